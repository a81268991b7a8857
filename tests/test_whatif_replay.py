"""A what-if replays the first propagation's visits where they are provably its own
(:mod:`sdy_dl.propagation.replay`); everything it answers must be what the same
what-if answers without replay: the output, the provenance record for record
(every write with its cause, the shardings read first, the ops without a rule),
the explanation of every value, the conflicts and the what-if's lines.

Random modules (dataflow DAGs, and control flow with calls, whiles, cases and
barriers) with random argument edits make the runs diverge and re-align; the
counts show that they did, and that the GPT-like program's local edit replays
nearly every visit.  tests/test_whatif*.py check every what-if against a full
propagate of its edited input and against Shardy.
"""

from __future__ import annotations

import random

import pytest

from random_control_flow import random_control_flow_module
from random_modules import _mesh, _sharding, random_module
from sdy_dl import propagate
from sdy_dl.audit.whatif import Edit
from test_whatif_incremental import _annotated_args


def _tracer(audit) -> dict:
    """The audit's provenance with its keys named by the values they are (the two
    propagations' keys are pointers into different modules)."""
    names = {}
    for tag, record in sorted(audit.propagated.by_tag.items()):
        names.setdefault(record.key, tag)

    def name(key):
        return key if isinstance(key, tuple) else names[key]

    tracer = audit.tracer
    causes = {id(c): c for c in tracer.causes() + tracer.steps + tracer.edge_steps}
    return {
        "causes": sorted((c.index, c.kind, c.title, c.detail,
                          [(name(k), s) for k, s in c.inputs], dict(c.op) if c.op else None,
                          c.step, c.output, c.strategy, c.phase, c.first, c.at,
                          repr(c.decision)) for c in causes.values()),
        "steps": [c.index for c in tracer.steps],
        "edge_steps": [c.index for c in tracer.edge_steps],
        "writes": [(name(w.key), w.sharding, w.cause.index) for w in tracer.writes],
        "initial": {name(k): s for k, s in tracer.initial.items()},
        "no_rule": tracer.no_rule,
    }


def _answers(result, changes) -> dict:
    return {"text": result.text, "tracer": _tracer(result.audit),
            "explain": [result.explain(name).to_json() for name in result.values()],
            "conflicts": [c.to_json() for c in result.audit.conflicts()],
            "whatif": changes.lines()}


def _replayed_and_plain(text: str, edits_of, engine: str = "python", **options):
    """The what-if of ``edits_of(first result)`` with replay and without, compared;
    its replay (None: the what-if could not start from the imported module)."""
    before = propagate(text, engine=engine, **options)
    edits = edits_of(before)
    if not edits:
        return None
    replayed, changes = before.whatif(edits)
    fixpoints, before.audit.fixpoints = before.audit.fixpoints, None
    plain, plain_changes = before.whatif(edits)
    before.audit.fixpoints = fixpoints
    assert plain.audit.replay is None
    assert _answers(replayed, changes) == _answers(plain, plain_changes)
    if replayed.audit.replay is not None:
        _check_changes(before.audit, replayed.audit)
    return replayed.audit.replay


def _check_changes(first, edited) -> None:
    """The replay's ``changes`` are the values and main results whose final shardings
    differ between the two provenance records (keyed alike), and the ops holding
    them."""
    changes = edited.sharding_changes
    assert changes is edited.replay.changes is not None
    a, b = first.tracer, edited.tracer

    def final(tracer, other, key):
        # (a run that never read a key left it as stored: the other's first read, or
        # its own when both never read it)
        return tracer.final(key) if key in tracer.keys() else other.initial.get(key)

    keys = edited.propagated.keys
    differ = {v for v, k in enumerate(keys) if final(a, b, k) != final(b, a, k)}
    assert changes.values == differ
    assert changes.stored <= changes.values
    main = [i for k in a.keys() | b.keys() if isinstance(k, tuple)
            for i in [k[1]] if final(a, b, k) != final(b, a, k)]
    assert {i for _, i in changes.results} == set(main)
    slots = edited.replay.propagator.state.slots
    tags = [tag for tag, _, _ in edited.propagated._values]   # (value v's tag: o<op> or a<v>)
    for v in changes.stored:
        assert v not in slots   # (a slot)
        if tags[v][0].startswith("o"):
            assert int(tags[v][0][1:]) in changes.ops


