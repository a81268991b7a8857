"""The common axes of the ops treated in full by insert-explicit-reshards
(Shardy's ``findCommonAxes``), from the factor shardings of their tensors
(:mod:`.explicit_reshards_projection`), for a batch of ops.

Every case is decided by a Datalog stage; this module sends each op to the
one that decides it.  When every factor is sharded alike on every tensor
that has it, factors that need replication are unsharded and no two factors
share an axis, the common axes are those; for an op with two non-scalar
tensors, no factor that needs replication and one factor per dim, the
preferred tensor keeps its axes and the other tensor's factors get what does
not overlap them (both: stage ``insert_explicit_reshards``).  Otherwise the
greedy heuristic chooses them (stage ``find_common_axes_heuristic``,
:mod:`.find_common_axes_heuristic`) and the axes of factors that need
replication then move to the batching factors where they fit (stage
``distribute_axis_refs_to_batching_factors``,
:mod:`.distribute_axis_refs_to_batching_factors`); one engine call each for
all ops.
"""

from __future__ import annotations

from sdy_dl.passes.export.distribute_axis_refs_to_batching_factors import (
    distribute_to_batching_factors)
from sdy_dl.passes.export.find_common_axes_heuristic import find_common_axes_heuristic


def find_common_axes(ops, options) -> list[list[tuple]]:
    """The common axes of every factor of each op of ``ops``: ``(projection,
    sizes, rule, mesh name, mesh)``, the projection of its operands then
    results (whose ``compatible`` flag and unary axes are the Datalog stage's)
    and each tensor's number of elements."""
    commons: list = [None] * len(ops)
    by_heuristic = []
    for k, (projection, _, rule, _, _) in enumerate(ops):
        if projection.compatible:
            commons[k] = projection.factor_axes(len(rule.factors))
        elif projection.unary_axes is not None:
            commons[k] = list(projection.unary_axes)
        else:
            by_heuristic.append(k)
    chosen = find_common_axes_heuristic(
        [(ops[k][2], ops[k][0].tensors, ops[k][1], ops[k][3], ops[k][4]) for k in by_heuristic],
        options)
    moved = distribute_to_batching_factors(
        [(ops[k][2], axes, ops[k][4]) for k, axes in zip(by_heuristic, chosen)], options)
    for k, axes in zip(by_heuristic, moved):
        commons[k] = axes
    return commons
