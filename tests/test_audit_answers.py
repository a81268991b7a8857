"""The audit's answers on real JAX programs (``audit_programs``) agree with the
propagated output: every value an answer names is one the output prints, every
origin of a conflict's axis is an input annotation holding that axis that the
value's derivation reaches, and the causes say what happened."""

from __future__ import annotations

import re

import pytest

import audit_programs
import sdy_dl


def _result(name: str):
    return sdy_dl.propagate(audit_programs.lowered(name))


def _nodes(node) -> list:
    out = [node]
    for child in node.children:
        out += _nodes(child)
    return out


ANNOTATION = re.compile(r"(\S+) = (#sdy\.sharding<[^>]*>)(?: \(annotation in the input: .*\))?$")


@pytest.mark.parametrize("name", sorted(audit_programs.PROGRAMS))
def test_conflict_origins_are_annotations_reaching_the_value(name):
    result = _result(name)
    values = set(result.values())
    for c in result.conflicts():
        for comp in c.competitors:
            assert comp["value"] in values, comp
            tree = {n.what for n in _nodes(result.explain(comp["value"], 100))}
            for origin in comp["origins"]:
                assert origin["from"], (c.op, comp)
                for annotation in origin["from"]:
                    m = ANNOTATION.match(annotation)
                    assert m, annotation
                    assert m[1] in values and m[1] in tree, (comp["value"], annotation)
                    axis = origin["axis"]   # (an axis, or a within-factor axis ref's text)
                    name = axis.split('"')[1] if axis.startswith('"') else axis
                    assert f'"{name}"' in m[2], (comp["value"], annotation)


def test_an_axis_reaching_a_loop_carry_backwards_is_traced_to_its_annotation():
    """In the scanned layer's matmul "model" is contested between the weight's output
    dim and the carry's contracting dim.  The carry's "model" comes from the head
    weight's annotation (its contracting dim), backwards through the head matmul,
    the cond, the loop's data-flow edge and the calls; the weight's from the scanned
    weights."""
    result = _result("scan_layers_cond")
    (c,) = [c for c in result.conflicts() if c.value == "@_layer:%0"]
    assert c.kind == "across-factor" and c.axis == "model"
    origins = {comp["value"]: comp["origins"] for comp in c.competitors}
    assert origins["@_layer:%arg0"] == [{"axis": "model", "from": [
        '%arg0 = #sdy.sharding<@mesh, [{"model"}, {}]>']}]
    assert origins["@_layer:%arg1"] == [{"axis": "model", "from": [
        '%arg1 = #sdy.sharding<@mesh, [{}, {}, {"model"}]>']}]


def test_why_not_skips_a_neighbour_that_got_the_axis_from_the_value():
    """The called layer's argument got the carry's "model" (on dim 1) through the
    call's edge from the carry itself: it is no place where "model" stopped on its
    way to the carry's dim 0 (it held no "model" when that edge last stepped)."""
    result = _result("scan_layers_cond")
    answer = result.why_not("%3#2", "model", 0)
    assert answer.blocked == [], [b.cause for b in answer.blocked]
    assert "the factors holding it map dim 1 of %3#2" in answer.note


def test_why_not_follows_no_axis_through_values_without_dims():
    """The scan's per-layer sums are scalars stacked into a vector: no axis of the
    layers reaches them (the index operands and the scalar sums hold none)."""
    result = _result("scan_layers_cond")
    for axis, dim in (("data", None), ("model", None), ("model", 0)):
        answer = result.why_not("%3#3", axis, dim)
        assert answer.blocked == [], [(b.source, b.to) for b in answer.blocked]
        assert "values without dims (rank 0)" in answer.note


def test_why_not_a_dim_follows_the_dims_that_map_onto_it():
    """Asked about one dim, the walk follows the dims that map onto it: the
    constraint's closed dim 1 is no reason for the call result's dim 0 (its dim 0
    comes from the layer matmul's batch factor, whose input holds "model" on the
    contracting factor only); the stacked weights' dim 1 (the layer weight's input
    dim, factor k of the layer's matmul) meets the batch's "data" on factor i there,
    which maps no dim of the weight."""
    result = _result("scan_layers_cond")
    answer = result.why_not("%14#0", "model", 0)
    assert [(b.op, b.source) for b in answer.blocked] == [("stablehlo.dot_general",
                                                            "@_layer:%arg0")]
    assert answer.blocked[0].cause.startswith(
        'factor k of "model" maps no dim of @_layer:%0 (a reduction factor)')
    answer = result.why_not("%arg1", "data", 1)
    assert answer.blocked and {b.op for b in answer.blocked} == {"stablehlo.dot_general"}
    assert all(b.cause.startswith('factor i of "data" maps no dim of @_layer:%arg1')
               for b in answer.blocked), [b.cause for b in answer.blocked]

    result = _result("while_constraint")
    answer = result.why_not("%arg0", "data", 1)
    assert answer.blocked == [], [(b.op, b.cause) for b in answer.blocked]
    assert "the factors holding it map dim 0 of %arg0" in answer.note


