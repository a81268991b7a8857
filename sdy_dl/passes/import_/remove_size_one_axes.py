"""``remove-size-one-axes`` (Shardy's ``sdy-remove-size-one-axes``, semantics §8.5).

When some mesh has an axis of size 1, every stored sharding loses its size-1
axes (full axes of size 1; a sub-axis is never of size 1) from each dim and
from the replicated and unreduced lists.  A dim left closed and empty loses
its priority.  Meshes keep their axes.
"""

from __future__ import annotations

from sdy_dl.errors import SdyError
from sdy_dl.ir.meshes import mesh_of, module_meshes
from sdy_dl.ir.model import Module
from sdy_dl.ir.sharding_walker import transform_shardings
from sdy_dl.passes import PassOptions, register
from sdy_dl.sharding import DimSharding, TensorSharding, format_symbol_ref


def remove_size_one_axes(sharding: TensorSharding, meshes) -> TensorSharding:
    mesh = mesh_of(sharding, meshes)
    if mesh is None:
        raise SdyError(f"unknown mesh {format_symbol_ref(sharding.mesh)}")

    def keep(axis) -> bool:
        size = axis.size if axis.is_sub_axis else mesh.axis_size(axis.name)
        return size != 1

    dims = []
    for d in sharding.dims:
        axes = tuple(a for a in d.axes if keep(a))
        priority = None if (not axes and d.is_closed) else d.priority
        dims.append(DimSharding(axes, d.is_closed, priority))
    new = TensorSharding(sharding.mesh, dims,
                         [a for a in sharding.replicated if keep(a)],
                         [a for a in sharding.unreduced if keep(a)])
    return sharding if new == sharding else new


@register("remove-size-one-axes", "Remove axes of size one from every sharding.")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        meshes = module_meshes(module)
        if not any(a.size == 1 for m in meshes.values() for a in m.axes):
            return module
        transform_shardings(module, lambda s: remove_size_one_axes(s, meshes), any_order=True)
        return module.invalidate(ops_kept=True)
