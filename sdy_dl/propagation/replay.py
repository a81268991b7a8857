"""Replaying the visits a propagation shares with an earlier one of the same module.

A what-if whose edits only give main-function arguments other shardings
propagates a module that is the first propagation's, op for op and value for
value, with other shardings on those arguments (``audit/whatif_import.py``).
Its fixpoints pop mostly the same ops with the same shardings as the first
run's did; such visits are *replayed* from a record of the first run instead
of being worked out again, without changing the order of anything.

**The record** (:class:`PassTrace`, filled by :meth:`PassTrace.fixpoint` in the
first run): the write log of the whole pass (every ``(vid, sharding)`` stored,
in order, with each slot's sharding as first read) and, per fixpoint, its
phase and strategy, the ops erased before it, its initial stack, per pop the
provenance cause its visit recorded and, for the pops that did so, the ops
it pushed, where its writes end in the log and the ops it erased.  Every
stack entry has an id: the initial ones 0..n-1, each push the next
(``FixpointTrace.top``: the top entry's id after each pop).

**Why a replayed visit is the visit.**  A visit of op X reads: whether X is
erased and the live uses of its results (the erased set), the op-priority
directions (a function of the live uses), the shardings of X's site tensors
(and, when it writes a value of a multi-result op, that op's other results:
:meth:`Replay._reads`), the worklist's pending set, and caches whose content
never changes an answer (sites, ``may_die``, the quiet-step cache: each
entry is checked against the write stamps, which every write below
updates).  The edited run (B) keeps, while *aligned* with the record at pop
``i``, three invariants: its stack equals the record's stack before pop
``i`` (so B pops the same op, and the pending sets agree), its erased set
equals the record's, and its shardings equal the record's state before pop
``i`` except on a set ``D`` of value ids (a superset of the differences is
enough).  If X's reads miss ``D``, B's visit reads exactly what the first
run's did, so it does exactly what it did: the same step input (the
recorded cause's), the same output, writes, pushes and provenance.  Replay
then makes those effects through the same code (``Propagator.take``: the
quiet-cache entry or the ``applied`` pair; the tracer's record
(``ProvenanceTracer.begin_like``), which *is* the recorded cause when B is in
step with the record (the same cause number, as many writes before, the
same keys: a what-if's values are keyed as the first run's), else a copy
with this run's number and keys; the writes; their notifications, which
follow the module's use lists: when every value's uses are in the record's
order (``same_uses``; a copy of a module need not keep it), with equal
stacks they enqueue exactly the record's pushes, which are pushed instead,
otherwise they are made and compared with the record's).  It keeps what a
real visit leaves behind although it changes no sharding: the op's site is
looked up (its rule, ``visited_rules``, the tracer's ops without a rule; the
site found first is used from then on, as its directions only go into the
step, which is the record's) and the site tensors are read before the visit
writes any (the tracer's initial shardings, a dict read by key).  What it
skips is the search for the step: the dead-op test, the quiet checks,
building and hashing the step input, the memo (a pop that did nothing in the
record, of an op whose tensors were read, costs a few lookups).  The
invariants hold after the visit, with ``D`` unchanged (its writes are site
tensors, outside ``D``).

**Runs of replayed visits at once.**  While aligned, the pops up to the next
one whose op may read a value of ``D`` or a slot not read yet that can hold a
sharding (a superset of its readers, :meth:`Replay._readers`, built from the
module's uses and edges for those values only), or that erased ops, are each a
replayed visit (a slot that cannot hold one reads as None: the pops in the run
that may read one first read their site tensors as a replayed visit does); when
the tracer is in step, values are keyed as the record's and the record's rules
were taken, they are made together: the record's causes and tracer writes
(``ProvenanceTracer.take_in_step``), its writes stamped in order
(``ShardingState.take_writes``), its pushes (with ``same_uses``) and applied
steps.  The pops themselves are not stepped (the first run records the op of
each, ``FixpointTrace.popped``); what they leave out are cache entries (quiet
steps, sites, read sets: a quiet entry made earlier stays true, as it holds
for its write count).

A visit whose reads meet ``D``, and every visit that erases ops, runs for
real.  Then ``D`` is updated over the values either run wrote at that pop
(compared with the record's sharding at the same point of the log); if the
pushes and erasures equal the record's, the stacks are equal again and B
stays aligned.  Otherwise B *diverges*: it runs every visit for real, giving
its pushes fresh (negative) ids, until its top entry carries an id of the
record's at a pop ``j`` at or after the divergence.  An entry's id is kept
while it is on the stack, and the entries under it are never touched while
it is there, so B's stack below that entry is the record's below it when it
was pushed: B's stack *equals* the record's after pop ``j`` (an empty stack
equals the record's after its last pop).  If neither run erased an op since
the divergence, B re-aligns at ``j + 1`` with ``D`` updated over every value
either run wrote since (no other value can have changed whether it
differs); otherwise it runs the rest of the pass for real.

Between fixpoints both runs do the same non-fixpoint work (user-priority
rewrites for real; the main function's result syncs replayed result by
result where their reads are the record's, :meth:`Replay.sync`, recorded per
result as :class:`SyncTrace`); a fixpoint is replayed when its phase,
strategy and erased set are the record's, starting from the record's
initial stack (the two initial stacks differ only in ops left out because
popping them does nothing, see ``Propagator._fixpoint``), with ``D``
updated over the writes made since the last fixpoint ended.  The first
fixpoint's ``D`` starts from the main arguments whose stored sharding is not
the one the first run read.  Anything else (sharding groups, no tracer, a
pass with another name or another number of ops or values, a fixpoint that
does not match) runs for real and ends replay for the pass; so does a
replay in which more than ``DIFF_LIMIT`` values differ, from that visit on
(visits that read them run for real, at more cost than in a plain
fixpoint).  The op
priorities' static parts and decisions, functions of the module's structure
and rules, are the record's too (:meth:`PassTrace.share_priorities`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from itertools import compress
from operator import itemgetter

from sdy_dl.ir.storage import is_shardable, stored_result_sharding, stored_sharding
from sdy_dl.propagation.state import results_share_a_slot

#: Replay stops for the pass when more values than this differ: a visit that reads
#: one runs for real, and costs more in a replay than in a plain fixpoint.
DIFF_LIMIT = 256

#: Not read and not written (the sharding stored in the module).
_STORED = object()


class FixpointTrace:
    """One fixpoint of a recorded pass (see the module docstring): per pop its cause,
    and, only for the pops that did so, the pushes, the writes and the erasures."""

    __slots__ = ("phase", "strategy", "erased", "initial", "log_start", "writes_start",
                 "causes", "popped", "pushes", "wrote", "log_len", "writes_len", "erasures",
                 "_top", "_applied")

    def __init__(self, phase: str, strategy: str, erased: frozenset, initial: list[int],
                 log_start: int, writes_start: int):
        self.phase, self.strategy, self.erased = phase, strategy, erased
        self.initial = initial           # the initial stack, bottom first, as op numbers
        self.log_start = log_start       # the pass's write log length when it began
        self.writes_start = writes_start   # ... and its tracer's writes
        self.causes: list = []           # per pop: the provenance cause recorded (None: none)
        self.popped: list[int] = []      # per pop: the op popped
        self.pushes: dict[int, tuple] = {}     # pop -> (id of its first push, ops pushed)
        self.wrote: list[int] = []       # the pops that wrote, in order ...
        self.log_len: list[int] = []     # ... and the write log's length after each
        self.writes_len: list[int] = []  # ... and the tracer's writes
        self.erasures: dict[int, tuple] = {}   # pop -> the ops it erased, in order
        self._top: list[int] | None = None
        self._applied: tuple[list, list] | None = None

    def applied_steps(self) -> tuple[list[int], list[tuple]]:
        """(the pops whose step changed something, their ``(op, step)`` pairs as
        ``Propagator.take`` adds them to the applied set), in order; worked out
        from the causes when first asked for."""
        if self._applied is None:
            pops, keys, causes, popped = [], [], self.causes, self.popped
            for p in compress(range(len(causes)), causes):
                output = causes[p].output
                if any(output.operands) or any(output.results):
                    pops.append(p)
                    keys.append((popped[p], causes[p].step))
            self._applied = (pops, keys)
        return self._applied

    def log_after(self, i: int) -> int:
        """The write log's length after pop ``i`` (-1: before the first)."""
        k = bisect_right(self.wrote, i)
        return self.log_len[k - 1] if k else self.log_start

    def writes_after(self, i: int) -> int:
        """The recording tracer's number of writes after pop ``i`` (-1: before the first)."""
        k = bisect_right(self.wrote, i)
        return self.writes_len[k - 1] if k else self.writes_start

    @property
    def top(self) -> list[int]:
        """Per pop, the id of the stack's top entry after it (-1: empty), worked out
        from the pushes when first asked for (only a replay that diverged asks)."""
        if self._top is None:
            ids = list(range(len(self.initial)))
            top, pushes = [], self.pushes
            for i in range(len(self.causes)):
                ids.pop()
                pushed = pushes.get(i)
                if pushed is not None:
                    ids.extend(range(pushed[0], pushed[0] + len(pushed[1])))
                top.append(ids[-1] if ids else -1)
            self._top = top
        return self._top


