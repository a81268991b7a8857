"""``explain --why-not AXIS``: why a value has no axis, from the step program's negation provenance.

One crafted module per cause; each answer must name the cause and carry the
Datalog rule and the body literal that did not hold (the question asked of
the step program, answered on its facts).
"""

from __future__ import annotations

import json

import pytest

from oracle import assert_same, normalize, shardy
from sdy_dl import propagate
from sdy_dl.errors import SdyError

MESH = 'sdy.mesh @mesh = <["x"=4, "y"=2]>\n'

NOT_DIVIDING = MESH + """\
func.func @main(%arg0: tensor<6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> tensor<3x2xf32> {
  %0 = stablehlo.reshape %arg0 : (tensor<6xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}
"""

CONFLICT = MESH + """\
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
"""

CLOSED = MESH + """\
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.tanh %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
"""

PRIORITY = MESH + """\
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}p1, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}p0, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
"""

REDUCTION = MESH + """\
func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) -> tensor<8xf32> {
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%arg0 init: %c) applies stablehlo.add across dimensions = [1] : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
"""

NEED_REPLICATION = MESH + """\
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %i: tensor<i32>) -> tensor<4x8xf32> {
  %0 = stablehlo.dynamic_slice %arg0, %i, %i, sizes = [4, 8] : (tensor<8x8xf32>, tensor<i32>, tensor<i32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
"""

OTHER_DIM = MESH + """\
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
"""

SUB_AXIS_RESHAPE = MESH + """\
func.func @main(%arg0: tensor<6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> tensor<2x3xf32> {
  %0 = stablehlo.reshape %arg0 : (tensor<6xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
"""

UNCONNECTED = MESH + """\
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg1: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = stablehlo.tanh %arg0 : tensor<8x8xf32>
  %1 = stablehlo.tanh %arg1 : tensor<8x8xf32>
  return %0, %1 : tensor<8x8xf32>, tensor<8x8xf32>
}
"""

# A loop after the reshape that stops "x": the walk crosses the while's data-flow edge.
AFTER_LOOP = MESH + """\
func.func @main(%arg0: tensor<6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> tensor<3x2xf32> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0 = stablehlo.reshape %arg0 : (tensor<6xf32>) -> tensor<3x2xf32>
  %1:2 = stablehlo.while(%iterArg = %0, %i = %c) : tensor<3x2xf32>, tensor<i32>
    cond {
      %k = stablehlo.constant dense<4> : tensor<i32>
      %p = stablehlo.compare LT, %i, %k : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %n = stablehlo.add %i, %one : tensor<i32>
      %t = stablehlo.tanh %iterArg : tensor<3x2xf32>
      stablehlo.return %t, %n : tensor<3x2xf32>, tensor<i32>
    }
  %2 = stablehlo.negate %1#0 : tensor<3x2xf32>
  return %2 : tensor<3x2xf32>
}
"""

# The while's own sharding closes dim 0: the edge into its block arguments stops "x".
CLOSED_LOOP = MESH + """\
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x8xf32> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %1:2 = stablehlo.while(%iterArg = %arg0, %i = %c) : tensor<8x8xf32>, tensor<i32> attributes {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>, <@mesh, []>]>}
    cond {
      %k = stablehlo.constant dense<4> : tensor<i32>
      %p = stablehlo.compare LT, %i, %k : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %n = stablehlo.add %i, %one : tensor<i32>
      %t = stablehlo.tanh %iterArg : tensor<8x8xf32>
      stablehlo.return %t, %n : tensor<8x8xf32>, tensor<i32>
    }
  %2 = stablehlo.negate %1#0 : tensor<8x8xf32>
  return %2 : tensor<8x8xf32>
}
"""

