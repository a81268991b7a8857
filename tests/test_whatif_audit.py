"""A what-if's audit computed from what changed, and the proof it rests on.

When the edited output is the first output with other shardings
(:mod:`sdy_dl.audit.same_structure`), the diff and the memory totals are
computed from the ops whose attributes differ; tests/test_whatif.py checks
them against the full computations on every program and edit
(check_shortcuts).  Here: the proof rejects what it must (an op, a type or
a non-sharding attribute that differs, even one whose text holds a sharding),
and a what-if without a structural change does not read the whole edited
output.
"""

from __future__ import annotations

import pytest

import jax_programs
from sdy_dl import propagate
from sdy_dl.audit.diff import diff_edited, diff_modules, signatures
from sdy_dl.audit.same_structure import equal_when_masked, masked, sharding_changes
from sdy_dl.ir import parse_module_text

A = """sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32>) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) {
  %0 = stablehlo.negate %arg0 {mhlo.frontend_attributes = {note = "<@mesh, [{}, {}]>"}, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>} : tensor<8x8xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{"a"}, {}]> : tensor<8x8xf32>
  %2 = stablehlo.add %1, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>} : tensor<8x8xf32>
  %3 = stablehlo.add %2, %2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>} : tensor<8x8xf32>
  return %3 : tensor<8x8xf32>
}
"""

#: Other shardings only: an argument's removed, another's added, an op's, a
#: constraint's and the result's changed.
SHARDINGS_ONLY = (A.replace('%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}',
                            "%arg0: tensor<8x8xf32>")
                  .replace("%arg1: tensor<8x8xf32>)",
                           '%arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>})')
                  .replace('%1 = sdy.sharding_constraint %0 <@mesh, [{"a"}, {}]>',
                           '%1 = sdy.sharding_constraint %0 <@mesh, [{}, {"b"}]>')
                  .replace('stablehlo.add %2, %2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>}',
                           "stablehlo.add %2, %2")
                  .replace('-> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>})',
                           '-> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>})'))

#: Not a proof: what the masking alone would not tell apart.
NOT_SHARDINGS_ONLY = {
    # a non-sharding attribute whose text holds a sharding (masked, but not a sharding)
    "attribute": A.replace('note = "<@mesh, [{}, {}]>"', 'note = "<@mesh, [{\\22a\\22}, {}]>"'),
    "op": A.replace("%2, %2 {", "%2, %1 {"),
    "operation": A.replace("stablehlo.add %1, %arg1", "stablehlo.subtract %1, %arg1"),
    "inline mesh": A.replace('%1 = sdy.sharding_constraint %0 <@mesh, [{"a"}, {}]>',
                             '%1 = sdy.sharding_constraint %0 <mesh<["a"=2, "b"=2]>, [{"a"}, {}]>'),
}


#: Other ops: a second negate of %arg0 before the first (the same signature: values
#: pair in module order), a reshard before the add (transparent to signatures), the
#: last add reading the new negate.
OPS_INSERTED = A.replace(
    "  %0 = stablehlo.negate",
    '  %n = stablehlo.negate %arg0 {mhlo.frontend_attributes = {note = "<@mesh, [{}, {}]>"}, '
    'sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"b"}]>]>} : tensor<8x8xf32>\n'
    "  %0 = stablehlo.negate").replace(
    "  %2 = stablehlo.add %1, %arg1",
    '  %r = sdy.reshard %1 <@mesh, [{}, {"b"}]> : tensor<8x8xf32>\n'
    "  %2 = stablehlo.add %r, %arg1").replace("stablehlo.add %2, %2", "stablehlo.add %2, %n")

#: An op fewer: the constraint is gone (its use reads its operand).
OPS_REMOVED = A.replace('  %1 = sdy.sharding_constraint %0 <@mesh, [{"a"}, {}]> : tensor<8x8xf32>\n',
                        "").replace("stablehlo.add %1, %arg1", "stablehlo.add %0, %arg1")


def _modules(a: str, b: str):
    return parse_module_text(a, "a.mlir"), parse_module_text(b, "b.mlir")


def test_shardings_only_is_proven_and_diffs_as_the_full_diff():
    a, b = _modules(A, SHARDINGS_ONLY)
    sa = signatures(a)
    same = sharding_changes(sa, a.print(), b, b.print())
    assert same is not None
    full = diff_modules(a, b)
    assert [d.to_json() for d in full[1]]   # (not vacuous)
    equal, diffs = diff_edited(sa, same)
    assert (equal, [d.to_json() for d in diffs]) == (full[0], [d.to_json() for d in full[1]])
    assert {sa.name(v) for v in same.texts} == {"%arg0", "%arg1", "%1", "%3", "result:0"}


