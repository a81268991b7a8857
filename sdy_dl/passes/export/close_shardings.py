"""``close-shardings`` (Shardy's ``sdy-close-shardings``, §9.3).

Every stored sharding (the sharding walker's places) becomes its closed
form, ``TensorShardingAttr::getClosedLike``: each dim closed (axes and
priority kept), the replicated axes dropped, the unreduced axes kept.
"""

from __future__ import annotations

from sdy_dl.ir.model import Module
from sdy_dl.ir.sharding_walker import transform_shardings
from sdy_dl.passes import PassOptions, register
from sdy_dl.sharding import DimSharding, TensorSharding


def closed_like(s: TensorSharding) -> TensorSharding:
    """``TensorShardingAttr::getClosedLike``."""
    dims = tuple(DimSharding(d.axes, True, d.priority) for d in s.dims)
    return TensorSharding(s.mesh, dims, (), s.unreduced)


@register("close-shardings", "Close every dim of every sharding and drop replicated axes.")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        transform_shardings(module, closed_like, any_order=True)
        return module.invalidate(ops_kept=True)