# A call (a named computation after import) between the reshape and the value.
AFTER_CALL = MESH + """\
func.func @main(%arg0: tensor<6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> tensor<3x2xf32> {
  %0 = stablehlo.reshape %arg0 : (tensor<6xf32>) -> tensor<3x2xf32>
  %1 = func.call @f(%0) : (tensor<3x2xf32>) -> tensor<3x2xf32>
  %2 = stablehlo.negate %1 : tensor<3x2xf32>
  return %2 : tensor<3x2xf32>
}
func.func private @f(%a: tensor<3x2xf32>) -> tensor<3x2xf32> {
  %0 = stablehlo.tanh %a : tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}
"""

# "x" is manual in the manual computation: its body sees the local view.
MANUAL = MESH + """\
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x8xf32> {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{}, {}]>] manual_axes={"x"} (%a: tensor<2x8xf32>) {
    %1 = stablehlo.tanh %a : tensor<2x8xf32>
    %c = stablehlo.concatenate %1, %1, %1, %1, dim = 0 : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<8x8xf32>
    sdy.return %c : tensor<8x8xf32>
  } : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %2 = stablehlo.negate %0 : tensor<8x8xf32>
  return %2 : tensor<8x8xf32>
}
"""


# The result's "y" reaches the dot's result through the negates in op-priority
# band 0; the dot lets its lhs's "x" through only from band 2.
BAND = MESH + """\
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {?}]>}, %arg1: tensor<8x8xf32>) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y", ?}, {?}]>}) {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = stablehlo.negate %0 : tensor<8x8xf32>
  %2 = stablehlo.negate %1 : tensor<8x8xf32>
  return %2 : tensor<8x8xf32>
}
"""

# The reshape splits "x" over the factors of dim 0 of %arg0: only "x":(1)2 fits dim 0 of %0.
SPLIT = MESH + """\
func.func @main(%arg0: tensor<16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> tensor<2x8xf32> {
  %0 = stablehlo.reshape %arg0 : (tensor<16xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}
"""

# The branches of a case between the reshape and the value.
AFTER_CASE = MESH + """\
func.func @main(%arg0: tensor<6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}, %i: tensor<i32>) -> tensor<3x2xf32> {
  %0 = stablehlo.reshape %arg0 : (tensor<6xf32>) -> tensor<3x2xf32>
  %1 = "stablehlo.case"(%i) ({
    %a = stablehlo.tanh %0 : tensor<3x2xf32>
    stablehlo.return %a : tensor<3x2xf32>
  }, {
    %b = stablehlo.abs %0 : tensor<3x2xf32>
    stablehlo.return %b : tensor<3x2xf32>
  }) : (tensor<i32>) -> tensor<3x2xf32>
  %2 = stablehlo.negate %1 : tensor<3x2xf32>
  return %2 : tensor<3x2xf32>
}
"""

# A custom call without a sharding rule between the annotation and the value.
NO_RULE = MESH + """\
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.custom_call @my_kernel(%arg0) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = stablehlo.tanh %0 : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
"""


def answer(text, value, axis, dim=None, **options):
    result = propagate(text, engine="python", **options)
    return result.why_not(value, axis, dim)


