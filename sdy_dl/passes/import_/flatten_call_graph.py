"""``flatten-call-graph`` (Shardy's ``sdy-flatten-call-graph``, semantics §8.7).

Calls are visited function by function in call-graph post-order (MLIR's
``CallGraph``: DFS from the external node over the functions in module
order), each function's calls in walk order.  The first call of each callee
keeps it; every later call gets a recursive clone of the callee (nested
calls cloned too, innermost inserted first), appended to the module, named
by the symbol table (``foo_0``, one counter for all names) and marked with
``sdy.original_func_name``.  Afterwards every function has one call site.
"""

from __future__ import annotations

from sdy_dl.ir.model import Module
from sdy_dl.passes import PassOptions, register
from sdy_dl.passes.import_common import (ORIGINAL_FUNC_NAME_ATTR, SymbolNamer, rebuild,
                                         symbol_name, walk_post)
from sdy_dl.passes.call_graph import (call_graph_post_order, callee_name, calls_in, func_table,
                                     original_name)


def clone_func(module: Module, namer: SymbolNamer, func) -> str:
    """``cloneFuncRecursively`` then ``SymbolTable::insert``: the clone's name."""
    from jaxlib.mlir import ir

    clone = func.clone(ip=False)
    clone.attributes[ORIGINAL_FUNC_NAME_ATTR] = ir.StringAttr.get(original_name(func))
    funcs = func_table(module)
    for mop in walk_post(clone):
        if mop.name == "func.call":
            new = clone_func(module, namer, funcs[callee_name(mop)])
            mop.attributes["callee"] = ir.FlatSymbolRefAttr.get(new)
    name = namer.insert(symbol_name(clone))
    clone.attributes["sym_name"] = ir.StringAttr.get(name)
    ir.InsertionPoint(module.mlir.body).insert(clone)
    return name


@register("flatten-call-graph",
          "Clone functions so that every function has exactly one call site.")
def run(module: Module, options: PassOptions) -> Module:
    from jaxlib.mlir import ir

    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        namer = SymbolNamer(module)
        seen: set[str] = set()
        changed = False
        for func in call_graph_post_order(module):
            for call in calls_in(func):
                name = callee_name(call)
                if name not in seen:
                    seen.add(name)
                    continue
                callee = func_table(module)[name]
                call.attributes["callee"] = ir.FlatSymbolRefAttr.get(
                    clone_func(module, namer, callee))
                changed = True
        return rebuild(module) if changed else module
