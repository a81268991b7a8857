"""Op priorities (§7.1) and user priorities (§7.2) around the propagation fixpoint.

* :class:`BandDirections` gives every factor of every op its direction in one
  op-priority band.  The decision is the Datalog stage ``op_priorities``,
  evaluated for all ops at once when the band starts; an op is asked again
  only if the use counts of its operands changed since (dead ops erased).
* :func:`run_op_priority` runs the five bands, each a complete fixpoint.
* :func:`run_user_priority` closes and replicates the dims of priority > 0,
  runs the bands, then re-opens the dims of each priority in turn and runs
  them again.
"""

from __future__ import annotations

from sdy_dl.ir import Op
from sdy_dl.propagation.driver import Propagator
from sdy_dl.propagation.traits import is_elementwise
from sdy_dl.rules.instance import RuleInstance
from sdy_dl.sharding import DimSharding, TensorSharding

BANDS = 5
OFFLOAD_TARGETS = ("MoveToHost", "MoveToDevice")


def op_class(op: Op) -> str:
    """The op-priority class of ``op`` (see ``datalog/priorities/op_priorities.dl.j2``)."""
    if op.name in ("stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice"):
        return "dynamic_slice"
    if op.name == "stablehlo.broadcast_in_dim":
        return "broadcast"
    if (is_elementwise(op) or op.name in ("stablehlo.reshape", "stablehlo.transpose",
                                          "sdy.data_flow_edge", "sdy.func_data_flow_edge")
            or (op.name == "stablehlo.custom_call"
                and op.attr_text("call_target_name") in (f'"{t}"' for t in OFFLOAD_TARGETS))):
        return "pass_through"
    return "other"


class BandDirections:
    """The direction function of one op-priority band, decided in Datalog."""

    def __init__(self, propagator: Propagator, band: int, run_stage):
        self.propagator = propagator
        self.band = band
        self.run_stage = run_stage   # (stage name, facts) -> relations
        self._cache: dict[tuple, tuple[str, ...]] = {}
        self._evaluate([op for op in propagator.module.ops
                        if op.oid not in propagator.erased and self._rule(op) is not None])

    def __call__(self, op: Op, rule: RuleInstance) -> tuple[str, ...]:
        key = self._key(op)
        if key not in self._cache:
            self._evaluate([op])
        return self._cache[key]

    def _rule(self, op: Op) -> RuleInstance | None:
        if op.name == "sdy.data_flow_edge":
            site = self.propagator._site(op, lambda o, r: ("BOTH",) * len(r.factors))
            return site.rule if site is not None else None
        return self.propagator._rule(op)

    def _key(self, op: Op) -> tuple:
        uses = self.propagator.live_uses
        return (op.oid,) + tuple(len(uses[v.vid]) for v in op.operands)

    def _evaluate(self, ops: list[Op]) -> None:
        uses = self.propagator.live_uses
        facts = {"in_band": [(self.band,)], "in_op": [], "in_operand": [], "in_uses": [],
                 "in_factor": [], "in_rule_attr": []}
        seen_values = set()
        rules = {}
        for op in ops:
            rule = rules[op.oid] = self._rule(op)
            facts["in_op"].append((op.oid, op_class(op)))
            for k, v in enumerate(op.operands):
                facts["in_operand"].append((op.oid, k, v.vid, int(v.rank == 0)))
                if v.vid not in seen_values:
                    seen_values.add(v.vid)
                    facts["in_uses"].append((v.vid, len(uses[v.vid])))
            facts["in_factor"].extend((op.oid, f, int(factor.kind == "pass_through"))
                                      for f, factor in enumerate(rule.factors))
            if op.name != "sdy.data_flow_edge":
                facts["in_rule_attr"].append((op.oid,))
        out = self.run_stage("op_priorities", facts)
        by_op: dict[int, dict[int, str]] = {}
        for oid, f, d in out["direction"]:
            by_op.setdefault(oid, {})[f] = d
        for op in ops:
            dirs = by_op.get(op.oid, {})
            self._cache[self._key(op)] = tuple(dirs[f] for f in range(len(rules[op.oid].factors)))


