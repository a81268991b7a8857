"""Data-flow edges (§8.1): owners, sources, targets, and where a value's sharding lives.

For every ``%e = sdy.data_flow_edge %owner`` the edge knows its sources and
its non-owner targets.  While the edge exists, reading or writing the
sharding of any of its targets (the owner and the non-owner targets) goes to
the edge op's own ``sharding`` (§1.5): ``slot_of`` maps each value to the
value whose sharding it uses.

A function data-flow edge (``sdy.func_data_flow_edge``, dedup-functions-fully
mode) has no slots: its own result holds its sharding, and its sources are
call operands or a callee's returned value (``func_edge_sources``).
"""

from __future__ import annotations


from sdy_dl.ir import Module, Op, Value


class DataFlowEdge:
    """One ``sdy.data_flow_edge`` op with the values it ties together (compared by
    identity)."""

    def __init__(self, op: Op, owner: Value, sources: list[Value],
                 source_uses: list[tuple[Op, int]], other_targets: list[Value]):
        self.op = op
        self.owner = owner
        self.sources = sources
        self.source_uses = source_uses   # the (user, operand index) uses that are sources
        self.other_targets = other_targets

    def __repr__(self) -> str:
        return f"DataFlowEdge(op={self.op!r}, owner={self.owner!r})"

    @property
    def result(self) -> Value:
        return self.op.results[0]


def _terminator(block) -> Op:
    return block.ops[-1]


def edge_of_owner(owner: Value) -> tuple[list[tuple[Op, int]], list[Value]]:
    """(source uses, non-owner targets) of the edge owned by ``owner``."""
    if owner.is_block_arg:
        parent = owner.block.region.owner
        if parent.name in ("sdy.named_computation", "sdy.manual_computation"):
            return [(parent, owner.index)], []
        return [], []
    op, i = owner.defining_op, owner.index
    if op.name == "stablehlo.while":
        cond, body = (r.blocks[0] for r in op.regions)
        return [(op, i), (_terminator(body), i)], [cond.args[i], body.args[i]]
    if op.name == "stablehlo.case":
        return [(_terminator(r.blocks[0]), i) for r in op.regions], []
    if op.name == "stablehlo.optimization_barrier":
        return [(op, i)], []
    if op.name in ("sdy.named_computation", "sdy.manual_computation"):
        return [(_terminator(op.regions[0].blocks[0]), i)], []
    return [], []


def find_edges(module: Module) -> list[DataFlowEdge]:
    """Every data-flow edge op of the module, in program order."""
    edges = []
    for op in module.ops:
        if op.name != "sdy.data_flow_edge":
            continue
        owner = op.operands[0]
        uses, targets = edge_of_owner(owner)
        edges.append(DataFlowEdge(op, owner, [u.operands[k] for u, k in uses], uses, targets))
    return edges


def slot_map(module: Module, edges: list[DataFlowEdge]) -> dict[int, Value]:
    """value id -> the value holding its sharding, for every value that does not
    hold its own: each edge target uses the edge result; without an edge, a
    while's condition and body arguments use the while result they are the
    targets of (Shardy's ``getShardableValue``: ``getEdgeOwnerFromTarget``),
    which keeps it in the while's ``sdy.sharding``."""
    slots: dict[int, Value] = {}
    for e in edges:
        for t in [e.owner, *e.other_targets]:
            slots[t.vid] = e.result
    for op in module.ops:
        if op.name != "stablehlo.while":
            continue
        for region in op.regions:
            for arg in region.blocks[0].args:
                if arg.vid not in slots:
                    slots[arg.vid] = op.results[arg.index]
    return slots


def func_edge_sources(module: Module, callers: dict[str, list[Op]]) -> dict[int, list[Value]]:
    """op id -> sources of every ``sdy.func_data_flow_edge`` (Shardy's
    ``PropagateFuncDataFlowEdgeOp``): for an edge on argument N of a function,
    operand N of every call to it (no entry when nothing calls it); for an edge
    on result N of a call, operand N of the callee's ``func.return``."""
    sources: dict[int, list[Value]] = {}
    for op in module.ops:
        if op.name != "sdy.func_data_flow_edge":
            continue
        wrapped = op.operands[0]
        if wrapped.is_block_arg:
            func = wrapped.block.region.owner
            calls = callers.get(func_symbol(func), [])
            if calls:
                sources[op.oid] = [c.operands[wrapped.index] for c in calls]
            continue
        callee = module.funcs.get(callee_of(wrapped.defining_op))
        ret = module.func_return(callee) if callee is not None else None
        sources[op.oid] = [ret.operands[wrapped.index]] if ret is not None and ret.name == "func.return" else []
    return sources


def callee_of(call: Op) -> str:
    """The callee symbol of a ``func.call``."""
    return call.attr_text("callee").lstrip("@").strip('"')


def func_symbol(func: Op) -> str:
    """The symbol name of a ``func.func``."""
    return func.attr_text("sym_name").strip('"')


def call_sites(module: Module) -> dict[str, list[Op]]:
    """callee name -> its ``func.call`` ops in module walk order."""
    callers: dict[str, list[Op]] = {}
    for op in module.ops:
        if op.name == "func.call":
            callers.setdefault(callee_of(op), []).append(op)
    return callers
