"""insert-explicit-reshards in its non-full version (what the pipeline runs)
against jaxlib's pass and pipeline: dots resharded to the operands' axes,
unreduced axes all-reduced where their users need them replicated, and call
operands.
"""

from __future__ import annotations

import pytest

from oracle import assert_same, normalize, ours, shardy

PASS = "func.func(sdy-insert-explicit-reshards{enable-full-version=false})"
MESH = 'sdy.mesh @mesh = <["x"=2, "y"=4, "z"=2]>\n'


def dot(lhs: str, rhs: str, result: str, dims: str = "contracting_dims = [1] x [0]",
        shapes=("4x32", "32x8", "4x8")) -> str:
    l, r, o = (f"tensor<{s}xf32>" for s in shapes)
    return MESH + f'''func.func @main(%arg0: {l} {{sdy.sharding = #sdy.sharding<@mesh, {lhs}>}},
                %arg1: {r} {{sdy.sharding = #sdy.sharding<@mesh, {rhs}>}}) -> {o} {{
  %0 = stablehlo.dot_general %arg0, %arg1, {dims} {{sdy.sharding = #sdy.sharding_per_value<[<@mesh, {result}>]>}} : ({l}, {r}) -> {o}
  %1 = stablehlo.negate %0 : {o}
  return %1 : {o}
}}
'''


