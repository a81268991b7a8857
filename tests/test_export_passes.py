"""Differential tests of the export passes against Shardy's passes of the same name.

Every pass of the export side of ``sdy-propagation-pipeline`` that jaxlib
registers is run on hand-written modules by Shardy (the function-nested ones
inside ``func.func(...)``) and by sdy-dl; the printed modules must be equal.
"""

from __future__ import annotations

import pytest

from oracle import assert_same, ours, shardy

MESH = 'sdy.mesh @mesh = <["a"=4, "b"=2]>\n'

# Functions, constraints, groups, priorities, replicated/unreduced axes, sub-axes.
GENERAL = MESH + '''func.func @main(%arg0: tensor<6x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"b", ?}p1]>},
                %arg1: tensor<6x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a":(1)2, ?}, {}], replicated={"b"}>})
    -> (tensor<6x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a":(1)2, "b", ?}, {}]>},
        tensor<6x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", "a":(1)2}, {"a":(2)2}]>}) {
  %0 = sdy.sharding_constraint %arg0 <@mesh, [{"a"}, {?}]> {foo = 1 : i64} : tensor<6x8xf32>
  sdy.sharding_group %0 group_id=0 : tensor<6x8xf32>
  sdy.sharding_group %arg1 group_id=0 : tensor<6x8xf32>
  %1 = stablehlo.add %0, %arg1 {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) {i=6, j=8}>} : tensor<6x8xf32>
  %2 = sdy.sharding_constraint %1 <@mesh, [{}, {"b"}], unreduced={"a"}> : tensor<6x8xf32>
  %3 = stablehlo.custom_call @foo(%2) {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {i=6, j=8}, custom>} : (tensor<6x8xf32>) -> tensor<6x8xf32>
  return %1, %3 : tensor<6x8xf32>, tensor<6x8xf32>
}
'''

# Non-divisible dims: full axes, partial axes (gcd sub-axes), gcd 1, closed dims.
NON_DIVISIBLE = MESH + '''func.func @main(%arg0: tensor<6x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>},
                %arg1: tensor<12x5xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", "a", ?}p0, {?}]>},
                %arg2: tensor<2x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a":(2)2, "b"}, {}], replicated={"a":(1)2}>},
                %arg3: tensor<10xf32>)
    -> (tensor<6x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", "a"}, {}]>},
        tensor<12x5xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", "b", ?}, {?}]>},
        tensor<10xf32>) {
  %0 = stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>]>} : tensor<6x3xf32>
  return %0, %arg1, %arg3 : tensor<6x3xf32>, tensor<12x5xf32>, tensor<10xf32>
}
'''

# A manual computation (its in/out shardings are kept divisible), a while and
# an optimization barrier with data-flow edges, some edges without shardings.
EDGES = MESH + '''func.func @main(%arg0: tensor<8x6xf32>, %arg1: tensor<8x6xf32>, %arg2: tensor<6xf32>) -> (tensor<8x6xf32>, tensor<8x6xf32>) {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"b", "a", ?}, {}]>] out_shardings=[<@mesh, [{"b"}, {"a", ?}]>] manual_axes={"b"} (%arg3: tensor<4x6xf32>) {
    %e = sdy.data_flow_edge %arg3 sharding=<@mesh, [{?}, {"a", ?}]> : tensor<4x6xf32>
    %n = stablehlo.negate %e : tensor<4x6xf32>
    sdy.return %n : tensor<4x6xf32>
  } : (tensor<8x6xf32>) -> tensor<8x6xf32>
  %1 = sdy.data_flow_edge %0 sharding=<@mesh, [{"b", ?}, {"a", ?}]> : tensor<8x6xf32>
  %2:2 = stablehlo.optimization_barrier %1, %arg1 : tensor<8x6xf32>, tensor<8x6xf32>
  %3 = sdy.data_flow_edge %2#0 : tensor<8x6xf32>
  %4 = sdy.data_flow_edge %2#1 sharding=<@mesh, [{"a", ?}, {?}], replicated={"b"}> : tensor<8x6xf32>
  %5:2 = stablehlo.optimization_barrier %3, %4 : tensor<8x6xf32>, tensor<8x6xf32>
  %6 = sdy.data_flow_edge %5#0 : tensor<8x6xf32>
  %7 = sdy.data_flow_edge %5#1 : tensor<8x6xf32>
  %8 = stablehlo.add %6, %7 : tensor<8x6xf32>
  %c = stablehlo.constant dense<0> : tensor<i32>
  %9:2 = stablehlo.while(%i = %c, %x = %8) : tensor<i32>, tensor<8x6xf32>
    cond {
      %t = stablehlo.compare LT, %i, %i : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %t : tensor<i1>
    } do {
      %y = stablehlo.negate %x : tensor<8x6xf32>
      stablehlo.return %i, %y : tensor<i32>, tensor<8x6xf32>
    }
  %10 = sdy.data_flow_edge %9#0 : tensor<i32>
  %11 = sdy.data_flow_edge %9#1 sharding=<@mesh, [{?}, {"b"}]> : tensor<8x6xf32>
  return %11, %4 : tensor<8x6xf32>, tensor<8x6xf32>
}
'''

