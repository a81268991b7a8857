"""``manual-axes-cleanup`` (Shardy's ``sdy-manual-axes-cleanup``, semantics §8.5).

For every ``manual_computation`` (post-order) with in/out shardings:

1. ``manual_axes`` are sorted in mesh order;
2. every shaped in/out sharding that does not use some manual axis (set
   difference aware of sub-axes) gets the unused part added to its
   replicated axes (sorted and merged); such a rewritten sharding is bound to
   the computation's common mesh (which replaces an empty mesh).

A manual computation with manual axes but no in/out shardings and a
non-empty body is an error.
"""

from __future__ import annotations

from sdy_dl.errors import SdyError
from sdy_dl.ir.manual_axes import manual_axes, set_manual_axes
from sdy_dl.ir.meshes import mesh_of, module_meshes, sort_and_merge_axes
from sdy_dl.ir.mlir_ops import op_error, tensor_info
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import op_names, ops_named
from sdy_dl.ir.storage import read_per_value, write_per_value
from sdy_dl.passes import PassOptions, register
from sdy_dl.sharding import AxisRef, Mesh, TensorSharding, axis_set_diff, format_symbol_ref


def common_mesh_or_ref(shardings: list[TensorSharding], meshes: dict[str, Mesh]):
    """Shardy's ``getCommonMeshOrRef`` (device ids not ignored): the first
    non-empty mesh, or None when two differ."""
    ref, mesh = None, None
    for s in shardings:
        other = mesh_of(s, meshes)
        if other is None:
            raise SdyError(f"unknown mesh {format_symbol_ref(s.mesh)}")
        if mesh is None or mesh.is_empty:
            mesh, ref = other, s.mesh
            continue
        if other.is_empty:
            continue
        if other != mesh:
            return None
    return ref


def _add_unused(shardings, types, manual: list[AxisRef], common_ref, mesh: Mesh):
    new, modified = [], False
    for s, t in zip(shardings, types):
        shaped, _ = tensor_info(t)
        if not shaped:
            new.append(s)
            continue
        unused = axis_set_diff(manual, list(s.axes_used()), mesh)
        if not unused:
            new.append(s)
            continue
        replicated = sort_and_merge_axes(list(s.replicated) + unused, mesh)
        new.append(TensorSharding(common_ref, s.dims, replicated, s.unreduced))
        modified = True
    return new if modified else None


def cleanup(module: Module, mop, meshes) -> None:
    ins = read_per_value(mop, "in_shardings") or []
    outs = read_per_value(mop, "out_shardings") or []
    if not ins and not outs:
        body_ops = list(mop.regions[0].blocks[0].operations)
        if manual_axes(mop) and not (body_ops and body_ops[0].operation.name == "sdy.return"):
            raise op_error(module, mop, "op has manual_axes when there are no in/out shardings "
                           "and the body is not empty. This isn't allowed at this stage, please "
                           "contact the Shardy team or file a bug.")
        return
    ref = common_mesh_or_ref(ins + outs, meshes)
    if ref is None:
        raise op_error(module, mop, "manual computation in/out shardings have no common mesh")
    mesh = mesh_of(TensorSharding(ref), meshes)
    names = manual_axes(mop)
    order = sorted(names, key=lambda n: mesh.axis_index(n))
    if order != names:
        set_manual_axes(mop, order)
    manual = [AxisRef(n) for n in order]
    new_ins = _add_unused(ins, [o.type for o in mop.operands], manual, ref, mesh)
    if new_ins is not None:
        write_per_value(mop, "in_shardings", new_ins)
    new_outs = _add_unused(outs, [r.type for r in mop.results], manual, ref, mesh)
    if new_outs is not None:
        write_per_value(mop, "out_shardings", new_outs)


@register("manual-axes-cleanup",
          "Sort manual axes; add unused manual axes to manual_computation replicated axes.")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    if "sdy.manual_computation" not in op_names(module):
        return module
    with mlir_context():
        meshes = module_meshes(module)
        for mop in ops_named(module, ("sdy.manual_computation",), post=True):
            cleanup(module, mop, meshes)
        return module.invalidate()
