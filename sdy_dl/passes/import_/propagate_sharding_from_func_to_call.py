"""``propagate-sharding-from-func-to-call`` (Shardy's
``sdy-propagate-sharding-from-func-to-call``, semantics §8.7).

A ``func.call`` without ``sdy.sharding`` gets its callee's result shardings,
when the callee has at least one result sharding on a non-maximal mesh;
missing entries become fully open shardings on the first such mesh.  An
existing call sharding is never overwritten.
"""

from __future__ import annotations

from sdy_dl.ir.meshes import module_meshes
from sdy_dl.ir.mlir_ops import module_ops, op_error, symbol_name
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import ops_named
from sdy_dl.ir.storage import SHARDING_ATTR, write_per_value
from sdy_dl.passes import PassOptions, register
from sdy_dl.passes.call_graph import callee_name, func_result_shardings


@register("propagate-sharding-from-func-to-call",
          "Copy callee result shardings onto calls that have none.")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        meshes = module_meshes(module)
        funcs = {symbol_name(op): op for op in module_ops(module) if op.name == "func.func"}
        changed = False
        for mop in ops_named(module, ("func.call",), post=True):
            callee = callee_name(mop)
            func = funcs.get(callee)
            if func is None:
                raise op_error(module, mop, f"call to unknown function @{callee}")
            if SHARDING_ATTR in mop.attributes:
                continue
            shardings = func_result_shardings(func, meshes)
            if shardings:
                write_per_value(mop, SHARDING_ATTR, shardings)
                changed = True
        return module.invalidate(ops_kept=True) if changed else module

