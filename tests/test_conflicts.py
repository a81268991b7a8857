"""``sdy-dl conflicts``: where propagation could not agree, and what decided."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sdy_dl.audit import Audit
from sdy_dl.cli import main
from sdy_dl.ir import parse_module_text
from sdy_dl.pipeline import make_options
from test_propagate import CASES

CLINGO = make_options(engine="clingo")

FREE = '''sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  %1 = stablehlo.multiply %0, %arg1 : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
'''

WITHIN = '''sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
'''
CASES = {**CASES, "within": WITHIN}


@pytest.mark.parametrize("name,kind,factor", [
    ("within", "within-factor", "i"),
    ("dot_across_factor", "across-factor", "i, j"),
    ("lifo_order", "across-factor", None),
    ("basic_blocks_factor", "replicated", "i"),
])
def test_conflicting_programs(name, kind, factor):
    found = Audit(parse_module_text(CASES[name]), CLINGO).conflicts()
    matching = [c for c in found if c.kind == kind and (factor is None or c.factor == factor)]
    assert matching, [(c.op, c.factor, c.kind) for c in found]
    c = matching[0]
    assert c.place.startswith("input line ") and c.decided["strategy"] == "aggressive strategy"
    origins = [a for comp in c.competitors for o in comp["origins"] for a in o["from"]]
    assert origins and all(a.startswith("%") for a in origins), origins
    assert any(comp["won"] for comp in c.competitors) or not any(c.kept.values())


def test_conflict_free_program_has_none(tmp_path):
    path = tmp_path / "free.mlir"
    path.write_text(FREE)
    result = CliRunner().invoke(main, ["conflicts", str(path), "--format", "json",
                                       "--engine", "clingo", "--quiet"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == []


def test_conflicts_cli_text(tmp_path):
    path = tmp_path / "across.mlir"
    path.write_text(CASES["dot_across_factor"])
    result = CliRunner().invoke(main, ["conflicts", str(path), "--engine", "clingo", "--quiet"])
    assert result.exit_code == 0, result.output
    assert "stablehlo.dot_general (" in result.output and "across-factor conflict" in result.output
    assert "decided by: " in result.output and "aggressive strategy" in result.output
    assert "  output: " in result.output and "  at: " in result.output


CONSTRAINED = '''sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{}, {"b"}]> : tensor<8x8xf32>
  %2 = stablehlo.multiply %1, %arg1 : tensor<8x8xf32>
  return %2 : tensor<8x8xf32>
}
'''


def test_conflict_says_what_the_output_does_there():
    """The add's result goes through a constraint, an ``sdy.reshard`` in the output
    and collectives once explicit: the add's conflict names them."""
    constrained = Audit(parse_module_text(CONSTRAINED), CLINGO)
    assert "sdy.reshard" in constrained.text
    adds = [c for c in constrained.conflicts() if c.op == "stablehlo.add"]
    assert adds and all(c.output and c.predicted for c in adds)
    assert all(any(m["tensor"] == "result 0" for m in c.output) for c in adds)


AT_CONSTRAINT = """sdy.mesh @mesh = <["data"=2, "model"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) -> tensor<8x8xf32> {
  %0 = call @f(%arg0) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{"data"}, {}]> : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
func.func private @f(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = sdy.sharding_constraint %arg0 <@mesh, [{"model"}, {}]> : tensor<8x8xf32>
  %1 = stablehlo.tanh %0 : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
"""


def test_a_conflict_at_a_constraint_names_the_collective_it_became():
    """A constraint becomes a reshard, then the collective carrying its tag: its
    conflict (in main and in a called function) names that collective."""
    main1 = """sdy.mesh @mesh = <["data"=2, "model"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) -> tensor<8x8xf32> {
  %0 = sdy.sharding_constraint %arg0 <@mesh, [{"model"}, {}]> : tensor<8x8xf32>
  %1 = stablehlo.tanh %0 : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
"""
    for text in (main1, AT_CONSTRAINT):
        got = [c for c in Audit(parse_module_text(text), CLINGO).conflicts()
               if c.op == "sdy.sharding_constraint"]
        assert got, text
        for c in got:
            assert c.output and c.output[0]["tensor"] == "result 0", c.output_text
            assert c.output[0]["ops"][0].startswith(("sdy.collective_permute", "sdy.all_")), c.output


