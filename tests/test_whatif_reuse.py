"""What a what-if reuses from the first propagation, and where it must not.

Each reuse is keyed by the full input of a pure function: a Datalog stage's
relations by its program and its facts as sets (``RunContext.stage_memo``).
A what-if's output stays a full propagation of its edited input
(tests/test_whatif.py checks that on every program, with Shardy).
"""

from __future__ import annotations

import pytest

import jax_programs
from test_whatif import named_now
from sdy_dl import propagate
from sdy_dl.passes import PassOptions, RunContext, run_analysis, stage_key


class CountingEngine:
    """Derives ``out(x) :- fact(x)`` on any program, counting its runs."""

    def __init__(self):
        self.runs = 0

    def run(self, program, facts):
        self.runs += 1
        return {"out": {tuple(map(str, r)) for r in facts.get("fact", ())}}


@pytest.fixture
def engine(monkeypatch):
    counting = CountingEngine()
    monkeypatch.setattr(RunContext, "make_engine", lambda self: counting)
    return counting


def _options(memo):
    return PassOptions(RunContext(engine="python", stage_memo=memo))


def test_equal_facts_reuse_the_relations(engine):
    memo = {}
    first = run_analysis("get_mesh", {"fact": [(1, "a"), (2, "b")]}, _options(memo))
    # The same relation as a set: rows in another order, lists for tuples, a repeat.
    again = run_analysis("get_mesh", {"fact": [[2, "b"], (1, "a"), (1, "a")]}, _options(memo))
    assert engine.runs == 1 and first == again == {"out": {("1", "a"), ("2", "b")}}
    # What a caller does to its relations does not reach the memo.
    again["out"].add((3, "c"))
    assert run_analysis("get_mesh", {"fact": [(1, "a"), (2, "b")]}, _options(memo)) == first
    assert engine.runs == 1 and len(memo) == 1


@pytest.mark.parametrize("facts, stage, params", [
    ({"fact": [(1, "a")]}, "get_mesh", {}),                       # a tuple fewer
    ({"fact": [(1, "a"), (2, "b")], "other": [(0,)]}, "get_mesh", {}),   # another relation
    ({"fact": [(1, "a"), (2, "b")]}, "is_equivalent", {}),        # another program
    ({"fact": [(1, "a"), (2, "b")]}, "unflatten_call_graph", {"dedup": True}),  # parameters
])
def test_other_facts_or_programs_are_evaluated(engine, facts, stage, params):
    memo = {}
    run_analysis("get_mesh", {"fact": [(1, "a"), (2, "b")]}, _options(memo))
    out = run_analysis(stage, facts, _options(memo), **params)
    assert engine.runs == 2 and len(memo) == 2
    assert out == {"out": {(str(a), b) for a, b in facts["fact"]}}


def test_no_memo_or_unhashable_facts_are_not_memoised(engine):
    run_analysis("get_mesh", {"fact": [(1, "a")]}, _options(None))
    run_analysis("get_mesh", {"fact": [(1, "a")]}, _options(None))
    assert engine.runs == 2
    memo = {}
    assert stage_key("get_mesh", {}, "python", {"fact": [([1], "a")]}) is None
    for _ in range(2):
        run_analysis("get_mesh", {"fact": [([1], "a")]}, _options(memo))
    assert engine.runs == 4 and memo == {}