def _random_edits(seed: int, sharding_of):
    def edits(before):
        rng = random.Random(seed)
        args = _annotated_args(before)
        picked = rng.sample(args, min(len(args), rng.randint(1, 2)))
        return [Edit("set", name, sharding_of(rng, shape)) for name, shape, _ in picked]
    return edits


def _totals(replays) -> dict:
    replays = [r for r in replays if r is not None]
    return {k: sum(getattr(r, k) for r in replays)
            for k in ("replayed", "run", "divergences", "realigned")} | {"runs": len(replays)}


@pytest.mark.parametrize("ops, limit", [(8, None), (14, None), (14, 1)])
def test_random_modules_replay_as_they_run(ops, limit, monkeypatch):
    """``limit``: replay stops for the pass once more values than this differ (the
    rest of the pass runs for real, mid-fixpoint)."""
    if limit is not None:
        from sdy_dl.propagation import replay

        monkeypatch.setattr(replay, "DIFF_LIMIT", limit)
    replays = []
    for seed in range(12):
        text = random_module(seed, ops)
        mesh = _mesh(random.Random(seed))   # (the module's mesh: its rng's first draw)
        replays.append(_replayed_and_plain(
            text, _random_edits(seed, lambda rng, shape: _sharding(rng, mesh, shape))))
    totals = _totals(replays)
    assert totals["runs"] >= 6 and totals["replayed"] and totals["run"], totals
    assert totals["divergences"] or limit is not None, totals


@pytest.mark.parametrize("options", [{}, {"keep_sharding_rules": True, "conservative": True}])
def test_control_flow_modules_replay_as_they_run(options):
    from random_control_flow import _sharding as control_sharding

    replays = []
    for seed in range(10):
        replays.append(_replayed_and_plain(
            random_control_flow_module(seed),
            _random_edits(seed, lambda rng, shape: control_sharding(rng)), **options))
    totals = _totals(replays)
    assert totals["runs"] >= 5 and totals["divergences"] and totals["realigned"], totals


def test_clingo_replays_as_it_runs():
    replay = _replayed_and_plain(random_control_flow_module(3), _random_edits(
        3, lambda rng, shape: '<@mesh, [{"b"}, {}]>'), engine="clingo")
    assert replay is not None and replay.replayed


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(40))
def test_many_random_modules_replay_as_they_run(seed):
    text = random_module(1000 + seed, 20)
    mesh = _mesh(random.Random(1000 + seed))
    _replayed_and_plain(text, _random_edits(seed, lambda rng, shape: _sharding(rng, mesh, shape)))
    _replayed_and_plain(random_control_flow_module(1000 + seed), _random_edits(
        seed, lambda rng, shape: __import__("random_control_flow")._sharding(rng)))


def test_a_local_edit_replays_nearly_every_visit():
    """A training step's last annotated argument given another sharding (as the
    benchmark's ``last`` what-if): most visits are replayed."""
    from test_whatif import program
    from test_whatif_incremental import _other

    def last(before):
        name, shape, current = _annotated_args(before)[-1]
        return [Edit("set", name, _other(shape, current))]
    replay = _replayed_and_plain(program("training_step"), last)
    assert replay is not None and replay.fixpoints == 5
    assert replay.replayed > 5 * replay.run, (replay.replayed, replay.run)


