"""Differential tests: sdy-dl's propagation passes against Shardy's, whole modules.

Every module goes through Shardy's ``sdy-basic-propagate`` /
``sdy-aggressive-propagate`` (jaxlib, the oracle) and through sdy-dl's pass of
the same name; the printed modules must be identical (every sharding, every
kept rule, every erased dead op).
"""

from __future__ import annotations

import pytest

from jax_programs import PROGRAMS, lowered
from oracle import assert_same, ours, shardy

MESH = 'sdy.mesh @mesh = <["a"=2, "b"=2]>\n'
MESH4 = 'sdy.mesh @mesh = <["a"=4, "b"=2]>\n'


def module(body: str, args: str, results: str, mesh: str = MESH) -> str:
    return f"{mesh}func.func @main({args}) -> ({results}) {{\n{body}\n}}\n"


def sharded(dims: str, extra: str = "") -> str:
    return f'{{sdy.sharding = #sdy.sharding<@mesh, [{dims}]{extra}>}}'


CASES = {
    # §11.1: basic blocks the whole factor when one tensor objects.
    "basic_blocks_factor": module(
        "  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>\n  return %0 : tensor<8x8xf32>",
        f"""%arg0: tensor<8x8xf32> {sharded('{"a"}, {}')}, """
        f"""%arg1: tensor<8x8xf32> {sharded('{?}, {?}', ', replicated={"a"}')}""",
        "tensor<8x8xf32>"),
    # §11.2: across-factor conflicts in dot_general.
    "dot_across_factor": module(
        "  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : "
        "(tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>\n  return %0 : tensor<8x16xf32>",
        f"""%arg0: tensor<8x4xf32> {sharded('{"a"}, {}')}, %arg1: tensor<4x16xf32> {sharded('{}, {"a"}')}""",
        "tensor<8x16xf32>"),
    # §7.3: the LIFO worklist decides the conflict.
    "lifo_order": module(
        "  %0 = stablehlo.negate %arg0 : tensor<8x8xf32>\n"
        "  %1 = stablehlo.sine %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"a\"}, {}]>]>} : tensor<8x8xf32>\n"
        "  %2 = stablehlo.cosine %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {\"a\"}]>]>} : tensor<8x8xf32>\n"
        "  return %1, %2 : tensor<8x8xf32>, tensor<8x8xf32>",
        "%arg0: tensor<8x8xf32>", "tensor<8x8xf32>, tensor<8x8xf32>"),
    # §11.7: sub-axis creation through reshape, and merging back.
    "reshape_sub_axes": module(
        "  %0 = stablehlo.reshape %arg0 : (tensor<8xf32>) -> tensor<2x4xf32>\n"
        "  %1 = stablehlo.reshape %0 : (tensor<2x4xf32>) -> tensor<8xf32>\n"
        "  return %1 : tensor<8xf32>",
        f"""%arg0: tensor<8xf32> {sharded('{"a"}')}""", "tensor<8xf32>", MESH4),
    # §11.8: a partially sharded major factor hides minor factors.
    "reshape_hides_minor": module(
        "  %0 = stablehlo.reshape %arg0 : (tensor<4x4xf32>) -> tensor<16xf32>\n  return %0 : tensor<16xf32>",
        f"""%arg0: tensor<4x4xf32> {sharded('{"a"}, {"b"}')}""", "tensor<16xf32>"),
    # §11.6: minor-most factors accept non-divisible axes.
    "non_divisible_minor_most": module(
        "  %0 = stablehlo.add %arg0, %arg0 : tensor<6xf32>\n  return %0 : tensor<6xf32>",
        f"""%arg0: tensor<6xf32> {sharded('{"a"}')}""", "tensor<6xf32>", MESH4),
    # Closed dims never grow; func results sync at the end.
    "closed_dims_and_results": module(
        "  %0 = stablehlo.multiply %arg0, %arg1 : tensor<8x8xf32>\n  return %0 : tensor<8x8xf32>",
        f"""%arg0: tensor<8x8xf32> {sharded('{"a", ?}, {?}')}, %arg1: tensor<8x8xf32> {sharded('{}, {?}')}""",
        f"""tensor<8x8xf32> {sharded('{?}, {"b"}')}"""),
    # Propagation barrier allows only one direction.
    "barrier_forward": module(
        "  %0 = sdy.propagation_barrier %arg0 allowed_direction=FORWARD : tensor<8x8xf32>\n"
        "  %1 = stablehlo.abs %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {\"b\"}]>]>} : tensor<8x8xf32>\n"
        "  return %1 : tensor<8x8xf32>",
        f"""%arg0: tensor<8x8xf32> {sharded('{"a", ?}, {?}')}""", "tensor<8x8xf32>"),
    # A sharding constraint's closed dim blocks, its open dim is refined.
    "sharding_constraint": module(
        "  %0 = stablehlo.abs %arg0 : tensor<8x8xf32>\n"
        "  %1 = sdy.sharding_constraint %0 <@mesh, [{}, {?}]> : tensor<8x8xf32>\n"
        "  %2 = stablehlo.negate %1 : tensor<8x8xf32>\n  return %2 : tensor<8x8xf32>",
        f"""%arg0: tensor<8x8xf32> {sharded('{"a", ?}, {"b", ?}')}""", "tensor<8x8xf32>"),
    # Dead pure ops are erased; transpose and broadcast carry shardings.
    "dead_ops_transpose_broadcast": module(
        "  %0 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<8x4xf32>) -> tensor<4x8xf32>\n"
        "  %1 = stablehlo.multiply %arg0, %arg0 : tensor<8x4xf32>\n"
        "  %2 = stablehlo.broadcast_in_dim %0, dims = [1, 2] : (tensor<4x8xf32>) -> tensor<2x4x8xf32>\n"
        "  return %2 : tensor<2x4x8xf32>",
        f"""%arg0: tensor<8x4xf32> {sharded('{"a"}, {"b"}')}""", "tensor<2x4x8xf32>"),
    # A while without data-flow edges: its condition and body arguments share
    # the sharding of the while result, kept in the while's own attribute.
    "while_without_edges": module(
        "  %c = stablehlo.constant dense<0> : tensor<i32>\n"
        "  %0:3 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %c, %iterArg_1 = %arg0) : "
        "tensor<8x8xf32>, tensor<i32>, tensor<8x8xf32>\n"
        "  cond {\n"
        "    %c_1 = stablehlo.constant dense<5> : tensor<i32>\n"
        "    %1 = stablehlo.compare LT, %iterArg_0, %c_1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
        "    stablehlo.return %1 : tensor<i1>\n"
        "  } do {\n"
        "    %1 = stablehlo.sine %iterArg : tensor<8x8xf32>\n"
        "    %2 = stablehlo.transpose %iterArg_1, dims = [1, 0] {sdy.sharding = "
        "#sdy.sharding_per_value<[<@mesh, [{}, {\"b\"}]>]>} : (tensor<8x8xf32>) -> tensor<8x8xf32>\n"
        "    %c_1 = stablehlo.constant dense<1> : tensor<i32>\n"
        "    %3 = stablehlo.add %iterArg_0, %c_1 : tensor<i32>\n"
        "    stablehlo.return %1, %3, %2 : tensor<8x8xf32>, tensor<i32>, tensor<8x8xf32>\n"
        "  }\n"
        "  %4 = stablehlo.negate %0#2 : tensor<8x8xf32>\n"
        "  return %0#0, %4 : tensor<8x8xf32>, tensor<8x8xf32>",
        "%arg0: tensor<8x8xf32>",
        f"""tensor<8x8xf32> {sharded('{"a"}, {}')}, tensor<8x8xf32>"""),
    # Reduction keeps the batch dim; dot with contracting dim sharded.
    "reduce_and_dot": module(
        "  %c = stablehlo.constant dense<0.0> : tensor<f32>\n"
        "  %0 = stablehlo.reduce(%arg0 init: %c) applies stablehlo.add across dimensions = [1] : "
        "(tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>\n"
        "  %1 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : "
        "(tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>\n"
        "  return %0, %1 : tensor<8xf32>, tensor<8x4xf32>",
        f"""%arg0: tensor<8x16xf32> {sharded('{"a"}, {"b"}')}, %arg1: tensor<16x4xf32>""",
        "tensor<8xf32>, tensor<8x4xf32>"),
}

