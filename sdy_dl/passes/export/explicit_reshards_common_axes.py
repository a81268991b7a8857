"""The common axes of an op in the full version of insert-explicit-reshards
(Shardy's ``findCommonAxes``), from the factor shardings of its tensors
(:mod:`.explicit_reshards_projection`).

When every factor is sharded alike on every tensor that has it, factors that
need replication are unsharded and no two factors share an axis, the common
axes are those; for an op with two non-scalar tensors, no factor that needs
replication and one factor per dim, the preferred tensor (no sharded
permutation factor, then the larger tensor, then the larger sharding) keeps
its axes and the other tensor's factors get what does not overlap them.
Both cases are decided by the Datalog stage.  Otherwise a greedy heuristic picks, again and again, the (factor,
axes-prefix) candidate with the largest total size of the tensors it already
shards (then factor kind, then the further sharding it adds, then the factor
and axes order), among the factors whose major neighbours in a dim are
already fully sharded; it gives the axes to the factor and trims the other
candidates that overlap them.  The axes of factors that need replication are
then moved to the batching factors where they fit, as the Datalog stage of
:mod:`.distribute_axis_refs_to_batching_factors` decides (for all ops at once).
"""

from __future__ import annotations

import dataclasses

from sdy_dl.sharding import Mesh

PRECEDENCE = {"pass_through": 3, "reduction": 2, "permutation": 1, "need_replication": 0}


def _size(axes, mesh: Mesh) -> int:
    n = 1
    for a in axes:
        n *= a.ref_size(mesh)
    return n


def _strict_prefix(a: tuple, b: tuple, mesh: Mesh) -> bool:
    """``AxisListRef::strictPrefixOf``."""
    if not a:
        return bool(b)
    if len(a) > len(b) or a[:-1] != b[:len(a) - 1]:
        return False
    if len(a) == len(b):
        return a[-1] != b[-1] and a[-1].prefix_of(b[-1], mesh)
    return a[-1].prefix_of(b[len(a) - 1], mesh)


def _truncate_without_overlap(axes: tuple, other: tuple, mesh: Mesh) -> tuple | None:
    """``AxisListRef::truncateWithoutOverlap``: the truncated list, None when
    nothing overlaps."""
    for i, axis in enumerate(axes):
        prefix = axis
        for o in other:
            prefix = prefix.prefix_without_overlap(o, mesh) if prefix is not None else None
            if prefix is None:
                break
        if prefix != axis:
            return axes[:i] + ((prefix,) if prefix is not None else ())
    return None


@dataclasses.dataclass
class Candidate:
    factor: int
    axes: tuple
    total: int
    precedence: int
    sharding: int

    def key(self, mesh: Mesh) -> tuple:
        axes_key = (len(self.axes), tuple((a.name, a._order_key()) for a in self.axes))
        return (self.total, self.precedence, self.sharding, self.factor, axes_key)


def add_axis_or_merge(axes: list, axis, mesh: Mesh) -> None:
    """Shardy's ``addAxisOrMerge``: ``axis`` at the end of ``axes``, merged with
    the last one when they are consecutive parts of one axis."""
    if axes and axes[-1].can_merge(axis):
        axes[-1] = axes[-1].merge(axis, mesh)
    else:
        axes.append(axis)


def find_common_axes(projection, sizes: list[int], rule, mesh: Mesh) -> tuple[list[tuple], bool]:
    """Shardy's ``findCommonAxes`` up to the move of the axes of factors that
    need replication: the axes of every factor of ``rule``, given the op's
    projection (operands then results; its ``compatible`` flag is the Datalog
    stage's) and each tensor's number of elements; and whether the heuristic
    chose them (then the move follows)."""
    if projection.compatible:
        return projection.factor_axes(len(rule.factors)), False
    if projection.unary_axes is not None:
        return list(projection.unary_axes), False
    return _heuristic(list(projection.tensors), sizes, rule, mesh), True


def _dependencies(rule) -> dict[int, set[int]]:
    """Factor -> the factors right before it in some dim (a factor is sharded
    only once those are fully sharded: no strided views)."""
    deps: dict[int, set[int]] = {}
    for t in list(rule.operands) + list(rule.results):
        for dim in t:
            for i in range(1, len(dim)):
                deps.setdefault(dim[i], set()).add(dim[i - 1])
    return deps


def _heuristic(projections, sizes, rule, mesh: Mesh) -> list[tuple]:
    """``findCommonAxesHeuristic``."""
    common: list[tuple] = [() for _ in rule.factors]
    deps = _dependencies(rule)
    pairs = []
    for proj in projections:
        for f, axes in proj.items():
            while axes:
                if (f, axes) not in pairs:
                    pairs.append((f, axes))
                axes = axes[:-1]
    cands = []
    for f, axes in pairs:
        total = sum(size for proj, size in zip(projections, sizes)
                    if f in proj and (proj[f] == axes or _strict_prefix(axes, proj[f], mesh)))
        cands.append(Candidate(f, axes, total, PRECEDENCE[rule.factors[f].kind], _size(axes, mesh)))
    while cands:
        valid = [c for c in cands if not deps.get(c.factor)]
        if not valid:
            break
        best = max(valid, key=lambda c: c.key(mesh))
        common[best.factor] = best.axes
        if _size(best.axes, mesh) == rule.factors[best.factor].size:
            for factors in deps.values():
                factors.discard(best.factor)
        kept = []
        for c in cands:
            if c.factor == best.factor:
                if _strict_prefix(best.axes, c.axes, mesh):
                    c.sharding = _size(c.axes, mesh) // _size(best.axes, mesh)
                    kept.append(c)
                continue
            truncated = _truncate_without_overlap(c.axes, best.axes, mesh)
            if truncated is not None:
                c.axes = truncated
                if c.axes == common[c.factor]:
                    continue
                c.sharding = _size(c.axes, mesh) // _size(common[c.factor], mesh)
                kept.append(c)
                continue
            c.sharding = _size(c.axes, mesh)
            kept.append(c)
        cands = kept
    return common