def test_a_replayed_visit_records_the_first_runs_cause():
    """The what-if's values are keyed as the first run's, and a replayed visit in step
    with the first run (same cause number, as many writes before) records the first
    run's cause object itself, with its op description; what it answers is the plain
    what-if's (``_replayed_and_plain`` compares every record)."""
    from test_whatif import program
    from test_whatif_incremental import _other

    before = propagate(program("training_step"), engine="python")
    name, shape, current = _annotated_args(before)[-1]
    after, _ = before.whatif([Edit("set", name, _other(shape, current))])
    first, edited = before.audit, after.audit
    assert edited.replay is not None and edited.replay.same_ops
    keys = {tag: r.key for tag, r in first.propagated.by_tag.items()}
    assert {tag: r.key for tag, r in edited.propagated.by_tag.items()} == keys
    ours = {id(c) for c in first.tracer.steps + first.tracer.edge_steps}
    shared = [c for c in edited.tracer.steps + edited.tracer.edge_steps if id(c) in ours]
    assert len(shared) > 10, len(shared)


def test_pushes_taken_from_the_record_are_the_notifications(monkeypatch):
    """A replayed visit enqueues the ops the record's visit did, without notifying,
    when every value's uses are in the record's order (``Replay.same_uses``): each
    such visit notifies for real here, and what it enqueues is checked against the
    record's; random modules and control flow, some whose copies reorder uses."""
    from sdy_dl.propagation.driver import Propagator

    take = Propagator.take
    checked = []

    def checking_take(self, op, site, step, output, applied, like=None, same_ops=False,
                      notified=None):
        if notified is None:
            return take(self, op, site, step, output, applied, like, same_ops)
        depth = len(self._worklist)
        cause = take(self, op, site, step, output, applied, like, same_ops)
        assert tuple(o.oid for o in self._worklist.stack[depth:]) == tuple(notified)
        checked.append(op.oid)
        return cause
    monkeypatch.setattr(Propagator, "take", checking_take)
    replays = []
    for seed in range(8):
        text = random_module(seed, 14)
        mesh = _mesh(random.Random(seed))
        replays.append(_replayed_and_plain(
            text, _random_edits(seed, lambda rng, shape: _sharding(rng, mesh, shape))))
        from random_control_flow import _sharding as control_sharding
        replays.append(_replayed_and_plain(
            random_control_flow_module(seed),
            _random_edits(seed, lambda rng, shape: control_sharding(rng))))
    replays = [r for r in replays if r is not None]
    assert checked and any(r.same_uses for r in replays)
    assert not all(r.same_uses for r in replays)   # (some copies order uses otherwise)


def test_pushes_follow_this_modules_use_lists():
    """A control-flow module whose copy orders a value's uses otherwise than the first
    run's module, where the order the notified ops are pushed in changes the
    answers: pushes are taken from the record only when the orders agree."""
    from random_control_flow import _sharding as control_sharding

    replay = _replayed_and_plain(random_control_flow_module(48), _random_edits(
        48, lambda rng, shape: control_sharding(rng)))
    assert replay is not None and replay.same and not replay.same_uses and replay.replayed


#: Two tensors sorted together (an op with several results: a write to one result
#: reads the others) and their uses.
SORTED_PAIR = """module @m {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                  %arg1: tensor<8x16xi32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>},
                  %arg2: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xi32>) {
    %0:2 = "stablehlo.sort"(%arg0, %arg1) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
      %p = stablehlo.compare GT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    }) {dimension = 1 : i64, is_stable = true} : (tensor<8x16xf32>, tensor<8x16xi32>) -> (tensor<8x16xf32>, tensor<8x16xi32>)
    %1 = stablehlo.add %0#0, %arg2 : tensor<8x16xf32>
    %2 = stablehlo.negate %1 : tensor<8x16xf32>
    %3 = stablehlo.convert %0#1 : (tensor<8x16xi32>) -> tensor<8x16xf32>
    %4 = stablehlo.multiply %2, %3 : tensor<8x16xf32>
    return %4, %0#1 : tensor<8x16xf32>, tensor<8x16xi32>
  }
}
"""


