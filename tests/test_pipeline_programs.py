"""The whole pipeline on the rule-database JAX programs (training steps, convnets with
pooling gradients, gather/scatter, sort/top_k/cumsum, fft, control flow, einsums,
shape ops, linalg): ``sdy-dl propagate`` equals ``sdy-propagation-pipeline``."""

from __future__ import annotations

import pytest

import rules_programs
from oracle import assert_same, shardy
from sdy_dl.ir import parse_module_text
from sdy_dl.passes import PassOptions
from sdy_dl.pipeline import propagate


@pytest.mark.parametrize("name", sorted(rules_programs.RULE_PROGRAMS))
def test_propagate_equals_shardy_pipeline(name):
    text = rules_programs.lowered(name)
    actual = propagate(parse_module_text(text, f"{name}.mlir"), PassOptions(engine="clingo")).print()
    assert_same(shardy(text, "sdy-propagation-pipeline"), actual)
