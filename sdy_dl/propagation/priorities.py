"""Op priorities (§7.1) and user priorities (§7.2) around the propagation fixpoint.

* :class:`OpPriorities` gives every factor of every op its direction in each
  op-priority band.  The decision is the Datalog stage ``op_priorities``,
  evaluated once per distinct op signature (ops with equal facts) for all
  bands at once; an op is looked up again only if the use counts of its
  operands changed since (dead ops erased).
* :func:`run_op_priority` runs the five bands, each a complete fixpoint.
* :func:`run_user_priority` closes and replicates the dims of priority > 0,
  runs the bands, then re-opens the dims of each priority in turn and runs
  them again; which dims and axes, in which round, is the Datalog stage
  ``user_priority_propagation``'s decision.
"""

from __future__ import annotations

from sdy_dl.ir import Op
from sdy_dl.ir.traits import CUSTOM_CALL_OP, ops_with
from sdy_dl.propagation.decisions import Decision
from sdy_dl.propagation.driver import Propagator
from sdy_dl.propagation.state import value_key
from sdy_dl.propagation.traits import is_elementwise
from sdy_dl.rules.instance import RuleInstance
from sdy_dl.sharding import DimSharding, TensorSharding

BANDS = 5

#: The traits of the op-trait table (``rules/traits/op_traits.yaml``) that stage
#: ``op_priorities`` derives each op's op-priority class from.
CLASS_TRAITS = ("priority_dynamic_slice", "priority_broadcast", "priority_pass_through",
                "priority_pass_through_custom_calls")


#: Edge ops: propagated through with an identity rule, no rule attribute.
EDGE_OPS = frozenset({"sdy.data_flow_edge", "sdy.func_data_flow_edge"})


def class_facts(op: Op) -> tuple[str, int, str]:
    """What stage ``op_priorities`` derives ``op``'s op-priority class from: its
    name, whether it is elementwise (:func:`is_elementwise`, which the step reads
    too) and, for a custom call, its call target name ("" otherwise)."""
    target = ""
    if op.name == CUSTOM_CALL_OP:
        text = op.attr_text("call_target_name") or ""
        plain = len(text) >= 2 and text[0] == text[-1] == '"' and "\\" not in text
        target = text[1:-1] if plain else text
    return op.name, int(is_elementwise(op)), target


def trait_facts(names) -> list[tuple[str, str]]:
    """``in_trait`` of stage ``op_priorities``: (name, trait) for every op name or
    call target in ``names`` that the op-trait table gives one of :data:`CLASS_TRAITS`."""
    return [(name, trait) for name in sorted(set(names)) for trait in CLASS_TRAITS
            if name in ops_with(trait)]


