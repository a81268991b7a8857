"""The full version's treatment of a reshape whose sharding projection has
overflow axes (Shardy's ``processReshapeWithOverflowAxes``).

The side (operand or result) with the larger sharding (the operand on a tie)
gives its axes, factor by factor with their overflow axes; they are spread
again over the factors of each side (:func:`distribute_axes`, Shardy's
``distributeAxesAcrossFactors``).  The two shardings this gives are projected
once more, and every factor takes the greatest common prefix of its axes on
the two sides.  The projections in and out are the Datalog stage's
(:mod:`.explicit_reshards_projection`); this module holds the arithmetic of
the redistribution.
"""

from __future__ import annotations

import math

from sdy_dl.passes.export.explicit_reshards_projection import Projection, TensorAxes
from sdy_dl.sharding import AxisRef, Mesh, add_axis_or_merge, make_sub_axis


def distribute_axes(factors: list[tuple[int, int]], all_axes: list[AxisRef],
                    mesh: Mesh) -> tuple[dict, dict]:
    """``(factor -> axes, factor -> overflow axes)``: ``all_axes`` spread, axis
    by axis, over ``factors`` (``(index, size)`` in dim order): each axis goes
    to the first factors with room that share a divisor with it (an axis of
    size 1 to the first with room), split into sub-axes where needed; what no
    factor takes overflows the last factor."""
    axes: dict[int, list] = {f: [] for f, _ in factors}
    overflow: dict[int, list] = {f: [] for f, _ in factors}
    if not factors:
        return {}, {}
    remaining = [size for _, size in factors]
    index = 0

    def info(i):
        if i >= len(all_axes):
            return None
        ref = all_axes[i]
        return [ref.name, ref.pre if ref.is_sub_axis else None, ref.ref_size(mesh)]

    def ref_of(cur) -> AxisRef:
        name, pre, size = cur
        return AxisRef(name) if pre is None else make_sub_axis(name, pre, size, mesh)

    cur = info(index)
    while cur is not None:
        used = False
        for k, (f, _) in enumerate(factors):
            if remaining[k] <= 1:
                continue
            g = math.gcd(remaining[k], cur[2])
            if g == 1 and cur[2] != 1:
                continue
            used = True
            if cur[2] > g:
                pre = cur[1] or 1
                add_axis_or_merge(axes[f], make_sub_axis(cur[0], pre, g, mesh), mesh)
                cur[1], cur[2] = pre * g, cur[2] // g
                remaining[k] //= g
            else:
                add_axis_or_merge(axes[f], ref_of(cur), mesh)
                remaining[k] //= cur[2]
                index += 1
                cur = info(index)
                break
        if not used:
            last = factors[-1][0]
            while cur is not None:
                add_axis_or_merge(overflow[last], ref_of(cur), mesh)
                index += 1
                cur = info(index)
            break
    return ({f: tuple(a) for f, a in axes.items()},
            {f: tuple(a) for f, a in overflow.items() if a})


def redistributed(rule, projection: Projection, mesh: Mesh) -> TensorAxes:
    """Both sides of a reshape with the preferred side's axes spread over
    their factors (``redistributeAxes``)."""
    def sharding_size(t) -> int:
        refs = [a for axes in projection.tensors[t].values() for a in axes]
        refs += [a for axes in projection.overflow[t].values() for a in axes]
        return math.prod(a.ref_size(mesh) for a in refs)

    best = 0 if sharding_size(0) >= sharding_size(1) else 1
    all_axes: list = []
    for f in range(len(rule.factors)):
        if f in projection.tensors[best]:
            all_axes.extend(projection.tensors[best][f])
            all_axes.extend(projection.overflow[best].get(f, ()))
    out_axes, out_overflow = [], []
    for t, mapping in enumerate((rule.operands[0], rule.results[0])):
        factors = [(f, rule.factors[f].size) for dim in mapping for f in dim
                   if f in projection.tensors[t]]
        axes, overflow = distribute_axes(factors, all_axes, mesh)
        out_axes.append(axes)
        out_overflow.append(overflow)
    return TensorAxes(tuple(out_axes), tuple(out_overflow))


def greatest_common_prefix_axes(projection: Projection, num_factors: int,
                                mesh: Mesh) -> list[tuple]:
    """``getGreatestCommonPrefixAxes``: per factor, the greatest common prefix
    of its axes on every tensor that has it."""
    common: list = [None] * num_factors
    for tensor in projection.tensors:
        for f, axes in tensor.items():
            common[f] = axes if common[f] is None else _common_prefix(common[f], axes, mesh)
    return [c if c is not None else () for c in common]


def _common_prefix(a: tuple, b: tuple, mesh: Mesh) -> tuple:
    out = []
    for x, y in zip(a, b):
        if x == y:
            out.append(x)
            continue
        prefix = x.greatest_common_prefix(y, mesh)
        if prefix is not None:
            out.append(prefix)
        break
    return tuple(out)
