"""``lift-inlined-meshes`` (Shardy's ``sdy-lift-inlined-meshes``, semantics §8.5).

1. Existing ``sdy.mesh`` ops with an identical mesh are deduplicated: the first
   one wins, later ones are erased and references to them renamed.
2. Every inlined mesh in a sharding (visited in the sharding walker's order)
   becomes a reference to an identical existing mesh, or to a new ``sdy.mesh``
   inserted after the last surviving mesh (at the start of the module when
   there is none), in creation order.  New names: ``maximal_mesh_<id>``,
   ``empty_mesh``, else ``mesh``; clashes are uniqued like MLIR's symbol
   table (``mesh_0``, ``mesh_1``, ... with one shared counter).
3. Meshes of ``replica_groups`` attributes of stablehlo collectives are lifted
   the same way (a ``#stablehlo.mesh`` always creates a new ``mesh``).
4. Every mesh gets the discardable ``stablehlo.mesh`` dictionary attribute.
"""

from __future__ import annotations

import re

from sdy_dl.ir.mlir_ops import SymbolNamer, module_ops, split_top_level, symbol_name
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import ops_named
from sdy_dl.ir.sdy_attrs import mesh_attr, mesh_of_attr
from sdy_dl.ir.sharding_walker import transform_shardings
from sdy_dl.ir.storage import parse_attr
from sdy_dl.passes import PassOptions, register
from sdy_dl.sharding import Mesh, MeshAxis, TensorSharding, format_symbol_ref

_REPLICA_GROUP_OPS = ("stablehlo.all_gather", "stablehlo.all_reduce", "stablehlo.reduce_scatter",
                      "stablehlo.all_to_all", "stablehlo.collective_broadcast")
_RG_PREFIX = "#stablehlo.replica_group_mesh_axes<mesh = "
_SHLO_MESH_AXIS_RE = re.compile(r'<name = ("(?:[^"\\]|\\.)*"), size = (\d+)>')


def mesh_key(mesh: Mesh) -> Mesh:
    """Identity of a ``MeshAttr``: the mesh itself (structural equality)."""
    return mesh


def new_mesh_name(mesh: Mesh) -> str:
    if mesh.is_maximal:
        return f"maximal_mesh_{mesh.device_ids[0]}"
    if mesh.is_empty:
        return "empty_mesh"
    return "mesh"


def stablehlo_mesh_dict(mesh: Mesh):
    """The ``stablehlo.mesh`` dictionary attribute of a mesh,
    ``{axes = [{name = "x", size = 2 : i64}], device_ids = dense<[...]> : tensor<Nxi64>}``."""
    from jaxlib.mlir import ir

    i64 = ir.IntegerType.get_signless(64)
    entries = {"axes": ir.ArrayAttr.get([
        ir.DictAttr.get({"name": ir.StringAttr.get(a.name),
                         "size": ir.IntegerAttr.get(i64, a.size)}) for a in mesh.axes])}
    if mesh.device_ids:
        import numpy as np   # (the process imports numpy only here, sdy_dl.cli.run)

        entries["device_ids"] = ir.DenseIntElementsAttr.get(
            np.asarray(mesh.device_ids, dtype=np.int64))
    return ir.DictAttr.get(entries)