@pytest.mark.parametrize("name", sorted(NOT_SHARDINGS_ONLY))
def test_other_differences_are_no_proof(name):
    a, b = _modules(A, NOT_SHARDINGS_ONLY[name])
    assert sharding_changes(signatures(a), a.print(), b, b.print()) is None
    assert diff_modules(a, b)[1]
    if name == "attribute":   # (the ops' attributes tell it, not the masked texts)
        assert masked(a.print()) == masked(b.print())


@pytest.mark.parametrize("name, b", [("shardings only", SHARDINGS_ONLY), ("same", A),
                                     ("ops inserted", OPS_INSERTED), ("ops removed", OPS_REMOVED),
                                     *sorted(NOT_SHARDINGS_ONLY.items())])
def test_signatures_like_another_module_are_its_own(name, b):
    """Signatures made like another module's (sharing its numbers) are those made
    alone with the same numbers, and the diff reading twin ops' values as equal is
    the full diff."""
    a, b = _modules(A, b)
    sa = signatures(a)
    like, alone = signatures(b, like=sa), signatures(b, ids=sa.ids)
    assert (like.groups, like.first, like.reshards, like.sig) == (
        alone.groups, alone.first, alone.reshards, alone.sig)
    assert [like.site(v)[1:] for v in like.sig] == [alone.site(v)[1:] for v in alone.sig]
    assert diff_modules(a, b, sa, signatures_b=like) == diff_modules(a, b)
    for n, m in like.twins.items():   # twins: all attributes the same
        x, y = sa.table.ops[m], like.table.ops[n]
        assert {k: str(x.attributes[k]) for k in x.attributes} == {
            k: str(y.attributes[k]) for k in y.attributes}
    assert like.twins if name in ("same", "ops inserted", "op") else True
    if name == "ops inserted":
        # the first negate pairs with the new one (module order), the last add reads
        # another value: a value only in each
        assert [d.kind for d in diff_modules(a, b)[1]] == [
            "different", "only in B", "only in A", "only in B", "reshard in B"]


def test_masked_line_by_line_is_the_whole_text_masked():
    """Comparing two printed modules' lines, masking only the lines that differ, says
    what comparing the two texts masked whole says."""
    texts = [parse_module_text(t, "x.mlir").print()
             for t in (A, SHARDINGS_ONLY, OPS_INSERTED, OPS_REMOVED, *NOT_SHARDINGS_ONLY.values())]
    texts.append(texts[0].replace("tensor<8x8xf32>) -> (tensor<8x8xf32>",
                                  "tensor<8x8xf32>) -> (tensor<8x4xf32>"))   # a type, one line
    answers = [[equal_when_masked(x, y) for y in texts] for x in texts]
    assert answers == [[masked(x) == masked(y) for y in texts] for x in texts]
    assert sum(map(sum, answers)) > len(texts)   # (some differ in shardings only)


def test_masked_text_keeps_everything_but_shardings():
    """An ``sdy.sharding`` entry goes with its separator (or its dictionary), other
    shardings become ``<@>``; other attributes of the dictionaries stay."""
    text = parse_module_text(A, "a.mlir").print()
    out = masked(text)
    assert "sdy.sharding =" not in out and '[{"a"}' not in out
    assert 'mhlo.frontend_attributes = {note = "<@>"}' in out
    assert "sdy.sharding_constraint %0 <@> :" in out
    assert "%arg1: tensor<8x8xf32>) -> (tensor<8x8xf32>) {" in out


@pytest.mark.parametrize("name, value, sharding", [
    ("mlp", "arg:0", '<@mesh, [{"model"}, {}]>'),
    ("convnet", "arg:0", '<@mesh, [{"model"}, {}, {}, {}]>'),
    ("while_loop", "arg:0", '<@mesh, [{"data"}, {}]>'),
    ("attention", "arg:0", '<@mesh, [{"model"}, {}, {}]>'),
])
def test_whatif_without_structural_change_reads_what_changed(monkeypatch, name, value, sharding):
    """A what-if that changes shardings only takes its diff and memory from the ops
    whose attributes differ: the edited output's signatures and memory table are
    never made, nor the first's memory table (its totals come from its signatures'
    walk; all equal the full computations, check_shortcuts)."""
    import sdy_dl.audit.diff as diff
    import sdy_dl.audit.memory as memory
    from test_whatif import check_shortcuts

    before = propagate(jax_programs.lowered(name), engine="python")
    made = {"signatures": [], "memory": []}
    real_signatures, real_memory = diff.Signatures.__init__, memory.memory_table

    def counting_signatures(self, module, table=None, like=None, ids=None):
        made["signatures"].append(module)
        real_signatures(self, module, table, like, ids)

    def counting_memory(audit, top=10):
        made["memory"].append(audit)
        return real_memory(audit, top)

    monkeypatch.setattr(diff.Signatures, "__init__", counting_signatures)
    monkeypatch.setattr(memory, "memory_table", counting_memory)
    after, changes = before.whatif(set={value: sharding})
    assert changes.changed and changes.memory
    assert changes.same is not None
    assert made["signatures"] == [before.audit.module]
    assert made["memory"] == []   # (both from the first's signatures)
    again, more = before.whatif(set={value: sharding})
    assert made["signatures"] == [before.audit.module] and made["memory"] == []
    assert [d.to_json() for d in more.changed] == [d.to_json() for d in changes.changed]
    check_shortcuts(before, after, changes)