def run_op_priority(propagator: Propagator, run_stage, progress=None, priority: int = 0) -> None:
    """The five op-priority bands, each one complete aggressive fixpoint (§7.1)."""
    for band in range(BANDS):
        propagator.phase = f"user priority {priority}, op-priority band {band}"
        propagator.propagate(BandDirections(propagator, band, run_stage), progress)
    propagator.phase = ""


# -- user priorities (§7.2) ---------------------------------------------------------

def initialized(sharding: TensorSharding, mesh) -> TensorSharding:
    """Shardy's ``getInitializedSharding``: dims with priority > 0 become closed
    and empty, their axes replicated; explicit priority 0 is dropped."""
    dims, replicated = [], list(sharding.replicated)
    for d in sharding.dims:
        if (d.priority or 0) == 0:
            dims.append(DimSharding(d.axes, d.is_closed))
        else:
            replicated.extend(d.axes)
            dims.append(DimSharding((), True))
    replicated.sort(key=lambda a: a.sort_key_in(mesh))
    return TensorSharding(sharding.mesh, tuple(dims), tuple(replicated), sharding.unreduced)


def reopened(current: TensorSharding, original: TensorSharding, priority: int) -> TensorSharding:
    """Shardy's ``getUpdatedShardingForPriority``: the dims of ``priority`` get their
    original sharding back, and their axes leave the replicated list."""
    dims, seen = list(current.dims), set()
    for i, d in enumerate(original.dims):
        if (d.priority or 0) == priority:
            dims[i] = DimSharding(d.axes, d.is_closed)
            seen.update(d.axes)
    return TensorSharding(current.mesh, tuple(dims),
                          tuple(a for a in current.replicated if a not in seen), current.unreduced)


def run_user_priority(propagator: Propagator, run_stage, progress=None,
                      op_priority: bool = True) -> None:
    """User-priority propagation: op-priority bands once per priority (§7.2); one
    plain fixpoint per priority instead when ``op_priority`` is false."""
    module = propagator.module
    tracer = propagator.state.tracer
    if tracer is not None:
        tracer.begin("priority", "user priorities: dims with priority > 0 closed and replicated")
    references: dict[int, list[tuple]] = {}
    for site, read, write in sharding_sites(propagator):
        sharding = read()
        if sharding is None or not isinstance(sharding.mesh, str):
            continue
        for p in sorted({d.priority for d in sharding.dims if d.priority}):
            references.setdefault(p, []).append((read, write, sharding))
        new = initialized(sharding, module.meshes[sharding.mesh])
        if new != sharding:
            write(new)
    if tracer is not None:
        tracer.end()
    _run_priority(propagator, run_stage, progress, 0, op_priority)
    for priority in sorted(references):
        if tracer is not None:
            tracer.begin("priority", f"user priority {priority}: its dims re-opened")
        for read, write, original in references[priority]:
            write(reopened(read(), original, priority))
        if tracer is not None:
            tracer.end()
        _run_priority(propagator, run_stage, progress, priority, op_priority)


def _run_priority(propagator: Propagator, run_stage, progress, priority: int,
                  op_priority: bool) -> None:
    if op_priority:
        run_op_priority(propagator, run_stage, progress, priority)
    else:
        propagator.phase = f"user priority {priority}"
        propagator.propagate(progress=progress)
        propagator.phase = ""


def sharding_sites(propagator: Propagator):
    """(site, read, write) for every stored sharding that is not shadowed by a
    data-flow edge: values (op results, block arguments, edges) and function results."""
    state = propagator.state
    for value in propagator.module.values:
        if state.slot(value) is value and state.can_hold(value):
            yield value, (lambda v=value: state.get(v)), (lambda s, v=value: state.set(v, s))
    for func in propagator.module.funcs.values():
        results = len(func.mlir.attributes["function_type"].value.results)
        for i in range(results):
            yield (func, i), (lambda f=func, i=i: state.get_result(f, i)), \
                (lambda s, f=func, i=i: state.set_result(f, i, s))