def test_why_not_a_dim_follows_ops_never_stepped_to_the_conflict_behind_them(tmp_path):
    """The softmax after the embedding lookup was never stepped (nothing sharded
    reached it): asked about the batch dim of its result, the walk maps the dim
    through the softmax's ops and the scores' contraction by their rules' factors
    back to the lookup, where the ids' "data" on the batch lost to the table's on
    the features (an across-factor conflict); the table's "data", which the
    contraction takes off another dim, comes after."""
    from click.testing import CliRunner

    from sdy_dl.cli import main

    result = _result("embed_softmax")
    answer = result.why_not("%14", "data", 0)
    assert not answer.has_axis
    gather = [b for b in answer.blocked if b.op == "stablehlo.gather"]
    assert len(gather) == 1, answer.lines()
    b = gather[0]
    assert b.annotations == ['%arg1 = #sdy.sharding<@mesh, [{"data"}, {}]>'], b.annotations
    assert b.factor == "i" and b.cause.startswith(
        '"data" is already used by another dim of @_take:%17 (factor k, dim 2): a tensor '
        'cannot use an axis twice (across-factor conflict)'), b.cause
    assert b.why.atom.startswith("ag_across_")
    assert answer.blocked[-1].op == "stablehlo.dot_general" and answer.blocked[-1].cause.startswith(
        'factor k of "data" maps no dim of %1 (a reduction factor)'), answer.lines()
    src = tmp_path / "m.mlir"
    src.write_text(audit_programs.lowered("embed_softmax"))
    r = CliRunner().invoke(main, ["explain", str(src), "%14", "--why-not", "data", "--dim", "0",
                                  "--proof"])
    assert r.exit_code == 0, r.output
    assert "stopped at stablehlo.gather" in r.output and "across-factor conflict" in r.output
    assert f"no {b.why.atom}:" in r.output and r.output.count("  rule datalog/step/") >= 2


def test_whatif_edits_the_result_of_a_call():
    """A call result is the input's func.call result (the call propagates as a named
    computation): the edit lands on the call's sharding, and the what-if's output is a
    full propagation's of the edited input."""
    result = _result("scan_layers_cond")
    after, changes = result.whatif(set={"%14#0": '<@mesh, [{"data"}, {"model"}]>'})
    assert changes.lines()[0].startswith("edit --set %14#0=")
    (call,) = [line for line in after.edited_input.splitlines() if "call @closed_call(" in line]
    assert '{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"}, {"model"}]>' in call
    assert after.text == sdy_dl.propagate(after.edited_input).text


def test_a_call_result_the_callee_narrows_names_the_pass_that_did():
    """The loop carry gave the call's first result "model" on dim 1; the callee's
    constrained result has none: insert-func-call-reshards prints the callee's
    sharding on the call and reshards to the propagated one after it (close-shardings
    and the main function's boundary passes drop no axis)."""
    result = _result("scan_layers_cond")
    assert result.sharding("%14#0") == '#sdy.sharding<@mesh, [{"data"}, {}]>'
    (reshard,) = [line for line in result.text.splitlines() if "sdy.reshard %14#0" in line]
    assert '<@mesh, [{"data"}, {"model"}]>' in reshard
    tree = result.explain("%14#0", 1)
    assert tree.because.startswith('propagated as #sdy.sharding<@mesh, [{"data", ?}, {"model", ?}]>; '
                                   "the export pass insert-func-call-reshards"), tree.because
    answer = result.why_not("%14#0", "model", 1)
    assert answer.note.startswith('propagation gave dim 1 {"model"}, which the callee\'s result '
                                  "has not: the export pass insert-func-call-reshards"), answer.note