@pytest.mark.parametrize("text, value, axis, dim, options, cause, literal", [
    (NOT_DIVIDING, "%0", "x", None, {}, '"x" does not divide factor i (size 3) of %arg0',
     "no rec_axis(0, 0, _, _, \"x\", _, _)"),
    (CONFLICT, "%0", "y", None, {}, 'factor i already holds another axis from another tensor '
     '(operand 0 has "x")', "no cand0(0, 0, _, \"y\", _, _)"),
    (CLOSED, "%0", "x", None, {}, "dim 0 of %0 is closed", "no ag_within(0, 1, 0, _, \"x\", _, _)"),
    (PRIORITY, "%0", "x", None, {}, 'a higher user priority won: %arg1 held "y" as the module '
     'gave it (from %arg1 = #sdy.sharding<@mesh, [{"y"}p0, {}]>), and "x" of %arg0 reached this '
     'step only in user priority 1, op-priority band 0 (the priority of its dim)',
     "no cand0(0, 0, _, \"x\", _, _)"),
    (BAND, "%0", "x", None, {}, 'an earlier op-priority band won (op priorities, §7.1): %0 held '
     '"y" in user priority 0, op-priority band 0 (from result:0 = #sdy.sharding<@mesh, '
     '[{"y", ?}, {?}]>), and "x" of %arg0 reached this step only in user priority 0, '
     'op-priority band 2', "no cand0(0, 0, _, \"x\", _, _)"),
    (REDUCTION, "%1", "x", None, {}, 'factor j of "x" maps no dim of %1 (a reduction factor)', None),
    (NEED_REPLICATION, "%0", "x", None, {}, "factor i is blocked (a need-replication factor with "
     "blocked propagation)", "no c0_key(0, 0, 0, _)"),
    (OTHER_DIM, "%0", "x", 1, {}, '"x" is already used by another dim of %0 (factor i, dim 0)',
     "no ag_across_1(0, 2, _, \"x\", _, _)"),
    (SPLIT, "%0", "x", 0, {}, 'a sub-axis that does not fit: only "x":(1)2 of "x" (size 4) fits '
     'factor i (size 2) of %arg0; its dim splits "x" into "x":(1)2 (factor i), "x":(2)2 (factor '
     'j), and dim 0 of %0 maps factor i only', "no proj_take(0, 0, _, _, _, \"x\", 1, 4)"),
    (SUB_AXIS_RESHAPE, "%0", "x", None, {"conservative": True},
     'conservative mode: "x" is on %arg0 as the sub-axis "x":(1)2', "no keep_ref(0, \"x\", 1, 2)"),
])
def test_each_cause_is_named_with_its_rule_and_literal(text, value, axis, dim, options, cause,
                                                       literal):
    got = answer(text, value, axis, dim, **options)
    assert not got.has_axis
    assert len(got.blocked) == 1, got.lines()
    b = got.blocked[0]
    assert b.cause.startswith(cause), b.cause
    if literal is None:   # (a factor no dim of the tensor maps: a missing fact of the step)
        assert b.why.input_relation and b.why.atom.startswith("in_dim_factor(0, ")
        assert f"    {b.why.atom}: not among the input facts" in got.lines()
        return
    assert b.why.atom == literal[3:]
    first = b.why.failures[0]
    assert first.rule.startswith("datalog/step/") and first.failed
    text = "\n".join(got.lines())
    assert f"{literal}: rule datalog/step/" in text and "did not hold: " in text


@pytest.mark.parametrize("text, value, edge", [
    (AFTER_LOOP, "%3", "the data-flow edge of stablehlo.while"),
    (AFTER_CALL, "%2", "the data-flow edge of func.call"),
    (AFTER_CASE, "%2", "the data-flow edge of stablehlo.case"),
])
def test_the_walk_crosses_data_flow_edges(text, value, edge):
    got = answer(text, value, "x")
    assert len(got.blocked) == 1, got.lines()
    b = got.blocked[0]
    assert (b.source, b.op) == ("%arg0", "stablehlo.reshape")
    assert b.cause.startswith('"x" does not divide factor i (size 3) of %arg0'), b.cause
    assert edge in b.via and b.via[-1] == "stablehlo.negate"
    assert f"(which reaches {value} through " in "\n".join(got.lines())


def test_a_closed_data_flow_edge_is_where_the_axis_stops():
    got = answer(CLOSED_LOOP, "%2", "x")
    edge = [b for b in got.blocked if b.op == "the data-flow edge of stablehlo.while"]
    assert len(edge) == 1, got.lines()
    b = edge[0]
    assert b.source == "%arg0" and b.cause.startswith("dim 0 of %1#0 is closed"), b.cause
    assert b.why.atom == 'ag_within(0, 2, 0, _, "x", _, _)'
    assert b.via == ["stablehlo.negate"]