#: Modules in the form the import pipeline leaves them (data-flow edges and
#: named computations already there), so they are not run through the whole
#: pipeline (whose import would add the edges again).
IMPORTED = {
    # §11.26: a while body calls a helper (named computation) on a carry it
    # returns unchanged; the carry's edge gets "b" after the helper's
    # block-argument edge was visited, and changing the helper's operand does
    # not notify that edge, so the helper stays unsharded.
    "computation_operand_does_not_notify_its_edge": module(
        "  %c = sdy.constant dense<0> : tensor<i32>\n"
        "  %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %c) : tensor<8x8xf32>, tensor<i32>\n"
        "  cond {\n"
        "    %1 = sdy.constant dense<3> : tensor<i32>\n"
        "    %2 = stablehlo.compare LT, %iterArg_0, %1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
        "    stablehlo.return %2 : tensor<i1>\n"
        "  } do {\n"
        "    %1 = sdy.named_computation<\"helper\">(%iterArg) (%arg1: tensor<8x8xf32>) {\n"
        "      %4 = sdy.data_flow_edge %arg1 : tensor<8x8xf32>\n"
        "      %5 = stablehlo.negate %4 : tensor<8x8xf32>\n"
        "      sdy.return %5 : tensor<8x8xf32>\n"
        "    } : (tensor<8x8xf32>) -> tensor<8x8xf32>\n"
        "    %2 = sdy.data_flow_edge %1 : tensor<8x8xf32>\n"
        "    %3 = stablehlo.add %iterArg_0, %iterArg_0 : tensor<i32>\n"
        "    stablehlo.return %iterArg, %3 : tensor<8x8xf32>, tensor<i32>\n"
        "  }\n"
        "  %1 = sdy.data_flow_edge %0#0 : tensor<8x8xf32>\n"
        "  %2 = sdy.data_flow_edge %0#1 : tensor<i32>\n"
        "  return %1 : tensor<8x8xf32>",
        f"""%arg0: tensor<8x8xf32> {sharded('{}, {"b"}')}""", "tensor<8x8xf32>"),
}


