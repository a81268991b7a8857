"""``insert-explicit-reshards`` (Shardy's ``sdy-insert-explicit-reshards`` with its
default ``enable-full-version=false``, as the export pipeline runs it; semantics §9.3).

Per function, ops in post-order (terminators skipped):

* ``func.call``: each operand is first all-reduced over the unreduced axes the
  callee's argument sharding does not keep (right after the operand), then, when
  its sharding is not equivalent to the target, resharded to it.  The target is
  the callee's argument sharding (``getFuncArgShardings``; when the callee has
  none, fully closed shardings on the first non-maximal mesh of the operands,
  and nothing when they have none either; fully closed like the operand when
  the target is missing).
* every other op: operands with unreduced axes that the op's first result does
  not keep unreduced get an ``sdy.all_reduce`` right before the op
  (``insertAllReduceOnOpIfUnreducedToReplicated``); dots whose result conflicts
  with an operand only along the contracting axes are resharded
  (``processDot``, :mod:`.explicit_reshards_util`).
* ``func.return``: returned values are all-reduced over the unreduced axes the
  function result does not keep, and made unreduced on the axes it adds.
* ``sdy.reshard`` to more unreduced axes (and call operands and returned
  values whose target has more): ``sdy.replicated_to_unreduced`` /
  ``sdy.sharded_to_unreduced`` (``insertUnreducedCollectives``).

* data-flow ops (while, case, optimization barrier, manual and named
  computations): the sources of each edge owner are all-reduced over the
  unreduced axes the owner does not keep, and made unreduced on the axes it
  adds (``insertExplicitReshardsOnDataFlowOp``).
* ops whose results are unreduced: the axes of their reduction factors the
  results do not keep unreduced are all-reduced after them.

* ``stablehlo.concatenate`` whose operands are sharded unlike the result (the
  one op besides calls the non-full version treats in full): operands and
  results are resharded to the common axes
  (:mod:`.explicit_reshards_common_axes`).

Not implemented: the full version for every op (``enable-full-version=true``,
so ``mhlo.ragged_dot``, which the non-full version treats in full, is
rejected)."""

from __future__ import annotations

from sdy_dl.ir.meshes import mesh_of, module_meshes
from sdy_dl.ir.mlir_ops import (funcs, insert_sharding_op_after, op_error, rebuild, tensor_rank,
                                walk_post)
from sdy_dl.ir.model import Module
from sdy_dl.ir.value_sharding import block_arg_owners, edge_sources, get_sharding, result_owners
from sdy_dl.passes import PassOptions, register
from sdy_dl.ir.mlir_ops import insert_after_value, is_block_arg, key, value_index
from sdy_dl.ir.storage import read_own, read_stored
from sdy_dl.ir.traits import DATA_FLOW_OPS, TERMINATORS
from sdy_dl.passes.call_graph import callee_name, func_result_shardings, func_table
from sdy_dl.passes.export.explicit_reshards_common_axes import (concat_needs_full_version,
                                                                reshard_to_common_axes)
from sdy_dl.passes.export.explicit_reshards_util import (DOT_OPS, all_reduce_reduction_factors,
                                                         insert_all_reduce_if_unreduced_to_replicated,
                                                         insert_unreduced_collectives,
                                                         reshard_dot_result)
from sdy_dl.passes.export.insert_func_call_reshards import fully_closed_like, is_equivalent
from sdy_dl.passes.import_.import_func_calls import func_arg_shardings
from sdy_dl.sharding import DimSharding, TensorSharding

UNSUPPORTED = frozenset({"mhlo.ragged_dot"})


def call_targets(call, func, meshes) -> list[TensorSharding] | None:
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


def reshard_operands(call, func, meshes) -> bool:
    targets = call_targets(call, func, meshes)
    if targets is None:
        return False
    changed = False
    for i, target in enumerate(targets):
        have, inserted = to_target_unreduced(call, i, target, meshes)
        changed |= inserted
        operand = call.operands[i]
        if have is None and target is None or is_equivalent(target, have):
            continue
        sharding = target if target is not None else fully_closed_like(have)
        reshard = insert_sharding_op_after("sdy.reshard", operand, sharding, call.location)
        call.operands[i] = reshard.results[0]
        changed = True
    return changed


def op_rules(module: Module, options: PassOptions):
    """``rule(mop)``: the sharding rule of an op of ``module`` as it was loaded
    (rules and the rule files are read at the first call)."""
    state: dict = {}

    def rule(mop):
        if not state:
            from sdy_dl.rules.db import load_rule_db

            state["db"] = load_rule_db(options.rule_files, conservative=False)
            state["ops"] = {key(op.mlir): op for op in module.ops}
        op = state["ops"].get(key(mop))
        return None if op is None else state["db"].rule_for(op, module)
    return rule


def has_unreduced(value) -> bool:
    sharding = get_sharding(value)
    return sharding is not None and bool(sharding.unreduced)