@pytest.mark.parametrize("name", ["sharding_constraint", "constrained_mlp", "grad_scan_helpers"])
def test_whatif_with_structural_change_takes_what_twin_ops_share(monkeypatch, name):
    """A what-if whose output has other ops than the first's makes the edited output's
    signatures like the first's and its memory totals from the first's rows at twin
    ops: the edited output's memory table and output index are never made (and the
    diff and totals equal the full computations, check_shortcuts)."""
    import sdy_dl.audit.memory as memory
    from test_whatif import check_shortcuts, edits_for, program

    before = propagate(program(name), engine="python")
    made = []
    real_memory = memory.memory_table
    monkeypatch.setattr(memory, "memory_table",
                        lambda audit, top=10: made.append(audit) or real_memory(audit, top))
    after, changes = before.whatif(edits_for(before))
    changes.lines()
    changes.to_json()
    assert changes.same is None and any(d.kind != "different" for d in changes.changed)
    assert made == [] and "outputs" not in vars(after.audit)
    assert after.audit.signatures.twins
    check_shortcuts(before, after, changes)


def test_edited_output_is_indexed_only_when_asked():
    """A what-if whose output differs in shardings only prints its lines and JSON
    without indexing the edited output's values; asking for them indexes it."""
    before = propagate(jax_programs.lowered("mlp"), engine="python")
    after, changes = before.whatif(set={"arg:0": '<@mesh, [{"model"}, {}]>'})
    changes.lines()
    changes.to_json()
    assert changes.same is not None and "outputs" not in vars(after.audit)
    assert after.sharding("arg:0") == '#sdy.sharding<@mesh, [{"model"}, {}]>'
    assert "outputs" in vars(after.audit)


def test_op_places_taken_from_the_first_propagation_are_the_locations_own():
    """A what-if's op descriptions take place, tag and line from the first
    propagation's where their location is the same object; each equals what its
    own location says."""
    from sdy_dl.audit.conflicts import last_visit_by_op
    from sdy_dl.audit.steps import OpInfo

    before = propagate(jax_programs.lowered("training_step"), engine="python")
    places = before.audit.tracer.describe_op.places
    last_visit_by_op(before.audit.explainer)
    known = len(places)
    after, changes = before.whatif(set={"arg:0": '<@mesh, [{}, {"data"}]>'})
    assert after.audit.tracer.describe_op.places is places
    changes.conflict_keys
    ops = {id(c.op): c.op for c in after.audit.tracer.steps}
    assert len(places) - known < len(ops) // 2    # most were the first's
    from sdy_dl.audit.naming import tags

    for op in ops.values():
        fresh = OpInfo(op.name, op.origin, op._loc)
        assert (op["place"], op["tag"], op.line) == (fresh["place"], fresh["tag"], fresh.line)
        assert fresh["tag"] == (tags(op._loc, "px") or [None])[0]   # (the outermost)


@pytest.mark.parametrize("name", ["training_step", "while_loop", "grad_scan_helpers"])
def test_last_visit_by_op_is_each_ops_last_step(name):
    """Each op's (by tag; a step of an untagged op alone) last step, in first-visit order."""
    from sdy_dl.audit.conflicts import last_visit_by_op

    audit = propagate(jax_programs.lowered(name), engine="python").audit
    steps = audit.tracer.steps
    expected = {}
    for cause in steps:
        expected[(cause.op or {}).get("tag") or id(cause)] = cause
    assert len(steps) > len(expected) > 1
    visits, counted = {}, {}
    last = last_visit_by_op(audit.explainer, visits=visits)
    assert list(last) == list(expected) and list(last.values()) == list(expected.values())
    for cause in steps:
        k = (cause.op or {}).get("tag") or id(cause)
        counted[k] = counted.get(k, 0) + 1
    assert visits == counted


