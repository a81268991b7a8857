"""Manual axes of ``sdy.manual_computation`` shardings (§8.6).

In/out shardings of a manual computation are the global view: every dim
starts with its manual axes.  The body sees the local view without them:
:func:`erase_manual_axes` turns the global view into the local one,
:func:`add_free_axes` a local sharding back into the global one.
"""

from __future__ import annotations

from collections.abc import Collection

from sdy_dl.ir.sdy_attrs import axes_of_list, manual_axes_attr
from sdy_dl.sharding import DimSharding, TensorSharding


def _manual_prefix_length(dim: DimSharding, manual: Collection[str]) -> int:
    k = 0
    while k < len(dim.axes) and dim.axes[k].name in manual:
        k += 1
    return k


def erase_manual_axes(sharding: TensorSharding, manual: Collection[str]) -> TensorSharding:
    """Shardy's ``eraseManualAxes``: drop the leading manual axes of every dim
    and the manual axes of the replicated/unreduced lists."""
    if not manual:
        return sharding
    dims = tuple(DimSharding(d.axes[_manual_prefix_length(d, manual):], d.is_closed, d.priority)
                 for d in sharding.dims)
    return TensorSharding(sharding.mesh, dims,
                          tuple(a for a in sharding.replicated if a.name not in manual),
                          tuple(a for a in sharding.unreduced if a.name not in manual))


def add_free_axes(outer: TensorSharding, new: TensorSharding,
                  manual: Collection[str]) -> TensorSharding:
    """Shardy's ``addFreeAxesToManualComputationSharding``: the manual prefix of
    ``outer`` followed by the axes of ``new`` (closed flags and priorities from
    ``new``, replicated and unreduced axes from ``outer``)."""
    dims = []
    for i, d in enumerate(outer.dims):
        prefix = d.axes[:_manual_prefix_length(d, manual)]
        if i < len(new.dims):
            nd = new.dims[i]
            dims.append(DimSharding(prefix + nd.axes, nd.is_closed, nd.priority))
        else:
            dims.append(DimSharding(prefix, d.is_closed, d.priority))
    return TensorSharding(new.mesh, tuple(dims), outer.replicated, outer.unreduced)


def manual_axes(mop) -> list[str]:
    """The ``manual_axes`` of a manual computation, in their stored order."""
    return [axis.name for axis in axes_of_list(mop.operation.attributes["manual_axes"])]


def set_manual_axes(mop, names: list[str]) -> None:
    """Store the ``manual_axes`` of a manual computation."""
    mop.operation.attributes["manual_axes"] = manual_axes_attr(tuple(names))
