"""Op-priority and user-priority propagation against Shardy (§7.1, §7.2)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import test_propagate
from jax_programs import PROGRAMS, lowered
from oracle import assert_same, ours, shardy
from random_modules import random_module

MESH = 'sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>\n'


def per_value(dims: str) -> str:
    return f"{{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{dims}]>]>}}"


def arg(dims: str, extra: str = "") -> str:
    return f"{{sdy.sharding = #sdy.sharding<@mesh, [{dims}]{extra}>}}"


T = "tensor<8x8xf32>"

CASES = {
    # §7.1: the return's sharding reaches the dot result through the adds (band 0)
    # before the dot's own lhs sharding can (band 2+).
    "elementwise_before_dot": MESH + f"""func.func @main(%arg0: {T} {arg('{"a", ?}, {?}')}, %arg1: {T}) -> ({T} {arg('{?}, {"a", ?}')}) {{
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : ({T}, {T}) -> {T}
  %1 = stablehlo.add %0, %0 : {T}
  %2 = stablehlo.add %1, %1 : {T}
  return %2 : {T}
}}""",
    # §7.1: %1 has two uses, so it is held back in band 0.
    "multi_use_deferred": MESH + f"""func.func @main(%arg0: {T} {arg('{"a"}, {}')}) -> ({T} {arg('{}, {"a"}')}, {T} {arg('{}, {"a"}')}) {{
  %1 = stablehlo.sine %arg0 : {T}
  %2 = stablehlo.add %1, %1 : {T}
  %3 = stablehlo.add %1, %1 : {T}
  %4 = stablehlo.cosine %2 : {T}
  %5 = stablehlo.cosine %3 : {T}
  return %4, %5 : {T}, {T}
}}""",
    # Broadcasts propagate backward first.
    "broadcast_backward": MESH + f"""func.func @main(%arg0: tensor<8xf32> {arg('{"a"}')}) -> (tensor<8x8xf32> {arg('{"b", ?}, {"c", ?}')}) {{
  %0 = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}}""",
    # dynamic_slice only forward in the first bands.
    "dynamic_slice_forward": MESH + f"""func.func @main(%arg0: tensor<8x8xf32> {arg('{"a"}, {?}')}, %arg1: tensor<i32>) -> (tensor<8x4xf32> {arg('{?}, {"b", ?}')}) {{
  %0 = stablehlo.dynamic_slice %arg0, %arg1, %arg1, sizes = [8, 4] : (tensor<8x8xf32>, tensor<i32>, tensor<i32>) -> tensor<8x4xf32>
  %1 = stablehlo.negate %0 : tensor<8x4xf32>
  return %1 : tensor<8x4xf32>
}}""",
    # §7.2: p1 dims are closed and replicated until their iteration.
    "user_priorities": MESH + f"""func.func @main(%arg0: {T} {arg('{"a"}p1, {}')}, %arg1: {T} {arg('{"b"}p0, {?}')}, %arg2: {T} {arg('{?}p2, {"c"}p1')}) -> ({T}) {{
  %0 = stablehlo.add %arg0, %arg1 : {T}
  %1 = stablehlo.multiply %0, %arg2 : {T}
  return %1 : {T}
}}""",
    # Gaps between priorities; a constraint with a priority; replicated axes.
    "priority_gaps_constraint": MESH + f"""func.func @main(%arg0: {T} {arg('{"a"}p3, {?}', ', replicated={"c"}')}, %arg1: {T}) -> ({T}) {{
  %0 = stablehlo.add %arg0, %arg1 : {T}
  %1 = sdy.sharding_constraint %0 <@mesh, [{{?}}, {{"b"}}p7]> : {T}
  %2 = stablehlo.abs %1 {per_value('{"c", ?}p1, {?}')} : {T}
  return %2 : {T}
}}""",
}

MODULES = {**CASES, **test_propagate.CASES, **{n: lowered(n) for n in PROGRAMS}}


@pytest.mark.parametrize("name", sorted(MODULES))
@pytest.mark.parametrize("pass_name", ["op-priority-propagate", "user-priority-propagate"])
def test_priorities_match_shardy(pass_name, name):
    text = MODULES[name]
    assert_same(shardy(text, f"sdy-{pass_name}"), ours(text, pass_name, engine="clingo"))


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("strategy", ["basic", "basic-then-aggressive"])
def test_propagation_strategy_option(name, strategy):
    text = CASES[name]
    expected = shardy(text, f"sdy-user-priority-propagate{{propagation-strategy={strategy}}}")
    actual = ours(text, "user-priority-propagate", engine="clingo",
                  options={"propagation_strategy": strategy})
    assert_same(expected, actual)


@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**9))
def test_random_modules_user_priority(seed):
    text = random_module(seed, 8)
    assert_same(shardy(text, "sdy-user-priority-propagate"),
                ours(text, "user-priority-propagate", engine="clingo"))


@pytest.mark.parametrize("name", sorted(test_propagate.CASES))
def test_aggressive_pass_basic_then_aggressive(name):
    text = test_propagate.CASES[name]
    expected = shardy(text, "sdy-aggressive-propagate{propagation-strategy=basic-then-aggressive}")
    actual = ours(text, "aggressive-propagate", engine="clingo",
                  options={"propagation_strategy": "basic-then-aggressive"})
    assert_same(expected, actual)
