"""Sharding groups during propagation (§8.2).

``sync_sharding_groups`` runs once at the start of a propagation pass and
carries out what the Datalog stage ``sharding_group_map`` decides: a group
whose members' shardings agree gets that sharding on every member; a group
whose members disagree gets an open ``sdy.sharding_constraint`` after every
member, which becomes the member (Shardy warns and does the same).  The same
run decides the copies made during the pass (``copy_to``: which members get a
member's new sharding), which :class:`GroupCopies` hands to the driver.
"""

from __future__ import annotations

from typing import NamedTuple

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


class GroupCopy(NamedTuple):
    """One copy ``copy_to(gid, k, k2)`` decided: ``member`` (member ``k2`` of group
    ``gid``) gets the new sharding of member ``k``."""

    member: Value
    gid: int
    k: int
    k2: int


class GroupCopies:
    """The copies of stage ``sharding_group_map`` (``copy_to``), by the value id
    of the updated member; ``facts``: the facts the stage ran on (for proofs)."""

    def __init__(self, by_vid: dict[int, list[GroupCopy]] | None = None, facts=None):
        self.by_vid = by_vid or {}
        self.facts = facts

    def of(self, vid: int) -> list[GroupCopy]:
        """The copies a new sharding of value ``vid`` makes (none: not a member)."""
        return self.by_vid.get(vid, ())

    def decision(self, key, copy: GroupCopy) -> Decision:
        """The stage's decision behind ``copy``, for the tracer key of its member."""
        return Decision(SYNC_STAGE, self.facts, {key: [("copy_to", (copy.gid, copy.k, copy.k2))]})


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


def sync_sharding_groups(module: Module, state, run_stage) -> tuple[bool, object]:
    """Sync every group's shardings through ``state`` as stage
    ``sharding_group_map`` decides (``run_stage(stage, facts)`` runs it); returns
    whether the module was rewritten, and the stage's copies as a function of
    the module to carry them out on (``copies(module)`` -> :class:`GroupCopies`).

    ``state`` reads and writes shardings the way propagation does (through
    data-flow-edge slots).  When a group needs open constraints the module is
    rewritten and invalidated, so callers must build their state anew (and
    take the copies' members from the rewritten module).
    """
    groups = groups_of(module)
    if not groups:
        return False, lambda _module: GroupCopies()
    facts, shardings = sync_facts(groups, state)
    decided = run_stage(SYNC_STAGE, facts)

    def copies(module_now: Module) -> GroupCopies:
        members = groups_of(module_now)
        by_vid: dict[int, list[GroupCopy]] = {}
        for gid, k, k2 in sorted(decided["copy_to"]):
            by_vid.setdefault(members[gid][k].vid, []).append(
                GroupCopy(members[gid][k2], gid, k, k2))
        return GroupCopies(by_vid, facts)

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
        return False, copies
    state.write_back()
    for gid, k, s in constrained:
        common = shardings[s]
        _constrain(groups[gid][k], TensorSharding.open_empty(common.mesh, len(common.dims)))
    module.invalidate()
    return True, copies


def _constrain(member: Value, sharding: TensorSharding) -> None:
    """Insert ``sdy.sharding_constraint member <open>`` after ``member``; all uses go through it."""
    from sdy_dl.ir.context import mlir_context

    value = member.mlir
    with mlir_context():
        constraint = insert_sharding_op_after("sdy.sharding_constraint", value, sharding)
    value.replace_all_uses_except(constraint.results[0], constraint)