def _sorted_pair_edits(before):
    return [Edit("set", "%arg1", '<@mesh, [{"a"}, {}]>')]


def test_an_op_with_several_results_replays_as_it_runs():
    replay = _replayed_and_plain(SORTED_PAIR, _sorted_pair_edits)
    assert replay is not None and replay.replayed and replay.run


def _checked_readers(replay) -> int:
    """Every value a visit of any op may read (``Replay._reads``) names that op among
    its readers (``Replay._readers``, which runs of pops replayed at once stop at)."""
    prop = replay.propagator
    checked = 0
    for op in prop.module.ops:
        if op.oid in prop.erased:
            continue
        vids, site = replay._reads(op, lambda o, rule: ("BOTH",) * len(rule.factors))
        for vid in vids:
            assert op.oid in replay._readers(vid), (op.name, vid)
            checked += 1
    return checked


def test_readers_hold_every_op_that_reads_a_value(monkeypatch):
    """On dataflow DAGs, control flow (calls, whiles, cases, barriers: data-flow edges
    and their slots) and a training step (ops with several results), the readers
    of a value are a superset of the ops whose visits read it (checked when the
    pass ends, on the module it ran on)."""
    from sdy_dl.propagation.replay import Replay
    from test_whatif import program
    from test_whatif_incremental import _other
    from random_control_flow import _sharding as control_sharding

    def last(before):
        name, shape, current = _annotated_args(before)[-1]
        return [Edit("set", name, _other(shape, current))]
    cases = [(program("training_step"), last), (SORTED_PAIR, _sorted_pair_edits)]
    for seed in range(6):
        mesh = _mesh(random.Random(seed))
        cases.append((random_module(seed, 14), _random_edits(
            seed, lambda rng, shape, mesh=mesh: _sharding(rng, mesh, shape))))
        cases.append((random_control_flow_module(seed),
                      _random_edits(seed, lambda rng, shape: control_sharding(rng))))
    checked = []
    finish = Replay.finish

    def checking_finish(self):
        if self.same:
            checked.append(_checked_readers(self))
        finish(self)
    monkeypatch.setattr(Replay, "finish", checking_finish)
    for text, edits in cases:
        before = propagate(text, engine="python")
        edit = edits(before)
        if edit:
            before.whatif(edit)
    assert len(checked) > 6 and sum(checked) > 300, checked


def test_changes_hold_the_writes_after_the_last_fixpoint(monkeypatch):
    """The hand-over (``Replay.changes``) compares every value either run wrote after
    the last replayed fixpoint: here a write made after the last band (in every
    run, first, replayed and plain) copies the edited argument's sharding onto a
    value no fixpoint makes differ."""
    from sdy_dl.propagation.driver import Propagator

    text = """module @m {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                  %arg1: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>})
      -> (tensor<8x16xf32>, tensor<8x16xf32>) {
    %0 = stablehlo.negate %arg0 : tensor<8x16xf32>
    %1 = stablehlo.negate %arg1 : tensor<8x16xf32>
    return %0, %1 : tensor<8x16xf32>, tensor<8x16xf32>
  }
}
"""
    propagate_ = Propagator.propagate
    copied = []

    def propagate_then_copy(self, directions=None, progress=None):
        propagate_(self, directions, progress)
        if self.phase.endswith("band 4"):
            main = self.module.main_func()
            arg = main.regions[0].blocks[0].args[0]
            self.state.set(self.module.func_return(main).operands[1], self.state.get(arg))
            copied.append(self.state.get(arg))
    monkeypatch.setattr(Propagator, "propagate", propagate_then_copy)
    replay = _replayed_and_plain(text, lambda before: [
        Edit("set", "%arg0", '<@mesh, [{"b"}, {}]>')])
    assert replay is not None and replay.on and replay.fixpoints == 5
    assert len(set(map(str, copied))) == 2   # (the copies differ between the runs)