class PassTrace:
    """The record of one propagation pass's fixpoints (see the module docstring):
    given empty to a propagation (``RunContext.fixpoints``), its first propagation
    pass fills it; :class:`Replay` reads it."""

    def __init__(self):
        self.name = ""                   # the pass recorded
        self.done = False                # the pass ended (nothing more is recorded)
        self.usable = True               # recorded completely (no sharding groups, a tracer)
        self.fixpoints: list[FixpointTrace] = []
        self.log: list[tuple] = []       # (vid, sharding) of every write of the pass
        self.read0: dict = {}            # vid -> its sharding as first read
        #: the op priorities' static parts by op and directions by signature
        #: (``priorities.OpPriorities``) and the rules looked up, shared with the
        #: replaying propagations (:meth:`share_priorities`)
        self.priorities: tuple | None = None
        #: the directions by op the first band looked up (``OpPriorities.band``), taken
        #: by a replaying run: its first band sees the same module and use counts
        self.first_band: dict | None = None
        #: what user-priority propagation read of every value before its fixpoints
        #: (``priorities.sharding_sites``): (vid, sharding) in order, the values
        #: wanted (by vid) and the manual axes of the slots read (by vid)
        self.site_reads: list | None = None
        self.site_wanted: list[int] = []
        self.manual: dict = {}
        self._writes: dict | None = None
        self.size = (0, 0)               # the module's ops and values
        self.describe_op = None          # the recording tracer's op describer
        self.uses: dict | None = None    # its propagator's use_orders() when it began
        self.tracer = None               # the recording tracer (its writes are read)
        self.values: list = []           # the recorded module's values (their keys are read)
        #: the main function's result syncs, in order (:class:`SyncTrace`)
        self.syncs: list[SyncTrace] = []
        #: when the pass ended: the function-result shardings held ((func op, index) ->
        #: sharding) and the ops erased
        self.results: dict = {}
        self.erased: frozenset = frozenset()

    def start(self, propagator, name: str) -> bool:
        """Record ``propagator``'s fixpoints (False: it cannot be replayed later)."""
        self.name = name
        if propagator.groups.by_vid or propagator.state.tracer is None:
            self.usable = False
            return False
        propagator.recorder = self
        propagator.state.log, propagator.state.read0 = self.log, self.read0
        self.describe_op = propagator.state.tracer.describe_op
        self.tracer, self.values = propagator.state.tracer, propagator.module.values
        self.size = (len(propagator.module.ops), len(propagator.module.values))
        self.uses = propagator.use_orders()
        return True

    def end(self, propagator) -> None:
        """The recorded pass ended: keep what it left that the log does not hold."""
        self.done = True
        if propagator.recorder is self:
            self.results = propagator.state.held_results()
            self.erased = frozenset(propagator.erased)

    def share_priorities(self, propagator, static: dict,
                         decided: dict) -> tuple[dict, dict, dict | None]:
        """The (static parts, decisions, first band's directions by op or None) an
        ``OpPriorities`` of ``propagator`` uses: the recording run's own, kept
        (its first band's directions are kept when made, :attr:`first_band`); a
        replaying run's are the recorded ones (functions of the module's
        structure, rules and, before any op is erased, use counts, which are the
        record's), and it takes the rules the recording run looked up: its first
        band looked up every op's (``OpPriorities._static_part``), as the
        replaying run's would, with the same rules (``RunContext.rule_memo``)."""
        if propagator.recorder is self:
            if self.usable:
                tracer = propagator.state.tracer
                self.priorities = (static, decided, *propagator.looked_up_rules(),
                                   tracer.no_rule, tracer.ruled)
            return static, decided, None
        if (self.priorities is None or propagator.erased or propagator.replay is None
                or not propagator.replay.same):
            return static, decided, None
        static, decided, rules, visited, no_rule, ruled = self.priorities
        propagator.adopt_rules(rules, visited)
        propagator.state.tracer.no_rule |= no_rule
        propagator.state.tracer.ruled.extend(ruled)
        propagator.replay.rules_shared = True
        return static, decided, self.first_band

    def sites_read(self, propagator, before: int, wanted: list[int]) -> None:
        """The recording run's ``sharding_sites`` read its values (its ``read0`` had
        ``before`` entries) and wanted those numbered ``wanted``."""
        if propagator.recorder is self:
            self.site_reads = list(self.read0.items())[before:]
            self.site_wanted = wanted
            self.manual = propagator.state.manual_slots()

    def sync_begins(self, propagator, main, ret) -> "SyncTrace":
        """The recording run's ``propagator`` syncs ``main``'s results with what ``ret``
        returns: what it holds now, and ``mark`` to call before each result's sync
        and at the end (:meth:`sync_ends` is told what it wrote)."""
        state = propagator.state
        tracer, log = state.tracer, self.log
        sync = SyncTrace(len(self.fixpoints), propagator.phase, propagator.strategy,
                         state.results_of(main, len(ret.operands)))
        logs, begun, writes = sync.logs, sync.begun, sync.writes

        def mark() -> None:
            logs.append(len(log))
            begun.append(tracer.begun)
            writes.append(len(tracer.writes))
        sync.mark = mark
        return sync

    def sync_ends(self, propagator, sync: "SyncTrace", written: list) -> None:
        """The sync :meth:`sync_begins` described ended, having written ``written``
        ((result index, sharding)) to the function's results."""
        sync.mark = None
        if propagator.recorder is self and not self.done:
            sync.written = written
            self.syncs.append(sync)

    def sharding_at(self, vid: int, at: int):
        """The sharding of ``vid`` when the write log had ``at`` entries (``_STORED``:
        not read or written by then)."""
        if self._writes is None:
            writes: dict[int, list[int]] = {}
            for n, v in enumerate(map(itemgetter(0), self.log)):
                found = writes.get(v)
                if found is None:
                    writes[v] = [n]
                else:
                    found.append(n)
            self._writes = writes
        found = self._writes.get(vid)
        if found is not None:
            k = bisect_left(found, at)
            if k:
                return self.log[found[k - 1]][1]
        return self.read0.get(vid, _STORED)

    def fixpoint(self, propagator, worklist, directions, applied: set):
        """(visit, end) of ``propagator``'s fixpoint from ``worklist``
        (``Propagator.drain``): each visit runs for real and is recorded."""
        stack = worklist.stack
        writes = propagator.state.tracer.writes
        rec = FixpointTrace(propagator.phase, propagator.strategy, frozenset(propagator.erased),
                            [op.oid for op in stack], len(self.log), len(writes))
        self.fixpoints.append(rec)
        log, order = self.log, propagator.erase_order
        visit = propagator.visitor(directions, applied)
        causes, popped, pushes, erasures, wrote, log_len, writes_len = (
            rec.causes, rec.popped, rec.pushes, rec.erasures, rec.wrote, rec.log_len,
            rec.writes_len)
        next_id, written, traced = len(stack), len(log), len(writes)

        def record(op) -> None:
            nonlocal next_id, written, traced
            i = len(causes)
            depth, before = len(stack), len(order)
            causes.append(visit(op))   # (None for an op erased before: it does nothing)
            popped.append(op.oid)
            if len(order) != before:
                erasures[i] = tuple(order[before:])
            if len(stack) != depth:
                pushed = tuple([o.oid for o in stack[depth:]])
                pushes[i] = (next_id, pushed)
                next_id += len(pushed)
            if len(log) != written or len(writes) != traced:
                written, traced = len(log), len(writes)
                wrote.append(i)
                log_len.append(written)
                writes_len.append(traced)
        return record, _nothing


