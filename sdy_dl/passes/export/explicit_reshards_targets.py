"""insert-explicit-reshards on values that flow into a target sharding
(Shardy's ``insertExplicitReshardsToTargetSharding`` and its callers): the
sources of data-flow edges, call operands and returned values, plus the
all-reduces of an op's unreduced operands and reshards to more unreduced
axes.

A value is all-reduced over the unreduced axes its target does not keep, made
unreduced on the axes the target adds and, in the full version, resharded to
the target when its sharding is not equivalent to it.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from sdy_dl.ir.manual_axes import erase_manual_axes, manual_axes
from sdy_dl.ir.meshes import mesh_of
from sdy_dl.ir.mlir_ops import (insert_after_value, insert_sharding_op_after, is_block_arg,
                                tensor_rank, value_index)
from sdy_dl.ir.storage import read_func_attr, read_own, read_stored
from sdy_dl.ir.sdy_attrs import sharding_attr
from sdy_dl.ir.value_sharding import block_arg_owners, edge_sources, get_sharding, result_owners
from sdy_dl.passes.export.explicit_reshards_util import insert_all_reduce_if_unreduced_to_replicated
from sdy_dl.passes.export.insert_unreduced_collectives import insert_unreduced_collectives
from sdy_dl.passes.export.insert_func_call_reshards import fully_closed_like
from sdy_dl.passes.export.is_equivalent import IsEquivalent
from sdy_dl.passes.import_.import_func_calls import func_arg_shardings
from sdy_dl.sharding import DimSharding, TensorSharding


def reshard_to_target(mop, index: int, target: TensorSharding | None, meshes,
                      on_full: bool, equivalent: IsEquivalent, options) -> bool:
    """Shardy's ``insertExplicitReshardsToTargetSharding`` with the new ops right
    after operand ``index`` of ``mop``: all-reduce the unreduced axes ``target``
    does not keep, make unreduced the axes it adds, and, in full, reshard to
    ``target`` when the sharding is not equivalent to it."""
    operand = mop.operands[index]
    have = get_sharding(operand)
    reduced = insert_all_reduce_if_unreduced_to_replicated(
        mop, index, have, target, meshes, lambda op, v=operand: insert_after_value(v, op))
    changed = reduced is not have
    unreduced = insert_unreduced_collectives(
        mop, index, target, meshes, lambda op: insert_after_value(op.operands[0], op), options)
    if unreduced is not None:
        reduced, changed = unreduced, True
    if not on_full or equivalent(reduced, target):
        return changed
    operand = mop.operands[index]
    sharding = target if target is not None else fully_closed_like(reduced)
    reshard = insert_sharding_op_after("sdy.reshard", operand, sharding, operand.location)
    mop.operands[index] = reshard.results[0]
    return True


def call_targets(call, func, meshes) -> list[TensorSharding] | None:
    """The target shardings of a call's operands: the callee's argument
    shardings; without any, fully closed shardings on the first operand mesh
    that is not maximal; None when there is none either."""
    targets = func_arg_shardings(func, meshes)
    if targets is not None:
        return targets
    for operand in call.operands:
        s = get_sharding(operand)
        mesh = None if s is None else mesh_of(s, meshes)
        if mesh is not None and not mesh.is_maximal:
            return [TensorSharding(s.mesh, tuple(DimSharding((), True)
                                                 for _ in range(tensor_rank(o.type))))
                    for o in call.operands]
    return None


def reshard_call_operands(call, func, meshes, equivalent: IsEquivalent, options) -> bool:
    """``insertExplicitReshardsOnCallOp`` (calls are always treated in full)."""
    targets = call_targets(call, func, meshes)
    if targets is None:
        return False
    changed = False
    for i, target in enumerate(targets):
        changed |= reshard_to_target(call, i, target, meshes, True, equivalent, options)
    return changed


def edge_owners(mop):
    """``(owner target sharding, [(op, operand index) of each source])`` of every
    edge owner of data-flow op ``mop``, results first, then block arguments
    (Shardy's ``ShardableDataFlowOpInterface``): the owner's stored sharding
    as the edge sees it before propagation (a manual computation's result in
    its local view, without the manual axes)."""
    manual = manual_axes(mop) if mop.name == "sdy.manual_computation" else []
    out = []
    for owner in result_owners(mop) + block_arg_owners(mop):
        block_arg = is_block_arg(owner)
        target = read_stored(mop, value_index(owner), block_arg)
        if target is not None and manual and not block_arg:
            target = erase_manual_axes(target, manual)
        out.append((target, edge_sources(mop, owner)))
    return out


def reshard_edge_sources(mop, meshes, on_full: bool, equivalent: IsEquivalent,
                         options) -> bool:
    """``insertExplicitReshardsOnDataFlowOp``."""
    changed = False
    for target, sources in edge_owners(mop):
        for user, i in sources:
            changed |= reshard_to_target(user, i, target, meshes, on_full, equivalent, options)
    return changed


def reshard_to_unreduced(reshard, meshes, options) -> bool:
    """Shardy's ``convertReshardToUnreducedCollectives``: a reshard to more
    unreduced axes becomes the unreduced collectives (inserted before it)."""
    if insert_unreduced_collectives(reshard, 0, read_own(reshard), meshes,
                                    lambda op: ir.InsertionPoint(reshard).insert(op),
                                    options) is None:
        return False
    reshard.results[0].replace_all_uses_with(reshard.operands[0])
    reshard.erase()
    return True


def all_reduce_unreduced_operands(mop, user: TensorSharding | None, meshes,
                                  sharding=get_sharding) -> bool:
    """Shardy's ``insertAllReduceOnOpIfUnreducedToReplicated``: operands with
    unreduced axes the first result (its sharding: ``user``) does not keep
    unreduced are all-reduced right before ``mop`` (``sharding(value)`` reads a
    value's sharding)."""
    if len(mop.results) == 0:
        return False
    changed = False
    for i, operand in enumerate(list(mop.operands)):   # (an all-reduce replaces operand i only)
        have = sharding(operand)
        if have is None or not have.unreduced:
            continue   # nothing unreduced: nothing to all-reduce
        changed |= insert_all_reduce_if_unreduced_to_replicated(
            mop, i, have, user, meshes, lambda op: ir.InsertionPoint(mop).insert(op)) is not have
    return changed


def reshard_returned(func, meshes, on_full: bool, equivalent: IsEquivalent, options) -> bool:
    """``insertExplicitReshardsOnFuncReturn``: each returned value against the
    function's result sharding, the new ops right before the return."""
    block = func.regions[0].blocks[0]
    ret = block.operations[len(block.operations) - 1].operation
    changed = False
    for i in range(len(ret.operands)):
        target = read_func_attr(func, "res_attrs", i)
        have = get_sharding(ret.operands[i])
        reduced = insert_all_reduce_if_unreduced_to_replicated(
            ret, i, have, target, meshes, lambda op: ir.InsertionPoint(ret).insert(op))
        changed |= reduced is not have
        unreduced = insert_unreduced_collectives(
            ret, i, target, meshes, lambda op: ir.InsertionPoint(ret).insert(op), options)
        if unreduced is not None:
            reduced, changed = unreduced, True
        if on_full and not equivalent(reduced, target):
            sharding = target if target is not None else fully_closed_like(reduced)
            reshard = ir.Operation.create("sdy.reshard", results=[ret.operands[i].type],
                                          operands=[ret.operands[i]],
                                          attributes={"sharding": sharding_attr(sharding)},
                                          loc=ret.operands[i].location)
            ir.InsertionPoint(ret).insert(reshard)
            ret.operands[i] = reshard.results[0]
            changed = True
    return changed