def test_collectives_name_what_needed_them():
    """With explicit collectives: the all-slice of the loop body's returned value onto
    the carry's sharding was needed by the loop (the carry's "model" came from the head
    weight); the all-gather lowering the layer output's constraint was needed by the
    constraint's own annotation (not by a function result 'the export passes made')."""
    result = sdy_dl.propagate(audit_programs.lowered("scan_layers_cond"),
                              explicit_collectives=True)
    entries = result.collectives().entries
    (carry,) = [e for e in entries if e.kind == "all_slice" and e.needed.op == "stablehlo.return"]
    assert '%arg0 = #sdy.sharding<@mesh, [{"model"}, {}]> (func.func at input line 3)' in \
        carry.needed.annotations, carry.needed.annotations
    (gather,) = [e for e in entries if e.kind == "all_gather" and e.function == "@closed_call"]
    assert any(a.startswith('@closed_call:%1 = #sdy.sharding<@mesh, [{"data"}, {}]> '
                            "(sdy.sharding_constraint") for a in gather.needed.annotations)
    assert not any("created by the export passes" in a for e in entries
                   for a in e.needed.annotations), [e.needed.annotations for e in entries]


def test_a_collectives_needed_side_does_not_hold_its_had_sides_annotations():
    """The needed side reads the chain's end, not its source: the layer's all-gather
    feeds the matmul, whose result does not derive from the head weight %arg0 (which
    only the had side's block argument does); the constraint's all-gather was needed
    by the constraint alone."""
    result = sdy_dl.propagate(audit_programs.lowered("scan_layers_cond"),
                              explicit_collectives=True)
    gathers = {e.function: e for e in result.collectives().entries if e.kind == "all_gather"}
    head = '%arg0 = #sdy.sharding<@mesh, [{"model"}, {}]> (func.func at input line 3)'
    assert head in gathers["@_layer"].had.annotations, gathers["@_layer"].had.annotations
    assert head not in gathers["@_layer"].needed.annotations, gathers["@_layer"].needed
    needed = gathers["@closed_call"].needed
    assert [a.split(" (")[1] for a in needed.annotations] == \
        ["sdy.sharding_constraint at input line 53)"], needed.annotations


def test_an_annotation_the_import_moved_is_one_origin_as_written():
    """The loop body's constraint onto "model" is moved by the import passes onto the
    tanh it constrains: a value deriving from both the constraint and the tanh lists
    the constraint once, as written at its line, and counts it once; a value deriving
    from the tanh alone cites the constraint and says it was moved.  The same for
    the queries' constraint of the attention, and in the why-not's annotations."""
    constraint = ('%5 = #sdy.sharding<@mesh, [{}, {"model"}]> (sdy.sharding_constraint at '
                  'input line 15)')
    result = sdy_dl.propagate(audit_programs.lowered("while_constraint"),
                              explicit_collectives=True)
    sides = [side for e in result.collectives().entries for side in (e.had, e.needed)]
    both = [side for side in sides if constraint in side.annotations]
    assert both, [side.annotations for side in sides]
    for side in sides:
        cited = [a for a in side.annotations if a.startswith(constraint)]
        assert len(cited) <= 1, side.annotations
        assert side.annotation_count == len(side.annotations), side
    assert any(side.annotations == [f"{constraint}, moved onto %4 by the import passes"]
               for side in sides), [side.annotations for side in sides]
    for name in ("attention_heads", "moe", "while_constraint"):
        result = sdy_dl.propagate(audit_programs.lowered(name), explicit_collectives=True)
        for e in result.collectives().entries:
            for side in (e.had, e.needed):
                cited = [a.split(", moved onto ")[0] for a in side.annotations]
                assert len(cited) == len(set(cited)), (name, side.annotations)
        for c in result.conflicts():
            for comp in c.competitors:
                for origin in comp["origins"]:
                    cited = [re.sub(r"^\S+ = \S+ \(annotation in the input: (.*?)(, moved onto "
                                    r"\S+ by the import passes)?\)$", r"\1", a)
                             for a in origin["from"]]
                    assert len(cited) == len(set(cited)), (name, origin)


def test_the_sub_axes_a_reshape_splits_an_axis_into_are_no_conflict():
    """The reshape puts "model":(1)2 and "model":(2)2 on two factors: disjoint parts of
    "model", no conflict there nor at the ops after it; the matmul's weight holds all
    of "model" on its output factor, which overlaps both: that one is a conflict."""
    result = _result("split_sub_axes")
    assert '[{"data", "model":(1)2}, {"model":(2)2}, {}]' in result.text
    (c,) = result.conflicts()
    assert (c.op, c.kind, c.axis, c.factors) == ("stablehlo.dot_general", "across-factor",
                                                 "model", ["i", "j", "k"])
    lost = [x for x in c.competitors if not x["won"]]
    assert [(x["value"], x["factor"], x["axes"]) for x in lost] == [("%arg1", "k", ['"model"'])]


