"""Random modules (DAGs of elementwise, dot, reshape, transpose, broadcast, reduce ops
with random shardings on random meshes): sdy-dl equals Shardy on every module."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oracle import assert_same, ours, shardy
from random_modules import random_module

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


def check(seed: int, strategy: str, ops: int) -> None:
    text = random_module(seed, ops)
    assert_same(shardy(text, f"sdy-{strategy}-propagate"),
                ours(text, f"{strategy}-propagate", engine="clingo"))


@pytest.mark.parametrize("strategy", ["basic", "aggressive"])
@settings(max_examples=25, **SETTINGS)
@given(seed=st.integers(0, 10**9))
def test_random_modules(strategy, seed):
    check(seed, strategy, ops=8)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["basic", "aggressive"])
@settings(max_examples=300, **SETTINGS)
@given(seed=st.integers(0, 10**9))
def test_random_modules_many(strategy, seed):
    check(seed, strategy, ops=14)
