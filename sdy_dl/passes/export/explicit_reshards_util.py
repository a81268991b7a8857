"""Helpers of insert-explicit-reshards (Shardy's ``explicit_reshards_util``):
the all-reduces that turn unreduced axes into replicated ones, the op's
reduction axes and a dot's new result axes once stage
``insert_explicit_reshards`` has taken ``processDot``'s decision (the
unreduced collectives: :mod:`.insert_unreduced_collectives`).

A value whose sharding has unreduced axes that its user does not keep
unreduced is all-reduced over those axes first (Shardy's
``insertAllReduceIfUnreducedToReplicated``): the new ``sdy.all_reduce``
reads the value, its ``out_sharding`` is the value's sharding without the
reduced axes, and the use reads it instead.  The axes are a set difference
on axis refs (:func:`axis_set_diff`, Shardy's ``getAxisSetDiff``), which
splits sub-axes where the sets overlap partly.
"""

from __future__ import annotations

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

    from sdy_dl.ir.sdy_attrs import axis_ref_list_attr, sharding_attr

    mesh = meshes[source.mesh] if isinstance(source.mesh, str) else source.mesh
    target = user.unreduced if user is not None else ()
    axes = axis_set_diff(source.unreduced, target, mesh)
    if not axes:
        return source
    sharding = source.replace(unreduced=tuple(axis_set_diff(source.unreduced, axes, mesh)))
    value = mop.operands[index]
    all_reduce = ir.Operation.create(
        "sdy.all_reduce", results=[value.type], operands=[value],
        attributes={"reduction_axes": axis_ref_list_attr(axes),
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
    (full version), or, without them, each reduction factor's axes on the
    first tensor that has it; None when stage ``insert_explicit_reshards``
    finds a reduction factor sharded unlike on two tensors
    (``projection.reduction_differs``: Shardy fails a check there)."""
    if common is None:
        if projection.reduction_differs:
            return None
        common = projection.factor_axes(len(rule.factors))
    return [a for f, factor in enumerate(rule.factors) if factor.kind == "reduction"
            for a in common[f]]


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