# Constants and scalar broadcasts: equal and different attributes, shardings,
# operands, regions; constants merged before the broadcasts that read them.
CONSTANTS = MESH + '''func.func @main(%arg0: tensor<f32>) -> tensor<8x8xf32> {
  %c0 = stablehlo.constant dense<1.0> : tensor<f32>
  %c1 = stablehlo.constant dense<1.0> : tensor<f32>
  %c2 = stablehlo.constant {sdy.sharding = #sdy.sharding_per_value<[<@mesh, []>]>} dense<1.0> : tensor<f32>
  %c3 = stablehlo.constant dense<2.0> : tensor<8x8xf32>
  %c4 = stablehlo.constant dense<2.0> : tensor<8x8xf32>
  %b0 = stablehlo.broadcast_in_dim %c0, dims = [] : (tensor<f32>) -> tensor<8x8xf32>
  %b1 = stablehlo.broadcast_in_dim %c1, dims = [] : (tensor<f32>) -> tensor<8x8xf32>
  %b2 = stablehlo.broadcast_in_dim %c2, dims = [] : (tensor<f32>) -> tensor<8x8xf32>
  %b3 = stablehlo.broadcast_in_dim %arg0, dims = [] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>} : (tensor<f32>) -> tensor<8x8xf32>
  %b4 = stablehlo.broadcast_in_dim %arg0, dims = [] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>} : (tensor<f32>) -> tensor<8x8xf32>
  %b5 = stablehlo.broadcast_in_dim %arg0, dims = [] : (tensor<f32>) -> tensor<8x8xf32>
  %b8 = stablehlo.broadcast_in_dim %c3, dims = [0, 1] : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %b9 = stablehlo.broadcast_in_dim %c3, dims = [0, 1] : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %0 = stablehlo.add %b0, %b1 : tensor<8x8xf32>
  %1 = stablehlo.add %b2, %b3 : tensor<8x8xf32>
  %2 = stablehlo.add %b4, %b5 : tensor<8x8xf32>
  %3 = stablehlo.add %c3, %c4 : tensor<8x8xf32>
  %4 = stablehlo.add %0, %1 : tensor<8x8xf32>
  %5 = stablehlo.add %2, %3 : tensor<8x8xf32>
  %6 = stablehlo.add %4, %5 : tensor<8x8xf32>
  %7 = stablehlo.add %b8, %b9 : tensor<8x8xf32>
  %8 = stablehlo.add %6, %7 : tensor<8x8xf32>
  %9 = stablehlo.while(%x = %8) : tensor<8x8xf32>
    cond {
      %c = stablehlo.constant dense<true> : tensor<i1>
      stablehlo.return %c : tensor<i1>
    } do {
      %c5 = stablehlo.constant dense<2.0> : tensor<8x8xf32>
      %c6 = stablehlo.constant dense<1.0> : tensor<f32>
      %c7 = stablehlo.constant dense<1.0> : tensor<f32>
      %b6 = stablehlo.broadcast_in_dim %c6, dims = [] : (tensor<f32>) -> tensor<8x8xf32>
      %b7 = stablehlo.broadcast_in_dim %c7, dims = [] : (tensor<f32>) -> tensor<8x8xf32>
      %b10 = stablehlo.broadcast_in_dim %c0, dims = [] : (tensor<f32>) -> tensor<8x8xf32>
      %y = stablehlo.add %x, %c5 : tensor<8x8xf32>
      %z = stablehlo.add %b6, %b7 : tensor<8x8xf32>
      %w = stablehlo.add %y, %z : tensor<8x8xf32>
      %v = stablehlo.add %w, %b10 : tensor<8x8xf32>
      stablehlo.return %v : tensor<8x8xf32>
    }
  return %9 : tensor<8x8xf32>
}
'''

