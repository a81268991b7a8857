"""``insert-explicit-reshards`` (Shardy's ``sdy-insert-explicit-reshards``;
semantics §9.3): in its default non-full version (as the export pipeline runs
it) and with ``enable-full-version=true``.

Per function, ops in post-order (terminators skipped); an op is treated "in
full" when the option is on, and always for ``func.call``,
``mhlo.ragged_dot`` and concatenates whose operands are sharded unlike the
result (``isOnFullVersion``):

* data-flow ops (while, case, optimization barrier, manual and named
  computations): the sources of each edge owner (results first, then block
  arguments) are all-reduced over the unreduced axes the owner's sharding
  does not keep and, in full, resharded to it (right after the source);
* ``func.call``: the same for each operand and the callee's argument sharding
  (when the callee has none: fully closed shardings on the operands' mesh);
* ``sdy.reshard`` to more unreduced axes: ``sdy.replicated_to_unreduced`` /
  ``sdy.sharded_to_unreduced`` (``insertUnreducedCollectives``);
* every other op with a (non-custom) rule and a mesh: operands with unreduced
  axes the first result does not keep are all-reduced before it; then, in
  full, every tensor is projected onto the rule's factors, the common axes
  of the factors are chosen (:mod:`.explicit_reshards_common_axes`) and the
  tensors whose factor shardings change (or whose mesh has another device
  order) are resharded: operands before the op, results after it (the result
  takes the common sharding, a reshard restores the old one).  Not in full,
  dots whose result conflicts with an operand only along the contracting axes
  are resharded (``processDot``);
* ops whose reduction factors are sharded (in full: on the common axes; not in
  full: only when the results are unreduced) get an ``sdy.all_reduce`` after
  them over the axes the results do not keep unreduced;
* ``func.return``: returned values are all-reduced over the unreduced axes the
  function result does not keep, made unreduced on the axes it adds and, in
  full, resharded to the function's result sharding.

The projections are computed for all ops of the module in two engine calls
(:mod:`.explicit_reshards_projection`): every op sees the shardings it would
see in Shardy's walk, since a rewritten op's users read a reshard that
restores its old sharding.

A reshape whose projection has overflow axes takes as common axes those of
its axes redistributed over its factors (:mod:`.explicit_reshards_reshape`).
"""

from __future__ import annotations

import dataclasses

from sdy_dl.ir.manual_axes import erase_manual_axes, manual_axes
from sdy_dl.ir.meshes import mesh_of, module_meshes, sort_and_merge_axes
from sdy_dl.ir.mlir_ops import (funcs, insert_after_value, insert_sharding_op_after, key,
                                rebuild, tensor_rank, walk_post)
from sdy_dl.ir.model import Module
from sdy_dl.ir.storage import parse_attr, read_func_attr, read_own, read_per_value
from sdy_dl.ir.traits import DATA_FLOW_OPS, TERMINATORS
from sdy_dl.ir.value_sharding import get_sharding, set_sharding
from sdy_dl.passes import PassOptions, register
from sdy_dl.passes.call_graph import callee_name, func_table
from sdy_dl.passes.export.explicit_reshards_common_axes import find_common_axes
from sdy_dl.passes.export.explicit_reshards_projection import (OpShardings, on_mesh, project,
                                                               project_out)
from sdy_dl.passes.export.explicit_reshards_reshape import (greatest_common_prefix_axes,
                                                            redistributed)
from sdy_dl.passes.export.explicit_reshards_util import (DOT_OPS, dot_result_axes, get_mesh,
                                                         insert_all_reduce_if_unreduced_to_replicated,
                                                         insert_unreduced_collectives,
                                                         is_fully_replicated, reduction_axes,
                                                         sharding_bypassing_barriers)
from sdy_dl.passes.export.insert_func_call_reshards import fully_closed_like, is_equivalent
from sdy_dl.passes.import_.import_func_calls import func_arg_shardings
from sdy_dl.sharding import DimSharding, TensorSharding, axis_set_diff

#: Ops the non-full version treats in full (besides calls and some concatenates).
ALWAYS_FULL = frozenset({"mhlo.ragged_dot"})


def is_on_full_version(mop, enable_full_version: bool) -> bool:
    """Shardy's ``isOnFullVersion``."""
    if enable_full_version or mop.name in ALWAYS_FULL or mop.name == "func.call":
        return True
    if mop.name == "stablehlo.concatenate":
        result = get_sharding(mop.results[0])
        return any(get_sharding(v) != result for v in mop.operands)
    return False