def _nothing() -> None:
    pass


@dataclass
class SyncTrace:
    """One sync of the main function's results with the values it returns
    (``Propagator._sync_results``) in a recorded pass: when it ran (after how many
    fixpoints, in which phase and strategy), the results held before it
    (``ShardingState.results_of``), and before each result's sync and at its end
    the write log's length, the causes begun and the tracer's writes; the results
    it wrote, (index, sharding) in order."""

    fixpoints: int
    phase: str
    strategy: str
    results: tuple
    logs: list = field(default_factory=list)
    begun: list = field(default_factory=list)
    writes: list = field(default_factory=list)
    written: list = field(default_factory=list)
    mark: object = None


@dataclass(frozen=True)
class ReplayedPassChanges:
    """What a replaying propagation pass left different from the recorded one's, by
    the numbers of the model the passes ran on (both runs number alike; value
    ``v`` is tagged ``a<v>`` or ``o<op>``, result ``r``, by ``PropagationIndex``,
    so the numbers name the same values in both outputs).  Exact: each sharding
    is compared with the record's (an edited main argument the record never
    read counts as changed)."""

    #: the values whose sharding differs: the slots in ``stored`` and every value
    #: reading its sharding through one of them (a data-flow edge's targets)
    values: frozenset
    #: the values whose own sharding attribute is written otherwise (the slots)
    stored: frozenset
    #: (function op, result index) whose result sharding differs
    results: frozenset
    #: the ops whose sharding attributes differ (the definers or block owners of
    #: ``stored``, the functions of ``results``) or that only one run erased
    ops: frozenset
    #: the ops only one of the runs erased
    erased: frozenset


