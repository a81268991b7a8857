"""``export-named-computations`` (Shardy's ``sdy-export-named-computations``, §9.2).

Named computations are visited in post-order (nested ones first).  Each one
first takes the shardings of its data-flow edges (block arguments into
``in_shardings``, results into ``out_shardings``, when at least one edge of
the group has a sharding; the others become fully open), then becomes a
private ``func.func`` appended to the module, named after the computation
(uniqued by the symbol table) and marked with ``sdy.original_func_name``:
the body is moved in (``sdy.return`` becomes ``func.return``), the edges on
the arguments are removed, every argument gets its ``in_shardings`` entry
and the ``execution_thread`` is moved over.  The named computation is
replaced by a ``func.call`` with its other discardable attributes and
``sdy.sharding`` = ``out_shardings``.  Finally the edges on the call results
are removed.  Function results get no sharding here
(``propagate-to-func-results`` does that).
"""

from __future__ import annotations

from sdy_dl.ir.mlir_ops import ORIGINAL_FUNC_NAME_ATTR, SymbolNamer, move_region_body
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import ops_named
from sdy_dl.ir.storage import SHARDING_ATTR, read_per_value, write_func_attrs, write_per_value
from sdy_dl.ir.value_sharding import data_flow_edge_user
from sdy_dl.passes import PassOptions, register
from sdy_dl.passes.export.sink_data_flow_edges import shardings_from_edges
from sdy_dl.passes.import_.import_func_calls import (EXECUTION_THREAD_ATTR, NAMED_INHERENT,
                                                     discardable_attrs)


def remove_edges(values) -> None:
    """Replace the data-flow edge that uses each value (if any) by the value."""
    for value in values:
        edge = data_flow_edge_user(value)
        if edge is not None:
            edge.results[0].replace_all_uses_with(value)
            edge.erase()


def export(module: Module, namer: SymbolNamer, named) -> list:
    """Export one named computation; the results of the new call."""
    from jaxlib.mlir import ir

    body = named.regions[0].blocks[0]
    ins = shardings_from_edges(list(body.arguments))
    if ins:
        write_per_value(named, "in_shardings", ins)
    outs = shardings_from_edges(list(named.results))
    if outs:
        write_per_value(named, "out_shardings", outs)
    ins = read_per_value(named, "in_shardings")
    outs = read_per_value(named, "out_shardings")

    name = ir.StringAttr(named.attributes["name"]).value
    ftype = ir.FunctionType.get([a.type for a in body.arguments], [r.type for r in named.results])
    func = ir.Operation.create("func.func", attributes={
        "sym_name": ir.StringAttr.get(namer.insert(name)),
        "function_type": ir.TypeAttr.get(ftype),
        "sym_visibility": ir.StringAttr.get("private"),
        ORIGINAL_FUNC_NAME_ATTR: ir.StringAttr.get(name)}, regions=1, loc=named.location)
    ir.InsertionPoint(module.mlir.body).insert(func)
    move_region_body(named, func, "sdy.return", "func.return")
    remove_edges(list(func.regions[0].blocks[0].arguments))
    if ins is not None:
        write_func_attrs(func, "arg_attrs", dict(enumerate(ins)))
    if EXECUTION_THREAD_ATTR in named.attributes:
        func.attributes[EXECUTION_THREAD_ATTR] = named.attributes[EXECUTION_THREAD_ATTR]

    call = ir.Operation.create("func.call", results=[r.type for r in named.results],
                               operands=list(named.operands),
                               attributes={"callee": ir.FlatSymbolRefAttr.get(
                                   ir.StringAttr(func.attributes["sym_name"]).value)},
                               loc=named.location)
    ir.InsertionPoint(named).insert(call)
    for attr_name, attr in discardable_attrs(named, NAMED_INHERENT,
                                             frozenset({EXECUTION_THREAD_ATTR})):
        call.attributes[attr_name] = attr
    if outs is not None:
        write_per_value(call, SHARDING_ATTR, outs)
    for old, new in zip(named.results, call.results):
        old.replace_all_uses_with(new)
    named.erase()
    return list(call.results)


@register("export-named-computations",
          "Turn every sdy.named_computation back into a private function and a call.")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        namer = SymbolNamer(module)
        results: list = []
        nameds = ops_named(module, ("sdy.named_computation",), post=True)
        if not nameds:
            return module
        for named in nameds:
            results += export(module, namer, named)
        remove_edges(results)
        return module.invalidate()
