"""Stage ``distribute_axis_refs_to_batching_factors`` (Shardy's
``distributeAxisRefsToBatchingFactors`` in insert-explicit-reshards) on both
embedded engines.  The expected axes follow Shardy's loop by hand; the pass is
compared with Shardy's in test_insert_explicit_reshards_full.py."""

from __future__ import annotations

import pytest

from oracle import read_mesh
from sdy_dl.passes import PassOptions, RunContext
from sdy_dl.passes.export.distribute_axis_refs_to_batching_factors import (
    distribute_to_batching_factors)
from sdy_dl.rules.instance import Factor, RuleInstance
from sdy_dl.sharding import parse_axis_ref

MESH = read_mesh('<["x"=2, "y"=2, "z"=2, "w"=4]>')
P, N = "pass_through", "need_replication"


def axes(*texts: str) -> tuple:
    return tuple(parse_axis_ref(t) for t in texts)


def rule(factors, operands, results=None):
    """Factors ``(size, kind)``; tensors as lists of dims of factor indices."""
    return RuleInstance(tuple(Factor(z, k) for z, k in factors),
                        tuple(tuple(tuple(d) for d in t) for t in operands),
                        tuple(tuple(tuple(d) for d in t) for t in (results or operands[:1])))


CASES = [
    # (rule, common axes before, after)
    # The batching factor takes the axis; the factor that needs replication loses it.
    (rule([(8, P), (4, N)], [[[0], [1]]]), [(), axes('"x"')], [axes('"x"'), ()]),
    # Room 2 after "y": "x" fits, "z" goes on to the next batching factor.
    (rule([(4, P), (4, N), (2, P)], [[[0], [1], [2]]]),
     [axes('"y"'), axes('"x"', '"z"'), ()], [axes('"y"', '"x"'), (), axes('"z"')]),
    # In order: "w" (4) does not fit the first (room 2), so nothing goes past it there;
    # the second has room 4 for "w" but then none for "x".
    (rule([(2, P), (4, N), (4, P)], [[[0], [1], [2]]]),
     [(), axes('"w"', '"x"'), ()], [(), (), axes('"w"')]),
    # Not in every non-scalar tensor: cleared, nothing moves.
    (rule([(8, P), (4, N)], [[[0], [1]], [[0]]]), [(), axes('"x"')], [(), ()]),
    # A scalar tensor does not count.
    (rule([(8, P), (4, N)], [[[0], [1]], []]), [(), axes('"x"')], [axes('"x"'), ()]),
    # Size 0, and a sharding that does not divide the size: skipped.
    (rule([(0, P), (6, P), (4, N), (2, P)], [[[0], [1], [2], [3]]]),
     [(), axes('"w"'), axes('"x"'), ()], [(), axes('"w"'), (), axes('"x"')]),
    # Two factors that need replication, in factor order, sharing the room.
    (rule([(4, N), (8, P), (2, N)], [[[0], [1], [2]]]),
     [axes('"x"'), (), axes('"y"', '"z"')], [(), axes('"x"', '"y"', '"z"'), ()]),
    # Consecutive parts of one axis merge.
    (rule([(8, P), (4, N)], [[[0], [1]]]), [axes('"w":(1)2'), axes('"w":(2)2')],
     [axes('"w"'), ()]),
    # No factor needs replication: unchanged.
    (rule([(8, P), (4, P)], [[[0], [1]]]), [axes('"x"'), axes('"y"')],
     [axes('"x"'), axes('"y"')]),
    # Not a batching factor (missing from a tensor): nothing goes there.
    (rule([(8, P), (4, N)], [[[0], [1]], [[1]]]), [(), axes('"x"')], [(), ()]),
]


@pytest.mark.parametrize("engine", ["python", "clingo"])
def test_distribute_as_shardy(engine):
    got = distribute_to_batching_factors([(r, before, MESH) for r, before, _ in CASES],
                                         PassOptions(RunContext(engine=engine)))
    assert got == [after for _, _, after in CASES]