def test_memory_offers_no_manual_axis_inside_the_manual_computation():
    """Inside the shard_map (manual over "model") a value is the body's local view:
    "model" cannot shard it (the verifier refuses such a sharding); outside, on the
    shard_map's result, it can."""
    result = sdy_dl.propagate(audit_programs.lowered("partly_manual"), explicit_collectives=True)
    top = {u.value.op: u for u in result.memory(top=20).top}
    assert top["stablehlo.dot_general"].value.shape == (16, 8)   # (the local matmul)
    for op in ("stablehlo.dot_general", "stablehlo.all_reduce"):
        assert "model" not in top[op].shardable, (op, top[op].shardable)
    assert "model" in top["sdy.manual_computation"].shardable


def test_memory_offers_no_manual_axis_in_a_function_the_manual_computation_calls():
    """The shard_map's body calls a jitted function: its arguments and values are the
    body's local view too ("model" is refused there); "data" still divides them."""
    result = sdy_dl.propagate(audit_programs.lowered("partly_manual_call"),
                              explicit_collectives=True)
    top = {u.value.name: u for u in result.memory(top=20).top}
    called = [n for n in top if n.startswith("@")]
    assert len(called) >= 3, list(top)
    for name in called:
        assert "model" not in top[name].shardable, (name, top[name].shardable)
    assert any("data" in top[n].shardable for n in called), {n: top[n].shardable for n in called}
    assert "model" in top["%1"].shardable, top["%1"].shardable   # (the shard_map's result)


def test_a_sharding_the_import_passes_made_names_the_op_it_came_from():
    """A shard_map's operand propagates through a sharding the import passes made from
    the manual computation's in_shardings: the conflicts citing it and its derivation
    name that manual computation."""
    import naming_programs

    result = sdy_dl.propagate(naming_programs.lowered("training_loop"))
    cited = {a for c in result.conflicts() for comp in c.competitors
             for o in comp["origins"] for a in o["from"] if "import passes" in a}
    assert cited, "no origin set by the import passes"
    assert all(re.fullmatch(r"\S+: set by the import passes from the sdy\.manual_computation at "
                            r"input line \d+", a) for a in cited), cited


def test_a_whatif_the_verifier_refuses_once_propagated_is_located_at_the_edit(monkeypatch):
    """A constraint inside the shard_map set onto the manual axis is refused at the
    edit, by the constraint's own check against the manual computation around it.
    Where the edited op passes and the verifier refuses the propagated edited input
    (after the passes), the refusal is one located error naming the edit."""
    import sdy_dl.audit as audit_module
    from sdy_dl.errors import InvalidModule, SdyError

    result = _result("partly_manual")
    assert result.audit.value("%6").op == "sdy.reshard"
    with pytest.raises(SdyError) as refused:
        result.whatif(set={"%6": '<@mesh, [{"model"}, {}]>'})
    e = refused.value
    assert e.line is not None and e.col is not None, str(e)
    assert e.message.startswith("sharding of %6: 'sdy.sharding_constraint' op operates on axis "
                                '"model" which is already bound by a parent '
                                "sdy.manual_computation op"), e.message

    def invalid(*args, **kwargs):
        raise InvalidModule("'stablehlo.dot_general' op result - operates on axis \"model\"",
                            file="<test>")

    monkeypatch.setattr(audit_module.Audit, "__init__", invalid)
    with pytest.raises(SdyError) as refused:
        result.whatif(set={"%6": '<@mesh, [{"data"}, {}]>'})
    e = refused.value
    assert e.line is not None and e.col is not None, str(e)
    assert e.message.startswith('the edited input (--set %6=<@mesh, [{"data"}, {}]>) is invalid '
                                "once propagated: "), e.message


def test_a_conflict_at_a_loop_edge_is_found_and_compared_by_whatif():
    """The loop's operand holds "data" where the constrained body returns "model": a
    within-factor conflict at the while's data-flow edge, with both origins and the
    resharding of the loop's operand; a what-if that annotates the operand with
    "model" makes it disappear, as the edited input's own conflicts say."""
    result = _result("loop_constraint_clash")
    (c,) = result.conflicts()
    assert (c.op, c.kind, c.factors) == ("the data-flow edge of stablehlo.while",
                                         "within-factor", ["i"])
    assert c.place.startswith("input line ")
    steps = result.audit.explainer.tracer.steps
    edge = result.audit.explainer.tracer.edge_steps[-1]
    before = sum(1 for x in steps if x.index < edge.index)
    assert f"(after {before} of the {len(steps)} op steps)" in c.decided["order"], c.decided
    origins = {comp["value"]: comp["origins"] for comp in c.competitors}
    assert origins["%arg0"] == [{"axis": '"data"', "from": [
        '%arg0 = #sdy.sharding<@mesh, [{"data"}, {}]>']}]
    body = [x for x in c.competitors if x["tensor"] == "operand 1"][0]
    assert body["origins"] == [{"axis": '"model"', "from": [
        '@closed_call:%1 = #sdy.sharding<@mesh, [{"model"}, {}]>']}]   # (the constraint)
    assert result.audit.value("@closed_call:%1").op == "sdy.reshard"
    assert c.output and c.output[0]["tensor"].startswith("operand ")
    after, changes = result.whatif(set={"%arg0": '<@mesh, [{"model"}, {}]>'})
    assert after.conflicts() == []
    assert [k.op for k in changes.conflict_keys[1]] == ["the data-flow edge of stablehlo.while"]
    assert changes.conflict_keys[0] == []


