"""Sharding groups during propagation (§8.2).

``group_members`` maps each group member (the input of an
``sdy.sharding_group`` op) to its group's members in module order.
``sync_sharding_groups`` runs once at the start of a propagation pass and
carries out what the Datalog stage ``sharding_group_map`` decides: a group
whose members' shardings agree gets that sharding on every member; a group
whose members disagree gets an open ``sdy.sharding_constraint`` after every
member, which becomes the member (Shardy warns and does the same).
"""

from __future__ import annotations

from sdy_dl.ir import Module, Value
from sdy_dl.ir.mlir_ops import insert_sharding_op_after, sharding_group_id
from sdy_dl.propagation.decisions import Decision
from sdy_dl.propagation.state import value_key
from sdy_dl.sharding import TensorSharding


def groups_of(module: Module) -> dict[int, list[Value]]:
    """group id -> its members (the inputs of its ``sdy.sharding_group`` ops) in module order."""
    groups: dict[int, list[Value]] = {}
    for op in module.ops:
        if op.name == "sdy.sharding_group":
            groups.setdefault(sharding_group_id(op.mlir), []).append(op.operands[0])
    return groups


def group_members(module: Module) -> dict[int, list[Value]]:
    """value id -> the members of its group (the value included), in module order."""
    return {v.vid: members for members in groups_of(module).values() for v in members}


#: The stage that decides the sync.
SYNC_STAGE = "sharding_group_map"


def sync_facts(groups: dict[int, list[Value]], state) -> tuple[dict, list[TensorSharding]]:
    """The facts of stage ``sharding_group_map`` for ``groups`` (values numbered
    by their position in the module's walk, as their vids), and the shardings by
    their number."""
    facts: dict[str, list[tuple]] = {"in_member": [], "in_sharding": [], "in_dim": [],
                                     "in_can_hold": []}
    numbers: dict[TensorSharding, int] = {}
    for gid, members in groups.items():
        for k, member in enumerate(members):
            facts["in_member"].append((gid, k, member.vid))
            if state.can_hold(member):
                facts["in_can_hold"].append((member.vid,))
            sharding = state.get(member)
            if sharding is None:
                continue
            if sharding not in numbers:
                numbers[sharding] = len(numbers)
                facts["in_dim"].extend((numbers[sharding], d, int(dim.is_closed), len(dim.axes))
                                       for d, dim in enumerate(sharding.dims))
            facts["in_sharding"].append((member.vid, numbers[sharding]))
    return facts, list(numbers)


def sync_sharding_groups(module: Module, state, run_stage) -> bool:
    """Sync every group's shardings through ``state`` as stage
    ``sharding_group_map`` decides (``run_stage(stage, facts)`` runs it); returns
    whether the module was rewritten.

    ``state`` reads and writes shardings the way propagation does (through
    data-flow-edge slots).  When a group needs open constraints the module is
    rewritten and invalidated, so callers must build their state anew.
    """
    groups = groups_of(module)
    if not groups:
        return False
    facts, shardings = sync_facts(groups, state)
    decided = run_stage(SYNC_STAGE, facts)
    synced: dict[int, list[tuple[int, int]]] = {}
    for gid, k, s in sorted(decided["synced"]):
        synced.setdefault(gid, []).append((k, s))
    for gid in sorted(synced):
        members = groups[gid]
        if state.tracer is not None:
            state.tracer.begin("group", f"sharding group {gid}: members synced",
                               decision=Decision(SYNC_STAGE, facts, {
                                   value_key(state.slot(members[k])): [("synced", (gid, k, s))]
                                   for k, s in synced[gid]}))
        for k, s in synced[gid]:
            state.set(members[k], shardings[s])
        if state.tracer is not None:
            state.tracer.end()
    constrained = sorted(decided["constrained"])
    if not constrained:
        return False
    state.write_back()
    for gid, k, s in constrained:
        common = shardings[s]
        _constrain(groups[gid][k], TensorSharding.open_empty(common.mesh, len(common.dims)))
    module.invalidate()
    return True


def _constrain(member: Value, sharding: TensorSharding) -> None:
    """Insert ``sdy.sharding_constraint member <open>`` after ``member``; all uses go through it."""
    from sdy_dl.ir.context import mlir_context

    value = member.mlir
    with mlir_context():
        constraint = insert_sharding_op_after("sdy.sharding_constraint", value, sharding)
    value.replace_all_uses_except(constraint.results[0], constraint)