def reshard_to_unreduced(reshard, meshes) -> bool:
    """Shardy's ``convertReshardToUnreducedCollectives``: a reshard to more
    unreduced axes becomes the unreduced collectives (inserted before it)."""
    from jaxlib.mlir import ir

    if insert_unreduced_collectives(reshard, 0, read_own(reshard), meshes,
                                    lambda op: ir.InsertionPoint(reshard).insert(op)) is None:
        return False
    reshard.results[0].replace_all_uses_with(reshard.operands[0])
    reshard.erase()
    return True


def to_target_unreduced(mop, index: int, target: TensorSharding | None, meshes):
    """The non-full ``insertExplicitReshardsToTargetSharding`` on operand ``index``
    of ``mop``, inserting after the operand: the unreduced axes ``target`` does
    not keep are all-reduced, then the axes it adds are made unreduced.
    Returns (the operand's sharding afterwards, whether anything was inserted)."""
    value = mop.operands[index]
    have = get_sharding(value)
    reduced = insert_all_reduce_if_unreduced_to_replicated(
        mop, index, have, target, meshes, lambda op: insert_after_value(value, op))
    changed = reduced is not have
    unreduced = insert_unreduced_collectives(
        mop, index, target, meshes, lambda op: insert_after_value(op.operands[0], op))
    if unreduced is not None:
        reduced, changed = unreduced, True
    return reduced, changed


def data_flow_edge_sources(mop, meshes) -> bool:
    """``insertExplicitReshardsOnDataFlowOp`` (non-full version) for every
    data-flow op (while, case, optimization barrier, manual and named
    computations): each source of each edge owner is brought to the owner's
    unreduced axes (:func:`to_target_unreduced`), in Shardy's order.  The
    owner's sharding is the one stored for it (the op's ``sdy.sharding``, a
    computation's ``out_shardings`` / ``in_shardings``)."""
    changed = False
    for owner in result_owners(mop) + block_arg_owners(mop):
        target = read_stored(mop, value_index(owner), is_block_arg(owner))
        for op, index in edge_sources(mop, owner):
            changed |= to_target_unreduced(op, index, target, meshes)[1]
    return changed


def all_reduce_unreduced_operands(mop, meshes) -> bool:
    """Shardy's ``insertAllReduceOnOpIfUnreducedToReplicated``: operands with
    unreduced axes the first result does not keep unreduced are all-reduced
    right before ``mop``."""
    from jaxlib.mlir import ir

    if len(mop.results) == 0:
        return False
    user = get_sharding(mop.results[0])
    changed = False
    for i in range(len(mop.operands)):
        have = get_sharding(mop.operands[i])
        changed |= insert_all_reduce_if_unreduced_to_replicated(
            mop, i, have, user, meshes, lambda op: ir.InsertionPoint(mop).insert(op)) is not have
    return changed


def all_reduce_returned(func, meshes) -> bool:
    """The unreduced axes of returned values that the function result does not
    keep unreduced are all-reduced right before the ``func.return``."""
    from jaxlib.mlir import ir

    ret = func.regions[0].blocks[0].operations[len(func.regions[0].blocks[0].operations) - 1]
    ret = ret.operation
    targets = func_result_shardings(func, meshes) or [None] * len(ret.operands)
    changed = False
    for i, target in enumerate(targets):
        have = get_sharding(ret.operands[i])
        changed |= insert_all_reduce_if_unreduced_to_replicated(
            ret, i, have, target, meshes, lambda op: ir.InsertionPoint(ret).insert(op)) is not have
        changed |= insert_unreduced_collectives(
            ret, i, target, meshes, lambda op: ir.InsertionPoint(ret).insert(op)) is not None
    return changed


@register("insert-explicit-reshards",
          "Reshard call operands to the callee's argument shardings (non-full version, calls only).")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        meshes = module_meshes(module)
        table = func_table(module)
        rules = op_rules(module, options)
        changed = False
        for func in funcs(module):
            for mop in walk_post(func)[:-1]:
                if mop.name in UNSUPPORTED:
                    raise op_error(module, mop, f"insert-explicit-reshards: {mop.name} "
                                   "is not supported")
                if mop.name in DATA_FLOW_OPS:
                    changed |= data_flow_edge_sources(mop, meshes)
                    continue
                if mop.name in TERMINATORS:
                    continue
                if mop.name == "func.call":
                    changed |= reshard_operands(mop, table[callee_name(mop)], meshes)
                    continue
                if mop.name == "sdy.reshard" and reshard_to_unreduced(mop, meshes):
                    changed = True
                    continue
                changed |= all_reduce_unreduced_operands(mop, meshes)
                if mop.name in DOT_OPS:
                    changed |= reshard_dot_result(mop, rules(mop), meshes)
                if mop.name == "stablehlo.concatenate" and concat_needs_full_version(mop):
                    changed |= reshard_to_common_axes(mop, rules(mop), meshes)
                if mop.results and has_unreduced(mop.results[0]):
                    changed |= all_reduce_reduction_factors(mop, rules(mop), meshes)
            changed |= all_reduce_returned(func, meshes)
        return rebuild(module) if changed else module