def equivalent(sharding: TensorSharding | None, other: TensorSharding | None) -> bool:
    """Shardy's free ``isEquivalent``: a missing sharding is equivalent to any
    sharding without dim axes (unreduced axes aside)."""
    if sharding is None:
        return is_fully_replicated(other)
    return is_equivalent(sharding, other)


def reshard_to_target(mop, index: int, target: TensorSharding | None, meshes,
                      on_full: bool) -> bool:
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
        mop, index, target, meshes, lambda op: insert_after_value(op.operands[0], op))
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


def reshard_call_operands(call, func, meshes) -> bool:
    targets = call_targets(call, func, meshes)
    if targets is None:
        return False
    changed = False
    for i, target in enumerate(targets):
        changed |= reshard_to_target(call, i, target, meshes, True)
    return changed


def _terminator(block):
    return block.operations[len(block.operations) - 1].operation


def edge_owners(mop):
    """``(owner target sharding, [(op, operand index) of each source])`` of every
    edge owner of data-flow op ``mop``: results first, then block arguments
    (Shardy's ``ShardableDataFlowOpInterface``, targets before edge propagation)."""
    name = mop.name
    out = []
    if name in ("sdy.manual_computation", "sdy.named_computation"):
        body = mop.regions[0].blocks[0]
        ret = _terminator(body)
        outs = read_per_value(mop, "out_shardings") or [None] * len(mop.results)
        ins = read_per_value(mop, "in_shardings") or [None] * len(body.arguments)
        manual = manual_axes(mop) if name == "sdy.manual_computation" else []
        for i, target in enumerate(outs):
            if target is not None and manual:
                target = erase_manual_axes(target, manual)
            out.append((target, [(ret, i)]))
        out.extend((target, [(mop, i)]) for i, target in enumerate(ins))
        return out
    for i, result in enumerate(mop.results):
        target = get_sharding(result)
        if name == "stablehlo.while":
            body = mop.regions[1].blocks[0]
            sources = [(mop, i), (_terminator(body), i)]
        elif name == "stablehlo.case":
            sources = [(_terminator(r.blocks[0]), i) for r in mop.regions]
        else:
            sources = [(mop, i)]
        out.append((target, sources))
    return out


def reshard_edge_sources(mop, meshes, on_full: bool) -> bool:
    """``insertExplicitReshardsOnDataFlowOp``."""
    changed = False
    for target, sources in edge_owners(mop):
        for user, i in sources:
            changed |= reshard_to_target(user, i, target, meshes, on_full)
    return changed


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


def reshard_returned(func, meshes, on_full: bool) -> bool:
    """``insertExplicitReshardsOnFuncReturn``: each returned value against the
    function's result sharding, the new ops right before the return."""
    from jaxlib.mlir import ir

    ret = _terminator(func.regions[0].blocks[0])
    changed = False
    for i in range(len(ret.operands)):
        target = read_func_attr(func, "res_attrs", i)
        have = get_sharding(ret.operands[i])
        reduced = insert_all_reduce_if_unreduced_to_replicated(
            ret, i, have, target, meshes, lambda op: ir.InsertionPoint(ret).insert(op))
        changed |= reduced is not have
        unreduced = insert_unreduced_collectives(
            ret, i, target, meshes, lambda op: ir.InsertionPoint(ret).insert(op))
        if unreduced is not None:
            reduced, changed = unreduced, True
        if on_full and not equivalent(reduced, target):
            sharding = target if target is not None else fully_closed_like(reduced)
            reshard = ir.Operation.create("sdy.reshard", results=[ret.operands[i].type],
                                          operands=[ret.operands[i]],
                                          attributes={"sharding": parse_attr(sharding.to_text())},
                                          loc=ret.operands[i].location)
            ir.InsertionPoint(ret).insert(reshard)
            ret.operands[i] = reshard.results[0]
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


def num_elements(type_) -> int:
    """The number of elements of a static tensor type (0 when dynamic)."""
    from jaxlib.mlir import ir

    try:
        shaped = ir.ShapedType(type_)
    except ValueError:
        return 0
    if not shaped.has_static_shape:
        return 0
    n = 1
    for d in shaped.shape:
        n *= d
    return n


@dataclasses.dataclass
class Pending:
    """An op whose rewrite needs its sharding projection."""

    mop: object
    op: OpShardings
    originals: tuple            # the shardings the op read (None: missing)
    on_full: bool
    sizes: tuple[int, ...]


