"""``pre-order-funcs`` (Shardy's ``sdy-pre-order-funcs``, semantics §8.7).

Moves the functions (those with a body) to the end of the module in
call-graph pre-order (the reverse of MLIR's ``CallGraph`` post-order:
callers before callees), so that propagation visits callers first.
"""

from __future__ import annotations

from sdy_dl.ir.mlir_ops import module_ops
from sdy_dl.ir.model import Module
from sdy_dl.ir.walk import key
from sdy_dl.passes import PassOptions, register
from sdy_dl.passes.call_graph import call_graph_post_order


@register("pre-order-funcs", "Reorder the functions into call-graph pre-order (callers first).")
def run(module: Module, options: PassOptions) -> Module:
    from jaxlib.mlir import ir

    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        order = list(reversed(call_graph_post_order(module)))
        tail = [op for op in module_ops(module)][-len(order):] if order else []
        if [key(f) for f in tail] == [key(f) for f in order]:
            return module
        for func in order:
            func.detach_from_parent()
            ir.InsertionPoint(module.mlir.body).insert(func)
        return module.invalidate()