@pytest.mark.parametrize("value", ["%2", "%1"])   # inside the body, and after it
def test_a_manual_axis_is_its_own_cause(value):
    got = answer(MANUAL, value, "x")
    assert len(got.blocked) == 1, got.lines()
    b = got.blocked[0]
    assert (b.source, b.op, b.to) == ("%arg0", "the data-flow edge of sdy.manual_computation",
                                      "%arg1")
    assert b.cause.startswith('"x" is manual in the sdy.manual_computation at input line 3: '
                              "it cannot propagate across"), b.cause


@pytest.mark.parametrize("text, value, dim", [
    (AFTER_LOOP, "%3", None), (CLOSED_LOOP, "%2", None), (AFTER_CALL, "%2", None),
    (AFTER_CASE, "%2", None), (NO_RULE, "%1", None),
    (MANUAL, "%1", None), (PRIORITY, "%0", None), (BAND, "%0", None), (SPLIT, "%0", 0),
    (NOT_DIVIDING, "%arg0", None)])
def test_shardy_leaves_the_axis_out_too(text, value, dim):
    """The crafted modules: Shardy's propagation prints the same module, so the
    value lacks the axis there as well."""
    result = propagate(text, engine="python")
    assert not result.why_not(value, "x", dim).has_axis
    assert_same(shardy(text, "sdy-propagation-pipeline"), normalize(result.text))


def test_priority_answer_names_the_phase():
    b = answer(PRIORITY, "%0", "x").blocked[0]
    assert b.source == "%arg0" and b.annotations == ['%arg0 = #sdy.sharding<@mesh, [{"x"}p1, {}]>']
    assert b.phase.startswith("user priority 1")


def test_sources_and_steps_are_named():
    b = answer(CONFLICT, "%0", "y").blocked[0]
    assert (b.source, b.op, b.factor, b.to) == ("%arg1", "stablehlo.add", "i", "%0")
    assert b.place.endswith("3") and b.strategy == "aggressive"


def test_a_boundary_made_evenly_sharded_keeps_a_sub_axis():
    got = answer(NOT_DIVIDING, "%arg0", "x")
    assert got.sharding == '#sdy.sharding<@mesh, [{"x":(1)2}]>' and not got.blocked
    assert got.note == ('a sub-axis that does not fit: propagation gave dim 0 {"x"}, but dim 0 has '
                        "size 6, which 4 devices do not divide: the export pass "
                        "update-non-divisible-input-output-shardings (§9.3) keeps the longest "
                        'prefix that divides it evenly, {"x":(1)2}')


UNEVEN_CALL = MESH + """\
func.func @main(%arg0: tensor<6x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<6x8xf32> {
  %0 = func.call @f(%arg0) : (tensor<6x8xf32>) -> tensor<6x8xf32>
  %1 = stablehlo.tanh %0 : tensor<6x8xf32>
  return %1 : tensor<6x8xf32>
}
func.func private @f(%arg0: tensor<6x8xf32>) -> tensor<6x8xf32> {
  %0 = stablehlo.sine %arg0 : tensor<6x8xf32>
  return %0 : tensor<6x8xf32>
}
"""


def test_an_uneven_call_result_names_the_pass_that_made_it_even():
    """The callee returns its value with "x" on a dim of 6: the call prints the
    callee's result sharding, which has "x" (no reshard after the call);
    update-non-divisible-input-output-shardings keeps "x":(1)2 of both."""
    result = propagate(UNEVEN_CALL, engine="python")
    assert result.sharding("%0") == '#sdy.sharding<@mesh, [{"x":(1)2}, {}]>'
    assert "sdy.reshard" not in result.text
    got = result.why_not("%0", "x")
    assert got.note.startswith("a sub-axis that does not fit: propagation gave dim 0 "
                               '{"x"}, but dim 0 has size 6'), got.note
    assert "update-non-divisible-input-output-shardings" in got.note, got.note
    because = result.explain("%0").because
    assert "insert-func-call-reshards" not in because, because