def test_last_visit_by_op_step_by_step_where_descriptions_do_not_key_ops():
    """Steps without an op, of an untagged op (each step its own key), or of two
    descriptions of one op: each key's last step, in first-visit order, and its
    visits are those of a walk over the steps."""
    from types import SimpleNamespace

    from sdy_dl.audit.conflicts import last_visit_by_op

    a, b, c = {"tag": "o1"}, {"tag": "o1"}, {"tag": ""}
    for ops in ((a, None, b, c, a, c, None), (a, b, a), (a, c, c), (a, b), (c, a)):
        steps = [SimpleNamespace(op=op) for op in ops]
        explainer = SimpleNamespace(tracer=SimpleNamespace(steps=steps), propagated=None)
        want, count = {}, {}
        for cause in steps:
            k = (cause.op or {}).get("tag") or id(cause)
            want[k] = cause
            count[k] = count.get(k, 0) + 1
        visits = {}
        found = last_visit_by_op(explainer, visits=visits)
        assert list(found.items()) == list(want.items()) and visits == count


def test_a_whatifs_last_steps_read_only_its_own_op_descriptions_tags(monkeypatch):
    """A what-if that starts from the first's imported module keys its ops' last
    steps with the first's tags of the op descriptions the two share (their
    locations' tags are not read again), and they are those found from scratch."""
    import sdy_dl.ir.walk as walk
    from sdy_dl.audit.conflicts import last_visit_by_op
    from sdy_dl.audit.whatif import _changed_steps, _last_steps

    before = propagate(jax_programs.lowered("grad_scan_helpers"), engine="python")
    after, _ = before.whatif(set={"arg:0": '<@mesh, [{"model"}, {}]>'})
    assert after.audit.import_reused
    _last_steps(before.audit)
    read = []
    real = walk.key
    monkeypatch.setattr(walk, "key", lambda x: read.append(x) or real(x))
    assert _changed_steps(before.audit, after.audit) is not None
    own = {id(c.op) for c in after.audit.tracer.steps} - {
        id(c.op) for c in before.audit.tracer.steps}
    assert len(read) <= len(own) < len({id(c.op) for c in after.audit.tracer.steps})
    monkeypatch.setattr(walk, "key", real)
    fresh = last_visit_by_op(after.audit.explainer)
    found = _last_steps(after.audit)
    assert list(found) == list(fresh)
    assert all(found[k] is fresh[k] for k in fresh)


def test_whatifs_from_one_propagation_make_its_ledger_once(monkeypatch):
    """The first propagation's collective ledger is made once for all its what-ifs
    (each suggest candidate is one); each what-if's collectives are its own."""
    import sdy_dl.audit.collectives as collectives

    before = propagate(jax_programs.lowered("mlp"), engine="python", explicit_collectives=True)
    made = []
    real = collectives.ledger
    monkeypatch.setattr(collectives, "ledger", lambda audit, cost=None: made.append(audit)
                        or real(audit, cost))
    results = [before.whatif(set={"arg:0": s}) for s in ('<@mesh, [{"model"}, {}]>',
                                                          '<@mesh, [{}, {"model"}]>')]
    for after, changes in results:
        changes.collectives_added
    assert made.count(before.audit) == 1
    assert [a.audit for a, _ in results] == [a for a in made if a is not before.audit]
    for after, changes in results:
        assert changes.collective_bytes[0] == sum(c.bytes or 0 for c in before.collectives().entries)
        assert changes.collective_bytes[1] == sum(c.bytes or 0 for c in after.collectives().entries)


def _random_edits(result, rng) -> list:
    """One to three edits of main's arguments: another sharding (each dim an axis that
    divides it, or none) or, for an annotated argument, none."""
    from test_whatif import _input_sharding, _owner, _shape

    from sdy_dl.audit.whatif import Edit

    audit = result.audit
    outs = [v for v in audit.outputs.values if v.value is not None and v.func == "main"
            and v.name.startswith("%arg") and "@" not in v.name
            and _owner(v).name == "func.func" and _shape(v)]
    edits = []
    for out in rng.sample(outs, min(len(outs), rng.randint(1, 3))):
        if _input_sharding(audit, out) is not None and rng.random() < 0.25:
            edits.append(Edit("unset", out.name))
            continue
        dims, used = [], set()
        for size in _shape(out):
            axes = [a for a, n in (("model", 4), ("data", 2)) if a not in used and size % n == 0]
            axis = rng.choice(axes + [None])
            used.add(axis)
            dims.append(f'{{"{axis}"}}' if axis else "{}")
        edits.append(Edit("set", out.name, f"<@mesh, [{', '.join(dims)}]>"))
    return edits