@pytest.mark.parametrize("strategy", ["basic", "aggressive"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_hand_written_modules(name, strategy):
    text = CASES[name]
    assert_same(shardy(text, f"sdy-{strategy}-propagate"), ours(text, f"{strategy}-propagate", engine="clingo"))


@pytest.mark.parametrize("strategy", ["basic", "aggressive"])
@pytest.mark.parametrize("name", sorted(IMPORTED))
def test_imported_modules(name, strategy):
    text = IMPORTED[name]
    assert_same(shardy(text, f"sdy-{strategy}-propagate"), ours(text, f"{strategy}-propagate", engine="clingo"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_keep_sharding_rules_and_conservative(name):
    text = CASES[name]
    expected = shardy(text, "sdy-aggressive-propagate{keep-sharding-rules=true conservative-propagation=true}")
    actual = ours(text, "aggressive-propagate", engine="clingo", options={"keep-sharding-rules": True, "conservative-propagation": True})
    assert_same(expected, actual)


REAL = ["mlp", "attention", "training_step", "convnet", "gather_scatter", "reductions_reshapes",
        "sharding_constraint"]


@pytest.mark.parametrize("strategy", ["basic", "aggressive"])
@pytest.mark.parametrize("name", REAL)
def test_real_jax_programs(name, strategy):
    assert name in PROGRAMS
    text = lowered(name)
    assert_same(shardy(text, f"sdy-{strategy}-propagate"), ours(text, f"{strategy}-propagate", engine="clingo"))
