"""``apply-sharding-constraints`` (Shardy's ``sdy-apply-sharding-constraints``, §8.3).

Ops are visited in post-order.  A ``sharding_constraint`` first applies the
chain rule, then may copy its sharding onto its input; a
``manual_computation`` may copy each ``in_sharding`` onto its operand.  The
copy happens when the input can hold a sharding and has none, the sharding is
fully closed, and no other constraint/manual user of the input has a
different sharding.  For a data-flow-edge input the constraint is moved right
after the input instead (a manual computation creates a new constraint there)
and every other use of the input goes through it; unreduced axes are still
written onto the input.  A constraint whose sharding is copied gets its
pointwise ``sdy.sharding_rule``.

Which constraints apply and the chain rule are the Datalog stage
``apply_sharding_constraints``; Python gathers facts and performs the rewrites.
"""

from __future__ import annotations

from sdy_dl.ir.mlir_ops import (SHARDING_RULE_ATTR, insert_sharding_op_after, is_block_arg,
                                owning_op, tensor_info, uses)
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import op_names
from sdy_dl.ir.storage import parse_attr, read_own, read_per_value
from sdy_dl.ir.value_sharding import (get_sharding, lookup_data_flow_edge, set_sharding,
                                      shardable_value)
from sdy_dl.ir.walk import BLOCK, OP, key, walk_numbered
from sdy_dl.passes import PassOptions, Stage, register
from sdy_dl.passes.options import Option
from sdy_dl.rules.instance import factor_name
from sdy_dl.sharding import TensorSharding

#: The Datalog stage this pass runs (``datalog/apply_sharding_constraints/``).
STAGE = Stage("apply_sharding_constraints")


def pointwise_rule(type_) -> str:
    _, shape = tensor_info(type_)
    shape = shape or ()
    names = [factor_name(i) for i in range(len(shape))]
    dims = ", ".join(names)
    text = f"#sdy.op_sharding_rule<([{dims}])->([{dims}])"
    if names:
        text += " {" + ", ".join(f"{n}={d}" for n, d in zip(names, shape)) + "}"
    return text + ">"


def _ops_with_blocks(root):
    """(op, id, block id, position in block) for every op, in post-order;
    ids are pre-order numbers (:func:`~sdy_dl.ir.loader.walk_numbered`'s),
    blocks are numbered by first visit."""
    out = []
    opened = []            # per op whose regions are open: its entry, the place after it
    block, pos, blocks = None, 0, 0   # the block being filled, the next op's position in it
    for event in walk_numbered([root.operation]):
        kind = event[0]
        if kind == OP:
            mop = event[1]
            entry = (mop, event[2], block, pos)
            pos += 1
            if len(mop.regions):
                opened.append((entry, block, pos))
            else:
                out.append(entry)
        elif kind == BLOCK:
            block, pos, blocks = blocks, 0, blocks + 1
        else:
            entry, block, pos = opened.pop()
            out.append(entry)
    return out


#: The ops whose shardings may be applied to their inputs.
APPLIER_OPS = frozenset({"sdy.sharding_constraint", "sdy.manual_computation"})


class _Facts:
    def __init__(self):
        self.value_ids: dict = {}
        self.values: list = []
        self.sharding_ids: dict = {}
        self.facts = {k: set() for k in (
            "in_applier", "in_open_sharding", "in_unreduced_sharding", "in_place",
            "in_initially_sharded", "in_edge_value", "in_constraint", "in_use", "in_constraint_user",
            "in_func_return", "in_op_in_block")}

    def value(self, v) -> int:
        i = self.value_ids.get(key(v))
        if i is None:
            i = self.value_ids[key(v)] = len(self.values)
            self.values.append(v)
        return i

    def sharding(self, s: TensorSharding) -> int:
        text = s.to_text()
        i = self.sharding_ids.get(text)
        if i is None:
            i = self.sharding_ids[text] = len(self.sharding_ids)
            if not s.is_fully_closed:
                self.facts["in_open_sharding"].add((i,))
            if s.unreduced:
                self.facts["in_unreduced_sharding"].add((i,))
        return i