def pending_op(mop, rule, meshes, on_full: bool) -> Pending | None:
    """The op ``mop`` to project (None when Shardy would skip it: no rule, a
    custom rule, no common mesh, or nothing to do in the non-full version)."""
    if rule is None or rule.is_custom:
        return None
    values = list(mop.operands) + list(mop.results)
    shardings = tuple(sharding_bypassing_barriers(v) for v in values)
    mesh = get_mesh(shardings, meshes)
    if mesh is None:
        return None
    if not on_full:
        first = get_sharding(mop.results[0]) if mop.results else None
        unreduced = first is not None and bool(first.unreduced)
        dot = mop.name in DOT_OPS and len(mop.operands) == 2 and len(mop.results) == 1 \
            and shardings[-1] is not None
        if not dot and not unreduced:
            return None
    tensors = tuple(on_mesh(s, mesh, tensor_rank(v.type)) for s, v in zip(shardings, values))
    return Pending(mop, OpShardings(rule, mesh, tensors), shardings, on_full,
                   tuple(num_elements(v.type) for v in values))


def is_reshape_with_overflow(p: Pending, projection) -> bool:
    return p.on_full and p.mop.name == "stablehlo.reshape" and projection.has_overflow()


def reshape_common_axes(pendings: list[Pending], projections, meshes, options) -> dict:
    """Index -> common axes of the reshapes whose projection has overflow axes
    (``processReshapeWithOverflowAxes``: both sides redistributed, projected
    again, the greatest common prefix per factor)."""
    indices = [k for k, (p, proj) in enumerate(zip(pendings, projections))
               if is_reshape_with_overflow(p, proj)]
    if not indices:
        return {}
    ops = [pendings[k].op for k in indices]
    built = project_out(ops, [redistributed(op.rule, projections[k], meshes[op.mesh])
                              for k, op in zip(indices, ops)], meshes, options)
    legal = project([dataclasses.replace(op, shardings=update.shardings)
                     for op, update in zip(ops, built)], meshes, options)
    return {k: greatest_common_prefix_axes(proj, len(op.rule.factors), meshes[op.mesh])
            for k, op, proj in zip(indices, ops, legal)}


def decide(pendings: list[Pending], meshes, options):
    """Per pending op: (its update: which tensors change and their new
    shardings, or None; the axes to all-reduce after it)."""
    projections = project([p.op for p in pendings], meshes, options)
    reshapes = reshape_common_axes(pendings, projections, meshes, options)
    plans = []
    for k, (p, projection) in enumerate(zip(pendings, projections)):
        rule, mesh = p.op.rule, meshes[p.op.mesh]
        common = None
        new_axes = None
        if k in reshapes:
            common = new_axes = reshapes[k]
        elif p.on_full:
            common = find_common_axes(list(projection.tensors), list(p.sizes), rule, mesh)
            new_axes = common
        elif p.mop.name in DOT_OPS and p.originals[-1] is not None:
            new_axes = dot_result_axes(rule, projection, p.sizes)
        reduce_axes = None
        first = p.originals[len(rule.operands)] if p.mop.results else None
        if p.mop.results and (p.on_full or (first is not None and first.unreduced)):
            reduce_axes = reduction_axes(rule, projection, common)
        plans.append((new_axes, reduce_axes))
    outs = project_out([p.op for p, (axes, _) in zip(pendings, plans) if axes is not None],
                       [axes for axes, _ in plans if axes is not None], meshes, options)
    it = iter(outs)
    decided = []
    for k, (p, (axes, reduce_axes)) in enumerate(zip(pendings, plans)):
        update = next(it) if axes is not None else None
        if k in reshapes:
            # The reshape's tensors change when their new sharding is not
            # equivalent to the old one (the operand's own, the result's
            # read through barriers).
            operand, result = update.shardings
            update = dataclasses.replace(update, updated=(
                not equivalent(get_sharding(p.mop.operands[0]), operand),
                not is_equivalent(result, p.originals[1])))
        decided.append((update, reduce_axes))
    return decided


def _create(name: str, value, attributes: dict, loc):
    from jaxlib.mlir import ir

    return ir.Operation.create(name, results=[value.type], operands=[value],
                               attributes=attributes, loc=loc)