def test_runs_of_visits_leave_the_applied_steps_of_each_visit(monkeypatch):
    """A run of replayed visits made at once adds to the fixpoint's applied steps
    (what ``Propagator.take`` checks a step against) every step its visits
    applied: the same set as when each visit is replayed on its own."""
    from sdy_dl.propagation.replay import Replay
    from test_whatif import program
    from test_whatif_incremental import _other

    fixpoint = Replay.fixpoint
    seen: list = []

    def recording_fixpoint(self, prop, worklist, directions, applied):
        made = fixpoint(self, prop, worklist, directions, applied)
        if made is None:
            return None
        visit, end = made

        def ended():
            end()
            seen[-1].append(frozenset(applied))
        return visit, ended
    monkeypatch.setattr(Replay, "fixpoint", recording_fixpoint)
    before = propagate(program("training_step"), engine="python")
    name, shape, current = _annotated_args(before)[-1]
    edits = [Edit("set", name, _other(shape, current))]
    seen.append([])
    runs = before.whatif(edits)[0].audit.replay.runs
    monkeypatch.setattr(Replay, "_keys_same", lambda self: False)   # (no runs at once)
    seen.append([])
    assert before.whatif(edits)[0].audit.replay.runs == 0
    assert runs and len(seen[0]) == 5 and seen[0] == seen[1]


def _reductions_module(count: int) -> str:
    """``count`` reductions of ``%arg1`` (each reducer's block arguments cannot hold a
    sharding) added up, and ``%arg0`` doubled on its own."""
    lines = ['sdy.mesh @mesh = <["a"=2, "b"=2]>',
             'func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, '
             '[{"a"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, '
             '[{"a"}, {}]>}) -> (tensor<8x8xf32>, tensor<8xf32>) {',
             '  %0 = stablehlo.add %arg0, %arg0 : tensor<8x8xf32>',
             '  %c = stablehlo.constant dense<0.0> : tensor<f32>']
    for k in range(count):
        lines += [f'  %r{k} = stablehlo.reduce(%arg1 init: %c) across dimensions = [1] : '
                  '(tensor<8x8xf32>, tensor<f32>) -> tensor<8xf32>',
                  '   reducer(%a: tensor<f32>, %b: tensor<f32>) {',
                  '    %s = stablehlo.add %a, %b : tensor<f32>',
                  '    stablehlo.return %s : tensor<f32>',
                  '  }']
    total = "%r0"
    for k in range(1, count):
        lines.append(f'  %t{k} = stablehlo.add {total}, %r{k} : tensor<8xf32>')
        total = f"%t{k}"
    lines += [f'  return %0, {total} : tensor<8x8xf32>, tensor<8xf32>', '}']
    return "\n".join(lines) + "\n"


def test_pops_that_first_read_a_slot_without_a_sharding_replay_in_runs():
    """A reducer's block arguments cannot hold a sharding: the pops of its ops read
    them first, and are made in runs (reading their tensors as a replayed visit
    does), not one by one; everything answered is the plain what-if's."""
    replay = _replayed_and_plain(_reductions_module(12), lambda before: [
        Edit("set", "arg:0", '<@mesh, [{}, {"a"}]>')])
    assert replay is not None and replay.fixpoints == 5 and replay.replayed
    # (12 reducers of 2 ops each: one by one, they alone were 24 pops)
    assert replay.singles < 12, (replay.singles, replay.runs)


_SYNCED = """sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                %arg2: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>})
    -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"b", ?}]>}, tensor<8x8xf32>,
        tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = stablehlo.add %arg0, %arg0 : tensor<8x8xf32>
  %1 = stablehlo.multiply %arg1, %arg1 : tensor<8x8xf32>
  %2 = stablehlo.negate %arg2 : tensor<8x8xf32>
  return %0, %0, %1, %2 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}
"""