def test_a_call_result_whose_callee_result_is_not_found_names_no_pass_as_fact(monkeypatch):
    """When the callee's returned value is not found, explain cannot tell the call
    reshard from the other export passes: it names both and says which is not known."""
    from sdy_dl.audit.explain import Explainer

    result = propagate(UNEVEN_CALL, engine="python")
    monkeypatch.setattr(Explainer, "callee_returned", lambda self, out: None)
    because = result.explain("%0").because
    assert "not known here" in because and "insert-func-call-reshards" in because, because

def test_sub_axes_on_two_dims_hold_the_axis():
    assert answer(SPLIT, "%0", "x").has_axis
    assert not answer(SPLIT, "%0", "x", 1).has_axis


def test_a_dim_reached_again_by_another_path_is_walked_with_it():
    """%3 = add(%1, transpose(%1)) asking dim 0: the add reaches %1 with its dim 0,
    the transpose with its dim 1, where %arg0 holds "x" (stopped at the tanh, whose
    result the closed constraint keeps replicated): the answer finds it through the
    transpose (not that no value holding "x" reaches dim 0)."""
    text = MESH + """\
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.tanh %arg0 : tensor<8x8xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{}, {}]> : tensor<8x8xf32>
  %2 = stablehlo.transpose %1, dims = [1, 0] : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %3 = stablehlo.add %1, %2 : tensor<8x8xf32>
  return %3 : tensor<8x8xf32>
}
"""
    got = answer(text, "%3", "x", 0)
    assert len(got.blocked) == 1, got.lines()
    b = got.blocked[0]
    assert (b.source, b.op, b.to, b.via) == (
        "%arg0", "stablehlo.tanh", "%0",
        ["sdy.sharding_constraint", "stablehlo.transpose", "stablehlo.add"]), got.lines()


def test_an_op_without_a_rule_is_where_the_axis_stops():
    got = answer(NO_RULE, "%1", "x")
    assert len(got.blocked) == 1, got.lines()
    b = got.blocked[0]
    assert (b.source, b.op, b.place, b.to, b.via) == ("%arg0", "stablehlo.custom_call",
                                                      "input line 3", "%0", ["stablehlo.tanh"])
    assert b.cause == ("stablehlo.custom_call has no sharding rule: propagation does not cross it "
                       "(no step of it was evaluated)")


def test_unconnected_value():
    """Asked with --dim too: no value holding the axis reaches it at all (no factor
    mapping is to blame)."""
    for dim in (None, 0):
        got = answer(UNCONNECTED, "%1", "x", dim)
        assert got.blocked == [] and got.note.startswith('no op with a rule connects %1 to a '
                                                         'value holding "x"'), (dim, got.note)


def test_value_that_has_the_axis_says_so():
    got = answer(OTHER_DIM, "%0", "x")
    assert got.has_axis and got.lines()[1] == '  has "x" (see \'sdy-dl explain %0\')'
    assert answer(OTHER_DIM, "%0", "x", 0).has_axis
    assert not answer(OTHER_DIM, "%0", "x", 1).has_axis


def test_bad_axis_or_dim_is_one_error():
    result = propagate(CONFLICT, engine="python")
    with pytest.raises(SdyError, match='no axis "z" in the module\'s meshes; axes: "x", "y"'):
        result.why_not("%0", "z")
    with pytest.raises(SdyError, match="%0 has rank 2: --dim is 0..1"):
        result.why_not("%0", "x", 2)
    with pytest.raises(SdyError, match="no value '%9'"):
        result.why_not("%9", "x")


