"""``remove-sub-axes-in-input-output-shardings`` (Shardy's
``sdy-remove-sub-axes-in-input-output-shardings``, §9.3).

On the main function's argument and result shardings, every *open* dim
keeps only the axes before its first sub-axis; closed dims are untouched.
Which axes each dim keeps is decided by the Datalog stage
``remove_sub_axes_in_input_output_shardings`` (``datalog/``), for all of
them in one engine call; this module writes the facts and the answer back.
``explain --why-not`` asks the same stage why a boundary lost an axis.
"""

from __future__ import annotations

from sdy_dl.ir.mlir_ops import main_func
from sdy_dl.ir.model import Module
from sdy_dl.ir.storage import update_func_shardings
from sdy_dl.passes import PassOptions, Stage, register
from sdy_dl.sharding import AxisRef, DimSharding, TensorSharding

STAGE = Stage("remove_sub_axes_in_input_output_shardings")


def sub_axes_facts(asked: list[TensorSharding]) -> dict[str, list]:
    """The facts of the stage: sharding ``k`` is ``asked[k]``."""
    facts: dict[str, list] = {"in_dim": [], "in_dim_axis": []}
    for k, s in enumerate(asked):
        for d, dim in enumerate(s.dims):
            facts["in_dim"].append((k, d, int(dim.is_closed)))
            facts["in_dim_axis"].extend((k, d, q, a.name, a.pre, a.size or 0)
                                        for q, a in enumerate(dim.axes))
    return facts


def without_sub_axes_from(s: TensorSharding, k: int, relations: dict[str, set]) -> TensorSharding:
    """Sharding ``k`` of the stage's answer ``relations``, rebuilt from ``s``."""
    cut = {d for i, d in relations["cut"] if i == k}
    if not cut:
        return s
    kept: dict[int, list] = {}
    for i, d, q, name, pre, size in sorted(relations["out_axis"]):
        if i == k and d in cut:
            kept.setdefault(d, []).append(AxisRef(name, pre, size or None))
    dims = tuple(DimSharding(tuple(kept.get(d, ())), dim.is_closed, dim.priority) if d in cut
                 else dim for d, dim in enumerate(s.dims))
    return TensorSharding(s.mesh, dims, s.replicated, s.unreduced)


def without_sub_axes(shardings: list, options: PassOptions) -> list:
    """The pass's answer for main's argument and result shardings ``shardings``
    (None: no sharding, left so), decided in one engine call (each alone)."""
    asked: dict[TensorSharding, int] = {}
    for s in shardings:
        if s is not None:
            asked.setdefault(s, len(asked))
    if not asked:
        return list(shardings)
    relations = STAGE.run(sub_axes_facts(list(asked)), options)
    return [None if s is None else without_sub_axes_from(s, asked[s], relations)
            for s in shardings]


@register("remove-sub-axes-in-input-output-shardings",
          "Drop sub-axes (and what follows) from open dims of main in/out shardings.")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        func = main_func(module)
        if func is None:
            return module
        asked: dict[TensorSharding, None] = {}

        def ask(_, s):
            asked[s] = None
            return s

        for kind in ("arg_attrs", "res_attrs"):
            update_func_shardings(func, kind, ask)
        if not asked:
            return module
        decided = dict(zip(asked, without_sub_axes(list(asked), options)))
        for kind in ("arg_attrs", "res_attrs"):
            update_func_shardings(func, kind, lambda _, s: decided[s])
        return module.invalidate(ops_kept=True)