class OpPriorities:
    """The direction functions of the op-priority bands, decided in Datalog.

    An op's directions depend only on its facts in stage ``op_priorities`` (its
    class, its operands with their scalar flags and use counts, its factors, its
    rule attribute).  Ops whose facts are equal up to the names of the op and
    its values share a *signature*; the stage runs once for every new signature
    and all bands at once, and an op is looked up again only when the use
    counts of its operands change (dead ops erased).
    """

    def __init__(self, propagator: Propagator, run_stage):
        self.propagator = propagator
        self.run_stage = run_stage   # (stage name, facts) -> relations
        self._static: dict[int, tuple] = {}
        #: id of a rule -> (the rule, kept alive, its pass-through flags)
        self._flags: dict[int, tuple] = {}
        self._signatures: dict[int, tuple] = {}   # oid -> signature (dropped when it may change)
        self._undecided: set[int] | None = None   # ops whose signature may be undecided (None: all)
        self._decided: dict[tuple, tuple[tuple[str, ...], ...]] = {}   # signature -> per band
        #: oid -> its signature's directions per band (dropped with the signature)
        self._directions: dict[int, tuple[tuple[str, ...], ...]] = {}
        # A what-if's propagation of the first run's module with other shardings
        # (``propagation.replay``) shares the first run's static parts and
        # decisions: both depend on the module's structure and rules only.  The
        # first band would look every op's rule up, as the first run's did: its
        # rules are taken instead (``PassTrace.share_priorities``).
        # Its first band's directions by op are the first run's too (the signatures
        # are looked up again only for ops whose use counts change).
        self._first_band: dict | None = None
        trace = propagator.recorder or getattr(propagator.replay, "trace", None)
        if trace is not None:
            self._static, self._decided, self._first_band = trace.share_priorities(
                propagator, self._static, self._decided)

    def band(self, band: int):
        """The direction function of ``band`` (new signatures of live ops decided first)."""
        self._forget_changed()
        by_op, decided = self._directions, self._decided
        if self._undecided is None and self._first_band is not None:
            by_op.update(self._first_band)
            self._undecided = set()
        else:
            first = self._undecided is None
            ops = self.propagator.module.ops
            candidates = (ops if first else [ops[oid] for oid in sorted(self._undecided)])
            self._undecided = set()
            erased = self.propagator.erased
            signatures = {op.oid: self._signature(op) for op in candidates
                          if op.oid not in erased and self._static_part(op) is not None}
            self._decide(set(signatures.values()))
            for oid, signature in signatures.items():   # (what ``directions`` would look up)
                by_op[oid] = decided[signature]
            if first and self.propagator.recorder is not None:
                self.propagator.recorder.first_band = dict(by_op)
        uses_changed = self.propagator.uses_changed

        def directions(op: Op, rule: RuleInstance) -> tuple[str, ...]:
            if uses_changed:
                self._forget_changed()
            try:
                return by_op[op.oid][band]
            except KeyError:
                pass
            signature = self._signature(op)
            if signature not in decided:
                self._decide({signature})
            found = by_op[op.oid] = decided[signature]
            return found[band]
        return directions

    def _static_part(self, op: Op) -> tuple | None:
        """(:func:`class_facts`, operands as (first index of the same value, scalar),
        pass-through flag per factor, has a rule attribute), or None for ops
        without a rule."""
        if op.oid not in self._static:
            rule = self._rule(op)
            if rule is None:
                self._static[op.oid] = None
            else:
                first: dict[int, int] = {}
                operands = tuple([(first.setdefault(v.vid, k), int(v.shape == ()))
                                  for k, v in enumerate(op.operands)])
                self._static[op.oid] = (class_facts(op), operands, self._pass_through(rule),
                                        int(op.name not in EDGE_OPS))
        return self._static[op.oid]

    def _pass_through(self, rule: RuleInstance) -> tuple[int, ...]:
        """Whether each factor of ``rule`` is pass-through (1) or not (0), read once per
        rule (ops with equal signatures share their rule: ~150 rules for 13k ops)."""
        found = self._flags.get(id(rule))
        if found is None:
            found = self._flags[id(rule)] = (
                rule, tuple([int(f.kind == "pass_through") for f in rule.factors]))
        return found[1]

    def _signature(self, op: Op) -> tuple:
        """The static part and the use count of each distinct operand value (use
        counts change only when ops are erased)."""
        if self.propagator.uses_changed:
            self._forget_changed()
        cached = self._signatures.get(op.oid)
        if cached is not None:
            return cached
        uses = self.propagator.live_uses
        seen, counts = set(), []
        for v in op.operands:
            if v.vid not in seen:
                seen.add(v.vid)
                counts.append(len(uses[v.vid]))
        signature = self._static_part(op) + (tuple(counts),)
        self._signatures[op.oid] = signature
        return signature

    def _forget_changed(self) -> None:
        """Drop the signatures of ops whose operands lost a use (dead ops erased)."""
        if not self.propagator.uses_changed:
            return
        changed = self.propagator.take_uses_changed()
        for oid in changed:
            self._signatures.pop(oid, None)
            self._directions.pop(oid, None)
        if self._undecided is not None:
            self._undecided |= changed

    def _rule(self, op: Op) -> RuleInstance | None:
        if op.name in EDGE_OPS:
            site = self.propagator.site_of(op, lambda o, r: ("BOTH",) * len(r.factors))
            return site.rule if site is not None else None
        return self.propagator.rule_of(op)

    def _decide(self, signatures: set[tuple]) -> None:
        """Run stage ``op_priorities`` once for the undecided ``signatures``, every band."""
        todo = sorted(s for s in signatures if s not in self._decided)
        if not todo:
            return
        facts = {"in_band": [(b,) for b in range(BANDS)], "in_op": [], "in_elementwise": [],
                 "in_call_target": [], "in_trait": [], "in_operand": [], "in_uses": [],
                 "in_factor": [], "in_rule_attr": []}
        values = 0
        for o, ((name, elementwise, target), operands, factors, rule_attr, counts) in enumerate(todo):
            facts["in_op"].append((o, name))
            if elementwise:
                facts["in_elementwise"].append((o,))
            if target:
                facts["in_call_target"].append((o, target))
            ids = {}
            for k, (j, scalar) in enumerate(operands):
                if j not in ids:
                    ids[j] = values
                    facts["in_uses"].append((values, counts[len(ids) - 1]))
                    values += 1
                facts["in_operand"].append((o, k, ids[j], scalar))
            facts["in_factor"].extend((o, f, p) for f, p in enumerate(factors))
            if rule_attr:
                facts["in_rule_attr"].append((o,))
        facts["in_trait"] = trait_facts([n for (_, n) in facts["in_op"]]
                                        + [t for (_, t) in facts["in_call_target"]])
        out = self.run_stage("op_priorities", facts)
        found: dict[tuple[int, int], dict[int, str]] = {}
        for b, o, f, d in out["direction"]:
            found.setdefault((o, b), {})[f] = d
        for o, signature in enumerate(todo):
            factors = len(signature[2])
            self._decided[signature] = tuple(
                tuple(found.get((o, b), {})[f] for f in range(factors)) for b in range(BANDS))


