"""``sharding-constraint-to-reshard`` (Shardy's ``sdy-sharding-constraint-to-reshard``, §9.3).

Every ``sdy.sharding_constraint`` becomes an ``sdy.reshard`` of the same
input, with the same ``sharding``, location and discardable attributes
(e.g. ``sdy.sharding_rule``), in its place.
"""

from __future__ import annotations

from sdy_dl.ir.mlir_ops import funcs
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import op_names, ops_named
from sdy_dl.passes import PassOptions, register


def to_reshard(op) -> None:
    from jaxlib.mlir import ir

    named = [op.attributes[i] for i in range(len(op.attributes))]
    attrs = {n.name: n.attr for n in named}
    sharding = attrs.pop("sharding")
    # The inherent attribute first, then the discardable ones in their order.
    attributes = {"sharding": sharding, **attrs}
    reshard = ir.Operation.create("sdy.reshard", results=[op.results[0].type],
                                  operands=[op.operands[0]], attributes=attributes,
                                  loc=op.location)
    ir.InsertionPoint(op).insert(reshard)
    op.results[0].replace_all_uses_with(reshard.results[0])
    op.erase()


@register("sharding-constraint-to-reshard", "Turn every sdy.sharding_constraint into sdy.reshard.")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    if "sdy.sharding_constraint" not in op_names(module):
        return module
    with mlir_context():
        for func in funcs(module):
            for op in ops_named(module, ("sdy.sharding_constraint",), post=True, top=func):
                to_reshard(op)
        return module.invalidate()