def test_a_function_data_flow_edge_conflict_names_its_function_argument_and_place():
    """With dedup-functions-fully, the conflict at @f's argument edge is named after the
    function and argument, placed at the function, and says what the output does there
    (the call's operand is permuted)."""
    options = make_options({"dedup-functions-fully": True}, engine="clingo")
    got = [c for c in Audit(parse_module_text(AT_CONSTRAINT), options).conflicts()
           if c.edge_of]
    assert [(c.op, c.place) for c in got] == [
        ("the data-flow edge of func.func @f argument 0", "input line 7")]
    moves = {m["tensor"]: m["ops"] for m in got[0].output or ()}
    assert moves.get("argument 0", [""])[0].startswith("sdy.collective_permute"), moves


# -- conflicts of a real model: what the output does, grouping, axis origins ----------------

EXPLICIT = make_options({"enable-insert-explicit-collectives": True})


def swiglu(layers: int) -> str:
    """A SwiGLU MLP of ``layers`` residual layers, FSDP ("data" on the weights' input
    dim) and tensor parallel ("model"), the batch on "data": every matmul contests
    "data" between the batch and a weight dim."""
    def lower() -> str:
        import jax
        import jax.numpy as jnp

        from jax_programs import _f32, _ns

        def f(x, ws):
            for wg, wu, wd in ws:
                x = x + (jax.nn.silu(x @ wg) * (x @ wu)) @ wd
            return x
        shardings = [(_ns("data", "model"), _ns("data", "model"), _ns("model", "data"))] * layers
        shapes = [(_f32(16, 32), _f32(16, 32), _f32(32, 16))] * layers
        return jax.jit(f, in_shardings=(_ns("data", None), shardings)).lower(
            _f32(8, 16), shapes).as_text()
    import lowering

    return lowering.once("conflicts", f"swiglu{layers}", lower)


def _moves_at(audit, value: str) -> list[dict]:
    """The collectives and reshards next to the op defining output value ``value``,
    read off the output module's MLIR: per operand the chain feeding it, per result
    the ops using it (transitively through moves)."""
    from jaxlib.mlir import ir

    from sdy_dl.audit.communication_at import MOVES
    from sdy_dl.ir.context import mlir_context

    out = []
    with mlir_context():
        op = audit.value(value).value.owner
        for k, operand in enumerate(op.operands):
            chain = []
            while isinstance(operand, ir.OpResult) and operand.owner.name in MOVES:
                chain.insert(0, operand.owner.name)
                operand = operand.owner.operands[0]
            if chain:
                out.append({"tensor": f"operand {k}", "ops": chain})
        for k, result in enumerate(op.results):
            chain, frontier = [], [result]
            while frontier:
                for use in frontier.pop(0).uses:
                    if use.owner.name in MOVES:
                        chain.append(use.owner.name)
                        frontier.extend(use.owner.results)
            if chain:
                out.append({"tensor": f"result {k}", "ops": chain})
    return out


def _names(moves: list[dict]) -> list[tuple]:
    return [(m["tensor"], [op.split()[0] for op in m["ops"]]) for m in moves]


def test_conflicts_say_what_the_output_does():
    """With explicit collectives, each conflict's moves are the ops around it in the
    output; without, the conflicts predict exactly those (the FSDP weights' matmuls
    communicate: none ends with "nothing")."""
    text = swiglu(2)
    explicit = Audit(parse_module_text(text), EXPLICIT)
    plain = Audit(parse_module_text(text), make_options())
    got = explicit.conflicts()
    assert got and all(c.output and not c.predicted for c in got)
    for c in got:
        assert _names(c.output) == _names(_moves_at(explicit, c.value)), c.value
        assert "all_" in c.output_text and c.output_text.startswith("the output communicates")
    predicted = plain.conflicts()
    assert len(predicted) == len(got)
    for p, c in zip(predicted, got):
        assert (p.op, p.place, p.factors, p.axis) == (c.op, c.place, c.factors, c.axis)
        assert p.predicted and p.output == c.output
        assert p.output_text.startswith("the partitioner communicates")
    # The printed (non-explicit) output has no collectives there: the statement is a prediction.
    assert all(not _moves_at(plain, c.value) for c in predicted)