def run_op_priority(propagator: Propagator, run_stage, progress=None, priority: int = 0,
                    priorities: OpPriorities | None = None) -> None:
    """The five op-priority bands, each one complete aggressive fixpoint (§7.1)."""
    priorities = priorities or OpPriorities(propagator, run_stage)
    for band in range(BANDS):
        propagator.phase = f"user priority {priority}, op-priority band {band}"
        propagator.propagate(priorities.band(band), progress)
    propagator.phase = ""


# -- user priorities (§7.2) ---------------------------------------------------------

#: The stage that decides the user priorities.
USER_PRIORITY_STAGE = "user_priority_propagation"


def user_priority_facts(sites: list[TensorSharding]) -> dict[str, list[tuple]]:
    """The facts of stage ``user_priority_propagation``: site ``k`` is ``sites[k]``."""
    facts: dict[str, list[tuple]] = {"in_site": [], "in_dim_priority": [], "in_dim_axis": []}
    for k, sharding in enumerate(sites):
        facts["in_site"].append((k,))
        for d, dim in enumerate(sharding.dims):
            if dim.priority is not None:
                facts["in_dim_priority"].append((k, d, dim.priority))
            facts["in_dim_axis"].extend((k, d, a.to_text()) for a in dim.axes)
    return facts


def initialized(sharding: TensorSharding, mesh, closed: set[int],
                replicated: set[str]) -> TensorSharding:
    """Shardy's ``getInitializedSharding`` as decided: the dims ``closed`` become
    closed and empty, the axes ``replicated`` (as text) join the replicated list
    in mesh order, and no dim keeps a priority."""
    axes = {a.to_text(): a for d in sharding.dims for a in d.axes}
    dims = tuple(DimSharding((), True) if d in closed else DimSharding(dim.axes, dim.is_closed)
                 for d, dim in enumerate(sharding.dims))
    added = [axes[a] for a in sorted(replicated)]
    return TensorSharding(sharding.mesh, dims,
                          tuple(sorted(list(sharding.replicated) + added,
                                       key=lambda a: a.sort_key_in(mesh))),
                          sharding.unreduced)


def reopened(current: TensorSharding, original: TensorSharding, dims: set[int],
             unreplicated: set[str]) -> TensorSharding:
    """Shardy's ``getUpdatedShardingForPriority`` as decided: the dims ``dims`` get
    their ``original`` sharding back, the axes ``unreplicated`` (as text) leave the
    replicated list."""
    new = tuple(DimSharding(original.dims[i].axes, original.dims[i].is_closed) if i in dims
                else d for i, d in enumerate(current.dims))
    return TensorSharding(current.mesh, new,
                          tuple(a for a in current.replicated if a.to_text() not in unreplicated),
                          current.unreduced)


