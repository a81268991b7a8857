"""Sharding groups during propagation (§8.2).

``group_members`` maps each group member (the input of an
``sdy.sharding_group`` op) to its group's members in module order.
``sync_sharding_groups`` runs once at the start of a propagation pass: a
group whose members' shardings agree gets that sharding on every member; a
group whose members disagree gets an open ``sdy.sharding_constraint`` after
every member, which becomes the member (Shardy warns and does the same).
"""

from __future__ import annotations

from sdy_dl.ir import Module, Value
from sdy_dl.ir.loader import build_model
from sdy_dl.ir.mlir_ops import insert_sharding_op_after, sharding_group_id
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


def _fully_open_and_replicated(sharding: TensorSharding) -> bool:
    return all(not d.axes and not d.is_closed for d in sharding.dims)


def sync_sharding_groups(module: Module, state) -> Module:
    """Sync every group's shardings through ``state``; returns the (re-indexed) module.

    ``state`` reads and writes shardings the way propagation does (through
    data-flow-edge slots).  When a group needs open constraints the module is
    rewritten and re-indexed, so callers must build their state anew.
    """
    groups = groups_of(module)
    conflicts = []
    for gid in sorted(groups):
        members = groups[gid]
        if len(members) == 1:
            continue
        common, conflict = None, False
        for member in members:
            candidate = state.get(member)
            if candidate is None or _fully_open_and_replicated(candidate):
                continue
            if common is None:
                common = candidate
            elif candidate != common:
                conflict = True
                break
        if common is None:
            continue
        if not conflict:
            if state.tracer is not None:
                state.tracer.begin("group", f"sharding group {gid}: members synced")
            for member in members:
                if state.can_hold(member) and state.get(member) != common:
                    state.set(member, common)
            if state.tracer is not None:
                state.tracer.end()
        else:
            conflicts.append((members, common))
    if not conflicts:
        return module
    state.write_back()
    for members, common in conflicts:
        for member in members:
            _constrain(member, TensorSharding.open_empty(common.mesh, len(common.dims)))
    return build_model(module.mlir, module.file)


def _constrain(member: Value, sharding: TensorSharding) -> None:
    """Insert ``sdy.sharding_constraint member <open>`` after ``member``; all uses go through it."""
    from sdy_dl.ir.context import mlir_context

    value = member.mlir
    with mlir_context():
        constraint = insert_sharding_op_after("sdy.sharding_constraint", value, sharding)
    value.replace_all_uses_except(constraint.results[0], constraint)
