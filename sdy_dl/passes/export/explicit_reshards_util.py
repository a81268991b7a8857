"""Helpers of insert-explicit-reshards (Shardy's ``explicit_reshards_util``):
the all-reduces that turn unreduced axes into replicated ones.

A value whose sharding has unreduced axes that its user does not keep
unreduced is all-reduced over those axes first (Shardy's
``insertAllReduceIfUnreducedToReplicated``): the new ``sdy.all_reduce``
reads the value, its ``out_sharding`` is the value's sharding without the
reduced axes, and the use reads it instead.  The axes are a set difference
on axis refs (:func:`axis_set_diff`, Shardy's ``getAxisSetDiff``), which
splits sub-axes where the sets overlap partly.
"""

from __future__ import annotations

import dataclasses

from sdy_dl.sharding import Mesh, TensorSharding, axis_set_diff


def insert_all_reduce_if_unreduced_to_replicated(mop, index: int,
                                                 source: TensorSharding | None,
                                                 user: TensorSharding | None,
                                                 meshes: dict[str, Mesh], insert) -> TensorSharding | None:
    """All-reduce operand ``index`` of ``mop`` over the unreduced axes of its
    sharding ``source`` that ``user`` does not have unreduced; ``insert(op)``
    places the new op.  Returns the operand's sharding afterwards."""
    from jaxlib.mlir import ir

    from sdy_dl.ir.storage import parse_attr

    if source is None or not source.unreduced:
        return source
    mesh = meshes[source.mesh] if isinstance(source.mesh, str) else source.mesh
    target = user.unreduced if user is not None else ()
    axes = axis_set_diff(source.unreduced, target, mesh)
    if not axes:
        return source
    sharding = dataclasses.replace(source,
                                   unreduced=tuple(axis_set_diff(source.unreduced, axes, mesh)))
    value = mop.operands[index]
    axes_text = "#sdy<axis_ref_list{" + ", ".join(a.to_text() for a in axes) + "}>"
    all_reduce = ir.Operation.create(
        "sdy.all_reduce", results=[value.type], operands=[value],
        attributes={"reduction_axes": ir.Attribute.parse(axes_text),
                    "out_sharding": parse_attr(sharding.to_text())},
        loc=mop.location)
    insert(all_reduce)
    mop.operands[index] = all_reduce.results[0]
    return sharding


# -- dots (Shardy's processDot, the non-full version's one rewrite) -------------------

DOT_OPS = frozenset({"stablehlo.dot", "stablehlo.dot_general"})


def _num_elements(type_) -> int:
    from jaxlib.mlir import ir

    n = 1
    for d in ir.RankedTensorType(type_).shape:
        n *= d
    return n


def _factor_axes(sharding: TensorSharding | None, mapping) -> dict[int, tuple] | None:
    """Factor index -> axes of a tensor whose dims each hold one factor
    (a missing sharding is closed and empty); None for compound dims."""
    out = {}
    for d, factors in enumerate(mapping):
        if len(factors) != 1:
            return None
        out[factors[0]] = () if sharding is None else tuple(sharding.dims[d].axes)
    return out


def value_bypassing_barriers(value):
    """The value a chain of ``sdy.propagation_barrier`` ops ending in ``value``
    starts from (``value`` itself when no barrier defines it)."""
    while True:
        owner = getattr(value.owner, "operation", None)
        if owner is None or owner.name != "sdy.propagation_barrier":
            return value
        value = owner.operands[0]


def sharding_bypassing_barriers(value) -> TensorSharding | None:
    """Shardy's ``getShardingBypassingBarriers``: the sharding of the value a
    chain of ``sdy.propagation_barrier`` ops starts from."""
    from sdy_dl.ir.value_sharding import get_sharding

    return get_sharding(value_bypassing_barriers(value))


def common_mesh(shardings, meshes: dict[str, Mesh]) -> str | None:
    """Shardy's ``getMesh``: the one (named, non-maximal) mesh of the given
    shardings, None when there is none or several."""
    names = {s.mesh for s in shardings if s is not None}
    if len(names) != 1:
        return None
    name = next(iter(names))
    mesh = meshes.get(name) if isinstance(name, str) else None
    return None if mesh is None or mesh.is_maximal else name


def factor_projections(mop, rule, meshes: dict[str, Mesh]):
    """``(mesh name, shardings, projections)`` of ``mop``: the common mesh of its
    operand and result shardings (read through propagation barriers), those
    shardings, and each one's factor -> axes projection under ``rule``; None
    when there is no common mesh or a tensor does not project."""
    shardings = [sharding_bypassing_barriers(v) for v in list(mop.operands) + list(mop.results)]
    mesh_name = common_mesh(shardings, meshes)
    if mesh_name is None:
        return None
    mappings = list(rule.operands) + list(rule.results)
    projections = [_factor_axes(s, m) for s, m in zip(shardings, mappings)]
    if any(p is None for p in projections):
        return None
    return mesh_name, shardings, projections


