"""``sharding-group-import`` (Shardy's ``sdy-sharding-group-import``, semantics §8.2).

1. Validation (per original group id, ops in walk order): all members lie in
   the same ``manual_computation`` (or none), and have the same shape.  The
   first violation is a one-line error.
2. Unification: the ids tagging one tensor are united, transitively; classes
   are renumbered ``0..N-1`` exactly as Shardy's union-find orders them.
3. A tensor tagged more than once keeps only its first ``sharding_group`` op.

The analysis (validation, union, renumbering, duplicates) is the Datalog
stage ``sharding_group_import``; Python collects facts and rewrites ops.
"""

from __future__ import annotations

from sdy_dl.ir.mlir_ops import enclosing, op_error, sharding_group_id
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import op_names, ops_named
from sdy_dl.ir.walk import key
from sdy_dl.passes import PassOptions, Stage, register

#: The Datalog stage this pass runs (``datalog/sharding_group_import/``).
STAGE = Stage("sharding_group_import")


def _shape_text(value) -> str:
    from jaxlib.mlir import ir

    t = value.type.maybe_downcast()
    if isinstance(t, ir.ShapedType) and t.has_rank:
        return "x".join(str(d) for d in t.shape) or "scalar"
    return "none"


def collect(module: Module):
    """The sharding_group ops in walk order and the facts of the analysis."""
    ops = ops_named(module, ("sdy.sharding_group",))
    tensor_index: dict = {}
    per_tensor: dict[int, int] = {}
    gid_index: dict[int, int] = {}
    members = []
    places = []
    mc_index: dict = {}
    for i, op in enumerate(ops):
        value = op.operands[0]
        t = tensor_index.setdefault(key(value), len(tensor_index))
        p = per_tensor.get(t, 0)
        per_tensor[t] = p + 1
        gid = sharding_group_id(op)
        g = gid_index.setdefault(gid, len(gid_index))
        members.append((i, t, p, g))
        mc = enclosing(op, "sdy.manual_computation")
        m = -1 if mc is None else mc_index.setdefault(key(mc), len(mc_index))
        places.append((i, g, m, _shape_text(value)))
    # K: the union-find insertion order, tensor-major then position.
    order = sorted(range(len(members)), key=lambda j: (members[j][1], members[j][2]))
    insert_key = {j: k for k, j in enumerate(order)}
    facts = {"in_group_member": [m + (insert_key[j],) for j, m in enumerate(members)],
             "in_group_place": places}
    original = {g: gid for gid, g in gid_index.items()}
    return ops, facts, original


@register("sharding-group-import",
          "Validate sharding groups, unify groups sharing a tensor, renumber them 0..N-1.")
def run(module: Module, options: PassOptions) -> Module:
    from jaxlib.mlir import ir

    from sdy_dl.ir.context import mlir_context

    if "sdy.sharding_group" not in op_names(module):
        return module
    with mlir_context():
        ops, facts, original = collect(module)
        if not ops:
            return module
        out = STAGE.run(facts, options)
        errors = sorted([(op, 0, g) for op, g in out["crosses_manual"]]
                        + [(op, 1, g) for op, g in out["shape_mismatch"]])
        if errors:
            op, kind, g = errors[0]
            what = ("ShardingGroupOps values cannot cross ManualComputationOp boundaries"
                    if kind == 0 else "ShardingGroupOps values must have the same shape")
            raise op_error(module, ops[op], f"{what} for groupId: {original[g]}")
        i64 = ir.IntegerType.get_signless(64)
        for op, n in out["new_group"]:
            ops[op].attributes["group_id"] = ir.IntegerAttr.get(i64, n)
        for (op,) in sorted(out["duplicate"]):
            ops[op].erase()
        return module.invalidate()