@pytest.mark.parametrize("edit, imported", [
    ({"unset": ["arg:0"]}, False),                          # the import stages run
    ({"set": {"arg:0": '<@mesh, [{}, {"data"}]>'}}, True),  # they are not run
])
def test_whatif_evaluates_only_stages_whose_facts_changed(monkeypatch, edit, imported):
    """A what-if re-evaluates the stages whose facts the edit changed (the export
    passes see the new shardings) and takes the others (the import passes') from
    the first propagation, or, for a new sharding of an annotated main argument,
    starts from its imported module (no import stage runs); it is still a full
    propagation of the edited input."""
    import sdy_dl.passes as passes

    keys = []
    real = passes.stage_key
    monkeypatch.setattr(passes, "stage_key", lambda *a: keys.append(real(*a)) or keys[-1])
    before = propagate(jax_programs.lowered("training_step"), engine="python")
    memo = before.audit.stage_memo
    assert len(memo) > 0 and set(keys) == set(memo)
    keys.clear()
    known = set(memo)
    after, _ = before.whatif(**edit)
    reused, changed = set(keys) & known, {k[0] for k in set(keys) - known}
    assert ("constant_or_scalar_splitter" in {k[0] for k in set(keys)}) is not imported
    assert imported or "constant_or_scalar_splitter" in {k[0] for k in reused}
    assert changed and (not imported or "insert_explicit_reshards" in changed)
    assert set(keys) <= set(memo)
    assert after.text == propagate(after.edited_input, engine="python").text


def test_conflicts_at_some_ops_are_those_of_the_whole_list():
    """``Audit.conflicts(at=...)`` makes the conflicts of the ops named only, each as
    the whole list has it (origins, processing order, the output's moves)."""
    whole = propagate(jax_programs.lowered("grad_scan_helpers"), engine="python").audit
    fresh = propagate(jax_programs.lowered("grad_scan_helpers"), engine="python").audit
    conflicts = whole.conflicts()
    assert len({(c.op, c.place) for c in conflicts}) >= 2
    at = {(conflicts[-1].op, conflicts[-1].place), ("stablehlo.no_such_op", "nowhere")}
    some = fresh.conflicts(at=at)
    assert not hasattr(fresh, "_conflicts")
    assert some and [c.to_json() for c in some] == [c.to_json() for c in conflicts
                                                    if (c.op, c.place) in at]
    assert fresh.conflicts(at=set()) == []
    assert [c.to_json() for c in whole.conflicts(at=at)] == [c.to_json() for c in some]


def test_json_gives_conflicts_as_text_does_without_whole_conflicts():
    """``WhatIf.to_json`` (``whatif --format json``) lists each conflict that appeared or
    disappeared by what the text lines say (its op by the value it makes), and makes
    no whole conflict list or explicit copy of either output for it."""
    from sdy_dl.audit.whatif import _conflict_key

    before = propagate(jax_programs.lowered("mlp"), engine="python")
    after, changes = before.whatif(set={"arg:0": '<@mesh, [{"model"}, {}]>'})
    report = changes.to_json()
    for audit in (before.audit, after.audit):
        assert not hasattr(audit, "_conflicts") and not hasattr(audit, "_op_communication")
    assert report["conflicts_appeared"] and not report["conflicts_disappeared"]
    whole = {_conflict_key(c): c for c in changes.conflicts_appeared}
    assert [k.same for k in changes.conflict_keys[0]] == list(whole)
    assert [(c["op"], c["value"], c["place"], c["factor"], c["axis"], c["kind"])
            for c in report["conflicts_appeared"]] == [
        (c.op, c.value, c.place, c.factor, c.axis, c.kind) for c in whole.values()]
    assert all(c["value"] for c in report["conflicts_appeared"])
    assert [c["kept"] for c in report["conflicts_appeared"]] == [c.kept for c in whole.values()]
    text = [line for line in changes.lines() if line.startswith("conflict appeared: ")]
    assert len(text) == len(report["conflicts_appeared"])
    for line, c in zip(text, report["conflicts_appeared"]):
        assert line.startswith(f"conflict appeared: {c['op']} at {c['value']} ({c['place']}): "
                               f"factor {c['factor']}")