@pytest.mark.parametrize("name, seed", [("mlp", 1), ("training_step", 2), ("constrained_mlp", 3),
                                        ("sharding_constraint", 4), ("grad_scan_helpers", 5)])
def test_random_edits_equal_the_computations_from_scratch(name, seed):
    """Random edits of main's arguments, two what-ifs from one propagation and one from
    a what-if: each what-if's output is a full propagation of its edited input, and
    its diff, memory totals and conflicts are those computed from scratch on both
    outputs, whichever shortcut it took."""
    import random

    from test_whatif import _check_conflicts, check_shortcuts, program

    rng = random.Random(seed)
    before = propagate(program(name), engine="python")
    for first in (before, before, None):
        start = first if first is not None else after
        after, changes = start.whatif(_random_edits(start, rng))
        changes.lines()
        assert after.text == propagate(after.edited_input, engine="python").text
        check_shortcuts(start, after, changes)
        _check_conflicts(start, after, changes)


@pytest.mark.parametrize("name", ["training_step", "while_loop", "grad_scan_helpers", "shard_map"])
def test_input_values_read_alone_are_the_tables(name):
    """Input values looked up before the input's value table is made (a what-if
    resolves one edit) have the places, names and annotations the table gives
    them (a function's arguments named without an AsmState); a block argument
    past its op's first block is read from the table."""
    from test_whatif import program

    from sdy_dl.audit.naming import InputIndex, ValueTable
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.storage import read_stored

    index = InputIndex(parse_module_text(program(name), "m.mlir"))
    with mlir_context():
        keys = list(ValueTable(index.copy(), None).places)   # (the same keys, another copy)
        alone = {key: index._place_alone(key) for key in keys}
        later = [key for key in keys if alone[key] is None]
        records = {key: index.get(key) for key in keys if key not in later}
        main = index.main
        assert any(p is not None and p[3] for p in alone.values())
        assert index._table is None
        table = index.table
        assert main == table.main and set(table.places) == set(keys)
        for key in keys:
            if key in later:
                continue
            assert alone[key][0] == table.places[key][0] and alone[key][1] == table.places[key][1]
            assert alone[key][2:] == table.places[key][2:], key
            assert records[key].names == table.names.names[key], key
            owner, _, i, is_arg = table.places[key]
            stored = read_stored(owner, i, is_arg)
            assert records[key].sharding == (stored.to_text() if stored is not None else None)
        assert later if name == "while_loop" else True   # (its body's arguments)


def test_whatif_made_by_difference_reads_only_the_written_ops():
    """A what-if whose output the export made by difference from the first output,
    writing attributes only (:mod:`sdy_dl.passes.export.by_difference`), takes its
    diff and memory from the ops the export wrote: the edited output is neither
    printed nor indexed, and the diff and totals equal the full computations
    (check_shortcuts)."""
    from random_control_flow import random_control_flow_module
    from test_export_by_difference import _dataflow, random_whatifs
    from test_whatif import check_shortcuts

    checked = 0
    for seed in range(6):
        for module in (_dataflow, random_control_flow_module):
            for _, before, _, after, changes in random_whatifs([seed], module):
                done = getattr(after.audit.module, "output_edits", None)
                if done is None or done.restructured:
                    continue
                checked += 1
                changes.lines()
                assert changes.same is not None and after.audit._text is None
                assert "value_table" not in vars(after.audit)
                check_shortcuts(before, after, changes)
    assert checked >= 3


#: Scalar broadcasts the merger groups by sharding (each multiplied by an argument),
#: between ops whose names a made or erased broadcast shifts, and two reduces whose
#: bodies print the same names (qualified by their lines).
BROADCASTS = """sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [ARG1]>},
                %arg2: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [ARG2]>})
    -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r0 = stablehlo.reduce(%arg0 init: %z) applies stablehlo.add across dimensions = [1] : (tensor<8x8xf32>, tensor<f32>) -> tensor<8xf32>
  %c = stablehlo.constant dense<2.0> : tensor<f32>
  %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<8x8xf32>
  %1 = stablehlo.multiply %0, %arg0 : tensor<8x8xf32>
  %n = stablehlo.negate %1 : tensor<8x8xf32>
  %c2 = stablehlo.constant dense<2.0> : tensor<f32>
  %2 = stablehlo.broadcast_in_dim %c2, dims = [] : (tensor<f32>) -> tensor<8x8xf32>
  %3 = stablehlo.multiply %2, %arg1 : tensor<8x8xf32>
  %4 = stablehlo.add %3, %arg1 : tensor<8x8xf32>
  %c3 = stablehlo.constant dense<2.0> : tensor<f32>
  %5 = stablehlo.broadcast_in_dim %c3, dims = [] : (tensor<f32>) -> tensor<8x8xf32>
  %6 = stablehlo.multiply %5, %arg2 : tensor<8x8xf32>
  %7 = stablehlo.subtract %6, %4 : tensor<8x8xf32>
  %r1 = stablehlo.reduce(%7 init: %z) applies stablehlo.add across dimensions = [1] : (tensor<8x8xf32>, tensor<f32>) -> tensor<8xf32>
  return %n, %4, %7, %r0, %r1 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>
}"""