def test_a_derivation_is_shown_where_its_first_occurrence_is_not():
    """The backward layer's matmul takes "model" from the weight's argument, whose
    derivation the tree met first under a branch it does not show (a step that took
    no axis from it): the shown occurrence is expanded down to the weight's
    annotation, not cut as "derived above"."""
    import naming_programs

    result = sdy_dl.propagate(naming_programs.lowered("training_loop"))
    tree = result.explain("@dense_1:%5", 100)
    (arg,) = [n for n in _nodes(tree) if n.what == "@dense_1:%arg0"]
    assert arg.children and not arg.children[0].truncated
    assert "%arg1" in {n.what for n in _nodes(arg) if n.kind == "annotation"}
    text = str(tree)
    assert "derived above in this tree" not in text.split("@dense_1:%arg0 =", 1)[1]


def test_a_conflict_in_a_second_call_of_a_function_names_the_printed_function():
    """A jitted helper called twice propagates on a copy per call, and the output prints
    one function: the second copy's conflict names that function's values (not input
    values "erased by the pipeline") and does not claim the output moves no data there."""
    import naming_programs

    result = sdy_dl.propagate(naming_programs.lowered("nested_jit_loops"))
    first, second = result.conflicts()
    assert (first.op, first.place) == (second.op, second.place)
    assert [x["value"] for x in second.competitors] == [
        f"{x['value']} (in another call of its function)" for x in first.competitors]
    assert first.output and "moves no data" not in second.output_text


def test_an_erased_value_of_the_printed_call_copy_is_not_named_as_another_calls(monkeypatch):
    """A value is named as in another call of its function only when its call copy
    differs from the printed value's: with every value in one copy, the second
    conflict's values are input values erased by the pipeline."""
    import naming_programs
    from sdy_dl.audit.naming import PropagationIndex

    monkeypatch.setattr(PropagationIndex, "call_copy", lambda self, record: 1)
    result = sdy_dl.propagate(naming_programs.lowered("nested_jit_loops"))
    first, second = result.conflicts()
    names = [x["value"] for x in second.competitors]
    assert names and all(n.endswith(" (erased by the pipeline)") for n in names), names


CALLS = """module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>}, %arg1: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>}, %arg2: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}]>}) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
    %2 = call @f(%arg2) : (tensor<8xf32>) -> tensor<8xf32>
    %0 = call @f(%arg0) : (tensor<8xf32>) -> tensor<8xf32>
    %1 = call @f(%arg1) : (tensor<8xf32>) -> tensor<8xf32>
    return %0, %1, %2 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
  }
  func.func private @f(%x: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.negate %x : tensor<8xf32>
    %1 = stablehlo.abs %0 : tensor<8xf32>
    return %1 : tensor<8xf32>
  }
}
"""


def test_a_value_of_another_call_is_named_in_the_function_its_call_calls():
    """@f is called three times: the output prints @f for the first call ("b") and
    @f_0 for the other two, which agree ("a"): the third call's copy is erased, and
    its values are @f_0's (the function its call calls), not @f's."""
    result = sdy_dl.propagate(CALLS)
    assert "call @f_0(%arg1)" in result.text
    tree = result.explain("result:1")
    named = {n.what for n in _nodes(tree) if n.what.endswith(" (in another call of its function)")}
    assert named == {f"@f_0:{v} (in another call of its function)" for v in ("%0", "%1", "%arg0")}


def test_an_origin_cites_the_input_annotation_when_the_output_names_it_otherwise():
    """The loop body's constraint becomes a reshard in the output and the import
    passes moved its annotation onto the tanh before it: the origins of the matmul's
    "model" cite the constraint as the input names it, with its place."""
    result = _result("while_constraint")
    cited = [a for c in result.conflicts() for comp in c.competitors for o in comp["origins"]
             for a in o["from"] if "sdy.sharding_constraint" in a]
    assert cited and all(re.search(r" \(annotation in the input: %\d+ = #sdy\.sharding<[^>]*> "
                                   r"\(sdy\.sharding_constraint at input line \d+\)", a)
                         for a in cited), cited


