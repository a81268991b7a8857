"""One propagation fixpoint over a module, scheduled like Shardy's greedy driver.

Python owns the schedule only: the worklist order (§7.3), which ops are
notified when a sharding changes, dead-op erasure and the function-result
syncs.  Every per-op decision is a ``StepInput`` evaluated by the Datalog
program (``step_eval``); steps are evaluated in batches and memoised by
their full input, so a batch computed ahead for pending ops is reused only
when those ops see exactly the same shardings when they are popped.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from sdy_dl.errors import SdyError
from sdy_dl.ir import Module, Op, Value
from sdy_dl.ir.manual_axes import add_free_axes, erase_manual_axes, manual_axes
from sdy_dl.ir.storage import stored_sharding
from sdy_dl.ir.traits import DATA_FLOW_OPS
from sdy_dl.ir.walk import walk_model
from sdy_dl.propagation.edges import (DataFlowEdge, call_sites, callee_of, find_edges,
                                     func_edge_sources, func_symbol, slot_map)
from sdy_dl.propagation.groups import GroupCopies
from sdy_dl.propagation.state import ShardingState, value_key
from sdy_dl.propagation.step import StepInput, StepOutput
from sdy_dl.propagation.traits import has_no_effects, is_elementwise
from sdy_dl.propagation.worklist import Worklist
from sdy_dl.rules.instance import Factor, RuleInstance
from sdy_dl.sharding import TensorSharding

#: (op, rule) -> one direction per factor; the default is BOTH everywhere.
DirectionFn = Callable[[Op, RuleInstance], tuple[str, ...]]

BATCH_LIMIT = 256
#: Speculation stops after this many simulated pops without a new step (fewer pops
#: cost less than the few more engine calls they leave: docs/performance.md).
SPECULATION_IDLE = 16

#: The step strategies one propagation runs, in order, per propagation-strategy option.
STRATEGY_SEQUENCES = {"basic": ("basic",), "aggressive": ("aggressive",),
                      "basic-then-aggressive": ("basic", "aggressive")}

#: sdy's PropagationDirection enum values, as stored in ``allowed_direction``.
BARRIER_DIRECTIONS = ("NONE", "FORWARD", "BACKWARD", "BOTH")



@functools.lru_cache(maxsize=None)
def identity_rule(shape: tuple[int, ...], operands: int, results: int) -> RuleInstance:
    """One factor per dim, shared by every tensor (barriers, edges, result syncs);
    one instance per distinct (shape, operands, results)."""
    dims = tuple((d,) for d in range(len(shape)))
    return RuleInstance(tuple(Factor(size) for size in shape), (dims,) * operands, (dims,) * results)


class _Site:
    """What one popped op propagates between: its tensors and its rule."""

    def __init__(self, operands: list[Value], results: list[Value], rule: RuleInstance,
                 directions: tuple[str, ...], elementwise: bool, conservative: bool = False,
                 fixed_directions: bool = False):
        self.operands = operands
        self.results = results
        self.rule = rule
        self.directions = directions
        self.elementwise = elementwise
        self.conservative = conservative   # only registered ops propagate conservatively
        # The edge's transformTargetSharding (manual computations, §8.6): the target
        # sharding as the step sees it, and as it is stored after the step.
        self.before: Callable[[TensorSharding | None], TensorSharding | None] | None = None
        self.after: Callable[[TensorSharding], TensorSharding] | None = None
        self.fixed_directions = fixed_directions   # barriers: the directions come from the op
        #: operands + results.
        self.tensors: list[Value] = list(operands) + list(results)

    def with_directions(self, directions: tuple[str, ...]) -> "_Site":
        """The same site with other directions (sites are shared, never changed)."""
        site = object.__new__(_Site)
        site.__dict__.update(self.__dict__)
        site.directions = directions
        return site


class Propagator:
    """Runs propagation fixpoints on one module with one step evaluator."""

    def __init__(self, module: Module, rule_for: Callable[[Op], RuleInstance | None],
                 evaluate: Callable[[list[StepInput]], list[StepOutput]],
                 strategy: str = "aggressive", conservative: bool = False):
        self.module = module
        self.rule_for = rule_for
        self.evaluate = evaluate
        self.strategies = STRATEGY_SEQUENCES[strategy]
        self.strategy = self.strategies[0]
        self.conservative = conservative
        self.phase = ""   # e.g. "user priority 1, band 3" (for provenance)
        self.edges = find_edges(module)
        self.state = ShardingState(module, slot_map(module, self.edges))
        self._edge_by_op = {e.op.oid: e for e in self.edges}
        self._edge_by_result = {e.result.vid: e for e in self.edges}
        self._callers = call_sites(module)
        self._func_edge_sources = func_edge_sources(module, self._callers)
        #: the sharding-group copies of the pass (set by :meth:`use_group_copies`)
        self.groups = GroupCopies()
        self._rules: dict[int, RuleInstance | None] = {}
        self._sites: dict[int, _Site | None] = {}
        self._may_die: dict[int, bool] = {}
        #: oid -> (site, strategy, write count, step or None) when the op's step
        #: last changed nothing: popped again with the same site and strategy and
        #: no write to its tensors since, its step input is the same, so it is
        #: skipped.
        self._quiet: dict[int, tuple] = {}
        #: oid -> (operands, results, kind, label, tracer keys) of a site, for provenance.
        self._described: dict[int, tuple] = {}
        #: (rule of a step or None, strategy, phase) -> a visit's detail, for provenance.
        self._details: dict[tuple, str] = {}
        self.visited_rules: dict[int, RuleInstance] = {}
        self.erased: set[int] = set()
        self.erase_order: list[int] = []   # ``erased`` in the order the ops were erased
        #: Ops whose operands lost a use since the last :meth:`take_uses_changed`
        #: (one set for the propagator's life: a reader may keep it and test it).
        self.uses_changed: set[int] = set()
        self.live_uses = _LiveUses(module.values)
        self._memo: dict[StepInput, StepOutput] = {}
        self.steps_evaluated = 0
        self.engine_calls = 0
        #: A :class:`~sdy_dl.propagation.replay.PassTrace` this propagation's fixpoints
        #: are recorded into (``recorder``), or one of an earlier propagation of the
        #: same module whose visits are replayed where provably equal (``replay``,
        #: a :class:`~sdy_dl.propagation.replay.Replay`).
        self.recorder = None
        self.replay = None

    def use_group_copies(self, copies: GroupCopies) -> None:
        """The sharding-group copies to make during the pass (the sync's ``copy_to``)."""
        self.groups = copies

    def share_memo(self, memo: dict) -> None:
        """Take step outputs from ``memo`` and add to it (the memo of an earlier
        propagation with the same meshes: outputs are looked up by full input)."""
        self._memo = memo

    # -- the pass --------------------------------------------------------

    def propagate(self, directions: DirectionFn | None = None,
                  progress: Callable[[int, int, int, int], None] | None = None) -> None:
        """One complete propagation: per strategy of ``self.strategies`` (basic-then-
        aggressive has two), result attrs → returns, worklist fixpoint, returns →
        result attrs.  ``progress(visits, pending, steps, engine calls)`` is called
        now and then."""
        main = self.module.main_func()
        for strategy in self.strategies:
            self.strategy = strategy
            if main is not None:
                self._sync_main_results(main)
            self._fixpoint(directions or _both, progress or (lambda *_: None))
            if main is not None:
                self._sync_main_results(main)

    def finish(self) -> None:
        """Write shardings back and erase the dead ops from the module."""
        self.state.write_back()
        for oid in sorted(self.erased, reverse=True):
            self.module.ops[oid].mlir.erase()

    # -- the worklist ----------------------------------------------------

    def _fixpoint(self, directions: DirectionFn, progress) -> None:
        worklist = self._worklist = Worklist(())
        self._current = None
        applied: set[tuple[int, StepInput]] = set()   # (op, step) whose output changed something
        # A replay of an earlier propagation's fixpoint (which starts from the record's
        # stack), or a recording of this one, brings its own visit
        # (``propagation.replay``), and closes the fixpoint with ``end``.
        replay, recorder = self.replay, self.recorder
        behaviour = None
        if replay is not None:
            behaviour = replay.fixpoint(self, worklist, directions, applied)
        if behaviour is None:
            # An op known to have no site that cannot die does nothing when popped:
            # it is left out (where it would wait in the list does not matter).
            sites, may_die, erased = self._sites, self._may_die, self.erased
            worklist.restart([op for op in self.module.ops if op.oid not in erased and not (
                sites.get(op.oid, op) is None and may_die.get(op.oid) is False)][::-1])
            if recorder is not None:
                behaviour = recorder.fixpoint(self, worklist, directions, applied)
        if behaviour is None:
            self.drain(worklist, self.visitor(directions, applied), progress)
        else:
            visit, end = behaviour
            self.drain(worklist, visit, progress)
            end()
        self._worklist = None

    def drain(self, worklist: Worklist, visit: Callable[[Op], object], progress) -> None:
        """The fixpoint loop: pop ``worklist`` until it is empty, giving each op to
        ``visit``; ``progress(visits, pending, steps, engine calls)`` every 512 pops."""
        # (Worklist.pop inlined: the list and its pending set, as ``pop`` keeps them.)
        stack, pending = worklist.stack, worklist.pending
        visits = 0
        while stack:
            op = stack.pop()
            pending.discard(op.oid)
            visits += 1
            if visits % 512 == 0:
                progress(visits, len(stack), self.steps_evaluated, self.engine_calls)
            visit(op)

    def visitor(self, directions: DirectionFn, applied: set) -> Callable[[Op], object]:
        """``visit(op)``: process popped ``op`` in this fixpoint (erase it if dead, else
        evaluate and apply its step); returns the provenance cause the visit
        recorded (None: none).  What every visit reads is bound once."""
        erased, may_die, may_die_of, live_uses = (self.erased, self._may_die, self._may_die_of,
                                                  self.live_uses)
        sites, quiet_of, site_of, memo, take = (self._sites, self._quiet, self.site_of,
                                                self._memo, self.take)
        state, strategy = self.state, self.strategy   # (speculation swaps the state back)
        tracer = state.tracer

        def visit(op: Op) -> object:
            oid = op.oid
            if oid in erased:
                return None
            dies = may_die.get(oid)
            if dies is None:
                dies = may_die_of(op)
            if dies and _unused(op.results, live_uses):
                self._current = None
                self._erase(op)
                return None
            if sites.get(oid, op) is None:
                return None   # no site (and alive): nothing to do
            quiet = quiet_of.get(oid)
            if (quiet is not None and quiet[3] is None
                    and state.unchanged_since(quiet[0].tensors, quiet[2])):
                return None   # still no tensor with a sharding: nothing to propagate
            site = site_of(op, directions)
            if site is None:
                return None
            if (quiet is not None and quiet[0] is site and quiet[1] == strategy
                    and state.unchanged_since(site.tensors, quiet[2])):
                # The same step input as when it last changed nothing: the same
                # (empty) output.  Provenance still records the visit.
                if tracer is not None and quiet[3] is not None:
                    kind, title, detail, keys, shardings = self._describe(op, site, quiet[3])
                    tracer.begin(kind, title, detail, keys=keys, shardings=shardings, op=op,
                                 step=quiet[3], output=memo[quiet[3]],
                                 strategy=strategy, phase=self.phase)
                    cause = tracer.current
                    tracer.end()
                    return cause
                return None
            step = self._step_input(site)
            if step is None:
                quiet_of[oid] = (site, strategy, state.clock, None)
                return None
            output = memo.get(step)
            if output is None:
                self._evaluate_batch(step, site, directions)
                output = memo[step]
            return take(op, site, step, output, applied)
        return visit

    def take(self, op: Op, site: _Site, step: StepInput, output: StepOutput,
             applied: set, like=None, same_ops: bool = False, notified=None) -> object:
        """Apply ``output``, the output of ``op``'s step ``step`` (read now from its
        site's tensors), and record the visit; returns its provenance cause.
        ``like``: the cause another propagation of this module recorded for the
        same visit (a replayed one, ``propagation.replay``), recorded again here
        (``ProvenanceTracer.begin_like``, with ``same_ops``); ``notified``: the ops
        (by number) its writes enqueued there, known to be what they enqueue here:
        they are pushed instead of notifying."""
        state = self.state
        changes = True
        if not any(output.operands) and not any(output.results):
            self._quiet[op.oid] = (site, self.strategy, state.clock, step)
            changes = False
        elif (op.oid, step) in applied:
            raise no_fixpoint_error(op)
        else:
            applied.add((op.oid, step))
        self._current = op
        tracer = state.tracer
        cause = None
        if like is not None:
            tracer.begin_like(like, self._described_of(op, site)[4], op, same_ops)
            cause = tracer.current
        elif tracer is not None:
            kind, title, detail, keys, shardings = self._describe(op, site, step)
            tracer.begin(kind, title, detail, keys=keys, shardings=shardings, op=op,
                         step=step, output=output, strategy=self.strategy, phase=self.phase)
            cause = tracer.current
        if changes:   # (an output that changes nothing writes nothing)
            if notified is None:
                self._apply(site, output)
            else:
                self._apply(site, output, notify=False)
                push, ops = self._worklist.push, self.module.ops
                for oid in notified:
                    push(ops[oid])
        if tracer is not None:
            tracer.end()
        self._current = None
        return cause

    def use_orders(self) -> dict[int, tuple]:
        """value id -> its live uses as (op number, operand number), in the order the
        notifications follow, of the values with more than one (the others' order
        cannot differ)."""
        live = self.live_uses
        return {v.vid: tuple([(op.oid, k) for op, k in uses]) for v in self.module.values
                if len(uses := live.get(v.vid, v.uses)) > 1}

    def func_edge_sources(self) -> dict[int, list[Value]]:
        """op number -> the sources of each ``sdy.func_data_flow_edge`` (``edges.func_edge_sources``)."""
        return self._func_edge_sources

    def looked_up_rules(self) -> tuple[dict, dict]:
        """(op number -> its rule or None, op number -> its rule when it has one) of
        the ops whose rules were looked up so far (the live tables)."""
        return self._rules, self.visited_rules

    def adopt_rules(self, rules: dict, visited: dict) -> None:
        """Take the rules another propagation of the same module looked up
        (:meth:`looked_up_rules`) instead of looking them up again."""
        self._rules.update(rules)
        self.visited_rules.update(visited)

    def site_of(self, op: Op, directions: DirectionFn) -> _Site | None:
        """The tensors and rule op ``op`` propagates with (None: nothing to do).

        Everything but the directions is fixed for an op: it is built once
        (``_fixed_site``), and rebuilt only when the directions change."""
        try:
            site = self._sites[op.oid]
        except KeyError:
            site = self._sites[op.oid] = self._fixed_site(op, directions)
        if site is None or site.fixed_directions:
            return site
        wanted = directions(op, site.rule)
        if wanted is not site.directions and wanted != site.directions:
            site = self._sites[op.oid] = site.with_directions(wanted)
        return site

    def _fixed_site(self, op: Op, directions: DirectionFn) -> _Site | None:
        if op.name == "sdy.data_flow_edge":
            edge = self._edge_by_op[op.oid]
            shape = edge.result.shape
            if not edge.result.static or not shape:
                return None
            rule = identity_rule(shape, len(edge.sources), 1)
            site = _Site(edge.sources, [edge.result], rule, directions(op, rule), False)
            owner_op = edge.owner.block.region.owner if edge.owner.is_block_arg else edge.owner.defining_op
            if owner_op.name == "sdy.manual_computation":
                site.before, site.after = manual_edge_transforms(owner_op, edge.owner)
            return site
        if op.name == "sdy.func_data_flow_edge":
            sources = self._func_edge_sources.get(op.oid)
            result = op.results[0]
            if not sources or not result.static or not result.shape:
                return None
            rule = identity_rule(result.shape, len(sources), 1)
            return _Site(sources, [result], rule, directions(op, rule), False)
        if op.name == "sdy.propagation_barrier":
            value = op.results[0]
            if not value.static or not value.shape:
                return None
            rule = identity_rule(value.shape, 1, 1)
            allowed = BARRIER_DIRECTIONS[int(op.attr_text("allowed_direction").split()[0])]
            return _Site(op.operands, op.results, rule, (allowed,) * len(rule.factors), True,
                         fixed_directions=True)
        rule = self.rule_of(op)
        if rule is None:
            return None
        return _Site(op.operands, op.results, rule, directions(op, rule), is_elementwise(op),
                     self.conservative)

    def rule_of(self, op: Op) -> RuleInstance | None:
        """:meth:`rule_for` of ``op``, asked once per op (and kept as a visited rule;
        an op without one is told to the tracer)."""
        if op.oid not in self._rules:
            rule = self.rule_for(op)
            self._rules[op.oid] = rule
            tracer = self.state.tracer
            if rule is not None:
                self.visited_rules[op.oid] = rule
                if tracer is not None:
                    tracer.on_rule(op, rule)
            elif tracer is not None:
                tracer.on_no_rule(op)
        return self._rules[op.oid]

    def _step_input(self, site: _Site) -> StepInput | None:
        get = self.state.get
        operands = tuple([get(v) for v in site.operands])
        results = tuple([get(v) for v in site.results])
        if site.before is not None:
            results = tuple([site.before(s) for s in results])
        if not any(operands) and not any(results):   # (a sharding is always true)
            return None  # nothing to propagate: no tensor of the op has a sharding
        return StepInput(site.rule, operands, results, site.directions, self.strategy,
                         site.conservative, site.elementwise)

    def _evaluate_batch(self, first: StepInput, site: _Site, directions: DirectionFn) -> None:
        """Evaluate ``first`` together with the steps the fixpoint is predicted to need next."""
        batch = [first]
        self._speculate(batch, site, directions)
        outputs = self.evaluate(batch)
        self.engine_calls += 1
        self.steps_evaluated += len(batch)
        self._memo.update(zip(batch, outputs))

    def _speculate(self, batch: list[StepInput], site: _Site, directions: DirectionFn) -> None:
        """Add to ``batch`` the steps a simulated continuation of the fixpoint misses.

        The simulation runs the worklist on copies of the state and the worklist,
        applying memoised step outputs (every decision comes from the engine);
        the tensors of a step not yet evaluated, and of every op that reads them,
        are unknown from then on (such ops are evaluated with the inputs they see
        now, as a guess).  Predictions only fill the memo: the real fixpoint uses
        an output only for exactly the same input.
        """
        state, worklist, current = self.state, self._worklist, self._current
        sim = state.fork()
        self.state, self._worklist = sim, worklist.fork()
        unknown: set[int] = set()
        seen = set(batch)
        try:
            self._mark_unknown(site, unknown)
            idle = 0
            while len(batch) < BATCH_LIMIT and idle < SPECULATION_IDLE:
                op = self._worklist.pop()
                if op is None:
                    break
                idle += 1
                if op.oid in self.erased or self._trivially_dead(op):
                    continue
                op_site = self.site_of(op, directions)
                if op_site is None:
                    continue
                blocked = any(sim.slot(v).vid in unknown for v in op_site.tensors)
                step = self._step_input(op_site)
                if step is None:
                    if blocked:
                        self._mark_unknown(op_site, unknown)
                    continue
                output = self._memo.get(step)
                if output is None or blocked:
                    # Not evaluated yet, or its inputs may still change: evaluate it
                    # with the inputs it sees now, and leave its tensors unknown.
                    if output is None and step not in seen:
                        seen.add(step)
                        batch.append(step)
                        idle = 0
                    self._mark_unknown(op_site, unknown)
                    continue
                self._current = op
                self._apply(op_site, output)
                self._current = None
        finally:
            self.state, self._worklist, self._current = state, worklist, current

    def _mark_unknown(self, site: _Site, unknown: set[int]) -> None:
        """The tensors of ``site`` (and the sharding-group members they are copied
        onto) become unknown."""
        for value in site.tensors:
            slot = self.state.slot(value)
            unknown.add(slot.vid)
            unknown.update(copy.member.vid for copy in self.groups.of(slot.vid))

    def _apply(self, site: _Site, output: StepOutput, notify: bool = True) -> None:
        """Write the updated shardings (operands first) and notify as Shardy does
        (``notify`` false: the caller enqueues what the notifications would)."""
        results = output.results
        if site.after is not None:
            results = tuple(None if s is None else site.after(s) for s in results)
        for values, news in ((site.operands, output.operands), (site.results, results)):
            for value, new in zip(values, news):
                if new is not None and self.state.can_hold(value):
                    self.state.set(value, new)
                    modified = self.state.slot(value)
                    if notify:
                        self._notify_sharding_modified(modified)
                    for copy in self.groups.of(modified.vid):
                        self._copy_to_member(copy, modified, new)

    def _copy_to_member(self, copy, source, new) -> None:
        """Write ``new``, just written on ``source``, onto another member of its
        sharding group, as stage ``sharding_group_map``'s ``copy_to`` decides, and
        notify.  Provenance records the copy as its own cause, read from ``source``."""
        tracer = self.state.tracer
        if tracer is not None:
            step_cause = tracer.current
            tracer.begin("group", f"sharding group {copy.gid}: member {copy.k} updated, "
                         f"copied onto member {copy.k2}",
                         inputs=[(value_key(source), new)],
                         decision=self.groups.decision(value_key(self.state.slot(copy.member)),
                                                       copy))
        self.state.set(copy.member, new)
        self._notify_sharding_modified(copy.member)
        if tracer is not None:
            tracer.resume(step_cause)

    def _described_of(self, op: Op, site: _Site) -> tuple:
        """(operands, results, kind, title, tracer keys of the tensors) of ``op``'s
        site, made once per site."""
        described = self._described.get(op.oid)
        if (described is None or described[0] is not site.operands
                or described[1] is not site.results):
            kind = {"sdy.data_flow_edge": "edge", "sdy.func_data_flow_edge": "edge",
                    "sdy.propagation_barrier": "barrier"}.get(op.name, "step")
            keys = tuple([value_key(self.state.slot(v)) for v in site.tensors])
            described = self._described[op.oid] = (site.operands, site.results, kind,
                                                    op.name, keys)
        return described

    def _describe(self, op: Op, site: _Site, step: StepInput) -> tuple:
        """(kind, title, detail, keys, shardings) of a step, for provenance: the
        tracer keys of the step's tensors and the shardings it read.  ``step``
        read them through the state (``_step_input``), so they are its own
        operands and results, except where the site transforms the results."""
        _, _, kind, title, keys = self._described_of(op, site)
        rule = site.rule if kind == "step" else None
        detail = self._details.get((rule, self.strategy, self.phase))
        if detail is None:
            detail = f"{self.strategy}" + (f", {self.phase}" if self.phase else "")
            if rule is not None:
                detail = f"rule {rule.to_text()}, {detail}"
            self._details[(rule, self.strategy, self.phase)] = detail
        if site.before is None:
            shardings = step.operands + step.results
        else:
            shardings = step.operands + tuple([self.state.get(v) for v in site.results])
        return kind, title, detail, keys, shardings

    # -- notifications (§7.3 item 4; research notes section 4) ----------------

    def _notify_op(self, op: Op) -> None:
        """``modifyOpInPlace``: enqueue ``op`` and its ancestors, never the current op."""
        if op is self._current:
            return
        while op is not None:
            self._worklist.push(op)
            op = op.parent

    def _notify_sharding_modified(self, value: Value) -> None:
        """Shardy's ``notifyShardingModified`` for the shardable value ``value``."""
        edge = self._edge_by_result.get(value.vid)
        if edge is not None:
            for target in edge.other_targets:
                self._notify_users(target)
        self._notify_op(value.defining_op or value.block.region.owner)
        self._notify_users(value)

    def _notify_users(self, value: Value) -> None:
        """Shardy's ``notifyUsersModified``: users in use-list order; through a
        call to the users of the callee's argument, through a ``func.return``
        of a called function to the users of the calls' results."""
        for user, index in self.live_uses[value.vid]:
            edge = self._edge_fed_by(user, index)
            if edge is not None:
                self._notify_op(edge.op)
            elif user.name == "func.return" and self._callers.get(func_symbol(user.parent)):
                for call in self._callers[func_symbol(user.parent)]:
                    self._notify_users(call.results[index])
            elif user.is_terminator:
                self._notify_op(user.parent)
            elif user.name == "func.call":
                callee = self.module.funcs.get(callee_of(user))
                if callee is not None and callee.regions and callee.regions[0].blocks:
                    self._notify_users(callee.regions[0].blocks[0].args[index])
            else:
                self._notify_op(user)

    def _edge_fed_by(self, user: Op, index: int) -> DataFlowEdge | None:
        """The data-flow edge whose source is operand ``index`` of ``user``, if any
        (Shardy's ``DataFlowEdgeOp::lookup(OpOperand&)``).

        For an operand of a named or manual computation Shardy's
        ``getEdgeOwnerFromSource`` answers the operand value itself, not the
        block argument, and that value's user is the computation, never an
        edge: no edge is found, so the computation op is notified and the
        block-argument edge is not (§7.3).  A while operand, or a terminator
        operand of any region op, finds the edge on the op's result."""
        owner = user.parent if user.is_terminator else user
        if owner is None or owner.name not in DATA_FLOW_OPS:
            return None
        if owner.name in ("sdy.named_computation", "sdy.manual_computation") and owner is user:
            return None
        target = owner.results[index]
        uses = self.live_uses[target.vid]
        if len(uses) == 1 and uses[0][0].name == "sdy.data_flow_edge":
            return self._edge_by_op.get(uses[0][0].oid)
        return None

    # -- dead ops (research notes sections 2, 3b) --------------------------------

    def _trivially_dead(self, op: Op) -> bool:
        may_die = self._may_die.get(op.oid)
        if may_die is None:
            may_die = self._may_die_of(op)
        return may_die and _unused(op.results, self.live_uses)

    def _may_die_of(self, op: Op) -> bool:
        """Decide and record whether ``op`` is erased once its results are unused
        (fixed for an op: nested, not a terminator, no effects)."""
        may_die = self._may_die[op.oid] = (op.parent is not None and not op.is_terminator
                                           and has_no_effects(op))
        return may_die

    def _erase(self, op: Op) -> None:
        """Erase ``op`` (nested ops first, in reverse); enqueue operand definers left with ≤ 1 user."""
        for dead in reversed([o for o, entering in walk_model(op) if entering]):
            for value in dead.operands:
                definer = value.defining_op
                if definer is None or definer.oid in self.erased:
                    continue
                others = {u.oid for u, _ in self.live_uses[value.vid] if u is not dead}
                if len(others) < 2:
                    self._notify_op(definer)
            self.erased.add(dead.oid)
            self.erase_order.append(dead.oid)
            for index, value in enumerate(dead.operands):
                uses = self.live_uses[value.vid]
                uses.remove((dead, index))
                self.uses_changed.update(user.oid for user, _ in uses)

    def take_uses_changed(self) -> set[int]:
        """The ops (by oid) whose operands lost a use to an erasure since the last
        call (their op-priority signature may have changed)."""
        changed = set(self.uses_changed)
        self.uses_changed.clear()
        return changed

    # -- main function results (§8.7) -----------------------------------

    def result_sync_step(self, main: Op, index: int, value: Value) -> StepInput | None:
        """The step syncing returned ``value`` with result ``index`` of ``main``."""
        if not value.static or not value.shape:
            return None
        rule = identity_rule(value.shape, 1, 1)
        step = StepInput(rule, (self.state.get(value),), (self.state.get_result(main, index),),
                         ("BOTH",) * len(rule.factors), self.strategy, False, False)
        if step.operands[0] is None and step.results[0] is None:
            return None
        return step

    def _sync_main_results(self, main: Op) -> None:
        ret = self.module.func_return(main)
        if ret is None:
            return
        # A sync another propagation of this module made is replayed where its
        # reads are the same; in a recording run, each result's sync is recorded
        # (``SyncTrace``, ``propagation.replay``).
        replay, recorder = self.replay, self.recorder
        if replay is not None and replay.sync(self, main, ret):
            return
        if recorder is None:
            self._sync_results(main, ret)
            return
        sync = recorder.sync_begins(self, main, ret)
        recorder.sync_ends(self, sync, self._sync_results(main, ret, sync.mark))

    def _sync_results(self, main: Op, ret: Op, mark=None) -> list[tuple[int, TensorSharding]]:
        """Sync every result of ``main`` with the value ``ret`` returns for it; returns
        the (result index, sharding) written to the results, in order.  ``mark()``
        is called before each result's sync (a recording's)."""
        written: list = []
        # Evaluate the steps of all results in one call, as they read now; a step
        # whose inputs an earlier sync changed is evaluated on its own below.
        steps = [self.result_sync_step(main, i, v) for i, v in enumerate(ret.operands)]
        ahead = list(dict.fromkeys(s for s in steps if s is not None and s not in self._memo))
        if ahead:
            self._memo.update(zip(ahead, self.evaluate(ahead)))
            self.engine_calls += 1
            self.steps_evaluated += len(ahead)
        state = self.state
        clock = state.clock
        for index, value in enumerate(ret.operands):
            if mark is not None:
                mark()
            # (as read above unless a sync wrote a value since: result ``index`` is
            # written only by its own sync)
            step = steps[index] if state.clock == clock else self.result_sync_step(main, index, value)
            self.sync_result(main, index, value, step, written)
        if mark is not None:
            mark()
        return written

    def sync_result(self, main: Op, index: int, value: Value, step: StepInput | None,
                    written: list) -> None:
        """Sync result ``index`` of ``main`` with returned ``value`` by ``step`` (read
        now, :meth:`result_sync_step`); (index, sharding) joins ``written`` when
        the result is written."""
        if step is None:
            return
        output = self._memo.get(step)
        if output is None:
            output = self.evaluate([step])[0]
            self.engine_calls += 1
            self._memo[step] = output
        tracer = self.state.tracer
        if tracer is not None:
            tracer.begin("result", f"function result {index} synced with the returned value",
                         inputs=[(value_key(self.state.slot(value)), step.operands[0]),
                                 (("result", index), step.results[0])])
        if output.operands[0] is not None:
            self.state.set(value, output.operands[0])
        if output.results[0] is not None:
            self.state.set_result(main, index, output.results[0])
            written.append((index, output.results[0]))
        if tracer is not None:
            tracer.end()


def no_fixpoint_error(op: Op) -> SdyError:
    """A step that changes shardings applied twice to the same input in one fixpoint:
    the tensors it wrote were put back, so the fixpoint would never be reached.
    Every step only adds axes, so this cannot happen with steps an engine derived;
    it stops a replay of relations that were changed (``--relations``)."""
    from sdy_dl.ir.model import op_position

    line, col = op_position(op.mlir)
    return SdyError(f"propagation does not converge: the step of {op.name} changes the same "
                    "shardings again (the step outputs contradict each other)", line=line, col=col)


def manual_edge_transforms(op: Op, owner: Value):
    """Shardy's ``transformTargetSharding`` of a manual computation edge (§8.6).

    A block-argument edge holds the local view: the step sees it with the
    manual prefix of ``in_shardings`` re-added, and stores it stripped again.
    A result edge holds the global view: the step sees it stripped, and it is
    stored with the manual prefix of ``out_shardings`` re-added.
    """
    manual = manual_axes(op.mlir)
    outer = stored_sharding(owner)  # the raw in_/out_shardings entry
    strip = lambda s: None if s is None else erase_manual_axes(s, manual)  # noqa: E731
    add = lambda s: None if s is None else add_free_axes(outer, s, manual)  # noqa: E731
    return (add, strip) if owner.is_block_arg else (strip, add)


class _LiveUses(dict):
    """Value id -> its live uses: a copy of the model value's uses, made when first
    asked for (``live[vid]``; most values of a replayed propagation are never
    asked), then kept as the pass erases users."""

    def __init__(self, values: list[Value]):
        super().__init__()
        self._values = values

    def __missing__(self, vid: int) -> list:
        uses = self[vid] = list(self._values[vid].uses)
        return uses


def _unused(results: list[Value], live_uses: dict) -> bool:
    """No result of an op has a live use."""
    for r in results:
        if live_uses[r.vid]:
            return False
    return True


def _both(op: Op, rule: RuleInstance) -> tuple[str, ...]:
    return ("BOTH",) * len(rule.factors)