#: (%arg1's and %arg2's first shardings, the edits): groups split (broadcasts made
#: again) and joined (broadcasts erased, their uses redirected), and both.
REGROUPINGS = [
    ('{"a"}, {}', '{"a"}, {}', [("%arg1", '{}, {"b"}')]),                          # made
    ('{"a"}, {}', '{"a"}, {}', [("%arg1", '{}, {"b"}'), ("%arg2", '{"b"}, {}')]),  # made twice
    ('{"a"}, {}', '{"b"}, {}', [("%arg1", '{"b"}, {}'), ("%arg2", '{"a"}, {}')]),  # made, erased
    ('{}, {"b"}', '{"a"}, {}', [("%arg1", '{"a"}, {}')]),                          # erased
    ('{}, {"b"}', '{"b"}, {}', [("%arg1", '{"a"}, {}'), ("%arg2", '{"a"}, {}')]),  # erased twice
]


def _regrouped(arg1: str, arg2: str, edits: list) -> None:
    from sdy_dl.audit.whatif import Edit
    from test_whatif import check_shortcuts

    before = propagate(BROADCASTS.replace("ARG1", arg1).replace("ARG2", arg2),
                       engine="python")
    for _ in range(2):
        after, changes = before.whatif([Edit("set", v, f"<@mesh, [{s}]>") for v, s in edits])
        done = getattr(after.audit.module, "output_edits", None)
        if done is None or not done.restructured:
            continue
        assert changes.edited is not None
        changes.lines()
        assert after.audit._text is None
        assert not {"value_table", "signatures", "memory_layouts"} & set(vars(after.audit))
        assert after.text == propagate(after.edited_input, engine="python").text
        check_shortcuts(before, after, changes)
        assert before.audit.value_table.names.shared   # (the reduces' bodies)
        yield done


@pytest.mark.parametrize("arg1, arg2, edits", REGROUPINGS)
def test_whatif_whose_export_made_and_erased_ops_reads_what_it_did(arg1, arg2, edits):
    """Where the export by difference made, erased and redirected broadcasts (the
    merger's groups moved), the diff and memory come from the first output's
    signatures and layouts and what the export did
    (:mod:`sdy_dl.audit.edited_output`): the edited output is neither printed nor
    indexed, and the diff (names shifted by the made ops, values only one output
    has) and totals equal the full computations; so does a later what-if."""
    assert len(list(_regrouped(arg1, arg2, edits))) == 2


#: :data:`BROADCASTS` with the first broadcast used last too: a use moved off it
#: leaves its last use where it was.
LATE_USE = BROADCASTS.replace(
    "  return %n, %4, %7,",
    "  %8 = stablehlo.add %0, %n : tensor<8x8xf32>\n  return %8, %4, %7,")


@pytest.mark.parametrize("arg1, arg2, edits", REGROUPINGS)
@pytest.mark.parametrize("module", ["BROADCASTS", "LATE_USE"])
def test_edited_mains_places_are_its_own_layouts(module, arg1, arg2, edits):
    """Main's entries read from the first output's and what the export did are the
    edited output's own layout's: each value's position and last use (ops made
    and erased before it shift it; the peak alone would not tell; a value whose
    last user still reads it keeps it, else its uses are read)."""
    from sdy_dl.audit.whatif import Edit

    text = globals()[module]
    assert module == "BROADCASTS" or "%8 = stablehlo.add %0, %n" in text
    before = propagate(text.replace("ARG1", arg1).replace("ARG2", arg2), engine="python")
    after, changes = before.whatif([Edit("set", v, f"<@mesh, [{s}]>") for v, s in edits])
    edited, read = changes.edited, []
    main = edited._main
    edited._main = lambda entries, rows: read.append(main(entries, rows)) or read[-1]
    changes.memory
    own = next(x for x in after.audit.memory_layouts if x.function == "main")
    assert [(i, end, str(t), r.bytes_per_device) for i, end, _, t, r in read[0]] == [
        (i, end, str(t), r.bytes_per_device) for i, end, _, t, r in own.intermediates]