def test_an_unsharded_function_result_gives_each_reason_once():
    result = _result("scan_layers_cond")
    tree = result.explain("@dynamic_update_index_in_dim:result:0")
    assert tree.because.startswith("function result: the returned value ")
    assert tree.reasons and len(tree.reasons) == len(set(tree.reasons)), tree.reasons


@pytest.mark.parametrize("name", sorted(audit_programs.PROGRAMS))
def test_every_derived_above_marker_has_its_derivation_above(name):
    """A tree cut at a write it expanded earlier ("derived above") shows that write
    expanded earlier in the same tree."""
    result = _result(name)
    for value in result.values():
        expanded = set()
        for node in _nodes(result.explain(value, 100)):   # (depth first, in display order)
            if node.truncated == "seen":
                assert (node.key, node.cause) in expanded, (value, node.what)
            elif node.cause is not None:
                expanded.add((node.key, node.cause))


@pytest.mark.parametrize("name", sorted(audit_programs.PROGRAMS))
def test_a_whatif_is_a_full_propagation_of_the_edited_input(name):
    """Re-sharding the first argument (replicated; all of "model" on its first dim)
    gives the output, and the conflicts, a propagation of the edited input gives."""
    from sdy_dl.audit.whatif import _conflict_key

    result = _result(name)
    rank = len(result.audit.value("%arg0").sharding.dims)
    for sharding in ("<@mesh, [%s]>" % ", ".join(["{}"] * rank),
                     "<@mesh, [%s]>" % ", ".join(['{"model"}'] + ["{}"] * (rank - 1))):
        after, changes = result.whatif(set={"%arg0": sharding})
        full = sdy_dl.propagate(after.edited_input)
        assert after.text == full.text, sharding
        before = list(dict.fromkeys(_conflict_key(c) for c in result.conflicts()))
        again = list(dict.fromkeys(_conflict_key(c) for c in full.conflicts()))
        assert tuple([k.same for k in keys] for keys in changes.conflict_keys) == (
            [k for k in again if k not in before], [k for k in before if k not in again]), sharding


def test_a_whatif_failure_other_than_the_verifiers_is_not_pinned_on_the_edit(monkeypatch):
    """A propagation of the edited input failing otherwise (an engine's failure, no
    line) keeps its own message: only the verifier's refusal is the edit's."""
    import sdy_dl.audit as audit_module
    from sdy_dl.errors import SdyError

    result = _result("partly_manual")

    def failing(*args, **kwargs):
        raise SdyError("the engine failed", file="engine")

    monkeypatch.setattr(audit_module.Audit, "__init__", failing)
    with pytest.raises(SdyError) as refused:
        result.whatif(set={"%6": '<@mesh, [{}, {}]>'})
    assert refused.value.message == "the engine failed", refused.value.message


def test_memory_prints_a_scalars_type_as_mlir_does():
    """The sort's comparator compares scalars: the memory table's largest replicated
    values list them with their type as MLIR prints it (tensor<f32>)."""
    table = sdy_dl.propagate(audit_programs.lowered("topk_sort"), explicit_collectives=True
                             ).memory(top=10)
    scalars = [u.value for u in table.top if not u.value.shape]
    assert scalars, [u.value.name for u in table.top]
    lines = str(table).splitlines()
    for v in scalars:
        (line,) = [x for x in lines if x.split("] ", 1)[-1].startswith(f"{v.name} in ")]
        assert f"({v.op}): tensor<{v.element_type}> " in line, line


def test_a_manual_computations_body_argument_is_its_local_view():
    """A shard_map's body sees its arguments without the manual axis: "model" is on
    no dim of them (the manual computation's in_shardings hold it, with the other
    axes); their trees and answers start from that view."""
    result = _result("ppermute_pipeline")
    assert "in_shardings=[<@mesh, [{\"model\"}, {}, {}]>" in result.text
    assert result.sharding("%arg2") == "#sdy.sharding<@mesh, [{}, {}, {}]>"
    assert result.explain("%arg2").sharding == "#sdy.sharding<@mesh, [{}, {}, {}]>"
    assert not result.why_not("%arg2", "model").has_axis
    result = _result("partly_manual")
    assert "in_shardings=[<@mesh, [{\"data\"}, {\"model\"}]>" in result.text
    assert result.sharding("%arg2") == "#sdy.sharding<@mesh, [{\"data\"}, {}]>"