def test_result_syncs_replay_the_results_whose_reads_are_the_same():
    """Each result sync of main is the record's but for the results whose returned
    value or result differs (or was written by an earlier result's sync in the
    same sync: result 1 returns what result 0's annotation writes): those are
    synced for real; everything answered is the plain what-if's."""
    replays = [_replayed_and_plain(_SYNCED, lambda before, edit=edit: [Edit("set", *edit)])
               for edit in [("arg:0", '<@mesh, [{}, {"a"}]>'), ("arg:0", '<@mesh, [{"b"}, {}]>'),
                            ("arg:1", '<@mesh, [{}, {"b"}]>'), ("arg:2", '<@mesh, [{"a"}, {"b"}]>'),
                            ("arg:2", '<@mesh, [{}, {"a"}]>')]]
    assert all(r is not None and r.syncs == 10 for r in replays)
    # (syncs replayed, results synced in them for real), exact: %arg0's edits make
    # no replayed sync's result hot; %arg1's and %arg2's fewer results than
    # syncs (only the result returning %1 or %2 reads them), never all four
    assert [(r.syncs_replayed, r.results_synced) for r in replays] == \
        [(3, 0), (3, 0), (10, 7), (10, 9), (10, 9)]


def _results_and_reads_faulted(at: int, fault: str, monkeypatch) -> list:
    """Main's sync number ``at`` of each what-if starts from a state its record's
    sync did not (``fault``: result 0 held as another sharding, or the value
    result 2 returns not read yet), in the replayed what-if and the plain one
    alike; they answer alike.  Returns the results the replay synced for real
    in sync ``at`` (not those run once it was no longer in step)."""
    from sdy_dl.propagation.driver import Propagator
    from sdy_dl.sharding import parse_tensor_sharding

    before = propagate(_SYNCED, engine="python")
    sync, sync_result = Propagator._sync_main_results, Propagator.sync_result
    real = []

    def recorded(self, main, index, *args):
        calls = self.__dict__.get("calls")
        if calls is not None:
            calls.append(index)
        return sync_result(self, main, index, *args)

    def faulted(self, main):
        n = self.__dict__.get("made", 0)
        self.made = n + 1
        if n == at:
            state = self.state
            if fault == "result":
                state._results[(main.oid, 0)] = parse_tensor_sharding(
                    '<@mesh, [{?}, {"b", "c", ?}]>')
            else:
                state._value.pop(state.slot(self.module.func_return(main).operands[2]).vid)
            if self.replay is not None:   # (the replayed what-if's: its real syncs come first)
                count, self.calls = self.replay.results_synced, []
                sync(self, main)
                real.extend(self.calls[:self.replay.results_synced - count])
                del self.calls
                return
        sync(self, main)
    monkeypatch.setattr(Propagator, "_sync_main_results", faulted)
    monkeypatch.setattr(Propagator, "sync_result", recorded)
    edits = [Edit("set", "arg:2", '<@mesh, [{}, {"a"}]>')]
    replayed, changes = before.whatif(edits)
    fixpoints, before.audit.fixpoints = before.audit.fixpoints, None
    plain, plain_changes = before.whatif(edits)
    before.audit.fixpoints = fixpoints
    assert replayed.audit.replay.syncs_replayed and plain.audit.replay is None
    assert _answers(replayed, changes) == _answers(plain, plain_changes)
    return real


@pytest.mark.parametrize("at, fault", [(0, "result"), (3, "result"), (1, "read"), (5, "read")])
def test_a_result_sync_whose_reads_differ_from_the_records_runs(at, fault, monkeypatch):
    """The faulted result is synced for real in the faulted sync (unfaulted, this
    edit syncs only result 3 for real)."""
    real = _results_and_reads_faulted(at, fault, monkeypatch)
    assert (0 if fault == "result" else 2) in real, real