def test_a_16_layer_and_a_2_layer_model_give_the_same_groups():
    small = Audit(parse_module_text(swiglu(2)), make_options()).conflict_groups()
    large = Audit(parse_module_text(swiglu(16)), make_options()).conflict_groups()
    assert len(small) == len(large) >= 2
    assert sum(g.count for g in large) == 8 * sum(g.count for g in small)
    for a, b in zip(small, large):
        assert (a.example.op, a.example.rule, a.example.factors) == \
            (b.example.op, b.example.rule, b.example.factors)
        assert b.count == 8 * a.count and len(b.members) == b.count


def test_competitors_follow_the_contested_axis():
    """At the first matmul "data" is contested between the batch (factor i) and the
    weight's input dim (factor k): the result's "data" came from the batch's
    annotation only, not from the weight whose "data" is on the contracting dim."""
    audit = Audit(parse_module_text(swiglu(2)), make_options())
    first = audit.conflicts()[0]
    assert first.kind == "across-factor" and first.axis == "data"
    by_tensor = {x["tensor"]: x for x in first.competitors}
    result, weight = by_tensor["result 0"], by_tensor["operand 1"]
    assert result["origins"] == [{"axis": "data", "from": [
        '%arg0 = #sdy.sharding<@mesh, [{"data"}, {}]>']}]
    assert weight["origins"] == [{"axis": "data", "from": [
        '%arg1 = #sdy.sharding<@mesh, [{"data"}, {"model"}]>']}]
    assert result["won"] and not weight["won"]


WITHIN_PROPAGATED = '''sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.negate %arg0 : tensor<8x8xf32>
  %1 = stablehlo.add %0, %arg1 : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
'''


def test_within_factor_origins_follow_propagated_axes():
    """A within-factor competitor's axes (named by their ref text) are followed back
    through the steps that moved them: %0's "a" came from %arg0 through the negate."""
    found = Audit(parse_module_text(WITHIN_PROPAGATED), make_options()).conflicts()
    (c,) = [c for c in found if c.kind == "within-factor"]
    origins = {comp["value"]: comp["origins"] for comp in c.competitors}
    assert origins["%0"] == [{"axis": '"a"', "from": ['%arg0 = #sdy.sharding<@mesh, [{"a"}, {}]>']}]
    assert origins["%arg1"] == [{"axis": '"b"', "from": ['%arg1 = #sdy.sharding<@mesh, [{"b"}, {}]>']}]


def test_an_origin_trace_stops_where_the_value_did_not_hold_the_axis():
    """Asked for an axis a value's last write did not put on the dim (%0 holds "a"
    on dim 0, not 1), the trace stops there and says so, naming the write; it
    does not go on through the value's earlier shardings or the tensors it read."""
    from sdy_dl.audit.conflicts import AxisOrigins

    audit = Audit(parse_module_text(WITHIN_PROPAGATED), make_options())
    explainer = audit.explainer
    origins = AxisOrigins(explainer, explainer.step_records())
    key, writes = audit.value("%0").key, len(explainer.tracer.writes)
    assert origins.of(key, 0, "a", writes) == ['%arg0 = #sdy.sharding<@mesh, [{"a"}, {}]>']
    (stop,) = origins.of(key, 1, "a", writes)
    assert stop.startswith('not traced: %0 had no "a" on dim 1 after '), stop
    assert stop.endswith(" wrote it"), stop


def test_the_op_at_a_tag_is_the_one_op_of_its_name_carrying_it():
    """Two ops of the output carrying one tag under one name: neither is taken for it."""
    from sdy_dl.audit.communication_at import OpCommunication
    from sdy_dl.ir import parse_module_text

    text = """func.func @main(%a: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.negate %a : tensor<8xf32> loc("sdy-dl.px:o2"("x":1:1))
  %1 = stablehlo.abs %0 : tensor<8xf32> loc("sdy-dl.px:o2"("x":2:1))
  %2 = stablehlo.abs %1 : tensor<8xf32> loc("sdy-dl.px:o3"("x":3:1))
  %3 = stablehlo.abs %2 : tensor<8xf32> loc("sdy-dl.px:o3"("x":4:1))
  return %3 : tensor<8xf32>
}
"""
    communication = OpCommunication(parse_module_text(text), predicted=False)
    assert communication.op("o2", "stablehlo.negate").name == "stablehlo.negate"
    assert communication.at("o3", "stablehlo.abs") is None
    assert communication.absent("o3", "stablehlo.abs") == (
        "several ops of the output carry its tag as this op (stablehlo.abs, stablehlo.abs): "
        "which one is this op's is not known")
