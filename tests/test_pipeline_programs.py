"""The whole pipeline on the rule-database JAX programs (training steps, convnets with
pooling gradients, gather/scatter, sort/top_k/cumsum, fft, control flow, einsums,
shape ops, linalg): ``sdy-dl propagate`` equals ``sdy-propagation-pipeline``."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rules_programs
from oracle import assert_same, shardy
from random_modules import random_module
from sdy_dl.ir import parse_module_text
from sdy_dl.pipeline import make_options
from sdy_dl.pipeline import propagate


@pytest.mark.parametrize("name", sorted(rules_programs.RULE_PROGRAMS))
def test_propagate_equals_shardy_pipeline(name):
    text = rules_programs.lowered(name)
    actual = propagate(parse_module_text(text, f"{name}.mlir"), make_options(engine="clingo")).print()
    assert_same(shardy(text, "sdy-propagation-pipeline"), actual)


@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**9))
def test_random_modules_through_the_whole_pipeline(seed):
    text = random_module(seed, 10)
    actual = propagate(parse_module_text(text), make_options(engine="clingo")).print()
    assert_same(shardy(text, "sdy-propagation-pipeline"), actual)