CASES = {
    # The result is sharded like the contracting dim: resharded to rhs's axes.
    "match_rhs": dot('[{}, {"x"}]', '[{"x"}, {"y"}]', '[{}, {"x"}]'),
    "match_lhs": dot('[{"y"}, {"x"}]', '[{"x"}, {}]', '[{"x"}, {}]'),
    "two_contracting_axes": dot('[{}, {"x", "z"}]', '[{"x", "z"}, {"y"}]', '[{}, {"x", "z"}]'),
    # No rewrite: the order of the reduction axes differs, operands conflict,
    # the conflicting operand axes are empty, two factors conflict, the
    # result is larger than the operand.
    "reduction_order": dot('[{}, {"x", "z"}]', '[{"x", "z"}, {"y"}]', '[{}, {"z", "x"}]'),
    "operands_conflict": dot('[{}, {"x"}]', '[{"z"}, {"y"}]', '[{}, {"x"}]'),
    "empty_operand_axes": dot('[{}, {"x"}]', '[{"x"}, {}]', '[{}, {"x"}]'),
    "two_conflicts": dot('[{"z"}, {"x"}]', '[{"x"}, {"y"}]', '[{}, {"x"}]'),
    "larger_result": dot('[{}, {"x"}]', '[{"x"}, {"y"}]', '[{}, {"x"}]', shapes=("64x2", "2x64", "64x64")),
    "batching": dot('[{"y"}, {}, {"x"}]', '[{"y"}, {"x"}, {"z"}]', '[{"y"}, {}, {"x"}]',
                    dims="batching_dims = [0] x [0], contracting_dims = [2] x [1]",
                    shapes=("4x8x16", "4x16x8", "4x8x8")),
    "non_contracting_overlap": dot('[{"y"}, {"x"}]', '[{"x"}, {"y"}]', '[{}, {"x"}]'),
    # Unreduced axes: all-reduced before the first user that is not unreduced on them.
    "unreduced_result": MESH + '''func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>},
                %arg1: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}) -> tensor<8x16xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}], unreduced={"y"}>]>} : (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %1 = stablehlo.add %0, %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}], unreduced={"y"}>]>} : tensor<8x16xf32>
  %2 = stablehlo.multiply %1, %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<8x16xf32>
  %3 = stablehlo.abs %1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}], unreduced={"y":(1)2}>]>} : tensor<8x16xf32>
  return %3 : tensor<8x16xf32>
}
''',
    # Reshards (and results) that add unreduced axes: sharded/replicated_to_unreduced.
    "reshard_to_unreduced": MESH + '''func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y", "x"}, {"z"}]>},
                %arg1: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>})
    -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>,
        tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}], unreduced={"y"}>}) {
  %0 = sdy.reshard %arg0 <@mesh, [{"y"}, {}], unreduced={"x", "z"}> : tensor<8x16xf32>
  %1 = sdy.reshard %arg0 <@mesh, [{"y":(1)2}, {"z"}], unreduced={"x", "y":(2)2}> : tensor<8x16xf32>
  %2 = sdy.reshard %arg1 <@mesh, [{"x"}, {}], unreduced={"z"}> : tensor<8x16xf32>
  return %0, %1, %2, %arg1 : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}
''',
    # Reduction factors of an op with unreduced results; a barrier before a dot;
    # unreduced values entering and leaving a manual computation.
    "reduction_factors": MESH + '''func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y", "z"}]>},
                %arg1: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y", "z"}, {}]>}) -> (tensor<8x8xf32>, tensor<8xf32>) {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}], unreduced={"z"}>]>} : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %c = sdy.constant dense<0.0> : tensor<f32>
  %1 = stablehlo.reduce(%arg0 init: %c) applies stablehlo.add across dimensions = [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}], unreduced={"y"}>]>} : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
  return %0, %1 : tensor<8x8xf32>, tensor<8xf32>
}
''',
    "barrier_before_dot": MESH + '''func.func @main(%arg0: tensor<4x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>},
                %arg1: tensor<32x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> tensor<4x8xf32> {
  %b = sdy.propagation_barrier %arg0 allowed_direction=NONE : tensor<4x32xf32>
  %0 = stablehlo.dot_general %b, %arg1, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
''',
    "manual_computation": MESH + '''func.func @main(%arg0: tensor<16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}], unreduced={"x", "z"}>}) -> tensor<16xf32> {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}], unreduced={"z"}>] out_shardings=[<@mesh, [{"x"}]>] manual_axes={"x"} (%arg1: tensor<8xf32>) {
    %1 = stablehlo.abs %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}], unreduced={"z"}>]>} : tensor<8xf32>
    sdy.return %1 : tensor<8xf32>
  } : (tensor<16xf32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}
''',
    # Concatenates whose operands are sharded unlike the result: common axes.
    "concat_conflicting": MESH + '''func.func @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>},
                %arg1: tensor<4x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}) -> tensor<12x4xf32> {
  %0 = stablehlo.concatenate %arg0, %arg1, dim = 0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<12x4xf32>
  return %0 : tensor<12x4xf32>
}
''',
    "concat_on_concat_dim": MESH + '''func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {"x"}]>},
                %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}) -> tensor<16x8xf32> {
  %0 = stablehlo.concatenate %arg0, %arg1, dim = 0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"y", "z"}, {"x"}]>]>} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
  %1 = stablehlo.negate %0 : tensor<16x8xf32>
  return %1 : tensor<16x8xf32>
}
''',
    "unreduced_returned": MESH + '''func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}], unreduced={"x", "z"}>})
    -> (tensor<8x8xf32>, tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}], unreduced={"z"}>}) {
  return %arg0, %arg0 : tensor<8x8xf32>, tensor<8x8xf32>
}
''',
    # One-operand concatenates of a slice (a permutation factor, so Shardy's
    # unary case): the tensor without sharded permutation factors (then the
    # more sharded one) keeps its axes, the other is resharded.
    "unary_concat_keeps_result": MESH + '''func.func @main(%arg0: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.slice %arg0 [0:8, 0:8] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<16x8xf32>) -> tensor<8x8xf32>
  %1 = stablehlo.concatenate %0, dim = 0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
''',
    "unary_concat_keeps_operand": MESH + '''func.func @main(%arg0: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.slice %arg0 [0:8, 0:8] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"z"}, {"y"}]>]>} : (tensor<16x8xf32>) -> tensor<8x8xf32>
  %1 = stablehlo.concatenate %0, dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y":(1)2}]>]>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
''',
    # Data-flow ops: each edge source is brought to the owner's unreduced axes
    # (all-reduced over the axes the owner drops, made unreduced on those it adds).
    "while_sources": MESH + '''func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}], unreduced={"x", "z"}>},
                %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0:3 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg0, %iterArg_1 = %arg1) : tensor<i32>, tensor<8x8xf32>, tensor<8x8xf32> attributes {sdy.sharding = #sdy.sharding_per_value<[<@mesh, []>, <@mesh, [{}, {"y"}], unreduced={"z"}>, <@mesh, [{"y"}, {}], unreduced={"x"}>]>}
  cond {
    %c_1 = stablehlo.constant dense<5> : tensor<i32>
    %1 = stablehlo.compare LT, %iterArg, %c_1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %1 = stablehlo.sine %iterArg_0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"y"}], unreduced={"x"}>]>} : tensor<8x8xf32>
    %c_1 = stablehlo.constant dense<1> : tensor<i32>
    %2 = stablehlo.add %iterArg, %c_1 : tensor<i32>
    stablehlo.return %2, %1, %iterArg_1 : tensor<i32>, tensor<8x8xf32>, tensor<8x8xf32>
  }
  return %0#1, %0#2 : tensor<8x8xf32>, tensor<8x8xf32>
}
''',
    "case_branches": MESH + '''func.func @main(%arg0: tensor<i32>, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}], unreduced={"x"}>},
                %arg2: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}], unreduced={"z"}>}) -> tensor<8x8xf32> {
  %0 = "stablehlo.case"(%arg0) ({
    stablehlo.return %arg1 : tensor<8x8xf32>
  }, {
    stablehlo.return %arg2 : tensor<8x8xf32>
  }) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"y"}], unreduced={"z"}>]>} : (tensor<i32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
''',
    "optimization_barrier": MESH + '''func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}], unreduced={"x"}>},
                %arg1: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0:2 = stablehlo.optimization_barrier %arg0, %arg1 : tensor<8x8xf32>, tensor<8x8xf32>
  return %0#0, %0#1 : tensor<8x8xf32>, tensor<8x8xf32>
}
''',
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_insert_explicit_reshards(name):
    text = CASES[name]
    assert_same(shardy(text, PASS), normalize(ours(text, "insert-explicit-reshards")))


# The smallest example: a dot whose result feeds a constraint on "model".
CONSTRAINED_DOT = '''sdy.mesh @mesh = <["data"=2, "model"=4]>
func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {"model"}]>},
                %arg1: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{"model"}, {}]> : tensor<8x8xf32>
  %2 = stablehlo.negate %1 : tensor<8x8xf32>
  return %2 : tensor<8x8xf32>
}
'''


# An unreduced argument fed to a while loop: all-reduced before the loop.
UNREDUCED_WHILE = '''sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}], unreduced={"a"}>}) -> tensor<8x8xf32> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg0) : tensor<i32>, tensor<8x8xf32>
  cond {
    %c_1 = stablehlo.constant dense<5> : tensor<i32>
    %1 = stablehlo.compare LT, %iterArg, %c_1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %1 = stablehlo.sine %iterArg_0 : tensor<8x8xf32>
    %c_1 = stablehlo.constant dense<1> : tensor<i32>
    %2 = stablehlo.add %iterArg, %c_1 : tensor<i32>
    stablehlo.return %2, %1 : tensor<i32>, tensor<8x8xf32>
  }
  return %0#1 : tensor<8x8xf32>
}
'''


# A one-operand concatenate whose result is sharded on another dim.
UNARY_CONCAT = '''sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"a"}]>}) {
  %0 = stablehlo.slice %arg0 [0:8, 0:8] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>} : (tensor<16x8xf32>) -> tensor<8x8xf32>
  %1 = stablehlo.concatenate %0, dim = 0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"a"}]>]>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
'''


# Calls whose results are unreduced: insert-func-call-reshards ignores unreduced
# axes, the return all-reduces them.
UNREDUCED_CALLS = '''sdy.mesh @mesh = <["x"=8]>
func.func private @foo(%arg0: tensor<256x128xf32>) -> (tensor<256x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  %0 = sdy.sharding_constraint %arg0 <@mesh, [{}, {}], unreduced={"x"}> : tensor<256x128xf32>
  return %0 : tensor<256x128xf32>
}
func.func @main(%arg0: tensor<256x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}], unreduced={"x"}>}) -> tensor<256x128xf32> {
  %0 = func.call @foo(%arg0) : (tensor<256x128xf32>) -> tensor<256x128xf32>
  %1 = func.call @foo(%0) : (tensor<256x128xf32>) -> tensor<256x128xf32>
  return %1 : tensor<256x128xf32>
}
'''


@pytest.mark.parametrize("text", [CONSTRAINED_DOT, CASES["unreduced_result"], UNREDUCED_CALLS,
                                  UNREDUCED_WHILE, UNARY_CONCAT],
                         ids=["constrained_dot", "unreduced_result", "unreduced_calls",
                              "unreduced_while", "unary_concat"])
def test_pipeline(text):
    from sdy_dl.ir import parse_module_text
    from sdy_dl.pipeline import make_options
    from sdy_dl.pipeline import propagate

    expected = shardy(text, "sdy-propagation-pipeline")
    actual = propagate(parse_module_text(text, "<test>"), make_options(engine="clingo")).print()
    assert_same(expected, normalize(actual))


#: Shardy's pipeline with its passes spelled out; the insert-explicit-reshards
#: stage is %s (to tell the seeds it changes from those it leaves alone).
EXPANDED = ("sdy-import-pipeline,sdy-flatten-call-graph,symbol-dce,sdy-import-func-calls,symbol-dce,"
            "sdy-apply-sharding-constraints,sdy-sharding-group-import,sdy-pre-order-funcs,"
            "sdy-user-priority-propagate{keep-sharding-rules=true},sdy-export-named-computations,"
            "sdy-propagate-to-func-results,sdy-unflatten-call-graph,symbol-dce,"
            "sdy-insert-func-call-reshards,func.func(sdy-constant-or-scalar-merger),"
            "func.func(sdy-sink-data-flow-edges),sdy-remove-sharding-groups,"
            "func.func(sdy-sharding-constraint-to-reshard),"
            "sdy-update-non-divisible-input-output-shardings,"
            "sdy-remove-sub-axes-in-input-output-shardings,sdy-close-shardings,%s"
            "canonicalize{enable-patterns={sdy-collective}},func.func(sdy-drop-sharding-rules)")
WITH = "func.func(sdy-insert-explicit-reshards),"


def random_case(seed: int, conflicts=("dot",)):
    """(module, Shardy's pipeline output, whether its insert-explicit-reshards changed it)."""
    from random_modules import random_module

    text = random_module(seed, 10, conflicts)
    expected = shardy(text, "sdy-propagation-pipeline")
    assert shardy(text, EXPANDED % WITH) == expected
    return text, expected, shardy(text, EXPANDED % "") != expected


def run_random(seeds, conflicts=("dot",)) -> tuple[int, int, list[int]]:
    """(equal, counted, differing seeds) over the seeds Shardy's pass changes."""
    from sdy_dl.ir import parse_module_text
    from sdy_dl.pipeline import make_options
    from sdy_dl.pipeline import propagate

    equal, counted, differ = 0, 0, []
    for seed in seeds:
        text, expected, changed = random_case(seed, conflicts)
        if not changed:
            continue
        counted += 1
        actual = normalize(propagate(parse_module_text(text, "<test>"),
                                     make_options(engine="clingo")).print())
        if actual == expected:
            equal += 1
        else:
            differ.append(seed)
    return equal, counted, differ


def test_random_dots_and_concatenates_with_conflicts():
    equal, counted, differ = run_random(range(14), ("dot", "concat"))
    assert counted >= 4, "too few seeds exercise insert-explicit-reshards"
    assert not differ, f"{equal}/{counted} equal; differ: {differ}"


@pytest.mark.slow
@pytest.mark.parametrize("conflicts", [("dot",), ("dot", "concat")])
def test_random_dots_and_concatenates_with_conflicts_many(conflicts):
    equal, counted, differ = run_random(range(14, 400), conflicts)
    assert counted >= 10
    assert not differ, f"{equal}/{counted} equal; differ: {differ}"


def test_an_unreduced_result_of_a_reduction_sharded_unlike_is_refused_at_the_op():
    """A dot whose result is unreduced over "y" while its operands shard the contracting
    factor differently (only the rhs has "y"): jaxlib's pass aborts the process on a
    failed check there; ours refuses with one error at the dot."""
    from oracle_isolated import shardy_each
    from sdy_dl.errors import SdyError

    text = MESH + """func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg1: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}) -> tensor<8x32xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}], unreduced={"y"}>]>} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}
"""
    assert shardy_each([text], "func.func(sdy-insert-explicit-reshards)") == [None]
    with pytest.raises(SdyError) as refused:
        ours(text, "insert-explicit-reshards", engine="clingo")
    e = refused.value
    assert (e.line, e.col) == (3, 8), str(e)
    assert e.message.startswith("insert-explicit-reshards: the result has unreduced axes while "
                                "the operands shard a reduction factor differently"), e.message
