"""The meshes of a module (semantics §1.1): by symbol, of a sharding, axis order."""

from __future__ import annotations

from sdy_dl.ir.mlir_ops import module_ops
from sdy_dl.ir.model import Module
from sdy_dl.ir.sdy_attrs import mesh_of_attr
from sdy_dl.sharding import AxisRef, Mesh, TensorSharding, merge_adjacent


def module_meshes(module: Module) -> dict[str, Mesh]:
    """Symbol name -> mesh of every ``sdy.mesh`` in the module (current MLIR state)."""
    from jaxlib.mlir import ir

    out = {}
    for op in module_ops(module):
        if op.name == "sdy.mesh":
            out[ir.StringAttr(op.attributes["sym_name"]).value] = mesh_of_attr(op.attributes["mesh"])
    return out


def mesh_of(sharding: TensorSharding, meshes: dict[str, Mesh]) -> Mesh | None:
    """The mesh of ``sharding``: its inlined mesh or the one its symbol names."""
    if isinstance(sharding.mesh, Mesh):
        return sharding.mesh
    return meshes.get(sharding.mesh)


def sort_and_merge_axes(axes: list[AxisRef], mesh: Mesh) -> list[AxisRef]:
    """Shardy's ``sortAndMergeAxes``: mesh order, adjacent sub-axes merged."""
    return merge_adjacent(sorted(axes, key=lambda a: a.sort_key_in(mesh)), mesh)