def test_conflicts_are_compared_only_where_last_steps_differ(monkeypatch):
    """The conflicts that appeared or disappeared are found at the ops whose last
    step differs between the two propagations only (each op named by its tag in
    both): the first propagation's other steps are not evaluated for their factor
    records, and the keys are still those of the two whole conflict lists."""
    import sdy_dl.audit.steps as steps
    from sdy_dl.audit.whatif import _changed_steps, _conflict_key, _last_steps

    evaluated = []
    real = steps.StepRecords

    class Recording(real):
        def __init__(self, step_list, meshes):
            evaluated.append(list(step_list))
            super().__init__(step_list, meshes)

    monkeypatch.setattr(steps, "StepRecords", Recording)
    before = propagate(jax_programs.lowered("grad_scan_helpers"), engine="python")
    after, changes = before.whatif(set={"arg:0": '<@mesh, [{"model"}, {}]>'})
    keys = changes.conflict_keys
    changed_before, changed_after = _changed_steps(before.audit, after.audit)
    last = _last_steps(before.audit)
    assert changed_before and len(changed_before) < len(last)   # some ops' last steps are the same
    first = {s for step_list in evaluated[:1] for s in step_list}   # the first propagation's
    assert first <= {c.step for c in changed_before}
    assert first < {c.step for c in last.values()}
    # The data-flow edges: only those whose last step differs are evaluated.
    from sdy_dl.audit.conflicts import last_edge_visits

    edges_b = {e.cause.op["tag"]: e for e in last_edge_visits(before.audit.explainer)}
    edges_a = {e.cause.op["tag"]: e for e in last_edge_visits(after.audit.explainer)}
    differ = {e.cause.step for t, e in edges_b.items() if edges_a[t].cause.step != e.cause.step}
    assert differ and len(differ) < len({e.cause.step for e in edges_b.values()})
    edge_steps = {e.cause.step for e in edges_b.values()} | {e.cause.step for e in edges_a.values()}
    evaluated_b = {s for step_list in evaluated[1:] for s in step_list
                   if s in edge_steps and s in {e.cause.step for e in edges_b.values()}}
    assert evaluated_b <= differ
    monkeypatch.setattr(steps, "StepRecords", real)
    whole_b = {_conflict_key(c): None for c in before.audit.conflicts()}
    whole_a = {_conflict_key(c): None for c in after.audit.conflicts()}
    assert tuple([k.same for k in found] for found in keys) == (
        [k for k in whole_a if k not in whole_b], [k for k in whole_b if k not in whole_a])


def test_ops_by_tag_are_the_same_ops_in_a_whatif_from_the_imported_module():
    """A what-if that starts from the first propagation's imported module keys its
    ops' last steps by the tags the first's index made (an op's tag names the same
    op on both sides: the same name and place); one that runs the import stages
    again is compared at every op."""
    from sdy_dl.audit.whatif import _changed_steps, _last_steps

    before = propagate(jax_programs.lowered("mlp"), engine="python")
    after, changes = before.whatif(set={"arg:0": '<@mesh, [{"model"}, {}]>'})
    assert after.audit.import_reused
    b, a = _last_steps(before.audit), _last_steps(after.audit)
    shared = [op for op in a if op in b]
    assert shared and all(isinstance(op, str) for op in shared)
    for op in shared:
        assert (a[op].op["name"], a[op].op["place"], a[op].op["tag"]) == (
            b[op].op["name"], b[op].op["place"], b[op].op["tag"]) == (
            b[op].op["name"], b[op].op["place"], op)
    assert _changed_steps(before.audit, after.audit) is not None
    dropped, _ = before.whatif(unset=["arg:0"])
    assert not dropped.audit.import_reused
    assert _changed_steps(before.audit, dropped.audit) is None


#: Two adds at one source place (a layer written once in Python): the first has an
#: across-factor conflict on "a", the second none.
SAME_PLACE = """sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"a"}]>}, %arg2: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg3: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32> loc("model.py":3:1)
  %1 = stablehlo.add %arg2, %arg3 : tensor<8x8xf32> loc("model.py":3:1)
  return %0, %1 : tensor<8x8xf32>, tensor<8x8xf32>
}
"""