# Two functions: the non-main one gets its return shardings (or loses them).
FUNCS = MESH + '''func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}) -> tensor<8x8xf32> {
  %0 = func.call @f(%arg0) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", "b"}, {}]>]>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = func.call @g(%0) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
func.func private @f(%arg0: tensor<8x8xf32>) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>}) {
  %0 = stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {}]>]>} : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
func.func private @g(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"b", ?}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>}, tensor<8x8xf32>) {
  %0 = stablehlo.negate %arg0 : tensor<8x8xf32>
  return %0, %arg0 : tensor<8x8xf32>, tensor<8x8xf32>
}
'''.replace("-> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"b\"}, {}]>}, tensor<8x8xf32>) {\n  %0 = stablehlo.negate %arg0 : tensor<8x8xf32>\n  return %0, %arg0",
            "-> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"b\"}, {}]>}) {\n  %0 = stablehlo.negate %arg0 : tensor<8x8xf32>\n  return %0")
FUNCS = FUNCS.replace(" : tensor<8x8xf32>, tensor<8x8xf32>\n}", " : tensor<8x8xf32>\n}")

MODULES = {"general": GENERAL, "non_divisible": NON_DIVISIBLE, "edges": EDGES,
           "constants": CONSTANTS, "funcs": FUNCS}

# (sdy-dl pass, Shardy pipeline element, modules it is checked on)
PASSES = [
    ("sink-data-flow-edges", "func.func(sdy-sink-data-flow-edges)", ["edges", "general"]),
    ("remove-sharding-groups", "sdy-remove-sharding-groups", ["general", "edges"]),
    ("sharding-constraint-to-reshard", "func.func(sdy-sharding-constraint-to-reshard)",
     ["general", "edges"]),
    ("update-non-divisible-input-output-shardings",
     "sdy-update-non-divisible-input-output-shardings",
     ["non_divisible", "general", "funcs"]),
    ("remove-sub-axes-in-input-output-shardings",
     "sdy-remove-sub-axes-in-input-output-shardings", ["general", "non_divisible"]),
    ("close-shardings", "sdy-close-shardings", ["general", "non_divisible", "edges", "funcs"]),
    ("drop-sharding-rules", "func.func(sdy-drop-sharding-rules)", ["general"]),
    ("constant-or-scalar-merger", "func.func(sdy-constant-or-scalar-merger)",
     ["constants", "general"]),
    ("propagate-to-func-results", "sdy-propagate-to-func-results", ["funcs", "general"]),
]

CASES = [(p, pipe, m) for p, pipe, ms in PASSES for m in ms]


@pytest.mark.parametrize("pass_name,pipeline,module", CASES,
                         ids=[f"{p}-{m}" for p, _, m in CASES])
def test_export_pass_equals_shardy(pass_name, pipeline, module):
    text = MODULES[module]
    assert_same(shardy(text, pipeline), ours(text, pass_name, engine="clingo"))


def test_non_divisible_manual_computation():
    """In/out shardings of a manual computation are cut like function ones;
    the in_shardings are seen without the manual axes, on local types."""
    text = MESH + '''func.func @main(%arg0: tensor<12x6xf32>) -> tensor<12x6xf32> {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"b", "a"}, {?}]>] out_shardings=[<@mesh, [{"b", "a"}, {}]>] manual_axes={"b"} (%arg1: tensor<6x6xf32>) {
    sdy.return %arg1 : tensor<6x6xf32>
  } : (tensor<12x6xf32>) -> tensor<12x6xf32>
  return %0 : tensor<12x6xf32>
}
'''
    pipeline = "sdy-update-non-divisible-input-output-shardings"
    assert_same(shardy(text, pipeline), ours(text, "update-non-divisible-input-output-shardings"))