def run_user_priority(propagator: Propagator, run_stage, progress=None,
                      op_priority: bool = True) -> None:
    """User-priority propagation (§7.2): which dims are closed, replicated and
    re-opened in which round is stage ``user_priority_propagation``'s decision;
    each round runs the op-priority bands (one plain fixpoint instead when
    ``op_priority`` is false)."""

    module = propagator.module
    tracer = propagator.state.tracer
    sites = list(sharding_sites(propagator, lambda sharding: (
        sharding is not None and isinstance(sharding.mesh, str)
        and any(d.priority is not None for d in sharding.dims))))
    rounds: list[tuple[int, int]] = []
    if sites:
        facts = user_priority_facts([sharding for *_, sharding in sites])
        decided = run_stage(USER_PRIORITY_STAGE, facts)
        closed = _by_site(decided["closed_at_start"])
        replicated = _by_site(decided["replicated_at_start"])
        rounds = sorted((n, p) for p, n in decided["round"])
        if tracer is not None:
            tracer.begin("priority", "user priorities: dims with priority > 0 closed and replicated",
                         decision=Decision(USER_PRIORITY_STAGE, facts, {
                             sites[k][0](): [("closed_at_start", (k, d)) for d in sorted(closed[k])]
                             + [("replicated_at_start", (k, a)) for a in sorted(replicated.get(k, ()))]
                             for k in closed}))
        for k, (key, read, write, sharding) in enumerate(sites):
            new = initialized(sharding, module.meshes[sharding.mesh], closed.get(k, set()),
                              replicated.get(k, set()))
            if new != sharding:
                write(new)
        if tracer is not None:
            tracer.end()
    priorities = OpPriorities(propagator, run_stage)
    _run_priority(propagator, run_stage, progress, 0, op_priority, priorities)
    for n, priority in rounds:
        dims = _by_site((s, d) for m, s, d in decided["reopen"] if m == n)
        axes = _by_site((s, a) for m, s, a in decided["unreplicated"] if m == n)
        if tracer is not None:
            tracer.begin("priority", f"user priority {priority}: its dims re-opened",
                         decision=Decision(USER_PRIORITY_STAGE, facts, {
                             sites[k][0](): [("reopen", (n, k, d)) for d in sorted(dims[k])]
                             + [("unreplicated", (n, k, a)) for a in sorted(axes.get(k, ()))]
                             for k in dims}))
        for k in sorted(dims):
            _, read, write, original = sites[k]
            write(reopened(read(), original, dims[k], axes.get(k, set())))
        if tracer is not None:
            tracer.end()
        _run_priority(propagator, run_stage, progress, priority, op_priority, priorities)


def _by_site(rows) -> dict[int, set]:
    """``{site: {item, ...}}`` of ``(site, item)`` rows."""
    out: dict[int, set] = {}
    for k, item in rows:
        out.setdefault(k, set()).add(item)
    return out


def _run_priority(propagator: Propagator, run_stage, progress, priority: int,
                  op_priority: bool, priorities) -> None:
    if op_priority:
        run_op_priority(propagator, run_stage, progress, priority, priorities)
    else:
        propagator.phase = f"user priority {priority}"
        propagator.propagate(progress=progress)
        propagator.phase = ""


def sharding_sites(propagator: Propagator, wanted):
    """(key, read, write, sharding) for every stored sharding that is not shadowed
    by a data-flow edge (values: op results, block arguments, edges; and
    function results) whose current ``sharding`` is ``wanted(sharding)``, each
    read in that order; ``key()`` is the key provenance records the site's
    writes under."""
    state, values = propagator.state, propagator.module.values
    recorder, replay = propagator.recorder, propagator.replay
    # (a replaying run reads them as the record did: ``Replay.read_sites``)
    shared = replay.read_sites(wanted) if replay is not None else None
    if shared is not None:
        picked = [values[vid] for vid in shared]
    else:
        before = len(state.read0) if recorder is not None else 0
        picked = [value for value in values if state.slot(value) is value
                  and state.can_hold(value) and wanted(state.get(value))]
        if recorder is not None:
            recorder.sites_read(propagator, before, [value.vid for value in picked])
    for value in picked:
        yield (lambda v=value: value_key(v)), (lambda v=value: state.get(v)), \
            (lambda s, v=value: state.set(v, s)), state.get(value)
    for func in propagator.module.funcs.values():
        results = len(func.mlir.attributes["function_type"].value.results)
        for i in range(results):
            sharding = state.get_result(func, i)
            if wanted(sharding):
                yield (lambda i=i: ("result", i)), (lambda f=func, i=i: state.get_result(f, i)), \
                    (lambda s, f=func, i=i: state.set_result(f, i, s)), sharding