def edited_names_are_the_outputs_own(before, after, changes) -> int:
    """Every name :meth:`EditedOutput.name` gives a value of main (its op results
    and block arguments, the made ops' results) is the name the edited output's
    own value table gives it (its values found by number: an op keeps its place
    in pre-order, shifted by the ops made before it less those erased before it);
    how many were compared."""
    from bisect import bisect_left, bisect_right

    from sdy_dl.audit.edited_output import Shared

    edited, sa = changes.edited, before.audit.signatures
    table, own = sa.table, after.audit.value_table
    made_at = [b for b, _, _ in edited.edits.made]
    erased = sorted(edited.edits.erased)

    def number(n: int) -> int:
        return n + bisect_right(made_at, n) - bisect_left(erased, n)
    compared = 0
    for value, n in ((v, sa.op_number(v)) for v in sa.sig):
        if isinstance(value, str) or table.functions_at[n] != table.main \
                or value in edited.erased:
            continue
        tag, index = value
        head, dot, rest = tag[1:].partition(".")
        key = (f"{tag[0]}{number(n)}{dot}{rest}", index)
        try:
            name = edited.name(value)
        except Shared:
            continue
        assert name == own.names.names[key][0], (value, key)
        compared += 1
    for k, (b, _, _) in enumerate(edited.edits.made):
        key = (f"o{b + k - bisect_left(erased, b)}", 0)
        assert edited.name(("made", k)) == own.names.names[key][0]
        compared += 1
    return compared


#: :data:`BROADCASTS` with one reduce: the values in its body print names of their own.
ONE_REDUCE = BROADCASTS.replace(
    "%r0 = stablehlo.reduce(%arg0 init: %z) applies stablehlo.add across dimensions = [1] "
    ": (tensor<8x8xf32>, tensor<f32>) -> tensor<8xf32>",
    "%s = stablehlo.slice %arg0 [0:8, 0:1] : (tensor<8x8xf32>) -> tensor<8x1xf32>\n"
    "  %r0 = stablehlo.reshape %s : (tensor<8x1xf32>) -> tensor<8xf32>")


@pytest.mark.parametrize("arg1, arg2, edits", REGROUPINGS)
@pytest.mark.parametrize("module", ["BROADCASTS", "ONE_REDUCE"])
def test_edited_mains_names_are_its_own(module, arg1, arg2, edits):
    """Main's names in an output the export made broadcasts in and erased them from
    are the first output's renumbered (made ops take numbers, erased ones give
    theirs back; nested values move by all of them), without the edited output's
    AsmState: they are the edited output's own value table's, a later what-if's
    too."""
    from sdy_dl.audit.whatif import Edit

    text = globals()[module]
    assert module == "BROADCASTS" or "slice" in text
    before = propagate(text.replace("ARG1", arg1).replace("ARG2", arg2), engine="python")
    for _ in range(2):
        after, changes = before.whatif([Edit("set", v, f"<@mesh, [{s}]>") for v, s in edits])
        changes.lines()
        assert changes.edited._state is None
        assert edited_names_are_the_outputs_own(before, after, changes) >= 10


def test_edited_names_misnumbered_are_caught(monkeypatch):
    """Names renumbered without the erased ops (what the names' exactness rests on)
    differ from the edited output's own."""
    from sdy_dl.audit import edited_output
    from sdy_dl.audit.whatif import Edit

    shift = edited_output.EditedOutput._shift

    def without_erased(self, n):
        found = shift(self, n)
        return None if found is None else found + (
            len(self.edits.erased) if n is None else self._erased_before(n))
    monkeypatch.setattr(edited_output.EditedOutput, "_shift", without_erased)
    arg1, arg2, edits = REGROUPINGS[3]   # (erased)
    before = propagate(BROADCASTS.replace("ARG1", arg1).replace("ARG2", arg2),
                       engine="python")
    after, changes = before.whatif([Edit("set", v, f"<@mesh, [{s}]>") for v, s in edits])
    assert changes.edited is not None and changes.edited.edits.erased
    with pytest.raises(AssertionError):
        edited_names_are_the_outputs_own(before, after, changes)


@pytest.mark.slow
def test_every_regrouping_reads_what_the_export_did():
    """:func:`test_whatif_whose_export_made_and_erased_ops_reads_what_it_did` for every
    first sharding of %arg1 and %arg2 and every edit of one or both."""
    import itertools

    shardings = ['{"a"}, {}', '{}, {"b"}', '{"b"}, {}']
    seen = set()
    for a1, a2 in itertools.product(shardings, shardings):
        for e1, e2 in itertools.product(shardings + [None], shardings + [None]):
            edits = [(v, s) for v, s, was in (("%arg1", e1, a1), ("%arg2", e2, a2))
                     if s is not None and s != was]
            if edits:
                seen |= {(bool(d.made), bool(d.erased)) for d in _regrouped(a1, a2, edits)}
    assert seen == {(True, False), (False, True), (True, True)}


