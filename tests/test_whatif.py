"""``sdy-dl whatif`` / ``result.whatif``: edits of the input annotations, re-propagated.

The what-if's output must be exactly a full ``sdy-dl propagate`` of the edited
input module, and Shardy's pipeline on that edited input (the oracle); the
edited input must differ from the input only where the edits say.  Edits are
chosen per program from its propagated output: an argument set to another
sharding with a dim priority, another argument's annotation removed, a
constraint dropped, another set, an op result in main given a sharding with
an open prioritised dim.
"""

from __future__ import annotations

import json
import os

import pytest

import jax_programs
import lowering
from oracle import assert_same, normalize, shardy
from sdy_dl import propagate
from sdy_dl.audit.whatif import Edit
from sdy_dl.errors import SdyError


def constrained_mlp() -> str:
    """An MLP with two constraints in the middle (JAX's with_sharding_constraint)."""
    import jax

    ns = jax_programs._ns

    def f(x, w1, w2):
        h = jax.lax.with_sharding_constraint(x @ w1, ns("data", "model"))
        h = jax.nn.relu(h)
        h = jax.lax.with_sharding_constraint(h, ns(None, "model"))
        return h @ w2

    f32 = jax_programs._f32
    return jax.jit(f, in_shardings=(ns("data", None), ns(), ns("model", None))).lower(
        f32(16, 32), f32(32, 64), f32(64, 32)).as_text()


def constrained_residual() -> str:
    """A residual block whose skip path is constrained."""
    import jax
    import jax.numpy as jnp

    ns = jax_programs._ns

    def f(x, w):
        y = jnp.tanh(x @ w)
        skip = jax.lax.with_sharding_constraint(x, ns(None, "model"))
        return jax.lax.with_sharding_constraint(y + skip, ns("data", None)).sum(axis=0)

    f32 = jax_programs._f32
    return jax.jit(f, in_shardings=(ns("data", None), ns(None, "model"))).lower(
        f32(8, 16), f32(16, 16)).as_text()


EXTRA = {"constrained_mlp": constrained_mlp, "constrained_residual": constrained_residual}
PROGRAMS = sorted(jax_programs.PROGRAMS) + sorted(EXTRA)


def program(name: str) -> str:
    if name in EXTRA:
        return lowering.once("whatif", name, EXTRA[name])
    return jax_programs.lowered(name)


def _shape(out) -> list[int]:
    from jaxlib.mlir import ir

    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        return list(ir.RankedTensorType(out.value.type).shape)


def _dims(shape, axis_sizes, priority: str = "", avoid: str | None = None) -> str:
    """A sharding of ``shape``: the first dim an axis divides gets it (``priority``
    appended), the rest closed and empty."""
    dims, used = [], False
    for size in shape:
        axis = next((a for a, n in axis_sizes if not used and a != avoid and size % n == 0
                     and size >= n), None)
        if axis is not None:
            dims.append(f'{{"{axis}"}}{priority}')
            used = True
        else:
            dims.append("{}")
    return f"<@mesh, [{', '.join(dims)}]>"


