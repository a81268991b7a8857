"""Stage ``is_equivalent`` (Shardy's ``isEquivalent``) on both embedded engines.

The expected answers follow Shardy's code (``isEquivalent`` in
sdy/transforms/propagation/utils.cc and ``TensorShardingAttr::isEquivalent``
in sdy/ir/dialect.cc); the passes that use the stage are compared with
Shardy's in test_insert_explicit_reshards*.py, test_calls.py and
test_reshard_to_collectives.py.
"""

from __future__ import annotations

import pytest

from sdy_dl.passes import PassOptions, RunContext
from sdy_dl.passes.export.is_equivalent import IsEquivalent
from sdy_dl.sharding import parse_tensor_sharding


def s(text: str | None):
    return None if text is None else parse_tensor_sharding(text)


M = '#sdy.sharding<@m, '
CASES = [
    # (first, second, ignore unreduced, equivalent)
    (None, M + '[{}, {}], unreduced={"a"}>', False, True),   # no sharding: dim axes only
    (None, M + '[{"a"}, {}]>', False, False),
    (None, None, False, True),
    (M + '[{}, {?}]>', None, False, True),
    (M + '[{}, {}]>', M + '[{}, {}], unreduced={"a"}>', False, False),
    (M + '[{}, {}]>', M + '[{}, {}], unreduced={"a"}>', True, True),
    (M + '[{}, {}], unreduced={"a"}>', M + '[{}, {}], unreduced={"a"}>', False, True),
    (M + '[{}, {}], unreduced={"a"}>', M + '[{}, {}]>', False, False),
    (M + '[{"a"}, {}], unreduced={"b"}>', M + '[{"a", ?}, {}]>', True, True),
    (M + '[{"a"}, {}]>', M + '[{"a", ?}, {?}]>', False, True),   # open or closed: axes only
    (M + '[{"a"}, {}]>', '#sdy.sharding<@n, [{"a"}, {}]>', False, False),
    (M + '[{"a"}, {}]>', '#sdy.sharding<mesh<["a"=2]>, [{"a"}, {}]>', False, False),
    (M + '[{"a"}, {}]>', M + '[{"a"}, {}, {}]>', False, False),
    (M + '[{"a"}, {}]>', None, False, False),
    (M + '[{"a", "b"}, {}]>', M + '[{"b", "a"}, {}]>', False, False),
    (M + '[{"a"}, {}]>', M + '[{}, {"a"}]>', False, False),
]


@pytest.mark.parametrize("engine", ["python", "clingo"])
def test_is_equivalent_as_shardy(engine):
    pairs = [(s(a), s(b), ignore) for a, b, ignore, _ in CASES]
    got = IsEquivalent(PassOptions(RunContext(engine=engine))).many(pairs)
    assert got == [want for *_, want in CASES]


def test_answers_are_kept_per_run():
    is_equivalent = IsEquivalent(PassOptions(RunContext(engine="python")))
    pair = (s(M + '[{"a"}, {}]>'), s(M + '[{"a"}, {}]>'), False)
    assert is_equivalent(*pair) and pair in is_equivalent._known
