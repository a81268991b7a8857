"""``constant-splitter`` (the older Shardy pass, not registered in jaxlib)
against its definition, with hand-written expected outputs.

Definition: ``stablehlo.constant`` becomes ``sdy.constant``; a constant
sub-computation is a constant or iota, or a broadcast_in_dim, slice or pure
elementwise op whose operands are all constant sub-computations (recursively;
reshape is *not* included, scalars are split too).  Every use of one by a
non-constant op (terminators included) gets its own clone of the whole
sub-computation, inserted right before the original ops; sharding groups of
cloned values are cloned; the originals are erased.
"""

from __future__ import annotations

import pytest

from import_programs import normalize, ours

CASES = {
    "two_users_and_scalars": ("""
func.func @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<f32>) {
  %c = stablehlo.constant dense<1.0> : tensor<4xf32>
  %s = stablehlo.constant dense<2.0> : tensor<f32>
  %0 = stablehlo.add %arg0, %c : tensor<4xf32>
  %1 = stablehlo.multiply %0, %c : tensor<4xf32>
  %2 = stablehlo.add %s, %s : tensor<f32>
  %3 = stablehlo.custom_call @f(%1, %2) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %3, %s : tensor<4xf32>, tensor<f32>
}""", """
module {
  func.func @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<f32>) {
    %0 = sdy.constant dense<1.000000e+00> : tensor<4xf32>
    %1 = sdy.constant dense<1.000000e+00> : tensor<4xf32>
    %2 = sdy.constant dense<2.000000e+00> : tensor<f32>
    %3 = sdy.constant dense<2.000000e+00> : tensor<f32>
    %4 = stablehlo.add %arg0, %0 : tensor<4xf32>
    %5 = stablehlo.multiply %4, %1 : tensor<4xf32>
    %6 = stablehlo.add %2, %2 : tensor<f32>
    %7 = stablehlo.custom_call @f(%5, %6) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    return %7, %3 : tensor<4xf32>, tensor<f32>
  }
}"""),
    "chains_shared_uses_groups_reshape": ("""
func.func @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<2x2xf32>) {
  %c = stablehlo.constant dense<1.0> : tensor<4xf32>
  %n = stablehlo.negate %c : tensor<4xf32>
  sdy.sharding_group %n group_id=0 : tensor<4xf32>
  %0 = stablehlo.add %arg0, %n : tensor<4xf32>
  %1 = stablehlo.add %n, %n : tensor<4xf32>
  %2 = stablehlo.multiply %0, %1 : tensor<4xf32>
  %3 = stablehlo.reshape %n : (tensor<4xf32>) -> tensor<2x2xf32>
  return %2, %n, %3 : tensor<4xf32>, tensor<4xf32>, tensor<2x2xf32>
}""", """
module {
  func.func @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<2x2xf32>) {
    %0 = sdy.constant dense<1.000000e+00> : tensor<4xf32>
    %1 = sdy.constant dense<1.000000e+00> : tensor<4xf32>
    %2 = sdy.constant dense<1.000000e+00> : tensor<4xf32>
    %3 = sdy.constant dense<1.000000e+00> : tensor<4xf32>
    %4 = stablehlo.negate %0 : tensor<4xf32>
    sdy.sharding_group %4 group_id=0 : tensor<4xf32>
    %5 = stablehlo.negate %1 : tensor<4xf32>
    sdy.sharding_group %5 group_id=0 : tensor<4xf32>
    %6 = stablehlo.negate %2 : tensor<4xf32>
    sdy.sharding_group %6 group_id=0 : tensor<4xf32>
    %7 = stablehlo.negate %3 : tensor<4xf32>
    sdy.sharding_group %7 group_id=0 : tensor<4xf32>
    %8 = stablehlo.add %arg0, %4 : tensor<4xf32>
    %9 = stablehlo.add %5, %5 : tensor<4xf32>
    %10 = stablehlo.multiply %8, %9 : tensor<4xf32>
    %11 = stablehlo.reshape %6 : (tensor<4xf32>) -> tensor<2x2xf32>
    return %10, %7, %11 : tensor<4xf32>, tensor<4xf32>, tensor<2x2xf32>
  }
}"""),
    "broadcast_slice_iota_and_nested_region": ("""
func.func @main(%arg0: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %c = stablehlo.constant dense<1.0> : tensor<f32>
  %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
  %i = stablehlo.iota dim = 0 : tensor<4x4xf32>
  %s = stablehlo.slice %i [0:4, 0:4] : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %t = stablehlo.transpose %s, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %w = stablehlo.while(%it = %arg0) : tensor<4x4xf32>
   cond {
    %p = stablehlo.constant dense<true> : tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %z = stablehlo.add %it, %b : tensor<4x4xf32>
    stablehlo.return %z : tensor<4x4xf32>
  }
  %0 = stablehlo.add %w, %t : tensor<4x4xf32>
  return %0, %b : tensor<4x4xf32>, tensor<4x4xf32>
}""", """
module {
  func.func @main(%arg0: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
    %0 = sdy.constant dense<1.000000e+00> : tensor<f32>
    %1 = sdy.constant dense<1.000000e+00> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %3 = stablehlo.broadcast_in_dim %1, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %4 = stablehlo.iota dim = 0 : tensor<4x4xf32>
    %5 = stablehlo.slice %4 [0:4, 0:4] : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %6 = stablehlo.transpose %5, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %7 = stablehlo.while(%iterArg = %arg0) : tensor<4x4xf32>
    cond {
      %9 = sdy.constant dense<true> : tensor<i1>
      stablehlo.return %9 : tensor<i1>
    } do {
      %9 = stablehlo.add %iterArg, %2 : tensor<4x4xf32>
      stablehlo.return %9 : tensor<4x4xf32>
    }
    %8 = stablehlo.add %7, %6 : tensor<4x4xf32>
    return %8, %3 : tensor<4x4xf32>, tensor<4x4xf32>
  }
}"""),
    "no_constants_unchanged": ("""
func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.negate %arg0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}""", """
module {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.negate %arg0 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}"""),
}


@pytest.mark.parametrize("text,expected", list(CASES.values()), ids=list(CASES))
def test_constant_splitter_definition(text, expected):
    assert ours(text, "constant-splitter") == normalize(expected)


def test_functions_are_split_independently():
    text = """
func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %c = stablehlo.constant dense<1.0> : tensor<4xf32>
  %0 = call @f(%c) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = stablehlo.add %0, %c : tensor<4xf32>
  return %1 : tensor<4xf32>
}
func.func private @f(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %c = stablehlo.constant dense<2.0> : tensor<4xf32>
  %0 = stablehlo.add %arg0, %c : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""
    out = ours(text, "constant-splitter")
    # A call is never a constant expression here (unlike constant-or-scalar-splitter):
    # each use of %c in @main gets its own copy, and @f is not cloned.
    assert out.count("sdy.constant dense<1.000000e+00>") == 2
    assert out.count("sdy.constant dense<2.000000e+00>") == 1
    assert out.count("func.func") == 2