#: Edits moving the conflict from the first add to the second: from the first's
#: imported module (both propagations' ops named by one tag), and running the
#: import stages again (the ops named by their order at their place).
MOVES = [dict(set={"%arg1": '<@mesh, [{"a"}, {}]>', "%arg3": '<@mesh, [{}, {"a"}]>'}),
         dict(set={"%arg3": '<@mesh, [{}, {"a"}]>'}, unset=["%arg1"])]


@pytest.mark.parametrize("edits", MOVES)
def test_a_conflict_moving_to_another_op_at_the_same_place_appears_there(edits):
    """A conflict that leaves one op for another of the same name and place
    disappeared at the one and appeared at the other, each named by the value its
    op makes (two conflicts at one place are told apart), in text and JSON."""
    before = propagate(SAME_PLACE, engine="python")
    after, changes = before.whatif(**edits)
    named_now(changes)
    assert after.audit.import_reused == ("unset" not in edits)
    (was,), (now,) = before.audit.conflicts(), after.audit.conflicts()
    assert (was.value, now.value) == ("%0", "%1") and was.place == now.place == "python model.py:3"
    conflict = "factor i, j axis a (across-factor), kept i: []; j: []"
    assert [line for line in changes.lines() if line.startswith("conflict ")] == [
        f"conflict appeared: stablehlo.add at %1 (python model.py:3): {conflict}",
        f"conflict disappeared: stablehlo.add at %0 (python model.py:3): {conflict}"]
    assert changes.lines()[-1].endswith("1 conflicts appeared, 1 disappeared")
    report = changes.to_json()
    assert [(c["value"], c["place"]) for c in report["conflicts_appeared"]] == [
        ("%1", "python model.py:3")]
    assert report["conflicts_not_compared"] == []
    assert [c["value"] for c in report["conflicts_disappeared"]] == ["%0"]
    assert [c.to_json() for c in changes.conflicts_appeared] == [now.to_json()]
    assert [c.to_json() for c in changes.conflicts_disappeared] == [was.to_json()]


def test_a_conflict_moving_between_ops_each_visited_on_one_side_only_appears_there():
    """Ops are numbered among all the ops of their name at their place, visited or
    not: a what-if that ran the import stages again, where only the first add is
    visited before and only the second after (1 -> 1 visited ops at the place, but
    not the same op), has the conflict disappear at the one and appear at the other."""
    module = SAME_PLACE.replace(
        ', %arg2: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg3: '
        'tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}',
        ", %arg2: tensor<8x8xf32>, %arg3: tensor<8x8xf32>")
    assert module != SAME_PLACE
    before = propagate(module, engine="python")
    after, changes = before.whatif(set={"%arg2": '<@mesh, [{"a"}, {}]>',
                                        "%arg3": '<@mesh, [{}, {"a"}]>'},
                                   unset=["%arg0", "%arg1"])
    named_now(changes)
    assert not after.audit.import_reused
    (was,), (now,) = before.audit.conflicts(), after.audit.conflicts()
    assert (was.value, now.value) == ("%0", "%1")
    conflict = "factor i, j axis a (across-factor), kept i: []; j: []"
    assert [line for line in changes.lines() if line.startswith("conflict")] == [
        f"conflict appeared: stablehlo.add at %1 (python model.py:3): {conflict}",
        f"conflict disappeared: stablehlo.add at %0 (python model.py:3): {conflict}"]
    assert changes.to_json()["conflicts_not_compared"] == []


def test_the_attribute_texts_kept_for_the_process_are_of_its_one_mlir_context():
    """The diff's table of attribute texts lives as long as the process, which is
    sound and bounded only because every attribute it keeps is one of sdy-dl's
    one MLIR context (uniqued there until the process ends): a what-if's diffs
    take the first run's texts, and no other context's attribute gets in."""
    from sdy_dl.audit import diff
    from sdy_dl.ir.context import mlir_context

    before = propagate(jax_programs.lowered("mlp"), engine="python")
    before.whatif(set={"arg:0": '<@mesh, [{"model"}, {}]>'})
    assert diff._ATTRIBUTE_TEXTS
    assert all(attr.context is mlir_context() for attr in diff._ATTRIBUTE_TEXTS)
    assert all(text == str(attr) for attr, text in diff._ATTRIBUTE_TEXTS.items())