class ReplayOf:
    """Asks a propagation (``RunContext.fixpoints``) to replay ``trace``; given only
    to a propagation of the recorded pass's module with other shardings on main
    arguments, on the same mesh symbols (``Audit(imported=...)``,
    ``audit.whatif_import``: the recorded run checked its shapes and meshes).
    ``replay``: the :class:`Replay` made."""

    def __init__(self, trace: PassTrace):
        self.trace = trace
        self.replay: Replay | None = None


class Replay:
    """Replays a :class:`PassTrace` in a propagation of the same module whose main
    arguments may have other shardings (see the module docstring); counts the
    visits replayed and run."""

    def __init__(self, trace: PassTrace, propagator):
        self.trace = trace
        self.propagator = propagator
        self.log: list[tuple] = []       # this run's writes, as the record's
        propagator.state.log = self.log
        module = propagator.module
        #: the record is of this module's pass, complete and replayable
        self.same = (trace.done and trace.usable and propagator.state.tracer is not None
                     and not propagator.groups.by_vid
                     and trace.size == (len(module.ops), len(module.values)))
        self.on = self.same
        #: this run's tracer describes ops as the record's (its causes' descriptions
        #: are taken, ``ProvenanceTracer.begin_like``)
        describe, theirs = getattr(propagator.state.tracer, "describe_op", None), trace.describe_op
        self.same_ops = (describe is not None and theirs is not None
                         and describe.describes_as(theirs))
        #: the uses of every value are in the record's order: a replayed visit's
        #: writes notify the ops the record's did (pushed, not notified)
        self.same_uses = self.same and propagator.use_orders() == trace.uses
        self.next = 0                    # the record's next fixpoint
        self.diff: set[int] | None = None   # D at the end of the last fixpoint
        self.edited: set[int] = set()    # slots whose stored shardings differ
        self.trace_mark = 0              # the record's log length at the last fixpoint end
        self.mark = 0                    # ... and this run's
        self._read_sets: dict[int, tuple] = {}
        self._ready: set[int] = set()     # ops whose site tensors were read (or have none)
        #: the shardings that differ from the record's when the pass ended
        #: (:class:`ReplayedPassChanges`, made by :meth:`finish`; None before, or when
        #: the record is not of this module)
        self.changes: ReplayedPassChanges | None = None
        self.replayed = 0                # visits replayed
        self.run = 0                     # visits run for real in a replayed fixpoint
        self.fixpoints = 0               # fixpoints replayed
        self.divergences = 0             # times the stacks became different
        self.realigned = 0               # ... and equal again
        self.runs = 0                    # runs of pops replayed at once
        self.syncs = 0                   # result syncs made so far
        self.syncs_replayed = 0          # ... replayed (hot results synced for real)
        self.results_synced = 0          # results synced for real in them
        #: vid of a slot main's result syncs read -> the results reading it (made at
        #: the first sync: main's return op and its operands stay as they are)
        self._sync_reads: dict[int, list[int]] | None = None
        self.singles = 0                 # pops made one by one while aligned
        #: the record's rules were taken (``PassTrace.share_priorities``): a visit
        #: not made looks up no rule the record's did not
        self.rules_shared = False
        self._same_keys: bool | None = None
        self._inverse: dict[int, list[int]] | None = None
        self._by_source: dict[int, list[int]] | None = None
        self._readers_of: dict[int, set[int]] = {}
        self._unread: set[int] | None = None

    # -- D ------------------------------------------------------------------

    def _start_diff(self) -> set[int]:
        """The slots of main arguments whose stored sharding is not what the record read
        (or the record never read it)."""
        prop = self.propagator
        main = prop.module.main_func()
        edited = set()
        if main is not None and main.regions and main.regions[0].blocks:
            read0 = self.trace.read0
            for arg in main.regions[0].blocks[0].args:
                slot = prop.state.slot(arg)
                if read0.get(slot.vid, _STORED) is _STORED or read0[slot.vid] != self._stored(slot.vid):
                    edited.add(slot.vid)
        self.edited = edited
        return set(edited)

    def _stored(self, vid: int):
        value = self.propagator.module.values[vid]
        return stored_sharding(value) if is_shardable(value) else None

    def _differs(self, vid: int, at: int) -> bool:
        """Whether ``vid``'s sharding now differs from the record's when its log had
        ``at`` entries (True when that is not known)."""
        theirs = self.trace.sharding_at(vid, at)
        ours = self.propagator.state.held(vid, _STORED)
        if theirs is _STORED:
            if vid in self.edited:
                return True
            if ours is _STORED:
                return False
            theirs = self._stored(vid)
        elif ours is _STORED:
            ours = self._stored(vid)
        return ours != theirs

    def _update(self, diff: set[int], written, at: int) -> None:
        """Bring ``diff`` (D) up to the record's log length ``at``: only values either
        run wrote since D was last exact can have changed whether they differ."""
        differs = self._differs
        for vid in written:
            if differs(vid, at):
                diff.add(vid)
            else:
                diff.discard(vid)

    # -- the end of the pass --------------------------------------------------------

    def finish(self) -> None:
        """The pass ended (before its shardings are written back): make
        :attr:`changes`.  While replay was on, ``D`` brought up to the end of both
        logs is the slots that may differ; once it was off, every slot either
        run wrote, or edited, may; each is compared with the record's."""
        prop, trace = self.propagator, self.trace
        if not self.same:
            return   # (not the record's module, or not comparable with it)
        at = len(trace.log)
        if self.on and self.diff is not None:
            maybe = set(self.diff) | {v for v, _ in trace.log[self.trace_mark:]}
            maybe.update(v for v, _ in self.log[self.mark:])
        else:
            if self.diff is None:
                self._start_diff()
            maybe = {v for v, _ in trace.log} | {v for v, _ in self.log}
        maybe |= self.edited
        differs = self._differs
        stored = frozenset(v for v in maybe if differs(v, at))
        values = set(stored)
        for vid, slot in prop.state.slots.items():
            if slot.vid in stored:
                values.add(vid)
        held = prop.state.held_results()
        results = set()
        for key in held.keys() | trace.results.keys():
            ours, theirs = held.get(key, _STORED), trace.results.get(key, _STORED)
            if ours is _STORED or theirs is _STORED:
                func = prop.module.ops[key[0]]
                ours = stored_result_sharding(func, key[1]) if ours is _STORED else ours
                theirs = stored_result_sharding(func, key[1]) if theirs is _STORED else theirs
            if ours != theirs:
                results.add(key)
        erased = frozenset(prop.erased ^ trace.erased)
        module_values = prop.module.values
        ops = set(erased)
        for vid in stored:
            value = module_values[vid]
            owner = value.defining_op if value.defining_op is not None else value.block.region.owner
            ops.add(owner.oid)
        ops.update(oid for oid, _ in results)
        self.changes = ReplayedPassChanges(frozenset(values), stored, frozenset(results),
                                           frozenset(ops), erased)

    def _reads(self, op, directions) -> tuple:
        """(the value ids a visit of ``op`` may read, ``op``'s site): the site tensors'
        slots and, for a slot defined by an op with several results, those results
        (the state's setter reads them).  The site is the first looked up: a
        replayed visit reads its tensors, the step and its directions are the
        record's."""
        prop = self.propagator
        site = prop.site_of(op, directions)
        found = self._read_sets[op.oid] = (
            self._slots_read(prop, site.tensors if site is not None else ()), site)
        return found

    def read_sites(self, wanted) -> list[int] | None:
        """``priorities.sharding_sites``'s reads of every value, made as the record's
        (the same values read in the same order, each stored as the record read
        it but the edited main arguments, the same manual slots and tracer keys);
        returns the values (by vid) whose sharding is ``wanted``: the record's
        but the edited arguments, asked again.  None: the record has none, or
        this run read something already (the values are then read one by one)."""
        trace, state = self.trace, self.propagator.state
        tracer = state.tracer
        if (trace.site_reads is None or not self.same or state.read_vids() or tracer.initial
                or not self._keys_same()):
            return None
        if self.diff is None:
            self.diff = self._start_diff()
        edited, values = self.edited, self.propagator.module.values
        reads = trace.site_reads
        if edited:
            reads = [(vid, self._stored(vid)) if vid in edited else (vid, s) for vid, s in reads]
        state.take_reads(reads, trace.manual)
        tracer.initial.update([(values[vid].pointer, s) for vid, s in reads])
        read = {vid for vid, _ in reads} & edited
        found = [vid for vid in trace.site_wanted if vid not in edited]
        found.extend(vid for vid in read if wanted(state.get(values[vid])))
        return sorted(found)

    # -- result syncs -----------------------------------------------------------------

    def sync(self, prop, main, ret) -> bool:
        """Make ``prop``'s sync of ``main``'s results with what ``ret`` returns,
        replaying the record's sync at the same place where its reads are the same
        (False: that sync is not known to be this one's, or the tracer is not in
        step with it: it runs).  Result ``j``'s sync reads the slot of the value
        returned for it (and, for a slot defined by an op with several results,
        those results: the state's setter reads them) and result ``j``, and writes
        only those.  The results whose reads meet ``D``, were not read yet, or
        whose result differs from the record's before its sync are *hot*: each is
        synced for real, and ``D`` brought up over what either run wrote then
        (which may make later results hot); the runs between them take the
        record's causes, writes and result writes, while the tracer is in step
        with the record (once it is not, the rest runs for real)."""
        k = self.syncs
        self.syncs += 1
        trace = self.trace
        if not self.on or k >= len(trace.syncs) or trace.tracer is None:
            return False
        rec = trace.syncs[k]
        state = prop.state
        tracer = state.tracer
        values = ret.operands
        n = len(values)
        if (rec.fixpoints != self.next or rec.phase != prop.phase or len(rec.results) != n
                or rec.strategy != prop.strategy or not self._keys_same()
                or tracer.begun != rec.begun[0] or len(tracer.writes) != rec.writes[0]):
            return False
        if self.diff is None:
            self.diff = self._start_diff()
        diff = self.diff
        logs, begun, writes, theirs = rec.logs, rec.begun, rec.writes, trace.tracer.writes
        # (D brought up to the sync: exact for both logs' lengths now)
        self._update(diff, {v for v, _ in trace.log[self.trace_mark:logs[0]]}
                     | {v for v, _ in self.log[self.mark:]}, logs[0])
        self.trace_mark, self.mark = logs[0], len(self.log)
        if self._sync_reads is None:
            self._sync_reads = by_vid = {}
            for j, value in enumerate(values):
                for vid in self._slots_read(prop, (value,)):
                    by_vid.setdefault(vid, []).append(j)
        by_vid = self._sync_reads
        held, manual = state.held, state.manual_slots()
        hot = {j for j, (ours, recorded) in enumerate(zip(state.results_of(main, n), rec.results))
               if ours is not recorded and ours != recorded}
        for vid, found in by_vid.items():
            if vid in diff or vid in manual or held(vid, _STORED) is _STORED:
                hot.update(found)
        pending = sorted(hot)
        written = rec.written
        at_written = [j for j, _ in written]
        j = 0
        while True:
            h = pending.pop(0) if pending else n
            if h > j:   # (results j .. h-1: the record's, while the tracer is in step)
                if not tracer.take_causes_in_step(begun[j], writes[j], begun[h],
                                                  theirs[writes[j]:writes[h]]):
                    self._sync_rest(prop, main, values, j)
                    return True
                state.take_writes(trace.log[logs[j]:logs[h]])
                state.take_results(main, written[bisect_left(at_written, j):bisect_left(at_written, h)])
            if h == n:
                break
            before = len(self.log)
            value = values[h]
            prop.sync_result(main, h, value, prop.result_sync_step(main, h, value), [])
            self.results_synced += 1
            if tracer.begun != begun[h + 1] or len(tracer.writes) != writes[h + 1]:
                self._sync_rest(prop, main, values, h + 1)
                return True
            gained = {v for v, _ in self.log[before:]} | {v for v, _ in trace.log[logs[h]:logs[h + 1]]}
            had = len(diff)
            self._update(diff, gained, logs[h + 1])
            if len(diff) != had or not diff.isdisjoint(gained):
                for vid in gained & diff:
                    pending.extend(i for i in by_vid.get(vid, ()) if i > h)
                pending = sorted(set(pending))
            j = h + 1
        self.trace_mark, self.mark = logs[n], len(self.log)
        self.syncs_replayed += 1
        return True

    @staticmethod
    def _sync_rest(prop, main, values, start: int) -> None:
        """Sync ``main``'s results from ``start`` on for real (the tracer is no longer
        in step with the record)."""
        for index in range(start, len(values)):
            value = values[index]
            prop.sync_result(main, index, value, prop.result_sync_step(main, index, value), [])

    @staticmethod
    def _slots_read(prop, values) -> frozenset:
        """The slots (by vid) reading or writing ``values`` reads: each one's slot and,
        for a slot defined by an op with several results, those results and their
        slots."""
        vids = set()
        slot = prop.state.slot
        for value in values:
            s = slot(value)
            vids.add(s.vid)
            definer = s.defining_op
            if results_share_a_slot(definer):
                for other in definer.results:
                    vids.add(other.vid)
                    vids.add(slot(other).vid)
        return frozenset(vids)

    # -- runs of pops replayed at once -------------------------------------------------

    def _keys_same(self) -> bool:
        """Every slot is keyed as the record's (a cause recorded in step has the
        record's keys: ``ProvenanceTracer.take_in_step``)."""
        if self._same_keys is None:
            slots, theirs = self.propagator.state.slots, self.trace.values
            values = self.propagator.module.values
            self._same_keys = len(theirs) == len(values) and all(
                v.pointer is not None and v.pointer == theirs[v.vid].pointer
                for v in values if v.vid not in slots)
        return self._same_keys

    def _readers(self, vid: int) -> set[int]:
        """A superset of the ops (by number) whose read sets (:meth:`_reads`) may hold
        ``vid``: every op that has, among its site tensors, a value read through
        ``vid`` (its slot, or, for a result of an op with several results, any
        result of that op or their slots): those values' users and definers, and
        the data-flow edges they are sources of."""
        found = self._readers_of.get(vid)
        if found is not None:
            return found
        prop = self.propagator
        values = prop.module.values
        if self._inverse is None:
            self._inverse, self._by_source = {}, {}
            for v, slot in prop.state.slots.items():
                self._inverse.setdefault(slot.vid, []).append(v)
            for edge in prop.edges:
                for source in edge.sources:
                    self._by_source.setdefault(source.vid, []).append(edge.op.oid)
            for oid, sources in prop.func_edge_sources().items():
                for source in sources:
                    self._by_source.setdefault(source.vid, []).append(oid)
        inverse, by_source = self._inverse, self._by_source
        tensors = {vid, *inverse.get(vid, ())}
        for t in list(tensors):
            definer = values[t].defining_op
            if results_share_a_slot(definer):
                for other in definer.results:
                    tensors.add(other.vid)
                    tensors.update(inverse.get(other.vid, ()))
        found = set()
        for t in tensors:
            value = values[t]
            if value.defining_op is not None:
                found.add(value.defining_op.oid)
            found.update([user.oid for user, _ in value.uses])
            found.update(by_source.get(t, ()))
        self._readers_of[vid] = found
        return found

    def _unread_slots(self) -> set[int]:
        """The slots (by vid) this run has not read yet: a visit that reads one for the
        first time is made (it reads them as the visit does)."""
        state = self.propagator.state
        read = state.read_vids()
        if self._unread is None:
            self._unread = set(range(len(self.propagator.module.values)))
            self._unread.difference_update(read)
            self._unread.difference_update(state.slots.keys())
        else:
            self._unread = {vid for vid in self._unread if vid not in read}
        return self._unread

    # -- one fixpoint --------------------------------------------------------------

    def fixpoint(self, prop, worklist, directions, applied: set):
        """(visit, end) of ``prop``'s fixpoint (``Propagator.drain``), replaying the
        record's visits where they are provably this run's; None: the fixpoint is
        not the record's next, and replay ends for the pass."""
        trace = self.trace
        if not self.on or self.next >= len(trace.fixpoints):
            self.on = False
            return None
        rec = trace.fixpoints[self.next]
        if rec.phase != prop.phase or rec.strategy != prop.strategy or rec.erased != prop.erased:
            self.on = False
            return None
        self.next += 1
        self.fixpoints += 1
        if self.diff is None:
            self.diff = self._start_diff()
        log = self.log
        diff = self.diff
        self._update(diff, {v for v, _ in trace.log[self.trace_mark:rec.log_start]}
                     | {v for v, _ in log[self.mark:]}, rec.log_start)

        module_ops = prop.module.ops
        worklist.restart(list(map(module_ops.__getitem__, rec.initial)), rec.initial)
        stack = worklist.stack
        ids = list(range(len(stack)))
        r_causes, r_pushes, r_erasures = rec.causes, rec.pushes, rec.erasures
        visit = prop.visitor(directions, applied)
        order, reads, read_sets = prop.erase_order, self._reads, self._read_sets
        state, erased = prop.state, prop.erased
        get, take, ready, same_ops = state.get, prop.take, self._ready, self.same_ops
        same_uses = self.same_uses
        unchanged = diff.isdisjoint
        fresh = -1
        replayed = 0
        i = 0                      # aligned: the record's next pop
        aligned = True
        stopped = False            # too many values differ: the rest runs for real
        since = 0                  # diverged: the record's pop where it diverged
        mark = 0                   # ... and this run's log length then
        erased_since = False       # ... and whether an op was erased since

        # Runs of pops replayed at once: while aligned, the pops up to the next one
        # whose op may read a value of D, or a slot not read yet (``hot``; its
        # readers, ``_readers``), or that erased ops (``stops``) are each a
        # replayed visit in step with the record, and together make exactly the
        # record's effects: its causes and writes (the tracer in step, the same
        # keys and op descriptions), its stamped writes, its pushes (``same_uses``)
        # and applied steps; what they leave out are cache entries (quiet steps,
        # sites, read sets), which never change an answer, and rule look-ups,
        # which the record's rules taken make (``rules_shared``).
        popped, n_pops = rec.popped, len(r_causes)
        pushing = list(r_pushes)   # (in pop order)
        tracer, theirs = state.tracer, trace.tracer.writes if trace.tracer is not None else None
        jumping = (same_uses and same_ops and self.rules_shared and theirs is not None
                   and len(popped) == n_pops and self._keys_same())
        pending = worklist.pending
        hot: set[int] = set()
        stops: list[int] = []
        reading: list[int] = []    # the pops whose visits may read a slot first
        values = prop.module.values
        at_stop = 0
        stale = True               # D gained values since ``stops`` was made

        def refresh() -> None:
            nonlocal hot, stops, at_stop, stale, reading
            unread = self._unread_slots()
            # (a slot that cannot hold a sharding reads as None whenever it is read:
            # the pops that may read it first are made in a run, reading their
            # tensors as a replayed visit does)
            soft = {vid for vid in unread if vid not in diff and not is_shardable(values[vid])}
            hot = set(diff) | (unread - soft)
            readers = set()
            for vid in hot:
                readers |= self._readers(vid)
            found = set(compress(range(i, n_pops), map(readers.__contains__, popped[i:])))
            found.update(p for p in r_erasures if p >= i)
            stops, at_stop, stale = sorted(found), 0, False
            first = set()
            for vid in soft:
                first |= self._readers(vid)
            first -= readers
            reading = list(compress(range(i, n_pops), map(first.__contains__, popped[i:])))

        def read_first(k: int) -> None:
            """The reads of the replayed visits of pops ``i`` to ``k - 1`` that may read a
            slot first: their site tensors, as :func:`replay` reads them."""
            for p in reading[bisect_left(reading, i):bisect_left(reading, k)]:
                oid = popped[p]
                if oid in ready or oid in erased:
                    continue
                site = (read_sets.get(oid) or reads(module_ops[oid], directions))[1]
                for value in site.tensors if site is not None else ():
                    get(value)
                ready.add(oid)

        def jump(k: int) -> bool:
            """Replay pops ``i`` (popped) to ``k - 1`` at once (False: the tracer is not
            in step, nothing done)."""
            nonlocal replayed
            if not tracer.take_in_step(list(filter(None, r_causes[i:k])),
                                       theirs[rec.writes_after(i - 1):rec.writes_after(k - 1)]):
                return False
            read_first(k)
            applied_pops, applied_keys = rec.applied_steps()
            lo, hi = bisect_left(applied_pops, i), bisect_left(applied_pops, k)
            if lo < hi:
                keys = applied_keys[lo:hi]
                if not applied.isdisjoint(keys):
                    from sdy_dl.propagation.driver import no_fixpoint_error

                    p = next(applied_pops[lo + n] for n, key in enumerate(keys) if key in applied)
                    raise no_fixpoint_error(module_ops[popped[p]])
                applied.update(keys)
            last = i   # (the last pop made)
            for q in pushing[bisect_left(pushing, i):bisect_left(pushing, k)]:
                if q > last:
                    del stack[last - q:], ids[last - q:]
                    pending.difference_update(popped[last + 1:q + 1])
                first, ops = r_pushes[q]
                stack.extend([module_ops[o] for o in ops])
                ids.extend(range(first, first + len(ops)))
                pending.update(ops)
                last = q
            if k - 1 > last:
                del stack[last + 1 - k:], ids[last + 1 - k:]
                pending.difference_update(popped[last + 1:k])
            state.take_writes(trace.log[rec.log_after(i - 1):rec.log_after(k - 1)])
            replayed += k - i
            self.runs += 1
            return True

        def replay(op) -> None:
            nonlocal fresh, replayed, i, aligned, stopped, since, mark, erased_since, jumping
            nonlocal at_stop, stale
            if stopped:
                self.run += 1
                visit(op)
                return
            oid = op.oid
            ids.pop()
            if aligned:
                if jumping:
                    if stale:
                        refresh()
                    while at_stop < len(stops) and stops[at_stop] < i:
                        at_stop += 1
                    k = stops[at_stop] if at_stop < len(stops) else n_pops
                    if k > i + 1:
                        if jump(k):
                            i = k
                            return
                        jumping = False
                self.singles += 1
                cause = r_causes[i]
                known = read_sets.get(oid)
                if (cause is None and known is not None and oid in ready and unchanged(known[0])
                        and i not in r_pushes and i not in r_erasures and oid not in erased):
                    replayed += 1   # (a visit that did nothing, its tensors read before)
                    i += 1
                    return
                depth = len(stack)
                if oid in erased:
                    i += 1
                    return   # erased in both runs
                if cause is not None and cause.title != op.name:
                    raise AssertionError("replay lost its alignment")
                if i not in r_erasures and unchanged((known or reads(op, directions))[0]):
                    replayed += 1
                    site = read_sets[oid][1]
                    if oid not in ready:   # (its tensors read as the visit reads them)
                        for value in site.tensors if site is not None else ():
                            get(value)
                        ready.add(oid)
                    pushed = r_pushes.get(i)
                    if cause is not None and site is not None:
                        take(op, site, cause.step, cause.output, applied, cause, same_ops,
                             (pushed[1] if pushed else ()) if same_uses else None)
                    n = len(stack) - depth
                    if not n and pushed is None:
                        i += 1
                        return
                    # (the same ops notified, in the order of this module's use lists)
                    same = pushed is not None and len(pushed[1]) == n and (same_uses or tuple(
                        [o.oid for o in stack[depth:]]) == pushed[1])
                    erased_now = False
                else:
                    self.run += 1
                    before, written = len(order), len(log)
                    visit(op)
                    at = rec.log_after(i)
                    changed = {v for v, _ in log[written:]}
                    changed.update(v for v, _ in trace.log[rec.log_after(i - 1):at])
                    self._update(diff, changed, at)
                    stale = stale or not diff <= hot
                    n = len(stack) - depth
                    if len(diff) > DIFF_LIMIT:
                        stopped, aligned = True, False
                        return
                    pushed = r_pushes.get(i)
                    erased_now = len(order) != before or i in r_erasures
                    same = (tuple([o.oid for o in stack[depth:]]) == (pushed[1] if pushed else ())
                            and tuple(order[before:]) == r_erasures.get(i, ()))
                if same:
                    if n:
                        ids.extend(range(pushed[0], pushed[0] + n))
                else:
                    aligned = False
                    since, mark, erased_since = i, len(log), erased_now
                    ids.extend(range(fresh, fresh - n, -1))
                    fresh -= n
                    self.divergences += 1
                i += 1
                return
            # diverged: run for real until the stacks are equal again
            self.run += 1
            depth, before = len(stack), len(order)
            visit(op)
            erased_since = erased_since or len(order) != before
            n = len(stack) - depth
            ids.extend(range(fresh, fresh - n, -1))
            fresh -= n
            top = ids[-1] if ids else -1
            if erased_since or (ids and top < 0):
                return
            j = rec.top.index(top, since)
            if any(since < k <= j for k in r_erasures):
                erased_since = True
                return
            at = rec.log_after(j)
            changed = {v for v, _ in log[mark:]}
            changed.update(v for v, _ in trace.log[rec.log_after(since):at])
            self._update(diff, changed, at)
            if len(diff) > DIFF_LIMIT:
                stopped = True
                return
            aligned, i = True, j + 1
            stale = stale or not diff <= hot
            self.realigned += 1

        def end() -> None:
            self.replayed += replayed
            if not aligned:
                self.on = False   # D is not known: the rest of the pass runs for real
            self.trace_mark = rec.log_after(len(r_causes) - 1)
            self.mark = len(log)
        return replay, end
