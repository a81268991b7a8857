"""StepInputs -> the input relations of stage ``step`` (``datalog/step/schema.dl.j2``).

Pure conversion: every step of a batch gets an instance id (its index), every
tensor an index (operands first, then results), every axis ref the triple
``(name, pre, size)`` with its actual size (the full axis ``"x"`` of size N is
``("x", 1, N)``).  The only computed facts are static: mesh equality classes
and the size ranks of the tensors' possible record sets (``in_size_variant``),
which Shardy compares as 64-bit products and the engines could not (32-bit).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from sdy_dl.errors import SdyError
from sdy_dl.propagation.step import DIRECTIONS, STRATEGIES, StepInput
from sdy_dl.sharding import AxisRef, Mesh, TensorSharding

Facts = dict[str, list[tuple]]

RELATIONS = (
    "in_step", "in_factor", "in_tensor", "in_sharding", "in_dim", "in_dim_factor",
    "in_dim_axis", "in_replicated", "in_unreduced", "in_size_variant",
    "in_size_variant_dim", "in_mesh", "in_mesh_axis",
)


def ref_triple(ref: AxisRef, mesh: Mesh) -> tuple[str, int, int]:
    """``(name, pre, size)`` of ``ref`` with its actual size."""
    if ref.size is None:
        return ref.name, 1, mesh.axis_size(ref.name)
    return ref.name, ref.pre, ref.size


def mesh_facts(symbols: Sequence[str], meshes: Mapping[str, Mesh]) -> Facts:
    """``in_mesh`` and ``in_mesh_axis`` for the mesh symbols ``symbols``."""
    facts: Facts = {"in_mesh": [], "in_mesh_axis": []}
    classes: dict[Mesh, int] = {}
    for sym in sorted(set(symbols)):
        mesh = _mesh(sym, meshes)
        cls = classes.setdefault(mesh, len(classes))
        kind = "empty" if mesh.is_empty else "maximal" if mesh.is_maximal else "axes"
        facts["in_mesh"].append((sym, cls, kind))
        facts["in_mesh_axis"].extend((sym, a.name, a.size) for a in mesh.axes)
    return facts


def _mesh(sym, meshes: Mapping[str, Mesh]) -> Mesh:
    if not isinstance(sym, str):
        raise SdyError("step facts: shardings must name their mesh by symbol (lift inlined meshes first)")
    try:
        return meshes[sym]
    except KeyError:
        raise SdyError(f"step facts: unknown mesh @{sym}") from None


def step_facts(steps: Sequence[StepInput], meshes: Mapping[str, Mesh]) -> Facts:
    """The input facts of a batch of steps; step ``i`` has instance id ``i``."""
    facts: Facts = {name: [] for name in RELATIONS}
    symbols: list[str] = []
    for inst, step in enumerate(steps):
        symbols.extend(_step(inst, step, meshes, facts))
    for name, rows in mesh_facts(symbols, meshes).items():
        facts[name].extend(rows)
    return facts


def _step(inst: int, step: StepInput, meshes: Mapping[str, Mesh], facts: Facts) -> list[str]:
    rule = step.rule
    if step.strategy not in STRATEGIES:
        raise SdyError(f"step {inst}: unknown strategy {step.strategy!r}")
    if len(step.directions) != len(rule.factors):
        raise SdyError(f"step {inst}: {len(step.directions)} directions for "
                       f"{len(rule.factors)} factors")
    if len(step.operands) != len(rule.operands) or len(step.results) != len(rule.results):
        raise SdyError(f"step {inst}: shardings do not match the rule's tensors")
    facts["in_step"].append((inst, step.strategy, int(step.conservative), int(step.elementwise),
                             len(rule.operands), len(rule.results)))
    for f, (factor, direction) in enumerate(zip(rule.factors, step.directions)):
        if direction not in DIRECTIONS:
            raise SdyError(f"step {inst}: unknown direction {direction!r}")
        facts["in_factor"].append((inst, f, factor.size, int(factor.blocked), direction))

    symbols = []
    mappings = tuple(rule.operands) + tuple(rule.results)
    shardings = tuple(step.operands) + tuple(step.results)
    sizes: list[list[tuple[tuple[tuple[int, int], ...], int]]] = []
    for t, (mapping, sharding) in enumerate(zip(mappings, shardings)):
        facts["in_tensor"].append((inst, t, int(t >= len(rule.operands))))
        if sharding is not None:
            symbols.append(sharding.mesh)
        _tensor(inst, t, mapping, sharding, meshes, facts)
        sizes.append(list(_size_variants(mapping, rule)))
    # Dense ranks of all variant sizes of all tensors of the step.
    ranks = {size: r for r, size in enumerate(sorted({s for vs in sizes for _, s in vs}))}
    for t, variants in enumerate(sizes):
        for v, (dims, size) in enumerate(variants):
            facts["in_size_variant"].append((inst, t, v, ranks[size]))
            facts["in_size_variant_dim"].extend((inst, t, v, d, c) for d, c in dims)
    return symbols


def _tensor(inst: int, t: int, mapping, sharding: TensorSharding | None,
            meshes: Mapping[str, Mesh], facts: Facts) -> None:
    mesh = _mesh(sharding.mesh, meshes) if sharding is not None else None
    if mesh is not None and mesh.is_maximal:
        # A maximal sharding has rank 0 whatever the tensor; it never projects (the
        # step is skipped), so only its mesh matters.
        facts["in_sharding"].append((inst, t, sharding.mesh))
        sharding = None
    if sharding is not None and sharding.rank != len(mapping):
        raise SdyError(f"step {inst}: tensor {t} has rank {len(mapping)} but its sharding "
                       f"has {sharding.rank} dims")
    for d, factors in enumerate(mapping):
        if not factors:
            raise SdyError(f"step {inst}: tensor {t} dim {d} maps to no factor")
        dim = sharding.dims[d] if sharding is not None else None
        axes = dim.axes if dim is not None else ()
        facts["in_dim"].append((inst, t, d, int(dim is not None and dim.is_closed),
                                int(dim is not None and dim.priority is not None),
                                len(factors), len(axes)))
        facts["in_dim_factor"].extend((inst, t, d, j, f) for j, f in enumerate(factors))
        facts["in_dim_axis"].extend((inst, t, d, q) + ref_triple(a, mesh) for q, a in enumerate(axes))
    if sharding is not None:
        facts["in_sharding"].append((inst, t, sharding.mesh))
        facts["in_replicated"].extend((inst, t, q) + ref_triple(a, mesh)
                                      for q, a in enumerate(sharding.replicated))
        facts["in_unreduced"].extend((inst, t, q) + ref_triple(a, mesh)
                                     for q, a in enumerate(sharding.unreduced))


def _size_variants(mapping, rule):
    """``(((dim, count), ...), size)`` for every record set the projection can give.

    A dim's factors all have records unless a non-minor-most factor overflows;
    then the records stop one factor after it, so a dim of k >= 3 factors may
    keep 2..k of them.  The size is the product of the kept factors' sizes.
    """
    varying = [(d, len(fs)) for d, fs in enumerate(mapping) if len(fs) >= 3]
    for counts in itertools.product(*(range(2, k + 1) for _, k in varying)):
        keep = dict(zip((d for d, _ in varying), counts))
        size = 1
        for d, fs in enumerate(mapping):
            for f in fs[:keep.get(d, len(fs))]:
                size *= rule.factors[f].size
        yield tuple(keep.items()), size