def edits_for(result) -> list[Edit]:
    """Several edits of the program ``result`` propagated (see the module docstring)."""
    audit = result.audit
    axes = [("model", 4), ("data", 2)]
    outs = {v.name: v for v in audit.outputs.values if v.value is not None}
    args = [n for n in outs if n.startswith("%arg") and "@" not in n and outs[n].func == "main"
            and _owner(outs[n]).name == "func.func"]
    args = [n for n in args if _shape(outs[n])]
    edits = []
    if args:
        current = result.sharding(args[0]) or ""
        avoid = "model" if '"model"' in current else "data" if '"data"' in current else None
        edits.append(Edit("set", args[0], _dims(_shape(outs[args[0]]), axes, "p1", avoid)))
    for name in args[1:]:
        if _input_sharding(audit, outs[name]) is not None:
            edits.append(Edit("unset", name))
            break
    constraints = [n for n in outs if _origin(audit, outs[n]) == "sdy.sharding_constraint"]
    if constraints:
        edits.append(Edit("drop", constraints[0]))
    if len(constraints) > 1:
        edits.append(Edit("set", constraints[1], _dims(_shape(outs[constraints[1]]), axes[::-1])))
    body = [n for n in outs if not n.startswith("%arg") and outs[n].func == "main"
            and not _place(outs[n])[2] and _owner(outs[n]).parent.name == "func.func"
            and _origin(audit, outs[n]) not in (None, "sdy.sharding_constraint")
            and len(_shape(outs[n])) >= 1 and any(s >= 2 for s in _shape(outs[n]))]
    if body:
        name = body[len(body) // 2]
        shape = _shape(outs[name])
        s = _dims(shape, axes[::-1], "p0")
        edits.append(Edit("set", name, s.replace("}p0", ", ?}p0", 1)))
    return edits


def _owner(out):
    """The op defining (or owning the block of) an output value."""
    return _place(out)[0]


def _place(out):
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.mlir_ops import value_place

    with mlir_context():
        return value_place(out.value)


def _origin(audit, out):
    from sdy_dl.audit.whatif import _origin

    origin = _origin(audit, out)
    return origin.op if origin is not None else None


def _input_sharding(audit, out):
    from sdy_dl.audit.whatif import resolve

    return resolve(audit, Edit("unset", out.name)).current


def _check_whatif(name: str, engine: str) -> None:
    text = program(name)
    before = propagate(text, engine=engine)
    edits = edits_for(before)
    assert len(edits) >= 2, (name, edits)
    after, changes = before.whatif(edits)
    named_now(changes)
    edited = after.edited_input
    assert len(changes.applied) == len(edits)
    # The what-if is a full propagation of the edited input, and Shardy's.
    full = propagate(edited, engine=engine)
    assert after.text == full.text, name
    assert_same(shardy(edited, "sdy-propagation-pipeline"), normalize(after.text))
    # The diff lists exactly the values whose printed sharding changed.
    for d in changes.changed:
        if d.kind == "different":
            assert before.sharding(d.a) == d.a_sharding
            assert after.sharding(d.b) == d.b_sharding
    _check_conflicts(before, after, changes)
    check_shortcuts(before, after, changes)


def named_now(changes):
    """``changes`` with its conflicts' values read now, right after the what-if, as
    ``sdy-dl whatif`` reads them (before anything indexes the edited output, so the
    shortcuts that name them without it are what :func:`check_shortcuts` checks)."""
    for found in changes.conflict_keys:
        for k in found:
            k.value
    return changes


def check_shortcuts(before, after, changes) -> None:
    """What the what-if computes from what changed (when the edited output is proven
    to be the first with other shardings, ``changes.same``) is what the full
    computations give: the diff of the two outputs from scratch, the edited
    output's own memory table, byte for byte, and the values the conflicts that
    appeared and disappeared are named by."""
    from sdy_dl.audit.diff import diff_modules

    equal, diffs = diff_modules(before.audit.module, after.audit.module)
    assert changes.unchanged == equal
    assert [d.to_json() for d in changes.changed] == [d.to_json() for d in diffs]
    if any(d.kind.startswith("only") for d in diffs):
        assert changes.same is None
    full = {f.function: f for f in after.audit.memory(top=0).functions}
    first = {f.function: f for f in before.audit.memory(top=0).functions}
    assert [(fn, b, a) for fn, b, a in changes.memory] == [(fn, first.get(fn), full.get(fn))
                                                           for fn, _, _ in changes.memory]
    assert set(full) | set(first) == {fn for fn, _, _ in changes.memory}
    # The values the conflicts that appeared and disappeared are named by (read without
    # indexing the edited output where its shortcuts allow) are the outputs' names.
    from sdy_dl.audit.conflicts import op_value

    for run, found in zip((after, before), changes.conflict_keys):   # (appeared, disappeared)
        for k in found:
            assert k.value == op_value(run.audit.explainer.key_name, k.cause)


def _check_conflicts(before, after, changes) -> None:
    """The conflicts found step by step (reusing the steps both propagations share)
    are those of the two propagations' whole conflict lists."""
    from sdy_dl.audit.whatif import _conflict_key, _OpIds

    # Made first at the ops they name only, then compared with the whole lists.
    appeared = [c.to_json() for c in changes.conflicts_appeared]
    disappeared = [c.to_json() for c in changes.conflicts_disappeared]
    ids = _OpIds(before.audit, after.audit)
    whole_b, whole_a = ({}, {})
    for side, whole in enumerate((whole_b, whole_a)):
        for c in (before, after)[side].audit.conflicts():
            key = _conflict_key(c, ids, side)
            if key is not None:   # (an op not told apart: its place is not compared)
                whole.setdefault(key, c)
            else:
                assert (c.op, c.place) in {(u.op, u.place) for u in changes.conflicts_not_compared}
    keys = tuple([k.same for k in found] for found in changes.conflict_keys)
    assert keys == ([k for k in whole_a if k not in whole_b],
                    [k for k in whole_b if k not in whole_a])
    told = changes.conflict_keys
    assert appeared == [whole_a[k.same].to_json() for k in told[0]]
    assert disappeared == [whole_b[k.same].to_json() for k in told[1]]
    # Each names its op as the conflict does (the value it makes).
    assert [k.value for k in told[0]] == [whole_a[k.same].value for k in told[0]]
    assert [k.value for k in told[1]] == [whole_b[k.same].value for k in told[1]]


@pytest.mark.parametrize("name", PROGRAMS)
def test_whatif_equals_full_propagate_and_shardy(name):
    _check_whatif(name, "python")


#: The clingo engine on three programs by default, on all with ``-m slow``.
CLINGO_DEFAULT = ("constrained_mlp", "shard_map_scan_pipeline", "while_loop")


@pytest.mark.parametrize("name", [n if n in CLINGO_DEFAULT else pytest.param(n, marks=pytest.mark.slow)
                                  for n in PROGRAMS])
def test_whatif_equals_full_propagate_and_shardy_clingo(name):
    _check_whatif(name, "clingo")


def test_edits_cover_every_kind():
    """Across the programs, the chosen edits set arguments (with priorities), unset
    annotations, drop and set constraints, and set op results."""
    kinds = set()
    for name in PROGRAMS:
        result = propagate(program(name), engine="python")
        for e in edits_for(result):
            kind = e.kind
            if kind == "set" and "p1" in e.sharding:
                kind = "set argument with priority"
            elif kind == "set" and "?}p0" in e.sharding:
                kind = "set op result, open with priority"
            kinds.add(kind)
    assert kinds == {"set argument with priority", "unset", "drop", "set",
                     "set op result, open with priority"}


def test_edited_input_changes_only_the_edited_annotations():
    before = propagate(program("constrained_mlp"), engine="python")
    after, changes = before.whatif(set={"arg:1": '<@mesh, [{}, {"data"}]>'},
                                   drop_constraints=["%1"])
    original = normalize(program("constrained_mlp"))
    edited = after.edited_input
    assert original.count("sdy.sharding_constraint") == 2
    assert edited.count("sdy.sharding_constraint") == 1
    assert '%arg1: tensor<32x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"data"}]>}' in edited
    assert [(a.target, a.after) for a in changes.applied] == [
        ("%arg1", '#sdy.sharding<@mesh, [{}, {"data"}]>'), ("%1", None)]


def test_whatif_reuses_the_first_propagations_steps():
    """The what-if evaluates only the steps whose inputs the edit changed (the rest come
    from the first propagation's memo) and still equals a propagation from scratch."""
    before = propagate(program("training_step"), engine="python")
    memo = before.audit.step_memo
    first = sum(map(len, memo.values()))
    assert first > 0
    after, changes = before.whatif(set={"arg:0": '<@mesh, [{}, {"data"}]>'})
    added = sum(map(len, memo.values())) - first
    assert changes.changed and 0 < added < first
    assert after.text == propagate(after.edited_input, engine="python").text
    again, _ = before.whatif(set={"arg:0": '<@mesh, [{}, {"data"}]>'})
    assert sum(map(len, memo.values())) == first + added and again.text == after.text


def test_collectives_and_memory_before_and_after():
    before = propagate(program("mlp"), engine="python", explicit_collectives=True)
    after, changes = before.whatif(set={"arg:0": '<@mesh, [{"model"}, {}]>'})
    named_now(changes)
    old, new = before.collectives(), after.collectives()
    assert changes.collective_bytes == (sum(c.bytes or 0 for c in old.entries),
                                        sum(c.bytes or 0 for c in new.entries))
    assert changes.collectives_added or changes.collectives_removed
    assert (sum(c.bytes or 0 for c in changes.collectives_added)
            - sum(c.bytes or 0 for c in changes.collectives_removed)
            == changes.collective_bytes[1] - changes.collective_bytes[0])
    check_shortcuts(before, after, changes)
    main = {fn: (b, a) for fn, b, a in changes.memory}["main"]
    assert main[0].arguments == before.memory().functions[0].arguments
    assert main[1].arguments == after.memory().functions[0].arguments
    lines = changes.lines()
    assert any(line.startswith("collective added: ") or line.startswith("collective removed: ")
               for line in lines)
    assert any(line.startswith("collectives: ") for line in lines)
    plain, _ = propagate(program("mlp"), engine="python").whatif(
        set={"arg:0": '<@mesh, [{"model"}, {}]>'})
    assert _.collectives_added is None and _.memory


def test_unchanged_whatif_reports_nothing():
    before = propagate(program("mlp"), engine="python")
    same = before.sharding("arg:0")
    after, changes = before.whatif(set={"arg:0": same})
    assert after.text == before.text
    assert changes.changed == [] and changes.conflicts_appeared == [] \
        and changes.conflicts_disappeared == []


def test_conflicts_appear_and_disappear():
    before = propagate(program("mlp"), engine="python")
    after, changes = before.whatif(set={"arg:0": '<@mesh, [{"model"}, {}]>'})
    assert changes.conflicts_appeared and not changes.conflicts_disappeared
    back, undo = after.whatif(set={"arg:0": before.sharding("arg:0")})
    assert back.text == before.text
    assert ({(c.op, c.place, c.factor) for c in undo.conflicts_disappeared}
            == {(c.op, c.place, c.factor) for c in changes.conflicts_appeared})
    _check_conflicts(before, after, changes)
    _check_conflicts(after, back, undo)


def _check_exact(before, edits):
    """``before.whatif(edits)``: its output is a full propagate of its edited input and
    Shardy's, and its conflicts those of the two whole lists; (after, changes)."""
    after, changes = before.whatif(edits)
    named_now(changes)
    engine = before.audit.options.context.engine
    given = {o: True for o in ("dedup-functions-fully",) if before.audit.options[_option(o)]}
    assert after.text == propagate(after.edited_input, engine=engine, pass_options=given).text
    pipeline = "sdy-propagation-pipeline" + ("{dedup-functions-fully=true}" if given else "")
    assert_same(shardy(after.edited_input, pipeline), normalize(after.text))
    _check_conflicts(before, after, changes)
    check_shortcuts(before, after, changes)
    return after, changes


def _option(name: str):
    from sdy_dl.pipeline import pipeline_options

    return next(o for o in pipeline_options() if o.name == name)


@pytest.mark.parametrize("dedup", [False, True])
def test_whatif_in_one_function_of_several(dedup):
    """Edits inside one of several functions (a helper called three times), and of
    main's arguments, each alone and together; in both call modes."""
    import call_programs

    text = lowering.once("call_programs", "repeated_dense", call_programs.repeated_dense)
    before = propagate(text, engine="python",
                       pass_options={"dedup-functions-fully": True} if dedup else None)
    inside = '<@mesh, [{"model"}, {}]>'
    helper = next(v.name for v in before.audit.outputs.values
                  if v.func not in ("main", "") and v.op == "stablehlo.dot_general")
    one, changes = _check_exact(before, [Edit("set", helper, inside)])
    assert changes.changed
    _check_exact(before, [Edit("set", "arg:3", '<@mesh, [{}, {"model"}]>')])
    _check_exact(before, [Edit("set", helper, inside), Edit("unset", "arg:1")])
    _check_exact(one, [Edit("set", helper, before.sharding(helper))])


GROUP = """sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32>, %arg2: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>}) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  sdy.sharding_group %arg0 group_id=0 : tensor<8x8xf32>
  sdy.sharding_group %arg1 group_id=0 : tensor<8x8xf32>
  %0 = stablehlo.negate %arg1 : tensor<8x8xf32>
  %1 = stablehlo.add %0, %arg2 : tensor<8x8xf32>
  return %1, %arg0 : tensor<8x8xf32>, tensor<8x8xf32>
}
"""


def test_whatif_in_a_sharding_group():
    """An edit of a sharding group's member reaches the other members (the group is
    synced on the edited annotations); removing it leaves the group to the others."""
    before = propagate(GROUP, engine="python")
    assert before.sharding("%arg1") == '#sdy.sharding<@mesh, [{"a"}, {}]>'
    after, _ = _check_exact(before, [Edit("set", "arg:0", '<@mesh, [{}, {"a"}]>')])
    assert after.sharding("%arg1") == '#sdy.sharding<@mesh, [{}, {"a"}]>'
    _check_exact(before, [Edit("set", "arg:1", '<@mesh, [{"b"}, {}]>')])
    _check_exact(before, [Edit("unset", "arg:0")])
    _check_exact(before, [Edit("set", "arg:2", '<@mesh, [{"a"}, {"b"}]>')])


def test_whatifs_from_one_propagation_share_what_they_reuse():
    """Several what-ifs from one propagation, and a what-if of a what-if, reuse the
    steps and the step conflicts the earlier ones found, and each is still exact."""
    before = propagate(program("constrained_mlp"), engine="python")
    edits = edits_for(before)
    firsts = [_check_exact(before, [e])[0] for e in edits]
    _check_exact(before, edits)
    _check_exact(firsts[0], edits[1:2])
    again, changes = _check_exact(before, [edits[0]])
    assert again.text == firsts[0].text


# -- bad edits -------------------------------------------------------------------

@pytest.mark.parametrize("edit, message", [
    (Edit("set", "%99", '<@mesh, [{}]>'), "no value '%99'"),
    (Edit("set", "arg:0", '<@mesh, [{"data"}]>'), "sharding doesn't match tensor rank: 1 != 2 (the value has rank 2"),
    (Edit("set", "arg:0", '<@mesh, [{"x"}, {}]>'), 'unknown axis name: "x" (the value has rank 2; mesh @mesh has axes "data"=2, "model"=4)'),
    (Edit("set", "arg:0", '<@other, [{}, {}]>'), "unknown mesh @other; meshes: @mesh"),
    (Edit("drop", "%0"), "not a sharding constraint; constraints: %1, %3"),
    (Edit("unset", "%0"), "has no annotation to remove (annotated: %arg0, %arg1, %arg2)"),
    (Edit("unset", "%1"), "use --drop-constraint"),
])
def test_bad_edit_is_one_error_with_choices(edit, message):
    before = propagate(program("constrained_mlp"), engine="python")
    with pytest.raises(SdyError) as e:
        before.whatif([edit])
    assert message in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("kind, index, sharding", [
    ("arg_attrs", 1, '<@mesh, [{"data"}]>'), ("arg_attrs", 2, '<@mesh, [{"x"}, {}]>'),
    ("arg_attrs", 2, '<@mesh, [{"data"}, {"data"}]>'), ("arg_attrs", 0, '<@mesh, [{}, {"model":(1)4}]>'),
    ("res_attrs", 0, '<@mesh, [{}, {"y"}]>'), ("res_attrs", 0, '<@mesh, [{}]>'),
])
def test_bad_function_annotation_fails_as_verifying_the_edited_function(kind, index, sharding):
    """An argument or result annotation is verified without the function's body:
    the error is the first diagnostic verifying the whole edited function gives
    (with its argument or result number)."""
    from jaxlib.mlir import ir

    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.mlir_ops import main_of
    from sdy_dl.ir.storage import write_func_attr
    from sdy_dl.sharding import parse_tensor_sharding

    before = propagate(program("constrained_mlp"), engine="python")
    with mlir_context():
        copy = before.audit.inputs.copy()
        main = main_of([op.operation for op in copy.regions[0].blocks[0].operations
                        if op.operation.name == "func.func"])
        write_func_attr(main, kind, index, parse_tensor_sharding(sharding))
        with pytest.raises(ir.MLIRError) as verified:
            main.verify()
    expected = verified.value.error_diagnostics[0].message.splitlines()[0]
    value = f"arg:{index}" if kind == "arg_attrs" else f"result:{index}"
    with pytest.raises(SdyError) as e:
        before.whatif([Edit("set", value, sharding)])
    assert f": {expected} (the value has rank" in str(e.value)


@pytest.mark.parametrize("edit", [Edit("set", "%argg1", '<@mesh, [{}, {}]>'),
                                  Edit("unset", "%argg1"), Edit("drop", "%argg1")])
def test_unknown_value_lists_the_closest_names(edit):
    """An edit of a value the output does not have lists the closest valid names,
    each value once (``%arg1`` is also ``arg:1``), and how many values there are;
    the message is the same for every kind of edit and located at the input's main
    function."""
    before = propagate(program("constrained_mlp"), engine="python")
    with pytest.raises(SdyError) as e:
        before.whatif([edit])
    message = e.value.message
    close = message.split("close matches: ", 1)[1].split(" (", 1)[0]
    assert close == "%arg1"
    listed = message.split("close matches: ", 1)[1].split("), ")[:5]
    assert len(set(listed)) == 5 and all("output line" in x for x in listed)
    assert f"({len(before.audit.outputs.values)} values," in message
    assert e.value.line is not None and e.value.col is not None
    text = program("constrained_mlp").splitlines()
    assert "@main(" in text[e.value.line - 1]
    with pytest.raises(SdyError) as again:
        before.whatif([edit])
    assert str(again.value) == str(e.value)


def test_unknown_value_without_close_names_still_lists_choices():
    """A name nothing resembles (difflib's ratio under 0.5 for every name) still gets
    the closest names there are."""
    before = propagate(program("constrained_mlp"), engine="python")
    with pytest.raises(SdyError) as e:
        before.whatif([Edit("unset", "zzzzzzzzzzzz")])
    assert "close matches: none" not in e.value.message
    assert e.value.message.count("output line") == 5


def test_cli_whatif_writes_outputs(tmp_path):
    from click.testing import CliRunner

    from sdy_dl.cli import main

    src = tmp_path / "in.mlir"
    src.write_text(program("constrained_mlp"))
    out, saved = tmp_path / "out.mlir", tmp_path / "edited.mlir"
    r = CliRunner().invoke(main, ["whatif", str(src), "--engine", "python",
                                  "--set", 'arg:0=<@mesh, [{"model"}, {}]>',
                                  "--drop-constraint", "%3", "-o", str(out),
                                  "--save-input", str(saved), "--format", "json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.output)
    assert [e["edit"] for e in report["edits"]] == ['--set arg:0=<@mesh, [{"model"}, {}]>',
                                                    "--drop-constraint %3"]
    assert report["changed"]
    full = CliRunner().invoke(main, ["propagate", str(saved), "--engine", "python"])
    assert full.exit_code == 0
    assert out.read_text() == full.output


@pytest.mark.parametrize("args, message, at_value", [
    (["--set", "%99=<@mesh, [{}]>"], "no value '%99'", True),
    (["--unset", "%nosuch"], "no value '%nosuch'", True),
    (["--drop-constraint", "%99"], "no value '%99'", True),
    (["--set", "result:5=<@mesh, [{}, {}]>"], "no value 'result:5'", True),
    (["--set", 'arg:0=<@mesh, [{"data"}]>'], "doesn't match tensor rank", True),
    (["--set", 'arg:0=<@mesh, [{"nope"}, {}]>'], 'has axes "data"=2, "model"=4', True),
])
def test_cli_bad_edit_writes_nothing(tmp_path, args, message, at_value):
    """A bad edit is one error line, located at the edited value's op in the input
    when there is one (arg:0: the main function), else (an unknown value) at the
    main function, and nothing is written."""
    from click.testing import CliRunner

    from sdy_dl.cli import main

    src = tmp_path / "in.mlir"
    src.write_text(program("constrained_mlp"))
    out, saved = tmp_path / "out.mlir", tmp_path / "edited.mlir"
    r = CliRunner().invoke(main, ["whatif", str(src), "--engine", "python", *args,
                                                  "-o", str(out), "--save-input", str(saved)])
    assert r.exit_code == 1
    lines = r.stderr.splitlines()
    where = str(src)
    if at_value:
        text = src.read_text().splitlines()
        line = next(n for n, t in enumerate(text, 1) if "func.func" in t and "@main(" in t)
        where += f":{line}:{text[line - 1].index('func.func') + 1}"
    assert len(lines) == 1 and lines[0].startswith(f"sdy-dl: error: {where}: ")
    assert message in lines[0]
    assert not out.exists() and not saved.exists()
    assert r.stdout == ""


@pytest.mark.parametrize("args, message", [
    (["--set", "arg:0"], "expected VALUE=SHARDING"),
    ([], "no edit given"),
])
def test_cli_usage_errors(tmp_path, args, message):
    from click.testing import CliRunner

    from sdy_dl.cli import main

    src = tmp_path / "in.mlir"
    src.write_text(program("mlp"))
    r = CliRunner().invoke(main, ["whatif", str(src), *args])
    assert r.exit_code == 2
    assert r.stderr.count("\n") == 1 and message in r.stderr


# -- JAX --------------------------------------------------------------------------

def test_jax_paths_partition_specs_and_lines():
    import jax
    import jax.numpy as jnp

    import sdy_dl.jax

    ns, f32 = jax_programs._ns, jax_programs._f32

    def f(params, x):
        h = jnp.tanh(x @ params["w1"])
        h = jax.lax.with_sharding_constraint(h, ns("data", "model"))
        return h @ params["w2"]

    jitted = jax.jit(f, in_shardings=({"w1": ns(None, "model"), "w2": ns("model", None)},
                                      ns("data", None)))
    result = sdy_dl.jax.explain(jitted, {"w1": f32(16, 32), "w2": f32(32, 8)}, f32(8, 16),
                                engine="python")
    after, changes = result.whatif(set={"params['w1']": "P('data', None)"},
                                   drop_constraints=["%2"])
    arg, drop = changes.applied
    assert arg.after == '#sdy.sharding<@mesh, [{"data"}, {}]>'
    assert arg.jax_line == "in_shardings entry for params['w1']: NamedSharding(mesh, P('data', None))"
    line = f"{__file__}:{f.__code__.co_firstlineno + 2}"
    assert drop.jax_line == f"at {line}: remove the jax.lax.with_sharding_constraint"
    assert after.sharding("params['w1']") == '#sdy.sharding<@mesh, [{"data"}, {}]>'
    _, changes = result.whatif(set={"%2": "P(None, ('data', 'model'))"})
    assert changes.applied[0].after == '#sdy.sharding<@mesh, [{}, {"data", "model"}]>'
    assert changes.applied[0].jax_line == (
        f"at {line}: the jax.lax.with_sharding_constraint there becomes "
        "jax.lax.with_sharding_constraint(x, NamedSharding(mesh, P(None, ('data', 'model'))))")


def test_partition_spec_text():
    from sdy_dl.jax import sdy_to_spec, spec_to_sdy

    assert spec_to_sdy("P('data', None)", 3, "mesh") == '<@mesh, [{"data"}, {}, {}]>'
    assert spec_to_sdy("P(('data', 'model'), P.UNCONSTRAINED)", 2, "m") == \
        '<@m, [{"data", "model"}, {?}]>'
    assert sdy_to_spec('<@mesh, [{"data"}, {?}, {}]>') == "P('data', P.UNCONSTRAINED, None)"
    assert sdy_to_spec('<@mesh, [{"data"}p1, {}]>') is None
    for bad in ("P(1)", "Q('data')", "P('a', 'b')"):
        with pytest.raises(SdyError):
            spec_to_sdy(bad, 1, "mesh")