def test_what_the_export_did_misstated_is_caught(monkeypatch):
    """The hand-over placing the made ops elsewhere: the diff and memory read from it
    differ from the full computations (what the shortcut's exactness rests on)."""
    from sdy_dl.audit.whatif import Edit
    from sdy_dl.passes.export import by_difference
    from test_whatif import check_shortcuts

    export = by_difference._export

    def misplaced(*args):   # each made op said to stand right after main's first op
        out = export(*args)
        done = out.output_edits
        first = min(done.written) + 2
        done.made = [(first, like, op) for _, like, op in done.made]
        return out
    monkeypatch.setattr(by_difference, "_export", misplaced)
    before = propagate(BROADCASTS.replace("ARG1", '{"a"}, {}').replace("ARG2", '{"a"}, {}'),
                       engine="python")
    after, changes = before.whatif([Edit("set", "%arg1", '<@mesh, [{}, {"b"}]>')])
    assert changes.edited is not None
    with pytest.raises(AssertionError):
        check_shortcuts(before, after, changes)


@pytest.mark.slow
def test_gpt_step_whatifs_read_what_the_export_did(monkeypatch):
    """The benchmark's what-ifs on a 1-layer GPT training step (benchmarks/pipeline.py):
    the last Adam moment sharded on its other dim is made by difference with the
    merger's scalar broadcasts regrouped, read from what the export did, and its
    diff and every function's memory equal the full computations, for the first
    what-if and a later one, main's names renumbered as the edited output prints
    them; a weight's (its output made by the export passes) too."""
    import importlib.util
    import sys
    from pathlib import Path

    from sdy_dl.audit.whatif import Edit
    from test_whatif import check_shortcuts

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "pipeline.py"
    spec = importlib.util.spec_from_file_location("bench_pipeline", path)
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, bench)   # (its dataclasses look it up)
    spec.loader.exec_module(bench)
    before = propagate(bench.gpt_train_step(1), engine="python")
    names = [v.name for v in before.audit.outputs.values
             if v.names[0].startswith("%arg") and (s := v.sharding) is not None and s.rank == 2
             and [a.name for a in s.dims[0].axes] == ["model"] and not s.dims[1].axes]
    for name, edited in ((names[-1], True), (names[-1], True), (names[0], False)):
        after, changes = before.whatif([Edit("set", name, '<@mesh, [{}, {"model"}]>')])
        assert (changes.edited is not None) == edited
        assert after.text == propagate(after.edited_input, engine="python").text
        check_shortcuts(before, after, changes)
        if edited:
            assert changes.edited._state is None
            assert edited_names_are_the_outputs_own(before, after, changes) > 500
        assert len(changes.memory) > 1


@pytest.mark.parametrize("name", ["training_step", "grad_scan_helpers"])
def test_top_level_ops_of_the_input_are_found_without_a_walk(name):
    """The input's top-level ops (its functions: a what-if's edit of an argument
    looks one up) are found by their places, and the functions its calls call are
    known, from tagging the input: the same ops, places and callees a walk of the
    snapshot gives, and no walk is made."""
    from test_whatif import program

    from sdy_dl.audit.naming import InputIndex
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.walk import walk_pre

    index = InputIndex(parse_module_text(program(name), "m.mlir"))
    with mlir_context():
        copy = index.copy()
        walked = walk_pre(copy)[1:]
        tops = [n for n, op in enumerate(walked) if op.parent.name == "builtin.module"]
        assert len(tops) > 1
        for place, n in enumerate(tops):
            assert index.top_level_position(n) == place
            if walked[n].name == "func.func":
                found = index._place_alone((f"a{n}.0", -1))
                assert found is None or found[0].name == "func.func" and found[3]
        assert index.top_level_position(tops[0] + 1) is None or tops[0] + 1 in tops
        called = {str(op.attributes["callee"])[1:] for op in walked if op.name == "func.call"}
        symbols = {str(op.attributes["sym_name"]).strip('"') for op in walked
                   if op.name == "func.func"}
        assert called or name != "grad_scan_helpers"
        for symbol in symbols:
            assert index.calls(symbol) == (symbol in called), symbol
        assert not hasattr(index, "_ops")   # (the snapshot was never walked)