def collect(module: Module):
    ops = _ops_with_blocks(module.mlir.operation)
    op_id = {key(op): i for op, i, _, _ in ops}
    f = _Facts()
    appliers = []       # (kind, op, op id, operand index)
    for op, oid, block_id, pos in ops:
        if block_id is not None:
            f.facts["in_op_in_block"].add((oid, block_id, pos))
        if op.name == "func.return":
            f.facts["in_func_return"].add((oid,))
        if op.name == "sdy.sharding_constraint":
            f.facts["in_constraint_user"].add((oid,))
            x, r = op.operands[0], op.results[0]
            f.facts["in_constraint"].add((oid, f.value(x), f.value(r)))
            appliers.append(("constraint", op, oid, 0))
            s = read_own(op)
            f.facts["in_applier"].add((len(appliers) - 1, len(appliers) - 1, f.value(x), f.sharding(s)))
        elif op.name == "sdy.manual_computation":
            f.facts["in_constraint_user"].add((oid,))
            ins = read_per_value(op, "in_shardings") or []
            for i, (operand, s) in enumerate(zip(op.operands, ins)):
                appliers.append(("manual", op, oid, i))
                f.facts["in_applier"].add((len(appliers) - 1, len(appliers) - 1, f.value(operand),
                                        f.sharding(s)))
    # Per-value facts for every value seen so far (inputs and constraint results).
    for v in list(f.values):
        vid = f.value_ids[key(v)]
        for user, i in uses(v):
            f.facts["in_use"].add((vid, op_id[key(user)], i))
        p = shardable_value(v)
        if p is not None:
            pid = f.value(p)
            f.facts["in_place"].add((vid, pid))
            if get_sharding(v) is not None:
                f.facts["in_initially_sharded"].add((pid,))
        if (not is_block_arg(v) and owning_op(v).name == "sdy.data_flow_edge") \
                or lookup_data_flow_edge(v) is not None:
            f.facts["in_edge_value"].add((vid,))
    return f, appliers, {i: op for op, i, _, _ in ops}


def _move_after_value(op, value) -> None:
    if is_block_arg(value):
        block = value.owner
        first = next(iter(block.operations)).operation
        if first != op:
            op.move_before(first)
    else:
        op.move_after(owning_op(value))


def apply_constraint(op, value, sharding: TensorSharding, kind: str) -> None:
    """The rewrite of ``applyConstraint`` once the decision is taken."""
    edge = ((not is_block_arg(value) and owning_op(value).name == "sdy.data_flow_edge")
            or lookup_data_flow_edge(value) is not None)
    if not edge:
        if kind == "constraint" and SHARDING_RULE_ATTR not in op.attributes:
            op.attributes[SHARDING_RULE_ATTR] = parse_attr(pointwise_rule(op.results[0].type))
        set_sharding(value, sharding)
        return
    if kind == "constraint":
        _move_after_value(op, value)
        constraint = op
    else:
        constraint = insert_sharding_op_after("sdy.sharding_constraint", value, sharding,
                                              op.location)
    value.replace_all_uses_except(constraint.results[0], constraint)
    if sharding.unreduced:
        current = get_sharding(value)
        if current is None:
            from sdy_dl.ir.mlir_ops import tensor_rank
            current = TensorSharding.open_empty(sharding.mesh, tensor_rank(value.type))
        set_sharding(value, TensorSharding(current.mesh, current.dims, current.replicated,
                                           sharding.unreduced))


DEBUG_SHARDING_ORIGINS = Option("debug-sharding-origins", "bool", False,
                                "Record where each sharding came from.", implemented=False)
DEBUG_PROPAGATION_EDGE_SHARDING = Option("debug-propagation-edge-sharding", "bool", False,
                                         "Record the edges shardings propagated along.",
                                         implemented=False)


@register("apply-sharding-constraints",
          "Copy fully closed sharding constraints onto their unsharded inputs; chain rule.",
          (DEBUG_SHARDING_ORIGINS, DEBUG_PROPAGATION_EDGE_SHARDING))
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        if not op_names(module) & APPLIER_OPS:
            return module  # nothing to apply: no facts to gather
        f, appliers, ops_by_id = collect(module)
        if not appliers:
            return module
        out = STAGE.run(f.facts, options)
        applied = {a for (a,) in out["apply"]}
        chain_tail = {h: t for h, t in out["chain"]}
        redirects: dict = {}
        for o, i, t in out["redirect"]:
            redirects.setdefault(t, []).append((o, i))
        for a, (kind, op, oid, index) in enumerate(appliers):
            if kind == "constraint" and oid in chain_tail:
                tail_id = chain_tail[oid]
                tail = ops_by_id[tail_id]
                for o, i in sorted(redirects.get(tail_id, ())):
                    ops_by_id[o].operands[i] = tail.results[0]
            if a not in applied:
                continue
            value = op.operands[index]
            if kind == "constraint":
                sharding = read_own(op)
            else:
                sharding = read_per_value(op, "in_shardings")[index]
            apply_constraint(op, value, sharding, kind)
        return module.invalidate()