def test_proof_expands_the_chain(tmp_path):
    from click.testing import CliRunner

    from sdy_dl.cli import main

    src = tmp_path / "m.mlir"
    src.write_text(CLOSED)
    r = CliRunner().invoke(main, ["explain", str(src), "%0", "--why-not", "x", "--proof",
                                  "--engine", "python"])
    assert r.exit_code == 0, r.output
    assert "no ag_within(0, 1, 0, _, \"x\", _, _):" in r.output
    assert r.output.count("  rule datalog/step/") >= 2 and "fails: " in r.output
    j = CliRunner().invoke(main, ["explain", str(src), "%0", "--why-not", "x", "--format", "json",
                                  "--engine", "python"])
    data = json.loads(j.output)
    assert data["blocked"][0]["datalog"]["atom"] == 'ag_within(0, 1, 0, _, "x", _, _)'


@pytest.mark.parametrize("text, value, dim", [(OTHER_DIM, "%0", 1), (SPLIT, "%0", 0),
                                              (BAND, "%0", None), (CLOSED_LOOP, "%2", None)])
def test_clingo_gives_the_same_answer(text, value, dim):
    python = answer(text, value, "x", dim).lines(proof=True)
    clingo = propagate(text, engine="clingo").why_not(value, "x", dim).lines(proof=True)
    assert python == clingo


def test_negation_answer_of_a_small_program():
    from sdy_dl.audit.negation import Model
    from sdy_dl.datalog.program import Program, parse_declarations
    from sdy_dl.engines.python_engine import PythonEngine

    text = """
// e(A, B): an edge
.decl e(a: number, b: number)
.input e
// bad(A): a bad node
.decl bad(a: number)
.input bad
// ok(A): a good node with a long edge
.decl ok(a: number)
ok(A) :- e(A, B), B > 1, !bad(A).
// path(A): what is asked
.decl path(a: number)
.output path
path(A) :- ok(A).
"""
    program = Program(text, parse_declarations(text))
    model = Model(program, {"e": [(1, 0), (2, 5), (3, 5)], "bad": [(3,)]}, PythonEngine().run)
    assert model.has("path", (2,))
    no1 = model.why_not("path", (1,))
    inner = no1.failures[0].below.failures[0]
    assert (inner.failed, inner.kind) == ("0 > 1", "comparison")
    no3 = model.why_not("ok", (3,))
    assert (no3.failures[0].kind, no3.failures[0].blocking) == ("blocked", "bad(3)")
    no4 = model.why_not("ok", (4,))
    assert no4.failures[0].failed == "e(4, B)" and no4.failures[0].below.input_relation


def test_report_memory_section_says_why_not(tmp_path):
    """The report's largest values each say, per axis that could shard them, why
    propagation did not put it there (the headline of the why-not answer)."""
    import html
    import re

    from click.testing import CliRunner

    from sdy_dl.cli import main

    src = tmp_path / "m.mlir"
    src.write_text(CONFLICT)
    out = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["report", str(src), "-o", str(out), "--engine", "python"])
    assert r.exit_code == 0, r.output
    memory = re.search(r'<section id="sec-memory">(.*?)</section>', out.read_text(), re.S).group(1)
    headline = answer(CONFLICT, "%0", "y", 0).headline()
    assert headline.startswith("stopped at stablehlo.add (input line 3) from %arg1 into %0: "
                               "factor i already holds another axis")
    assert f"y on dim 0, 1: <small>why not: {html.escape(headline)}</small>" in memory


@pytest.mark.parametrize("text, value, dim, atom, failed", [
    (SPLIT, "%0", 0, 'proj_take(0, 0, _, _, _, "x", 1, 4)', "fails: proj_gcd(2, 4, 4)  (no tuple)"),
    (BAND, "%0", None, 'cand0(0, 0, _, "x", _, _)', "fails: c0(0, 0, 2, Q, \"x\", P, S)  (no tuple)"),
    (CLOSED_LOOP, "%2", None, 'ag_within(0, 2, 0, _, "x", _, _)', "fails: "),
])
def test_proof_of_the_new_causes(text, value, dim, atom, failed):
    """--proof expands the failing rule of a sub-axis, a band win and a closed
    data-flow edge into the step program's derivation."""
    lines = answer(text, value, "x", dim).lines(proof=True)
    start = lines.index(f"    no {atom}:")
    assert lines[start + 1].startswith("      rule datalog/step/")
    assert any(line.strip().startswith(failed) for line in lines[start:])


