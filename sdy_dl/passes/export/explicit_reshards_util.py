"""Helpers of insert-explicit-reshards (Shardy's ``explicit_reshards_util``):
the all-reduces that turn unreduced axes into replicated ones, the op's
reduction axes, a dot's new result axes once stage
``insert_explicit_reshards`` has taken ``processDot``'s decision, and the
unreduced collectives.

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
    if source is None or not source.unreduced:
        return source
    from jaxlib.mlir import ir

    from sdy_dl.ir.sdy_attrs import sharding_attr

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
                    "out_sharding": sharding_attr(sharding)},
        loc=mop.location)
    insert(all_reduce)
    mop.operands[index] = all_reduce.results[0]
    return sharding


# -- barriers, reduction axes and processDot ---------------------------------

DOT_OPS = frozenset({"stablehlo.dot", "stablehlo.dot_general"})


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


def is_fully_replicated(sharding: TensorSharding | None) -> bool:
    """Shardy's ``isFullyReplicated``: no sharding, or no dim has an axis."""
    return sharding is None or all(not d.axes for d in sharding.dims)


def reduction_axes(rule, projection, common) -> list | None:
    """The axes of the reduction factors, in factor order: the common axes
    (full version), or, without them, each reduction factor's sharding when it
    is alike on every tensor that has it (None when it is not: Shardy fails a
    check there)."""
    axes: list = []
    for f, factor in enumerate(rule.factors):
        if factor.kind != "reduction":
            continue
        if common is not None:
            axes.extend(common[f])
            continue
        shardings = [p[f] for p in projection.tensors if f in p]
        if any(s != shardings[0] for s in shardings):
            return None
        axes.extend(shardings[0] if shardings else ())
    return axes


def dot_result_axes(rule, projection) -> list | None:
    """``processDot``'s new axes per factor for a dot's result, as stage
    ``insert_explicit_reshards`` decides it (``projection.dot``: the conflicting
    factor and the operand whose axes it takes; the other factors keep the
    result's axes); None when the dot is left alone."""
    if projection.dot is None:
        return None
    factor, operand = projection.dot
    result = projection.tensors[-1]
    axes = [result.get(f, ()) for f in range(len(rule.factors))]
    axes[factor] = projection.tensors[operand].get(factor, ())
    return axes


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

    from sdy_dl.ir.sdy_attrs import sharding_attr
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
        result = create("sdy.reshard", result, {"sharding": sharding_attr(last)})
    r2u = axis_set_diff(added, s2u, mesh)
    if r2u:
        unreduced = sort_and_merge_axes(list(have.unreduced) + list(r2u), mesh)
        last = TensorSharding(have.mesh, tuple(dims), out.replicated, tuple(unreduced))
        result = create("sdy.replicated_to_unreduced", result,
                        {"axes": ir.Attribute.parse("#sdy<axis_ref_list" + _axes_attr(r2u) + ">"),
                         "out_sharding": sharding_attr(last)})
    if s2u:
        lists = ", ".join(_axes_attr(axes) for axes in per_dim)
        result = create("sdy.sharded_to_unreduced", result,
                        {"axes": ir.Attribute.parse(f"#sdy<list_of_axis_ref_lists[{lists}]>"),
                         "out_sharding": sharding_attr(out)})
        last = out
    if result == value:
        return None
    mop.operands[index] = result
    return last