def test_why_not_names_no_path_across_a_link_the_axis_never_crosses():
    """The router's probabilities reach the one-hot dispatch mask (which holds "model"
    on the expert dim) only through top_k, which has no sharding rule: that path's
    "model" stopped there, not at an op beyond it (no path is said to reach the value
    through top_k).  In the shard_map "model" is manual: every place where it stopped
    is an edge of the manual computation, and no path crosses one."""
    result = _result("moe")
    answer = result.why_not("%13", "model")
    (top_k,) = [b for b in answer.blocked if b.op == "chlo.top_k"]
    assert top_k.cause.startswith("chlo.top_k has no sharding rule"), top_k.cause
    assert top_k.to == "%13"
    assert all("chlo.top_k" not in b.via for b in answer.blocked), [b.via for b in answer.blocked]
    result = _result("ppermute_pipeline")
    for value in ("%arg2", "%arg3", "@closed_call:%2"):
        answer = result.why_not(value, "model")
        assert answer.blocked, value
        for b in answer.blocked:
            assert b.op == "the data-flow edge of sdy.manual_computation", (value, b.op)
            assert b.cause.startswith('"model" is manual in the sdy.manual_computation'), b.cause
            assert "the data-flow edge of sdy.manual_computation" not in b.via, (value, b.via)


def test_a_whatif_of_a_main_result_says_its_out_shardings_entry():
    """A main result JAX names (result[1]: the donated weight's update) is edited at its
    out_shardings entry; a result JAX does not name is main result N."""
    result = _result("donated_specs")
    _, changes = result.whatif(set={"result:1": "P('model')"})
    (applied,) = changes.applied
    assert applied.source == "result[1]"
    assert applied.jax_line == "out_shardings entry for result[1]: NamedSharding(mesh, P('model', None))"
    assert "  jax: out_shardings entry for result[1]: NamedSharding(mesh, P('model', None))" \
        in changes.lines()


def test_a_value_no_annotation_reaches_in_a_manual_body_says_the_manual_axes():
    """The stacked weights' "model" is manual in the shard_map: the stage's weight (the
    loop carry, and its reshape in the called stage) is unsharded, and no annotation
    reaches it but through the manual computation, whose manual axis is on no dim of
    the body's values: the reason says so (a value outside, top_k's result, does not)."""
    result = sdy_dl.propagate(audit_programs.lowered("ppermute_pipeline"),
                              explicit_collectives=True)
    why = {u.value.name: u.why for u in result.memory(top=10).top}
    for name in ("%7#0", "@closed_call:%0"):
        assert why[name] == ["no annotation reaches it: no op with a sharding rule connects it "
                             "to a value that has axes on the same factor (it is in a manual "
                             "computation's body, manual over \"model\": the body computes on "
                             "its local view, and an annotation's manual axes are on no dim of "
                             "it)"], why[name]
        assert "manual over \"model\"" in result.explain(name).because
    tree = _result("topk_sort").explain("%values")
    assert tree.because.startswith("no annotation reaches it") and "manual" not in tree.because


@pytest.mark.parametrize("name, value, sharding, message", [
    ("moe", "%27", '<@mesh, [{"model"}, {}]>',
     "'sdy.sharding_constraint' op sharding doesn't match tensor rank: 2 != 3"),
    ("moe", "%27", '<@mesh, [{"modle"}, {}, {}]>',
     "'sdy.sharding_constraint' op unknown axis name: \"modle\""),
    ("ppermute_pipeline", "%1", '<@mesh, [{"model"}, {}]>',
     "'sdy.manual_computation' op result shape, corresponding sharding, and region result "
     "shape at index 0 must match"),
])
def test_a_whatif_sharding_an_sdy_op_cannot_take_is_refused_at_the_edit(name, value, sharding,
                                                                       message):
    """A constraint's or a shard_map result's new sharding is checked against the meshes
    and the body as MLIR's verifier checks the op (with the module: its symbol uses),
    before anything runs: one error at the edited op, not a failure deep in the
    propagation of a step."""
    from sdy_dl.errors import SdyError

    result = _result(name)
    assert result.audit.value(value).op in ("sdy.reshard", "sdy.manual_computation")
    with pytest.raises(SdyError) as refused:
        result.whatif(set={value: sharding})
    e = refused.value
    assert e.line is not None and e.message.startswith("sharding of %"), e.message
    assert message in e.message and "once propagated" not in e.message, e.message


