"""``add-func-data-flow-edges`` (Shardy's ``sdy-add-func-data-flow-edges``,
the first step of the pipeline with ``dedup-functions-fully=true``, §9.2).

Functions stay functions and calls stay calls; instead of named computations,
every function/call boundary gets an ``sdy.func_data_flow_edge`` that
propagation goes through (``propagation/edges.py``):

* every static-shaped argument of every function except the main one (the
  only function, else ``@main``): ``%e = sdy.func_data_flow_edge %argN`` at
  the start of the entry block, in argument order, with the function's
  location; every other use of the argument reads ``%e``;
* every static-shaped result of every ``func.call`` (walk order, nested calls
  included): an edge right after the call, in result order, with the call's
  location; every other use of the result reads the edge.

An edge starts with the sharding of the value it wraps (the argument's
``sdy.sharding`` or the call's ``sdy.sharding`` entry), as its own
``sdy.sharding``.  ``sink-func-data-flow-edges`` removes the edges again.
"""

from __future__ import annotations

from sdy_dl.ir.mlir_ops import funcs, is_static_tensor, main_func, tensor_rank
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import ops_named
from sdy_dl.ir.storage import write_stored
from sdy_dl.ir.value_sharding import get_sharding
from sdy_dl.passes import PassOptions, register, rewrite

EDGE_OP = "sdy.func_data_flow_edge"


def _edge(value, loc):
    """A detached ``sdy.func_data_flow_edge`` on ``value`` with its sharding."""
    from jaxlib.mlir import ir

    edge = ir.Operation.create(EDGE_OP, results=[value.type], operands=[value], loc=loc)
    sharding = get_sharding(value)
    if sharding is not None:
        write_stored(edge, 0, False, [tensor_rank(value.type)], sharding)
    return edge


def _wrap(value, edge) -> None:
    """Every use of ``value`` but ``edge``'s now reads ``edge``."""
    value.replace_all_uses_except(edge.results[0], edge)


@register("add-func-data-flow-edges",
          "Insert sdy.func_data_flow_edge on non-main function arguments and call results.")
def run(module: Module, options: PassOptions) -> Module:
    from jaxlib.mlir import ir

    def edit() -> bool:
        main = main_func(module)
        changed = False
        for func in funcs(module):
            if main is not None and func == main or not func.regions[0].blocks:
                continue
            block = func.regions[0].blocks[0]
            first = next(iter(block.operations), None)
            point = ir.InsertionPoint(first.operation) if first is not None else ir.InsertionPoint(block)
            for arg in block.arguments:
                if is_static_tensor(arg.type):
                    edge = _edge(arg, func.location)
                    point.insert(edge)
                    _wrap(arg, edge)
                    changed = True
        for call in ops_named(module, ("func.call",), post=True):
            after = call
            for result in call.results:
                if is_static_tensor(result.type):
                    edge = _edge(result, call.location)
                    ir.InsertionPoint.after(after).insert(edge)
                    _wrap(result, edge)
                    after = edge
                    changed = True
        return changed
    return rewrite(module, edit)
