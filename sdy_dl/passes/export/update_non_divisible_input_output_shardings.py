"""``update-non-divisible-input-output-shardings`` (Shardy's
``sdy-update-non-divisible-input-output-shardings``, §9.3).

The argument and result shardings of every function, the result shardings
of every ``func.call`` and the edge-owner shardings of every
``manual_computation`` (its ``in_shardings`` seen without the manual axes,
against the local block-argument types, and its ``out_shardings``) are made
evenly sharded: a dim whose size is not divisible by its sharded size keeps
the longest prefix of axes that divides it, where an axis that only partly
divides the rest becomes its sub-axis of gcd size and ends the dim (an axis
with gcd 1 ends it before).  A rewritten dim keeps its closed flag and loses
its priority; divisible dims are untouched.

Which axes each dim keeps is decided by the Datalog stage
``update_non_divisible_input_output_shardings`` (``datalog/``), for every
boundary sharding of the module in one engine call; this module writes the
facts and the answer back.  ``explain --why-not`` asks the same stage why a
boundary lost an axis.
"""

from __future__ import annotations

from sdy_dl.errors import SdyError
from sdy_dl.ir.meshes import mesh_of, module_meshes
from sdy_dl.ir.mlir_ops import func_arg_types, func_result_types, funcs, tensor_info
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import ops_named
from sdy_dl.ir.storage import SHARDING_ATTR, read_per_value, update_func_shardings, write_per_value
from sdy_dl.ir.value_sharding import (block_arg_owners, get_block_arg_owner_shardings,
                                      get_result_owner_shardings, result_owners,
                                      set_block_arg_owner_shardings, set_result_owner_shardings)
from sdy_dl.passes import PassOptions, Stage, register
from sdy_dl.sharding import AxisRef, DimSharding, Mesh, TensorSharding

STAGE = Stage("update_non_divisible_input_output_shardings")

#: The largest dim size the engines' 32-bit numbers hold.
MAX_SIZE = 2**31 - 1


def even_facts(asked: list[tuple[TensorSharding, tuple[int, ...], Mesh]]) -> dict[str, list]:
    """The facts of the stage: sharding ``k`` is ``asked[k]``'s (sharding, shape, mesh)."""
    facts: dict[str, list] = {"in_dim": [], "in_dim_axis": []}
    for k, (s, shape, mesh) in enumerate(asked):
        for d, (dim, size) in enumerate(zip(s.dims, shape)):
            if not 0 <= size <= MAX_SIZE:
                raise SdyError(f"update-non-divisible-input-output-shardings: dim size {size} "
                               "is out of range")
            facts["in_dim"].append((k, d, size, len(dim.axes)))
            facts["in_dim_axis"].extend((k, d, q, a.name, a.pre, a.ref_size(mesh))
                                        for q, a in enumerate(dim.axes))
    return facts


def evenly_sharded_from(s: TensorSharding, mesh: Mesh, k: int,
                        relations: dict[str, set]) -> TensorSharding:
    """Sharding ``k`` of the stage's answer ``relations``, rebuilt from ``s``: its
    uneven dims with the axes the stage kept (an axis kept whole is ``s``'s own
    ref), without their priority."""
    uneven = {d for i, d in relations["uneven"] if i == k}
    if not uneven:
        return s
    kept: dict[int, list] = {}
    for i, d, q, name, pre, size in sorted(relations["out_axis"]):
        if i == k and d in uneven:
            kept.setdefault(d, []).append((q, name, pre, size))
    dims = []
    for d, dim in enumerate(s.dims):
        if d not in uneven:
            dims.append(dim)
            continue
        axes = tuple(dim.axes[q] if size == dim.axes[q].ref_size(mesh) else AxisRef(name, pre, size)
                     for q, name, pre, size in kept.get(d, ()))
        dims.append(DimSharding(axes, dim.is_closed))
    return TensorSharding(s.mesh, tuple(dims), s.replicated, s.unreduced)


class _Updater:
    """The boundary shardings of one module: asked first (:meth:`even` returns
    them unchanged and records them), then decided in one engine call
    (:meth:`decide`), then :meth:`even` returns the stage's answer."""

    def __init__(self, module: Module):
        self.meshes = module_meshes(module)
        self.asked: dict[tuple, int] = {}
        self.decided: dict[tuple, TensorSharding] | None = None

    def even(self, s: TensorSharding | None, type_) -> TensorSharding | None:
        _, shape = tensor_info(type_)
        if s is None or shape is None:
            return s
        mesh = mesh_of(s, self.meshes)
        if mesh is None:
            return s
        key = (s, tuple(shape), mesh)
        if self.decided is None:
            self.asked.setdefault(key, len(self.asked))
            return s
        return self.decided[key]

    def list(self, shardings: list, types: list) -> list | None:
        """The per-value form; None when there are no shardings."""
        if not shardings:
            return None
        return [self.even(s, t) for s, t in zip(shardings, types)]

    def decide(self, options: PassOptions) -> None:
        asked = list(self.asked)
        relations = STAGE.run(even_facts(asked), options) if asked else {}
        self.decided = {key: evenly_sharded_from(key[0], key[2], k, relations)
                        for key, k in self.asked.items()}


def evenly_sharded(items: list, module: Module, options: PassOptions) -> list:
    """The pass's answer for boundary shardings ``items`` (each a (sharding or None,
    type)), decided in one engine call: what the pass makes of them wherever they
    stand (each boundary sharding is decided alone)."""
    up = _Updater(module)
    for s, t in items:
        up.even(s, t)
    up.decide(options)
    return [up.even(s, t) for s, t in items]


def _update(module: Module, up: _Updater) -> None:
    """Give every boundary sharding of ``module`` ``up``'s answer for it."""
    for func in funcs(module):
        for kind, types in (("arg_attrs", func_arg_types(func)),
                            ("res_attrs", func_result_types(func))):
            update_func_shardings(func, kind, lambda i, s, types=types: (
                up.even(s, types[i]) if tensor_info(types[i])[1] is not None else s))
    # Calls and manual computations are updated independently (each op reads and
    # writes only its own shardings), in one walk.
    for op in ops_named(module, ("func.call", "sdy.manual_computation")):
        if op.name == "func.call":
            shardings = read_per_value(op, SHARDING_ATTR) or []
            new = up.list(shardings, [r.type for r in op.results])
            if new is not None and up.decided is not None:
                write_per_value(op, SHARDING_ATTR, new)
        elif op.name == "sdy.manual_computation":
            shardings = get_block_arg_owner_shardings(op)
            new = up.list(shardings, [a.type for a in block_arg_owners(op)])
            if new is not None and up.decided is not None:
                set_block_arg_owner_shardings(op, new)
            shardings = get_result_owner_shardings(op)
            new = up.list(shardings, [r.type for r in result_owners(op)])
            if new is not None and up.decided is not None:
                set_result_owner_shardings(op, new)


@register("update-non-divisible-input-output-shardings",
          "Make function input/output shardings evenly divisible.")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        up = _Updater(module)
        _update(module, up)          # (asks)
        if not up.asked:
            return module
        up.decide(options)
        _update(module, up)          # (writes)
        return module.invalidate(ops_kept=True)
