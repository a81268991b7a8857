"""``remove-sub-axes-in-input-output-shardings`` (Shardy's
``sdy-remove-sub-axes-in-input-output-shardings``, §9.3).

On the main function's argument and result shardings, every *open* dim
keeps only the axes before its first sub-axis; closed dims are untouched.
"""

from __future__ import annotations

from sdy_dl.ir.mlir_ops import main_func
from sdy_dl.ir.model import Module
from sdy_dl.ir.storage import update_func_shardings
from sdy_dl.passes import PassOptions, register
from sdy_dl.sharding import DimSharding, TensorSharding


def without_sub_axes(s: TensorSharding) -> TensorSharding:
    dims = []
    for d in s.dims:
        axes = d.axes
        if not d.is_closed:
            cut = next((i for i, a in enumerate(axes) if a.is_sub_axis), len(axes))
            axes = axes[:cut]
        dims.append(DimSharding(axes, d.is_closed, d.priority))
    return TensorSharding(s.mesh, tuple(dims), s.replicated, s.unreduced)


@register("remove-sub-axes-in-input-output-shardings",
          "Drop sub-axes (and what follows) from open dims of main in/out shardings.")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        func = main_func(module)
        if func is not None:
            for kind in ("arg_attrs", "res_attrs"):
                update_func_shardings(func, kind, lambda _, s: without_sub_axes(s))
        return module.invalidate(ops_kept=True)