def all_reduce_reduction_factors(mop, rule, meshes: dict[str, Mesh]) -> bool:
    """Shardy's ``insertAllReducesForReductionFactors`` in the non-full version:
    when the op's results are unreduced, the axes of its reduction factors
    (sharded alike on every tensor that has them) that the results do not keep
    unreduced are all-reduced right after the op, one ``sdy.all_reduce`` per
    result."""
    from jaxlib.mlir import ir

    from sdy_dl.ir.storage import parse_attr
    from sdy_dl.ir.meshes import sort_and_merge_axes
    from sdy_dl.ir.value_sharding import get_sharding
    from sdy_dl.sharding import DimSharding

    if rule is None or rule.is_custom or len(mop.results) == 0:
        return False
    first = get_sharding(mop.results[0])
    if first is None or not first.unreduced:
        return False
    projected = factor_projections(mop, rule, meshes)
    if projected is None:
        return False
    mesh_name, _, projections = projected
    mesh = meshes[mesh_name]
    reduction: list = []
    for f, factor in enumerate(rule.factors):
        if factor.kind != "reduction":
            continue
        shardings = [p[f] for p in projections if f in p]
        if any(s != shardings[0] for s in shardings):
            return False  # Shardy fails a check here
        reduction.extend(shardings[0] if shardings else ())
    axes = axis_set_diff(reduction, first.unreduced, mesh)
    if not axes:
        return False
    axes = sort_and_merge_axes(axes, mesh)
    anchor = mop
    for result in list(mop.results):
        sharding = get_sharding(result) or TensorSharding(
            mesh_name, tuple(DimSharding((), True) for _ in ir.RankedTensorType(result.type).shape))
        axes_text = "#sdy<axis_ref_list{" + ", ".join(a.to_text() for a in axes) + "}>"
        all_reduce = ir.Operation.create(
            "sdy.all_reduce", results=[result.type], operands=[result],
            attributes={"reduction_axes": ir.Attribute.parse(axes_text),
                        "out_sharding": parse_attr(sharding.to_text())}, loc=mop.location)
        ir.InsertionPoint.after(anchor).insert(all_reduce)
        result.replace_all_uses_except(all_reduce.results[0], all_reduce)
        anchor = all_reduce
    return True


def reshard_dot_result(mop, rule, meshes: dict[str, Mesh]) -> bool:
    """Shardy's ``processDot``: when the operands are compatible and exactly one
    non-contracting/batching factor of the result conflicts with a (non-empty)
    operand sharding, the result is no larger than that operand and the
    result's conflicting axes are exactly the contracting factors' axes, the
    dot is resharded to the operand's axes (a more sharded dot) and an
    ``sdy.reshard`` back to the original result sharding follows it."""
    from sdy_dl.ir.mlir_ops import insert_sharding_op_after
    from sdy_dl.ir.value_sharding import get_sharding, set_sharding
    from sdy_dl.sharding import DimSharding

    if rule is None or rule.is_custom or len(mop.results) != 1 or len(mop.operands) != 2:
        return False
    lhs_s, rhs_s = (sharding_bypassing_barriers(v) for v in mop.operands)
    out_s = get_sharding(mop.results[0])
    if out_s is None or common_mesh((lhs_s, rhs_s, out_s), meshes) is None:
        return False
    lhs = _factor_axes(lhs_s, rule.operands[0])
    rhs = _factor_axes(rhs_s, rule.operands[1])
    res = _factor_axes(out_s, rule.results[0])
    if lhs is None or rhs is None or res is None:
        return False
    lhs_size, rhs_size = (_num_elements(v.type) for v in mop.operands)
    result_size = _num_elements(mop.results[0].type)
    conflicting, conflicting_axes = None, ()
    reduction_axes: list = []
    seen: list = []
    for f in range(len(rule.factors)):
        if f in lhs and f in rhs:
            operand_axes, max_size = lhs[f], max(lhs_size, rhs_size)
            if lhs[f] != rhs[f]:
                return False
            if rule.factors[f].kind == "reduction":
                reduction_axes.extend(operand_axes)
                continue
        else:
            operand_axes = lhs[f] if f in lhs else rhs.get(f, ())
            max_size = lhs_size if f in lhs else rhs_size
            for axis in operand_axes:
                if any(a.overlaps(axis) for a in seen):
                    return False
                seen.append(axis)
        if res.get(f, ()) != operand_axes:
            if not operand_axes or conflicting is not None or result_size > max_size:
                return False
            conflicting, conflicting_axes = f, operand_axes
    if conflicting is None:
        return False
    if not res[conflicting] or list(res[conflicting]) != reduction_axes:
        return False
    res[conflicting] = conflicting_axes
    dims = tuple(DimSharding(res[factors[0]], dim.is_closed)
                 for factors, dim in zip(rule.results[0], out_s.dims))
    result = mop.results[0]
    set_sharding(result, dataclasses.replace(out_s, dims=dims))
    reshard = insert_sharding_op_after("sdy.reshard", result, out_s, mop.location)
    result.replace_all_uses_except(reshard.results[0], reshard)
    return True


