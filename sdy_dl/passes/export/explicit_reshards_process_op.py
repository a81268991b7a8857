"""insert-explicit-reshards on an op with a sharding rule (Shardy's
``processOp``, ``processDot`` and ``insertAllReducesForReductionFactors``),
for all such ops of a module at once.

Each op to treat is a :class:`Pending` (its rule and shardings as it reads
them, then its mesh: :func:`on_meshes`); :func:`decide` asks the Datalog
stage for every projection, picks the new axes per factor (the common axes in full; a dot's more sharded result
otherwise) and asks the stage for the tensors they change;
:func:`apply_full`, :func:`apply_dot` and :func:`all_reduce_reduction_factors`
rewrite the op.
"""

from __future__ import annotations

from sdy_dl.ir.meshes import sort_and_merge_axes
from sdy_dl.ir.mlir_ops import tensor_rank
from sdy_dl.ir.sdy_attrs import axis_ref_list_attr, sharding_attr
from sdy_dl.ir.value_sharding import get_sharding, set_sharding
from sdy_dl.passes.export.explicit_reshards_common_axes import find_common_axes
from sdy_dl.passes.export.explicit_reshards_projection import (OpShardings, on_mesh, project,
                                                               project_out)
from sdy_dl.passes.export.explicit_reshards_reshape import (greatest_common_prefix_axes,
                                                            redistributed)
from sdy_dl.passes.export.get_mesh import get_meshes
from sdy_dl.passes.export.explicit_reshards_util import (DOT_OPS, dot_result_axes,
                                                         is_fully_replicated, reduction_axes,
                                                         sharding_bypassing_barriers)
from sdy_dl.passes.export.is_equivalent import IsEquivalent
from sdy_dl.sharding import DimSharding, TensorSharding, axis_set_diff


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


class Pending:
    """An op whose rewrite needs its sharding projection."""

    def __init__(self, mop, rule, originals: tuple, on_full: bool, sizes: tuple[int, ...],
                 ranks: tuple[int, ...], op: OpShardings | None = None):
        self.mop = mop
        self.rule = rule               # its sharding rule
        self.originals = originals     # the shardings the op read (None: missing)
        self.on_full = on_full
        self.sizes = sizes
        self.ranks = ranks
        self.op = op   # its rule and shardings on its mesh (:func:`on_meshes`)

    def on_other_devices(self, meshes) -> list[bool]:
        """Per tensor: sharded on a mesh whose device order is not the op's
        mesh's (``shouldReshardToCommonMesh``)."""
        devices = meshes[self.op.mesh].device_ids
        return [not is_fully_replicated(s) and meshes[s.mesh].device_ids != devices
                for s in self.originals]


def rewritten_off_full(mop, first: TensorSharding | None) -> bool:
    """Whether the non-full version may rewrite ``mop`` (``processOp`` off the
    full version), ``first`` being the sharding of its first result: a dot with
    two operands, one result and a result sharding (through barriers;
    ``processDot``), or an op whose first result has unreduced axes."""
    if mop.name in DOT_OPS and len(mop.operands) == 2 and len(mop.results) == 1 \
            and sharding_bypassing_barriers(mop.results[0]) is not None:
        return True
    return first is not None and bool(first.unreduced)


def pending_op(mop, first: TensorSharding | None, rule_of, on_full: bool) -> Pending | None:
    """The op ``mop`` to project if it has a mesh (None when Shardy would skip
    it: nothing to do in the non-full version, no rule or a custom rule);
    ``first`` is the sharding of its first result, ``rule_of(mop)`` gives its
    sharding rule (asked only when needed)."""
    if not on_full and not rewritten_off_full(mop, first):
        return None
    rule = rule_of(mop)
    if rule is None or rule.is_custom:
        return None
    values = list(mop.operands) + list(mop.results)
    return Pending(mop, rule, tuple(sharding_bypassing_barriers(v) for v in values), on_full,
                   tuple(num_elements(v.type) for v in values),
                   tuple(tensor_rank(v.type) for v in values))


def on_meshes(pendings: list[Pending], meshes, options) -> list[Pending]:
    """The ``pendings`` that have a mesh (Shardy's ``getMesh``: stage ``get_mesh``,
    :mod:`.get_mesh`), each given its shardings on that mesh; Shardy
    skips the others."""
    out = []
    for p, mesh in zip(pendings, get_meshes([p.originals for p in pendings], meshes, options)):
        if mesh is not None:
            p.op = OpShardings(p.rule, mesh, tuple(on_mesh(s, mesh, rank)
                                                   for s, rank in zip(p.originals, p.ranks)))
            out.append(p)
    return out


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
    legal = project([op.replace(shardings=update.shardings)
                     for op, update in zip(ops, built)],
                    [pendings[k].sizes for k in indices], meshes, options)
    return {k: greatest_common_prefix_axes(proj, len(op.rule.factors), meshes[op.mesh])
            for k, op, proj in zip(indices, ops, legal)}