@pytest.mark.parametrize("text, value, failed, below", [
    (MANUAL, "%2", 'fails: !in_manual_axis("o3", "x")  (blocked by in_manual_axis("o3", "x"))',
     None),
    (NO_RULE, "%1", 'fails: steps("o2")  (no tuple)', 'fails: in_rule("o2")  (no tuple)'),
])
def test_proof_of_a_link_propagation_does_not_step_across(text, value, failed, below):
    """A manual axis at a manual computation's edge and an op without a rule are
    decided by stage why_not: --proof shows its rule and the literal that failed."""
    got = answer(text, value, "x")
    b = got.blocked[0]
    assert b.why.atom == f'carries("{"o3" if text is MANUAL else "o2"}", "x")'
    assert b.why.failures[0].rule.startswith("datalog/why_not/main.dl.j2:")
    lines = [line.strip() for line in got.lines(proof=True)]
    start = lines.index(f"no {b.why.atom}:")
    assert lines[start + 1].startswith("rule datalog/why_not/main.dl.j2:")
    assert failed in lines[start:]
    if below is not None:
        assert below in lines[start:] and 'in_rule("o2"): not among the input facts' in lines


@pytest.mark.parametrize("text, value", [(MANUAL, "%2"), (MANUAL, "%1"), (NO_RULE, "%1")])
def test_clingo_gives_the_same_link_answer(text, value):
    python = answer(text, value, "x").lines(proof=True)
    assert python == propagate(text, engine="clingo").why_not(value, "x").lines(proof=True)


# Backward through the reshape %arg0 gets "x":(1)2 on its open dim 0, which the
# export pass remove-sub-axes-in-input-output-shardings drops from main's boundary.
SUB_AXIS_BOUNDARY = MESH + """\
func.func @main(%arg0: tensor<2x8xf32>) -> (tensor<16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) {
  %0 = stablehlo.reshape %arg0 : (tensor<2x8xf32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}
"""

# "x" (4) and the size 3 share nothing: update-non-divisible-input-output-shardings
# keeps no axis of the dim.
COPRIME = MESH + """\
func.func @main(%arg0: tensor<3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> tensor<3xf32> {
  %0 = stablehlo.negate %arg0 : tensor<3xf32>
  return %0 : tensor<3xf32>
}
"""

# An open dim: cut to "x":(1)2 by one export pass, then dropped by the next.
CUT_THEN_DROPPED = MESH + """\
func.func @main(%arg0: tensor<6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}]>}) -> tensor<6xf32> {
  %0 = stablehlo.negate %arg0 : tensor<6xf32>
  return %0 : tensor<6xf32>
}
"""


