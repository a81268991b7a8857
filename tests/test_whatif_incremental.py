"""What a what-if does not run again, and that its output is still exact.

A what-if that only gives annotated main arguments other shardings starts
from the first propagation's imported module (:mod:`sdy_dl.audit.whatif_import`):
no import stage runs.  Every what-if here is checked against a full
``propagate`` of its edited input and against Shardy on it, and each case says
whether the import stages ran: edits whose sharding is read first thing or
only late, in a called function, on a sharding-group member, with
priorities, and the edits that must run every stage.
"""

from __future__ import annotations

import pytest

from oracle import assert_same, normalize, shardy
from sdy_dl import propagate
from sdy_dl.audit.whatif import Edit
from test_whatif import PROGRAMS, _dims, _shape, program


@pytest.fixture
def import_runs(monkeypatch):
    """How many times the import pipeline ran (a list: one entry per run)."""
    from sdy_dl.passes import PASSES, PassSpec, get_pass

    spec = get_pass("import-pipeline")
    runs = []

    def run(module, options):
        runs.append(module)
        return spec.run(module, options)
    monkeypatch.setitem(PASSES, "import-pipeline", PassSpec(spec.name, spec.help, run, spec.options))
    return runs


def _exact(before, edits, runs, pass_options=None):
    """``before.whatif(edits)``, checked against a full propagate of the edited input
    and against Shardy's pipeline on it: (the new result, whether the what-if ran the
    import pipeline, as ``runs`` counts them)."""
    count = len(runs)
    after, _ = before.whatif(edits)
    ran = len(runs) > count
    engine = before.audit.options.context.engine
    assert after.text == propagate(after.edited_input, engine=engine,
                                   pass_options=pass_options).text
    pipeline = "sdy-propagation-pipeline" + (
        "{dedup-functions-fully=true}" if pass_options else "")
    assert_same(shardy(after.edited_input, pipeline), normalize(after.text))
    return after, ran


def _annotated_args(result) -> list:
    """The output names of main's arguments that have an input annotation, with shapes."""
    from sdy_dl.audit.whatif import resolve

    audit = result.audit
    out = []
    for v in audit.outputs.values:
        if v.value is None or not v.names[0].startswith("%arg") or v.func != "main":
            continue
        try:
            target = resolve(audit, Edit("unset", v.name))
        except Exception:
            continue
        if target.place == "arg" and target.current is not None and _shape(v):
            out.append((v.name, _shape(v), target.current.to_text()))
    return out


def _other(shape, current: str, priority: str = "") -> str:
    avoid = "model" if '"model"' in current else "data" if '"data"' in current else None
    return _dims(shape, [("model", 4), ("data", 2)], priority, avoid)


#: explicit_unreduced: these edits give a dot's operand a sharding along its reduction
#: factor that its unreduced result cannot have, and Shardy aborts (a CHECK in
#: insert-explicit-reshards) instead of answering.
@pytest.mark.parametrize("name", [n for n in PROGRAMS if n != "explicit_unreduced"])
def test_main_argument_edits_start_from_the_imported_module(name, import_runs):
    """On every program: the first annotated main argument given another sharding
    (the one propagation reads first), then the last one (read later) with a
    priority, then both at once; no import stage runs, and each is exact."""
    before = propagate(program(name), engine="python")
    args = _annotated_args(before)
    if not args:
        pytest.skip("no annotated main argument")
    (first, shape0, cur0), (last, shape1, cur1) = args[0], args[-1]
    ran = [_exact(before, [Edit("set", first, _other(shape0, cur0))], import_runs)[1],
           _exact(before, [Edit("set", last, _other(shape1, cur1, "p1"))], import_runs)[1]]
    if first != last:
        ran.append(_exact(before, [Edit("set", first, _other(shape0, cur0, "p0")),
                                   Edit("set", last, _other(shape1, cur1))], import_runs)[1])
    assert not any(ran)


def test_whatif_of_a_whatif_starts_from_its_imported_module(import_runs):
    """A what-if's result keeps its own imported module: a what-if of it (back to
    the first sharding) runs no import stage either and gives the first output."""
    before = propagate(program("mlp"), engine="python")
    after, ran = _exact(before, [Edit("set", "arg:0", '<@mesh, [{"model"}, {}]>')], import_runs)
    back, ran_back = _exact(after, [Edit("set", "arg:0", before.sharding("arg:0"))], import_runs)
    assert back.text == before.text
    assert not ran and not ran_back


GROUP = """sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}, %arg2: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>}) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  sdy.sharding_group %arg0 group_id=0 : tensor<8x8xf32>
  sdy.sharding_group %arg1 group_id=0 : tensor<8x8xf32>
  %0 = stablehlo.negate %arg1 : tensor<8x8xf32>
  %1 = stablehlo.add %0, %arg2 : tensor<8x8xf32>
  %2 = sdy.sharding_constraint %arg2 <@mesh, [{"b"}, {}]> : tensor<8x8xf32>
  return %1, %2 : tensor<8x8xf32>, tensor<8x8xf32>
}
"""


