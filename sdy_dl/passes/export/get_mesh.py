"""Shardy's ``getMesh`` in insert-explicit-reshards, decided by the Datalog stage
``get_mesh`` (``datalog/get_mesh/main.dl.j2``) for every op the pass projects,
in one engine call: which mesh each op works on, or none (the op is left
alone).  This module writes the facts and reads the answer."""

from __future__ import annotations

from collections.abc import Sequence

from sdy_dl.passes import Stage
from sdy_dl.sharding import Mesh, TensorSharding

STAGE = Stage("get_mesh")


def mesh_kind(mesh: Mesh) -> str:
    """The kind of ``mesh`` as stage ``get_mesh`` reads it."""
    return "empty" if mesh.is_empty else "maximal" if mesh.is_maximal else "axes"


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
            if s is None or not isinstance(s.mesh, str):
                continue
            used.add(s.mesh)
            facts["in_tensor_mesh"].add((k, t, s.mesh))
            if any(d.axes for d in s.dims):
                facts["in_sharded"].add((k, t))
    for name in used:
        mesh = meshes[name]
        axes = ", ".join(f"{a.name!r}={a.size}" for a in mesh.axes)
        facts["in_mesh"].add((name, axes, mesh_kind(mesh), int(not mesh.device_ids)))
    return facts


def get_meshes(shardings: Sequence[Sequence[TensorSharding | None]], meshes: dict[str, Mesh],
               options) -> list[str | None]:
    """Per op, the mesh symbol it works on (None: none)."""
    if not shardings:
        return []
    decided = dict(STAGE.run(get_mesh_facts(shardings, meshes), options)["mesh"])
    return [decided.get(k) for k in range(len(shardings))]
