"""``remove-sharding-groups`` (Shardy's ``sdy-remove-sharding-groups``, §9.3):
every ``sdy.sharding_group`` op is erased."""

from __future__ import annotations

from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import op_names, ops_named
from sdy_dl.passes import PassOptions, register


@register("remove-sharding-groups", "Erase every sdy.sharding_group op.")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    if "sdy.sharding_group" not in op_names(module):
        return module
    with mlir_context():
        for op in ops_named(module, ("sdy.sharding_group",), post=True):
            op.erase()
        return module.invalidate()