@pytest.mark.parametrize("edits, imported", [
    # a sharding-group member (the group is synced during propagation)
    ([Edit("set", "arg:0", '<@mesh, [{}, {"a"}]>')], True),
    # the argument a constraint reads (the constraint stays: the argument is sharded)
    ([Edit("set", "arg:2", '<@mesh, [{"a"}, {"b"}]>')], True),
    # priorities, one open dim
    ([Edit("set", "arg:1", '<@mesh, [{"b", ?}p0, {?}p1]>')], True),
    # an annotation removed: apply-sharding-constraints may now write the argument
    ([Edit("unset", "arg:2")], False),
    # a constraint edited or dropped
    ([Edit("set", "%3", '<@mesh, [{}, {"a"}]>')], False),
    ([Edit("drop", "%3")], False),
])
@pytest.mark.parametrize("engine", ["python", "clingo"])
def test_which_edits_run_the_import_stages(edits, imported, engine, import_runs):
    before = propagate(GROUP, engine=engine)
    assert _exact(before, edits, import_runs)[1] is not imported


UNANNOTATED = """sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32>, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> tensor<8x8xf32> {
  %0 = sdy.sharding_constraint %arg0 <@mesh, [{"b"}, {}]> : tensor<8x8xf32>
  %1 = stablehlo.add %0, %arg1 : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
"""

SIZE_ONE = """sdy.mesh @mesh = <["a"=2, "one"=1, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.negate %arg0 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
"""

TWO_MESHES = """sdy.mesh @mesh = <["a"=2, "b"=2]>
sdy.mesh @other = <["c"=4]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.negate %arg0 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
"""


@pytest.mark.parametrize("text, edit", [
    # an argument without an annotation, read by a constraint that applies to it
    (UNANNOTATED, Edit("set", "arg:0", '<@mesh, [{}, {"a"}]>')),
    # a mesh with an axis of size one (remove-size-one-axes rewrites shardings)
    (SIZE_ONE, Edit("set", "arg:0", '<@mesh, [{"one", "b"}, {}]>')),
    # another mesh (symbol-dce keeps another set of meshes)
    (TWO_MESHES, Edit("set", "arg:0", '<@other, [{"c"}, {}]>')),
])
def test_edits_the_import_stages_may_see_differently_run_them(text, edit, import_runs):
    before = propagate(text, engine="python")
    assert _exact(before, [edit], import_runs)[1]


@pytest.mark.parametrize("dedup", [False, True])
def test_called_functions(dedup, import_runs):
    """A helper called three times: an edit of main's argument starts from the
    imported module (the calls were imported already), an edit inside the helper
    (cloned or kept whole by the import stages) runs them; both modes."""
    import call_programs
    import lowering

    text = lowering.once("call_programs", "repeated_dense", call_programs.repeated_dense)
    given = {"dedup-functions-fully": True} if dedup else None
    before = propagate(text, engine="python", pass_options=given)
    helper = next(v.name for v in before.audit.outputs.values
                  if v.func not in ("main", "") and v.op == "stablehlo.dot_general")
    assert not _exact(before, [Edit("set", "arg:1", '<@mesh, [{"model"}, {}]>')], import_runs,
                      given)[1]
    assert _exact(before, [Edit("set", helper, '<@mesh, [{"model"}, {}]>')], import_runs, given)[1]


def _index_view(index) -> tuple:
    """A propagation index without its tracer keys (pointers, which differ between
    runs): each record by tag, the tags sharing a key, the links with each key
    given as those tags."""
    tags_of = {key: tuple(sorted(t for t, r in index.by_tag.items() if r.key == key))
               for key in index.by_key}
    records = {t: (r.op, r.is_edge, r.owner, r.place, tags_of[r.key],
                   (r.origin.names, r.origin.sharding) if r.origin is not None else None)
               for t, r in index.by_tag.items()}
    links = [(link.tag, link.name, link.owner, link.manual, tuple(tags_of[k] for k in link.keys))
             for link in index.links]
    return records, sorted(tags_of.values()), links


@pytest.mark.parametrize("name", ["training_step", "while_loop", "grad_scan_helpers", "shard_map"])
def test_index_of_a_whatif_from_the_imported_module_is_its_own(name, import_runs):
    """A what-if started from the first propagation's imported module takes its
    propagation index from the first's (records and links remade with its own
    tracer keys, nothing tagged again): the index, every value's explanation and
    the conflicts are those of a full propagate of the edited input; and so for a
    what-if of that what-if."""
    before = propagate(program(name), engine="python")
    args = _annotated_args(before)
    if not args:
        pytest.skip("no annotated main argument")
    (first, shape0, cur0), (last, shape1, cur1) = args[0], args[-1]
    after, ran = _exact(before, [Edit("set", first, _other(shape0, cur0))], import_runs)
    again, ran_again = _exact(after, [Edit("set", last, _other(shape1, cur1, "p0"))], import_runs)
    assert not ran and not ran_again
    for result in (after, again):
        assert result.audit.propagated._first is not None
        full = propagate(result.edited_input, engine="python")
        assert _index_view(result.audit.propagated) == _index_view(full.audit.propagated)
        for out in result.audit.outputs.values:
            assert str(result.explain(out.name)) == str(full.explain(out.name)), out.name
        assert ([c.to_json() for c in result.audit.conflicts()]
                == [c.to_json() for c in full.audit.conflicts()])