def full_common_axes(pendings: list[Pending], projections, reshapes: dict, meshes,
                     options) -> dict:
    """Index -> the common axes of the ops treated in full (``findCommonAxes``,
    :mod:`.explicit_reshards_common_axes`: one engine call per stage for all;
    the reshapes' from ``reshapes``)."""
    indices = [k for k, p in enumerate(pendings) if p.on_full and k not in reshapes]
    commons = dict(reshapes)
    commons.update(zip(indices, find_common_axes(
        [(projections[k], pendings[k].sizes, pendings[k].op.rule, pendings[k].op.mesh,
          meshes[pendings[k].op.mesh]) for k in indices], options)))
    return commons


def decide(pendings: list[Pending], meshes, options, is_equivalent: IsEquivalent):
    """Per pending op: (its update: which tensors change and their new
    shardings, or None; the axes to all-reduce after it)."""
    projections = project([p.op for p in pendings], [p.sizes for p in pendings], meshes, options,
                          [not p.on_full and p.mop.name in DOT_OPS and len(p.op.shardings) == 3
                           for p in pendings])
    reshapes = reshape_common_axes(pendings, projections, meshes, options)
    commons = full_common_axes(pendings, projections, reshapes, meshes, options)
    plans = []
    for k, (p, projection) in enumerate(zip(pendings, projections)):
        rule = p.op.rule
        common = commons.get(k)
        new_axes = None
        if k in reshapes:
            new_axes = common
        elif p.on_full:
            # Compatible shardings without overflow axes change no tensor: the
            # op needs no projection out unless a mesh has another device order.
            unchanged = projection.compatible and not projection.has_overflow()
            new_axes = None if unchanged and not any(p.on_other_devices(meshes)) else common
        elif p.mop.name in DOT_OPS and p.originals[-1] is not None:
            new_axes = dot_result_axes(rule, projection)
        reduce_axes = None
        first = p.originals[len(rule.operands)] if p.mop.results else None
        if p.mop.results and (p.on_full or (first is not None and first.unreduced)):
            reduce_axes = reduction_axes(rule, projection, common)
        plans.append((new_axes, reduce_axes))
    outs = project_out([p.op for p, (axes, _) in zip(pendings, plans) if axes is not None],
                       [axes for axes, _ in plans if axes is not None], meshes, options)
    it = iter(outs)
    updates = [next(it) if axes is not None else None for axes, _ in plans]
    # A reshape's tensors change when their new sharding is not equivalent to
    # the old one (the operand's own, the result's read through barriers).
    pairs = [pair for k in sorted(reshapes) for pair in (
        (get_sharding(pendings[k].mop.operands[0]), updates[k].shardings[0], False),
        (updates[k].shardings[1], pendings[k].originals[1], False))]
    same = iter(is_equivalent.many(pairs))
    for k in sorted(reshapes):
        updates[k] = updates[k].replace(updated=(not next(same), not next(same)))
    return [(update, reduce_axes) for update, (_, reduce_axes) in zip(updates, plans)]


def _create(name: str, value, attributes: dict, loc):
    from jaxlib.mlir import ir

    return ir.Operation.create(name, results=[value.type], operands=[value],
                               attributes=attributes, loc=loc)


def apply_full(p: Pending, update, meshes) -> bool:
    """Shardy's ``insertExplicitReshards``: operands before the op, then results
    after it, for the tensors the update changes or whose mesh has another
    device order than the op's mesh."""
    from jaxlib.mlir import ir

    mop = p.mop
    n = len(mop.operands)
    others = p.on_other_devices(meshes)
    changed = False
    for i in range(n):
        if update.updated[i] or others[i]:
            operand = mop.operands[i]
            reshard = _create("sdy.reshard", operand,
                              {"sharding": sharding_attr(update.shardings[i])},
                              operand.location)
            ir.InsertionPoint(mop).insert(reshard)
            mop.operands[i] = reshard.results[0]
            changed = True
    anchor = mop
    for j, result in enumerate(list(mop.results)):
        if update.updated[n + j] or others[n + j]:
            old = get_sharding(result) or TensorSharding(
                p.op.mesh, tuple(DimSharding((), True) for _ in range(tensor_rank(result.type))))
            reshard = _create("sdy.reshard", result, {"sharding": sharding_attr(old)},
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
    reshard = _create("sdy.reshard", result, {"sharding": sharding_attr(old)},
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
    axes_attr = axis_ref_list_attr(axes)
    anchor = p.mop
    for result in list(p.mop.results):
        sharding = get_sharding(result) or TensorSharding(
            p.op.mesh, tuple(DimSharding((), True) for _ in range(tensor_rank(result.type))))
        all_reduce = _create("sdy.all_reduce", result,
                             {"reduction_axes": axes_attr,
                              "out_sharding": sharding_attr(sharding)}, result.location)
        ir.InsertionPoint.after(anchor).insert(all_reduce)
        anchor = all_reduce
        result.replace_all_uses_except(all_reduce.results[0], all_reduce)
    return True