def test_expert_parallel_all_to_alls_are_in_the_ledger_with_xlas_bytes():
    """The hand-written expert parallelism's two all-to-alls over "model" and its
    reduce-scatter over "data" are the ledger's collectives, with the bytes XLA's
    compiled module has (1,536, 1,536 and 1,024 per device, measured)."""
    ledger = sdy_dl.propagate(audit_programs.lowered("ep_all_to_all"),
                              explicit_collectives=True).collectives()
    assert sorted((e.kind, e.axes, e.devices, e.bytes, e.written) for e in ledger) == [
        ("all_to_all", ['"model"'], 4, 1536, True), ("all_to_all", ['"model"'], 4, 1536, True),
        ("reduce_scatter", ['"data"'], 2, 1024, True)]


def test_a_whatif_whose_propagation_a_pass_refuses_names_the_edit():
    """Taking "model" off the activation of an explicit-axes matmul whose result is
    unreduced over "model" leaves the contracting factor sharded on the weight only:
    insert-explicit-reshards refuses the dot (jaxlib's pass aborts there); the what-if
    says the edited input cannot be propagated, at the dot, naming the edit."""
    import jax_programs
    from sdy_dl.errors import SdyError

    result = sdy_dl.propagate(jax_programs.lowered("explicit_unreduced"))
    with pytest.raises(SdyError) as refused:
        result.whatif(set={"%arg0": '<@mesh, [{"data"}, {}]>'})
    e = refused.value
    assert e.line is not None, str(e)
    assert e.message.startswith('the edited input (--set %arg0=<@mesh, [{"data"}, {}]>) cannot be '
                                "propagated: insert-explicit-reshards: the result has unreduced "
                                "axes"), e.message


def test_unsetting_a_shard_map_result_edits_its_out_shardings():
    """--unset of a shard_map's result opens its out_shardings entry (it was an internal
    error: the edit read the op's sdy.sharding); where the entry holds a manual axis,
    the body's local shape no longer fits and the edit is refused at the op.  The
    values an unset may name are offered without the shard_map's body arguments."""
    from sdy_dl.errors import SdyError

    result = _result("ppermute_pipeline")
    assert result.audit.value("%1").op == "sdy.manual_computation"
    with pytest.raises(SdyError) as refused:   # (the choices: no body argument, which is refused)
        result.whatif(unset=["%2"])
    assert refused.value.message.endswith("(annotated: %arg0, %arg1, %1)"), refused.value.message
    after, changes = result.whatif(unset=["%1"])
    assert changes.applied[0].after is None
    assert after.text == sdy_dl.propagate(after.edited_input).text
    result = _result("ep_all_to_all")
    assert result.audit.value("%0").op == "sdy.manual_computation"
    with pytest.raises(SdyError) as refused:
        result.whatif(unset=["%0"])
    assert refused.value.line is not None and "'sdy.manual_computation' op result shape" in \
        refused.value.message, refused.value.message


def test_a_whatif_refused_at_a_line_of_another_file_is_that_files_error(monkeypatch):
    """An error the what-if's propagation places in another file (a rule file's
    line) is not the edits' error: it is reported as it is, at its own place."""
    import sdy_dl.pipeline
    from sdy_dl.errors import SdyError

    result = sdy_dl.propagate('sdy.mesh @mesh = <["a"=2]>\n'
                              "func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
                              "  %0 = stablehlo.negate %arg0 : tensor<8xf32>\n"
                              "  return %0 : tensor<8xf32>\n}\n")

    def refused(*args, **kwargs):
        raise SdyError("cannot evaluate `n // 0`: division by zero", "rules.yaml", 3, 5)

    monkeypatch.setattr(sdy_dl.pipeline, "propagate", refused)
    with pytest.raises(SdyError) as e:
        result.whatif(set={"%arg0": '<@mesh, [{"a"}]>'})
    assert str(e.value) == "rules.yaml:3:5: cannot evaluate `n // 0`: division by zero"


def test_memory_says_how_much_of_a_split_value_is_padding():
    """The first stage's weight, a slice of one row of the stacked weights sharded on
    "model" over that dim, is split over the 4 "model" devices but a row cannot be:
    each device holds the whole row, 3 KiB of its 4 KiB padding on average."""
    table = sdy_dl.propagate(audit_programs.lowered("ppermute_pipeline"),
                             explicit_collectives=True).memory(top=10)
    (line,) = [x for x in str(table).splitlines() if " %3 in main (stablehlo.slice)" in x]
    assert line.endswith('[{"model"}, {}, {}]: 4.0 KiB per device, split over 4 of 8 devices, '
                         "3.0 KiB of it padding (dims the axes do not divide)"), line