# -- reshards to unreduced axes (Shardy's insertUnreducedCollectives) -----------------

EQUAL, STRICT_PREFIX, NOT_A_PREFIX = "equal", "strict_prefix", "not_a_prefix"


def axis_list_prefix_status(first, second, mesh: Mesh) -> str:
    """Shardy's ``isAxisListPrefixOf(first, second)``."""
    first, second = list(first), list(second)
    if not first:
        return EQUAL if not second else STRICT_PREFIX
    if len(first) > len(second):
        return NOT_A_PREFIX
    n = len(first)
    if first[:n - 1] != second[:n - 1]:
        return NOT_A_PREFIX
    if len(first) == len(second) and first[-1] == second[-1]:
        return EQUAL
    return STRICT_PREFIX if first[-1].prefix_of(second[n - 1], mesh) else NOT_A_PREFIX


def _axes_attr(axes) -> str:
    return "{" + ", ".join(a.to_text() for a in axes) + "}"


def insert_unreduced_collectives(mop, index: int, out: TensorSharding | None,
                                 meshes: dict[str, Mesh], insert) -> TensorSharding | None:
    """Make operand ``index`` of ``mop`` unreduced on the axes ``out`` has
    unreduced beyond the operand's: dims whose axes end with such axes give
    them up (``sdy.sharded_to_unreduced``), the others come replicated
    (``sdy.replicated_to_unreduced``), after a reshard when the dims do not
    line up.  ``insert(op)`` places each new op (in order).  Returns the
    operand's new sharding, or None when nothing was inserted."""
    from jaxlib.mlir import ir

    from sdy_dl.ir.storage import parse_attr
    from sdy_dl.ir.meshes import sort_and_merge_axes
    from sdy_dl.ir.value_sharding import get_sharding

    value = mop.operands[index]
    have = get_sharding(value)
    if have is None or out is None or not out.unreduced:
        return None
    mesh = meshes[have.mesh] if isinstance(have.mesh, str) else have.mesh
    added = axis_set_diff(out.unreduced, have.unreduced, mesh)
    if not added:
        return None
    s2u: list = []
    per_dim: list = [() for _ in have.dims]
    need_reshard = False
    dims = list(out.dims)
    for i, (in_dim, out_dim) in enumerate(zip(have.dims, out.dims)):
        in_axes, out_axes = list(in_dim.axes), list(out_dim.axes)
        status = axis_list_prefix_status(out_axes, in_axes, mesh)
        if status == STRICT_PREFIX:
            diff = []
            if out_axes and out_axes[-1] != in_axes[len(out_axes) - 1]:
                diff.append(in_axes[len(out_axes) - 1].suffix_without_overlap(out_axes[-1], mesh))
            diff.extend(in_axes[len(out_axes):])
            if not axis_set_diff(diff, added, mesh):
                per_dim[i] = tuple(diff)
                s2u.extend(diff)
                dims[i] = in_dim
            else:
                need_reshard = True
        elif status == NOT_A_PREFIX:
            need_reshard = True

    def create(name: str, operand, attributes: dict):
        op = ir.Operation.create(name, results=[operand.type], operands=[operand],
                                 attributes=attributes, loc=mop.location)
        insert(op)
        return op.results[0]

    result = value
    last = have
    if need_reshard:
        last = dataclasses.replace(have, dims=tuple(dims))
        result = create("sdy.reshard", result, {"sharding": parse_attr(last.to_text())})
    r2u = axis_set_diff(added, s2u, mesh)
    if r2u:
        unreduced = sort_and_merge_axes(list(have.unreduced) + list(r2u), mesh)
        last = TensorSharding(have.mesh, tuple(dims), out.replicated, tuple(unreduced))
        result = create("sdy.replicated_to_unreduced", result,
                        {"axes": ir.Attribute.parse("#sdy<axis_ref_list" + _axes_attr(r2u) + ">"),
                         "out_sharding": parse_attr(last.to_text())})
    if s2u:
        lists = ", ".join(_axes_attr(axes) for axes in per_dim)
        result = create("sdy.sharded_to_unreduced", result,
                        {"axes": ir.Attribute.parse(f"#sdy<list_of_axis_ref_lists[{lists}]>"),
                         "out_sharding": parse_attr(out.to_text())})
        last = out
    if result == value:
        return None
    mop.operands[index] = result
    return last
