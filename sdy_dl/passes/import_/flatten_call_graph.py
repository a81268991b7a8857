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

from sdy_dl.ir.mlir_ops import SymbolNamer
from sdy_dl.ir.model import Module
from sdy_dl.ir.walk import key
from sdy_dl.passes import PassOptions, register, rewrite
from sdy_dl.passes.call_graph import call_graph, callee_name, clone_func, func_table


@register("flatten-call-graph",
          "Clone functions so that every function has exactly one call site.")
def run(module: Module, options: PassOptions) -> Module:
    from jaxlib.mlir import ir

    def edit() -> bool:
        namer = SymbolNamer(module)
        table = func_table(module)
        seen: set[str] = set()
        changed = False
        order, calls = call_graph(module)   # (cloning adds functions, not calls to these)
        for func in order:
            for call in calls[key(func)]:
                name = callee_name(call)
                if name not in seen:
                    seen.add(name)
                    continue
                call.attributes["callee"] = ir.FlatSymbolRefAttr.get(
                    clone_func(module, namer, table[name], table))
                changed = True
        return changed
    return rewrite(module, edit, ops_kept=True)   # (and copies of functions)