class _Lifter:
    def __init__(self, module: Module):
        from jaxlib.mlir import ir

        self.ir = ir
        self.namer = SymbolNamer(module)
        # mesh key or "@name" of a deduplicated mesh -> the symbol to use.
        self.new_name: dict[str, str] = {}
        self.erased = self.created = False   # whether meshes were erased, created
        last = None
        for op in module_ops(module):
            if op.name != "sdy.mesh":
                continue
            name = symbol_name(op)
            key = mesh_key(mesh_of_attr(op.attributes["mesh"]))
            if key in self.new_name:
                self.new_name["@" + name] = self.new_name[key]
                self.namer.erase(name)
                op.erase()
                self.erased = True
            else:
                self.new_name[key] = name
                last = op
        body = module.mlir.body
        if last is not None:
            self.ip = ir.InsertionPoint.after(last)
        else:
            first = next(iter(body.operations), None)
            self.ip = ir.InsertionPoint(first.operation) if first is not None \
                else ir.InsertionPoint(body)

    def create_mesh(self, name: str, mesh: Mesh) -> str:
        ir = self.ir
        name = self.namer.insert(name)
        with ir.Location.unknown():
            op = ir.Operation.create("sdy.mesh", attributes={
                "sym_name": ir.StringAttr.get(name),
                "mesh": mesh_attr(mesh)})
        self.ip.insert(op)
        self.created = True
        return name

    def lift_sharding(self, sharding: TensorSharding) -> TensorSharding:
        mesh = sharding.mesh
        key = mesh_key(mesh) if isinstance(mesh, Mesh) else "@" + mesh
        name = self.new_name.get(key)
        if name is not None:
            return TensorSharding(name, sharding.dims, sharding.replicated, sharding.unreduced)
        if isinstance(mesh, Mesh):
            name = self.create_mesh(new_mesh_name(mesh), mesh)
            self.new_name[key] = name
            return TensorSharding(name, sharding.dims, sharding.replicated, sharding.unreduced)
        return sharding

    def lift_replica_groups(self, mop) -> None:
        attrs = mop.operation.attributes
        if "replica_groups" not in attrs:
            return
        text = str(attrs["replica_groups"])
        if not text.startswith(_RG_PREFIX):
            return
        rest = text[len(_RG_PREFIX):]
        mesh_text, tail = _split_mesh(rest)
        if mesh_text.startswith("@"):
            key = mesh_text
            name = self.new_name.get(key)
            if name is None:
                return
        elif mesh_text.startswith("#sdy.mesh"):
            mesh = mesh_of_attr(parse_attr(mesh_text))
            key = mesh_key(mesh)
            name = self.new_name.get(key)
            if name is None:
                name = self.create_mesh(new_mesh_name(mesh), mesh)
                self.new_name[key] = name
        elif mesh_text.startswith("#stablehlo.mesh"):
            key = "shlo:" + mesh_text
            name = self.new_name.get(key)
            if name is None:
                import json
                axes = tuple(MeshAxis(json.loads(n), int(s))
                             for n, s in _SHLO_MESH_AXIS_RE.findall(mesh_text))
                name = self.create_mesh("mesh", Mesh(axes))
                self.new_name[key] = name
        else:
            return
        attrs["replica_groups"] = parse_attr(_RG_PREFIX + format_symbol_ref(name) + tail)


def _split_mesh(rest: str) -> tuple[str, str]:
    """Split ``<mesh>, axes = ...>`` at the comma that ends the mesh."""
    mesh = split_top_level(rest, 1)[0]
    return mesh, rest[len(mesh):]


@register("lift-inlined-meshes", "Lift inlined meshes into sdy.mesh symbols; dedupe meshes.")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        lifter = _Lifter(module)
        if lifter.erased:   # (meshes erased: the op index is read afresh)
            module = module.invalidate()
        transform_shardings(module, lifter.lift_sharding)
        # op name by op name, each in post-order; one walk finds them all (lifting
        # only edits attributes and adds meshes)
        collectives = ops_named(module, _REPLICA_GROUP_OPS, post=True)
        for op_name in _REPLICA_GROUP_OPS:
            for mop in collectives:
                if mop.name == op_name:
                    lifter.lift_replica_groups(mop)
        for op in module_ops(module):
            if op.name == "sdy.mesh" and "stablehlo.mesh" not in op.attributes:
                op.attributes["stablehlo.mesh"] = stablehlo_mesh_dict(
                    mesh_of_attr(op.attributes["mesh"]))
        return module.invalidate(ops_kept=not lifter.erased and not lifter.created)
