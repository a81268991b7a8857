"""The sharding projections of insert-explicit-reshards (Shardy's
``ShardingProjection`` as the pass builds it), computed by the Datalog stage
``explicit_reshards`` for a batch of ops in one engine call.

:func:`project` gives, per op, every tensor's factor shardings (the step's
projection, ``datalog/step/projection.dl.j2``); :func:`project_out` gives,
for new axes per factor, which tensors change and their new shardings (the
step's projection out, ``datalog/step/dims_out.dl.j2``).  Python only turns
shardings into facts and relations back into shardings.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from sdy_dl.propagation.step import StepInput
from sdy_dl.propagation.step_facts import ref_triple, step_facts, triple_ref
from sdy_dl.rules.instance import RuleInstance
from sdy_dl.sharding import AxisRef, DimSharding, Mesh, TensorSharding


@dataclasses.dataclass(frozen=True)
class OpShardings:
    """An op to project: its rule, its mesh (a symbol) and the shardings of its
    operands then results, all on that mesh (a missing one fully closed)."""

    rule: RuleInstance
    mesh: str
    shardings: tuple[TensorSharding, ...]

    @property
    def num_operands(self) -> int:
        return len(self.rule.operands)

    def step(self) -> StepInput:
        n = self.num_operands
        return StepInput(self.rule, self.shardings[:n], self.shardings[n:],
                         ("BOTH",) * len(self.rule.factors))


@dataclasses.dataclass(frozen=True)
class Projection:
    """Per tensor (operands then results): factor -> axes of its record, and
    the factors whose records have overflow axes."""

    tensors: tuple[dict[int, tuple[AxisRef, ...]], ...]
    overflow: tuple[frozenset[int], ...]

    def has_overflow(self) -> bool:
        return any(self.overflow)


def on_mesh(sharding: TensorSharding | None, mesh: str, rank: int) -> TensorSharding:
    """``sharding`` on the mesh symbol ``mesh`` (meshes that differ only in
    device order have the same axes); fully closed and empty when missing."""
    if sharding is None:
        return TensorSharding(mesh, tuple(DimSharding((), True) for _ in range(rank)))
    return dataclasses.replace(sharding, mesh=mesh)


def _run(ops: list[OpShardings], meshes: dict[str, Mesh], options, phase: str,
         extra: dict | None = None) -> dict[str, set[tuple]]:
    from sdy_dl.passes import run_analysis

    facts = step_facts([op.step() for op in ops], meshes)
    facts.update(extra or {})
    return run_analysis("explicit_reshards", facts, options, phase=phase)


def project(ops: list[OpShardings], meshes: dict[str, Mesh], options) -> list[Projection]:
    """The projection of every op in ``ops`` (one engine call)."""
    if not ops:
        return []
    out = _run(ops, meshes, options, "project")
    axes: dict[tuple, dict[int, tuple]] = defaultdict(dict)
    for i, t, f, q, a, p, s in out["er_rec_axis"]:
        axes[i, t, f][q] = (a, p, s)
    records: dict[tuple, dict[int, tuple]] = defaultdict(dict)
    for i, t, f in out["er_rec"]:
        mesh = meshes[ops[i].mesh]
        refs = axes.get((i, t, f), {})
        records[i, t][f] = tuple(triple_ref(*refs[q], mesh) for q in range(len(refs)))
    overflow: dict[tuple, set[int]] = defaultdict(set)
    for i, t, f in out["er_rec_overflow"]:
        overflow[i, t].add(f)
    result = []
    for i, op in enumerate(ops):
        n = len(op.shardings)
        result.append(Projection(tuple(records.get((i, t), {}) for t in range(n)),
                                 tuple(frozenset(overflow.get((i, t), ())) for t in range(n))))
    return result


@dataclasses.dataclass(frozen=True)
class Update:
    """The outcome of setting every factor of an op to new axes: which tensors
    change (operands then results) and every tensor's sharding afterwards."""

    updated: tuple[bool, ...]
    shardings: tuple[TensorSharding, ...]


def project_out(ops: list[OpShardings], axes_per_factor: list[list[tuple[AxisRef, ...]]],
                meshes: dict[str, Mesh], options) -> list[Update]:
    """For each op, its tensors after every factor ``f`` takes the axes
    ``axes_per_factor[i][f]`` (Shardy's ``updateSharding`` of every factor
    and ``createTensorShardingAttr``; one engine call).  Closed flags and
    replicated and unreduced axes are kept."""
    if not ops:
        return []
    rows = []
    for i, (op, per_factor) in enumerate(zip(ops, axes_per_factor)):
        mesh = meshes[op.mesh]
        for f, refs in enumerate(per_factor):
            rows.extend((i, f, q) + ref_triple(a, mesh) for q, a in enumerate(refs))
    out = _run(ops, meshes, options, "out", {"in_factor_axis": rows})
    dims: dict[tuple, dict[int, tuple]] = defaultdict(dict)
    for i, t, d, o, a, p, s in out["er_dim_axis"]:
        dims[i, t, d][o] = (a, p, s)
    updated = {(i, t) for i, t in out["er_updated"]}
    result = []
    for i, op in enumerate(ops):
        mesh = meshes[op.mesh]
        new = []
        for t, old in enumerate(op.shardings):
            new_dims = []
            for d, dim in enumerate(old.dims):
                refs = dims.get((i, t, d), {})
                new_dims.append(DimSharding(tuple(triple_ref(*refs[o], mesh)
                                                  for o in range(len(refs))), dim.is_closed))
            new.append(dataclasses.replace(old, dims=tuple(new_dims)))
        result.append(Update(tuple((i, t) in updated for t in range(len(op.shardings))),
                             tuple(new)))
    return result
