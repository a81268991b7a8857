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
phase and strategy, the ops erased before it, its initial stack, and per pop
the op popped, whether it was erased already or died, the provenance cause
its visit recorded, where its writes end in the log, the ops it pushed and
the ids of the stack's entries (every entry gets a number: the initial ones
0..n-1, each push the next; ``top`` is the top entry's id after the pop).

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
then makes those effects through the same code (``Propagator._take``: the
quiet-cache entry or the ``applied`` pair, the tracer's record, the writes
with their notifications, so the pushes are the real ones; they are compared
with the record's, as the order of notifications is the order of the
module's use lists, which a copy of a module need not keep), and keeps what
a real visit leaves behind although it changes no sharding: the site is
looked up (its rule, ``visited_rules``, the tracer's ops without a rule) and
the site tensors read (the tracer's initial shardings).  What it skips is
the search for the step: the dead-op test, the quiet checks, building and
hashing the step input, the memo.  The invariants hold after the visit,
with ``D`` unchanged (its writes are site tensors, outside ``D``).

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

Between fixpoints both runs do the same non-fixpoint work for real (result
syncs, user-priority rewrites); a fixpoint is replayed when its phase,
strategy and erased set are the record's, starting from the record's
initial stack (the two initial stacks differ only in ops left out because
popping them does nothing, see ``Propagator._fixpoint``), with ``D``
updated over the writes made since the last fixpoint ended.  The first
fixpoint's ``D`` starts from the main arguments whose stored sharding is not
the one the first run read.  Anything else (sharding groups, no tracer, a
pass with another name, a fixpoint that does not match) runs for real and
ends replay for the pass.
"""

from __future__ import annotations

from bisect import bisect_left

from sdy_dl.ir.storage import is_shardable, stored_sharding
from sdy_dl.ir.traits import COMPUTATION_OPS, OWN_SHARDING_OPS

#: Not read and not written (the sharding stored in the module).
_STORED = object()


class FixpointTrace:
    """One fixpoint of a recorded pass (see the module docstring)."""

    __slots__ = ("phase", "strategy", "erased", "initial", "log_start", "ops", "flags",
                 "causes", "log_end", "pushes", "first_id", "top", "erasures")

    def __init__(self, phase: str, strategy: str, erased: frozenset, initial: list[int],
                 log_start: int):
        self.phase, self.strategy, self.erased = phase, strategy, erased
        self.initial = initial           # the initial stack, bottom first, as op numbers
        self.log_start = log_start       # the pass's write log length when it began
        self.ops: list[int] = []         # per pop: the op popped
        self.flags: list[int] = []       # 0 visited, 1 erased before, 2 erased ops
        self.causes: list = []           # the provenance cause recorded (None: none)
        self.log_end: list[int] = []     # the write log's length after the pop
        self.pushes: list = []           # the ops pushed (a tuple; None: none)
        self.first_id: list[int] = []    # the id of the first push
        self.top: list[int] = []         # the id of the top entry after the pop (-1: empty)
        self.erasures: dict[int, tuple] = {}   # pop -> the ops it erased, in order

    def log_after(self, i: int) -> int:
        """The write log's length after pop ``i`` (-1: before the first)."""
        return self.log_end[i] if i >= 0 else self.log_start


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
        self._writes: dict | None = None

    def start(self, propagator, name: str) -> bool:
        """Record ``propagator``'s fixpoints (False: it cannot be replayed later)."""
        self.name = name
        if propagator.groups.by_vid or propagator.state.tracer is None:
            self.usable = False
            return False
        propagator.recorder = self
        propagator.state.log, propagator.state.read0 = self.log, self.read0
        return True

    def share_priorities(self, propagator, static: dict, decided: dict) -> tuple[dict, dict]:
        """The (static parts, decisions) an ``OpPriorities`` of ``propagator`` uses:
        the recording run's own, kept; a replaying run's are the recorded ones
        (functions of the module's structure and rules, which are the record's),
        and it takes the rules the recording run looked up: its first band looked
        up every op's (``OpPriorities._static_part``), as the replaying run's
        would, with the same rules (``RunContext.rule_memo``)."""
        if propagator.recorder is self:
            if self.usable:
                self.priorities = (static, decided, propagator._rules, propagator.visited_rules,
                                   propagator.state.tracer.no_rule)
            return static, decided
        if not self.usable or self.priorities is None or propagator.erased:
            return static, decided
        static, decided, rules, visited, no_rule = self.priorities
        propagator._rules.update(rules)
        propagator.visited_rules.update(visited)
        propagator.state.tracer.no_rule |= no_rule
        return static, decided

    def sharding_at(self, vid: int, at: int):
        """The sharding of ``vid`` when the write log had ``at`` entries (``_STORED``:
        not read or written by then)."""
        if self._writes is None:
            writes: dict[int, tuple[list, list]] = {}
            for n, (v, s) in enumerate(self.log):
                found = writes.get(v)
                if found is None:
                    found = writes[v] = ([], [])
                found[0].append(n)
                found[1].append(s)
            self._writes = writes
        found = self._writes.get(vid)
        if found is not None:
            k = bisect_left(found[0], at)
            if k:
                return found[1][k - 1]
        return self.read0.get(vid, _STORED)

    def fixpoint(self, propagator, worklist, directions, applied: set, progress) -> None:
        """Run ``propagator``'s fixpoint from ``worklist`` for real, recording it."""
        stack, pending = worklist._stack, worklist._pending
        rec = FixpointTrace(propagator.phase, propagator.strategy, frozenset(propagator.erased),
                            [op.oid for op in stack], len(self.log))
        self.fixpoints.append(rec)
        ids = list(range(len(stack)))
        next_id = len(stack)
        log, erased, order, visit = self.log, propagator.erased, propagator.erase_order, \
            propagator._visit
        ops, flags, causes, log_end = rec.ops, rec.flags, rec.causes, rec.log_end
        pushes, first_id, top = rec.pushes, rec.first_id, rec.top
        visits = 0
        while stack:
            op = stack.pop()
            oid = op.oid
            pending.discard(oid)
            ids.pop()
            visits += 1
            if visits % 512 == 0:
                progress(visits, len(stack), propagator.steps_evaluated, propagator.engine_calls)
            depth = len(stack)
            if oid in erased:
                flag, cause = 1, None
            else:
                before = len(order)
                cause = visit(op, directions, applied)
                flag = 0
                if len(order) != before:
                    flag = 2
                    rec.erasures[len(ops)] = tuple(order[before:])
            ops.append(oid)
            flags.append(flag)
            causes.append(cause)
            log_end.append(len(log))
            first_id.append(next_id)
            n = len(stack) - depth
            if n:
                pushes.append(tuple([o.oid for o in stack[depth:]]))
                ids.extend(range(next_id, next_id + n))
                next_id += n
            else:
                pushes.append(None)
            top.append(ids[-1] if ids else -1)


class ReplayOf:
    """Asks a propagation (``RunContext.fixpoints``) to replay ``trace``; given only
    to a propagation of the recorded pass's module with other shardings on main
    arguments (``Audit(imported=...)``).  ``replay``: the :class:`Replay` made."""

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
        self.on = trace.done and trace.usable and propagator.state.tracer is not None \
            and not propagator.groups.by_vid
        self.next = 0                    # the record's next fixpoint
        self.diff: set[int] | None = None   # D at the end of the last fixpoint
        self.edited: set[int] = set()    # slots whose stored shardings differ
        self.trace_mark = 0              # the record's log length at the last fixpoint end
        self.mark = 0                    # ... and this run's
        self._read_sets: dict[int, tuple] = {}
        self._ready: set[int] = set()     # ops whose site tensors were read
        self.replayed = 0                # visits replayed
        self.run = 0                     # visits run for real in a replayed fixpoint
        self.fixpoints = 0               # fixpoints replayed
        self.divergences = 0             # times the stacks became different
        self.realigned = 0               # ... and equal again

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
        ours = self.propagator.state._value.get(vid, _STORED)
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

    def _reads(self, op, directions) -> tuple:
        """(the value ids a visit of ``op`` may read, ``op``'s site): the site tensors'
        slots and, for a slot defined by an op with several results, those results
        (the state's setter reads them).  The site is the first looked up: a
        replayed visit reads its tensors, the step and its directions are the
        record's."""
        prop = self.propagator
        site = prop.site_of(op, directions)
        vids = set()
        slot = prop.state.slot
        for value in site.tensors if site is not None else ():
            s = slot(value)
            vids.add(s.vid)
            definer = s.defining_op
            if (definer is not None and len(definer.results) > 1
                    and definer.name not in OWN_SHARDING_OPS
                    and definer.name not in COMPUTATION_OPS):
                for other in definer.results:
                    vids.add(other.vid)
                    vids.add(slot(other).vid)
        found = self._read_sets[op.oid] = (frozenset(vids), site)
        return found

    # -- one fixpoint --------------------------------------------------------------

    def fixpoint(self, prop, worklist, directions, applied: set, progress) -> bool:
        """Run ``prop``'s fixpoint, replaying the record's visits where they are
        provably this run's; False (nothing done): the fixpoint is not the
        record's next, and replay ends for the pass."""
        trace = self.trace
        if not self.on or self.next >= len(trace.fixpoints):
            self.on = False
            return False
        rec = trace.fixpoints[self.next]
        if rec.phase != prop.phase or rec.strategy != prop.strategy or rec.erased != prop.erased:
            self.on = False
            return False
        self.next += 1
        self.fixpoints += 1
        if self.diff is None:
            self.diff = self._start_diff()
        log = self.log
        diff = self.diff
        self._update(diff, {v for v, _ in trace.log[self.trace_mark:rec.log_start]}
                     | {v for v, _ in log[self.mark:]}, rec.log_start)

        module_ops = prop.module.ops
        stack = worklist._stack = [module_ops[o] for o in rec.initial]
        pending = worklist._pending = set(rec.initial)
        ids = list(range(len(stack)))
        fresh = -1
        r_ops, r_flags, r_causes, r_pushes = rec.ops, rec.flags, rec.causes, rec.pushes
        r_first, r_top = rec.first_id, rec.top
        visit, order, reads, read_sets = prop._visit, prop.erase_order, self._reads, self._read_sets
        state = prop.state
        get, take, ready = state.get, prop._take, self._ready
        replayed = 0
        i = 0                      # aligned: the record's next pop
        aligned = True
        since = 0                  # diverged: the record's pop where it diverged
        mark = 0                   # ... and this run's log length then
        erased_since = False       # ... and whether an op was erased since
        visits = 0
        while stack:
            op = stack.pop()
            oid = op.oid
            pending.discard(oid)
            ids.pop()
            visits += 1
            if visits % 512 == 0:
                progress(visits, len(stack), prop.steps_evaluated, prop.engine_calls)
            depth = len(stack)
            if aligned:
                if r_ops[i] != oid:
                    raise AssertionError("replay lost its alignment")
                flag = r_flags[i]
                if flag == 1:
                    i += 1
                    continue   # erased in both runs
                if flag == 0 and diff.isdisjoint((read_sets.get(oid) or reads(op, directions))[0]):
                    replayed += 1
                    site = read_sets[oid][1]
                    if site is not None:
                        if oid not in ready:   # (read as the visit reads them)
                            for value in site.tensors:
                                get(value)
                            ready.add(oid)
                        cause = r_causes[i]
                        if cause is not None:
                            take(op, site, cause.step, cause.output, applied, cause)
                    n = len(stack) - depth
                    if not n and r_pushes[i] is None:
                        i += 1
                        continue
                    # (the same ops notified, in the order of this module's use lists)
                    same = tuple([o.oid for o in stack[depth:]]) == r_pushes[i]
                    erased_now = False
                else:
                    self.run += 1
                    before, written = len(order), len(log)
                    visit(op, directions, applied)
                    at = rec.log_after(i)
                    changed = {v for v, _ in log[written:]}
                    changed.update(v for v, _ in trace.log[rec.log_after(i - 1):at])
                    self._update(diff, changed, at)
                    n = len(stack) - depth
                    erased_now = len(order) != before or i in rec.erasures
                    same = ((tuple([o.oid for o in stack[depth:]]) or None) == r_pushes[i]
                            and tuple(order[before:]) == rec.erasures.get(i, ()))
                if same:
                    if n:
                        ids.extend(range(r_first[i], r_first[i] + n))
                else:
                    aligned = False
                    since, mark, erased_since = i, len(log), erased_now
                    ids.extend(range(fresh, fresh - n, -1))
                    fresh -= n
                    self.divergences += 1
                i += 1
                continue
            # diverged: run for real until the stacks are equal again
            self.run += 1
            before = len(order)
            visit(op, directions, applied)
            erased_since = erased_since or len(order) != before
            n = len(stack) - depth
            ids.extend(range(fresh, fresh - n, -1))
            fresh -= n
            top = ids[-1] if ids else -1
            if erased_since or (ids and top < 0):
                continue
            j = r_top.index(top, since)
            if any(since < k <= j for k in rec.erasures):
                erased_since = True
                continue
            at = rec.log_after(j)
            changed = {v for v, _ in log[mark:]}
            changed.update(v for v, _ in trace.log[rec.log_after(since):at])
            self._update(diff, changed, at)
            aligned, i = True, j + 1
            self.realigned += 1
        self.replayed += replayed
        if not aligned:
            self.on = False   # D is not known: the rest of the pass runs for real
        self.diff = diff
        self.trace_mark = rec.log_after(len(r_ops) - 1)
        self.mark = len(log)
        return True