def test_conflicts_of_ops_not_told_apart_are_not_compared(monkeypatch):
    """A what-if that ran the import stages again names an op by its number among
    the ops of its name at its place; where the two propagations have not as many
    ops there (here made so: the edited one's count has one more), its ops are not
    told apart and their conflicts are not compared: the place is listed as not
    compared, in text and JSON, and no conflict there appears or disappears."""
    import sdy_dl.audit.whatif as whatif

    real = whatif._tags_at
    monkeypatch.setattr(whatif, "_tags_at", lambda audit, edge, name, place: real(
        audit, edge, name, place) + (["o999"] if audit is not first and not edge else []))
    before = propagate(SAME_PLACE, engine="python")
    first = before.audit
    after, changes = before.whatif(**MOVES[1])
    assert not after.audit.import_reused
    lines = changes.lines()
    assert [line for line in lines if line.startswith("conflict")] == [
        "conflicts not compared: stablehlo.add at python model.py:3: its ops there are not "
        "told apart (2 -> 3 ops, with 1 -> 1 conflicts)"]
    assert lines[-1].endswith("0 conflicts appeared, 0 disappeared, 1 places not compared")
    report = changes.to_json()
    assert report["conflicts_not_compared"] == [
        {"op": "stablehlo.add", "place": "python model.py:3", "ops": [2, 3], "conflicts": [1, 1]}]
    assert report["conflicts_appeared"] == report["conflicts_disappeared"] == []


def _layers_in_a_loop() -> str:
    """Two matmul layers written once (one Python line), lowered with JAX debug
    locations: both dot_generals are at that line."""
    import jax
    from jax_programs import _f32, _ns

    def layer(x, w):
        return x @ w

    def f(x, w1, w2):
        for w in (w1, w2):
            x = layer(x, w)
        return x
    return jax.jit(f, in_shardings=(_ns("model", None), _ns(None, "model"), _ns(None, None))
                   ).lower(_f32(16, 32), _f32(32, 32), _f32(32, 32)).as_text(debug_info=True)


@pytest.mark.parametrize("edits", [dict(set={"%arg1": "P(None, None)", "%arg2": "P(None, 'model')"}),
                                   dict(set={"%arg2": "P(None, 'model')"}, unset=["%arg1"])])
def test_a_conflict_moving_between_layers_written_once_in_jax_is_told_apart(edits):
    """A JAX program whose layer is one Python line: re-sharding the weights moves
    the across-factor conflict from the first layer's dot_general to the second's,
    at the same Python line; the what-if says it disappeared at the one and
    appeared at the other, each by the value its op makes."""
    before = propagate(_layers_in_a_loop(), engine="python")
    (was,) = before.audit.conflicts()
    after, changes = before.whatif(**edits)
    named_now(changes)
    assert after.audit.import_reused == ("unset" not in edits)
    (now,) = after.audit.conflicts()
    assert was.place == now.place and was.place.startswith("python ")
    assert (was.op, was.value, now.op, now.value) == ("stablehlo.dot_general", "%0",
                                                      "stablehlo.dot_general", "%1")
    got = [line for line in changes.lines() if line.startswith("conflict")]
    assert got == [f"conflict appeared: stablehlo.dot_general at %1 ({now.place}): factor i, j "
                   'axis model (across-factor), kept i: []; j: ["model"]',
                   f"conflict disappeared: stablehlo.dot_general at %0 ({was.place}): factor "
                   'i, j axis model (across-factor), kept i: []; j: ["model"]']
    assert [c.to_json() for c in changes.conflicts_appeared] == [now.to_json()]