@pytest.mark.parametrize("text, note, atom, failed", [
    (NOT_DIVIDING, "a sub-axis that does not fit: propagation gave dim 0 {\"x\"}, but dim 0 has "
     "size 6, which 4 devices do not divide", 'out_axis(0, 0, 0, "x", 1, 4)', "2 = 4  (false)"),
    (COPRIME, "a sub-axis that does not fit: propagation gave dim 0 {\"x\"}, but dim 0 has size 3, "
     "which 4 devices do not divide", 'out_axis(0, 0, 0, "x", _, _)', "1 > 1  (false)"),
    (CUT_THEN_DROPPED, 'a sub-axis that does not fit: propagation gave dim 0 {"x"}, but dim 0 has '
     "size 6", 'out_axis(0, 0, 0, "x", 1, 4)', "2 = 4  (false)"),
    (SUB_AXIS_BOUNDARY, 'a sub-axis on an open dim of the main function\'s boundary: propagation '
     'gave dim 0 {"x":(1)2}, and the export pass remove-sub-axes-in-input-output-shardings',
     'out_axis(0, 0, 0, "x", _, _)',
     "!after_sub_axis(0, 0, 0)  (blocked by after_sub_axis(0, 0, 0))"),
])
def test_a_boundary_an_export_pass_narrowed_has_its_stage_proof(text, note, atom, failed):
    """The export pass that narrowed a function boundary is asked through its
    Datalog stage: the note names it, --proof shows the rule that would have kept
    the axis and the literal that failed; Shardy prints the same module."""
    result = propagate(text, engine="python")
    got = result.why_not("%arg0", "x")
    assert not got.has_axis and not got.blocked and got.note.startswith(note), got.note
    assert got.why.atom == atom
    stage = ("remove_sub_axes_in" if text is SUB_AXIS_BOUNDARY
             else "update_non_divisible") + "_input_output_shardings"
    assert got.why.failures[0].rule.startswith(f"datalog/{stage}/main.dl.j2:")
    lines = [line.strip() for line in got.lines(proof=True)]
    assert f"no {atom}:" in lines and f"fails: {failed}" in lines
    assert got.to_json()["datalog"]["atom"] == atom
    assert_same(shardy(text, "sdy-propagation-pipeline"), normalize(result.text))


def test_a_boundary_cut_then_dropped_says_both():
    got = answer(CUT_THEN_DROPPED, "%arg0", "x")
    assert got.note.endswith('keeps the longest prefix that divides it evenly, {"x":(1)2} (then '
                             "remove-sub-axes-in-input-output-shardings drops an open dim's "
                             "sub-axes: {})"), got.note


@pytest.mark.parametrize("text", [NOT_DIVIDING, COPRIME, SUB_AXIS_BOUNDARY])
def test_clingo_gives_the_same_boundary_answer(text):
    python = answer(text, "%arg0", "x").lines(proof=True)
    assert python == propagate(text, engine="clingo").why_not("%arg0", "x").lines(proof=True)


def test_a_value_without_dims_says_so():
    """A rank-0 value (the reduction's init constant) has no dim for any axis:
    the answer says so instead of walking the data flow."""
    got = answer(REDUCTION, "%0", "x")
    assert not got.has_axis and not got.blocked
    assert got.note == 'it has no dims (rank 0): no dim can hold "x"'
    with pytest.raises(SdyError, match=r"%0 has no dims \(rank 0\): --dim does not apply"):
        answer(REDUCTION, "%0", "x", 0)


def test_a_dim_no_neighbour_would_fill_names_the_dim_they_fill():
    """--dim 1 of a value whose neighbours hold the axis on factors of its dim 0:
    the answer says so (not that they carry it onto "another dim" of it)."""
    text = MESH + """\
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.tanh %arg0 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
"""
    got = answer(text, "%0", "x", 1)
    assert not got.has_axis and not got.blocked
    assert got.note == ('it holds "x" on dim 0; no value holding "x" next to it would put it on '
                        'dim 1: the factors holding it map dim 0 of %0 (--dim 0 says what '
                        'happened there)')


def test_an_axis_is_held_whole_as_the_values_own_mesh_sizes_it():
    """Two meshes size "x" otherwise: half of @m2's "x" is not all of it, although it is
    as large as @m1's."""
    text = """module {
  sdy.mesh @m1 = <["x"=2]>
  sdy.mesh @m2 = <["x"=4]>
  func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@m2, [{"x":(1)2}]>}, %arg1: tensor<8xf32> {sdy.sharding = #sdy.sharding<@m1, [{"x"}]>}) -> (tensor<8xf32>, tensor<8xf32>) {
    %0 = stablehlo.negate %arg0 : tensor<8xf32>
    %1 = stablehlo.negate %arg1 : tensor<8xf32>
    return %0, %1 : tensor<8xf32>, tensor<8xf32>
  }
}
"""
    result = propagate(text)
    assert not result.why_not("%0", "x").has_axis
    assert result.why_not("%1", "x").has_axis
