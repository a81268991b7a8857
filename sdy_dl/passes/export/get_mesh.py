"""Shardy's ``getMesh`` in insert-explicit-reshards, decided by the Datalog stage
``get_mesh`` (``datalog/get_mesh/main.dl.j2``) for every op the pass projects,
in one engine call: which mesh each op works on, or none (the op is left
alone).  This module writes the facts and reads the answer."""

from __future__ import annotations

from collections.abc import Sequence

from sdy_dl.passes import Stage
from sdy_dl.passes.export.explicit_reshards_projection import per_distinct
from sdy_dl.sharding import Mesh, TensorSharding

STAGE = Stage("get_mesh")


def mesh_kind(mesh: Mesh) -> str:
    """The kind of ``mesh`` as stage ``get_mesh`` reads it."""
    return "empty" if mesh.is_empty else "maximal" if mesh.is_maximal else "axes"


def tensor_key(s: TensorSharding | None):
    """What the stage reads of one tensor's sharding ``s``: its mesh symbol and
    whether a dim has an axis (None: no sharding on a mesh symbol)."""
    if s is None or not isinstance(s.mesh, str):
        return None
    return s.mesh, any(d.axes for d in s.dims)


def get_mesh_facts(shardings: Sequence[Sequence[TensorSharding | None]],
                   meshes: dict[str, Mesh]) -> dict[str, set]:
    """The facts of stage ``get_mesh``: op ``k`` reads ``shardings[k]`` (its
    operands', then its results', None when missing)."""
    facts: dict[str, set] = {"in_op": set(), "in_tensor_mesh": set(), "in_sharded": set(),
                             "in_mesh": set()}
    used = set()
    for k, tensors in enumerate(shardings):
        facts["in_op"].add((k,))
        for t, s in enumerate(tensors):
            key = tensor_key(s)
            if key is None:
                continue
            used.add(key[0])
            facts["in_tensor_mesh"].add((k, t, key[0]))
            if key[1]:
                facts["in_sharded"].add((k, t))
    for name in used:
        mesh = meshes[name]
        axes = ", ".join(f"{a.name!r}={a.size}" for a in mesh.axes)
        facts["in_mesh"].add((name, axes, mesh_kind(mesh), int(not mesh.device_ids)))
    return facts


def get_meshes(shardings: Sequence[Sequence[TensorSharding | None]], meshes: dict[str, Mesh],
               options) -> list[str | None]:
    """Per op, the mesh symbol it works on (None: none); the stage is asked once
    for the ops whose tensors it reads alike."""
    def run(distinct):
        decided = dict(STAGE.run(get_mesh_facts(distinct, meshes), options)["mesh"])
        return [decided.get(k) for k in range(len(distinct))]
    return per_distinct(run, list(shardings),
                        [tuple(tensor_key(s) for s in tensors) for tensors in shardings])