def apply_full(p: Pending, update, meshes) -> bool:
    """Shardy's ``insertExplicitReshards``: operands before the op, then results
    after it, for the tensors the update changes or whose mesh has another
    device order than the op's mesh."""
    from jaxlib.mlir import ir

    mop, mesh = p.mop, meshes[p.op.mesh]
    n = len(mop.operands)

    def other_devices(s) -> bool:
        return not is_fully_replicated(s) and meshes[s.mesh].device_ids != mesh.device_ids

    changed = False
    for i in range(n):
        if update.updated[i] or other_devices(p.originals[i]):
            operand = mop.operands[i]
            reshard = _create("sdy.reshard", operand,
                              {"sharding": parse_attr(update.shardings[i].to_text())},
                              operand.location)
            ir.InsertionPoint(mop).insert(reshard)
            mop.operands[i] = reshard.results[0]
            changed = True
    anchor = mop
    for j, result in enumerate(list(mop.results)):
        if update.updated[n + j] or other_devices(p.originals[n + j]):
            old = get_sharding(result) or TensorSharding(
                p.op.mesh, tuple(DimSharding((), True) for _ in range(tensor_rank(result.type))))
            reshard = _create("sdy.reshard", result, {"sharding": parse_attr(old.to_text())},
                              result.location)
            ir.InsertionPoint.after(anchor).insert(reshard)
            anchor = reshard
            result.replace_all_uses_except(reshard.results[0], reshard)
            set_sharding(result, update.shardings[n + j])
            changed = True
    return changed


def apply_dot(p: Pending, update) -> bool:
    """``processDot``'s rewrite: the dot takes its new result sharding and a
    reshard back to the old one follows it."""
    from jaxlib.mlir import ir

    result = p.mop.results[0]
    old = get_sharding(result)
    set_sharding(result, update.shardings[-1])
    reshard = _create("sdy.reshard", result, {"sharding": parse_attr(old.to_text())},
                      result.location)
    ir.InsertionPoint.after(p.mop).insert(reshard)
    result.replace_all_uses_except(reshard.results[0], reshard)
    return True


def all_reduce_reduction_factors(p: Pending, axes, meshes) -> bool:
    """Shardy's ``insertAllReducesForReductionFactors``: the reduction axes the
    first result does not keep unreduced are all-reduced right after the op,
    one ``sdy.all_reduce`` per result."""
    from jaxlib.mlir import ir

    mesh = meshes[p.op.mesh]
    first = get_sharding(p.mop.results[0])
    axes = axis_set_diff(axes, first.unreduced if first is not None else (), mesh)
    if not axes:
        return False
    axes = sort_and_merge_axes(axes, mesh)
    axes_attr = ir.Attribute.parse("#sdy<axis_ref_list{" + ", ".join(a.to_text() for a in axes)
                                   + "}>")
    anchor = p.mop
    for result in list(p.mop.results):
        sharding = get_sharding(result) or TensorSharding(
            p.op.mesh, tuple(DimSharding((), True) for _ in range(tensor_rank(result.type))))
        all_reduce = _create("sdy.all_reduce", result,
                             {"reduction_axes": axes_attr,
                              "out_sharding": parse_attr(sharding.to_text())}, result.location)
        ir.InsertionPoint.after(anchor).insert(all_reduce)
        anchor = all_reduce
        result.replace_all_uses_except(all_reduce.results[0], all_reduce)
    return True


@register("insert-explicit-reshards",
          "Make every sharding conflict explicit with sdy.reshard and unreduced collectives "
          "(non-full version by default; enable-full-version=true for every op).")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    full = bool(options.option("enable-full-version"))
    with mlir_context():
        meshes = module_meshes(module)
        table = func_table(module)
        rules = op_rules(module, options)
        changed = False
        pendings: list[Pending] = []
        for func in funcs(module):
            for mop in walk_post(func)[:-1]:
                if mop.name in TERMINATORS:
                    continue
                on_full = is_on_full_version(mop, full)
                if mop.name in DATA_FLOW_OPS:
                    changed |= reshard_edge_sources(mop, meshes, on_full)
                    continue
                if mop.name == "func.call":
                    changed |= reshard_call_operands(mop, table[callee_name(mop)], meshes)
                    continue
                if mop.name == "sdy.reshard" and reshard_to_unreduced(mop, meshes):
                    changed = True
                    continue
                changed |= all_reduce_unreduced_operands(mop, meshes)
                pending = pending_op(mop, rules(mop), meshes, on_full)
                if pending is not None:
                    pendings.append(pending)
            changed |= reshard_returned(func, meshes, full)
        for p, (update, reduce_axes) in zip(pendings, decide(pendings, meshes, options)):
            if update is not None:
                changed |= apply_full(p, update, meshes) if p.on_full else apply_dot(p, update)
            if reduce_axes:
                changed |= all_reduce_reduction_factors(p, reduce_axes, meshes)
        return rebuild(module) if changed else module
