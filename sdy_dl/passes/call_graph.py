"""The call graph shared by the call passes (semantics §8.7, §9.2).

Functions by name, a call's callee, a clone's original name
(``sdy.original_func_name``), the calls in a function, a function's result
shardings (Shardy's ``getFuncResultShardings``) and the call-graph
post-order in which Shardy's ``iterateFuncs`` visits functions.
"""

from __future__ import annotations

from sdy_dl.ir.model import Module
from sdy_dl.passes.import_common import (ORIGINAL_FUNC_NAME_ATTR, func_result_types, func_shardings,
                                         key, module_ops, symbol_name, walk_pre)
from sdy_dl.sharding import TensorSharding


def func_table(module: Module) -> dict:
    """The module's ``func.func`` ops by symbol name."""
    return {symbol_name(op): op for op in module_ops(module) if op.name == "func.func"}


def callee_name(call) -> str:
    """The symbol a ``func.call`` calls."""
    from jaxlib.mlir import ir

    return ir.FlatSymbolRefAttr(call.attributes["callee"]).value


def original_name(func) -> str:
    """The name ``func`` was cloned from (its own name when it is no clone)."""
    from jaxlib.mlir import ir

    attrs = func.attributes
    if ORIGINAL_FUNC_NAME_ATTR in attrs:
        return ir.StringAttr(attrs[ORIGINAL_FUNC_NAME_ATTR]).value
    return symbol_name(func)


def has_body(func) -> bool:
    """Whether ``func`` is a definition (not a declaration)."""
    return len(func.regions[0].blocks) > 0


def calls_in(func) -> list:
    """The ``func.call`` ops nested in ``func`` in walk order."""
    return [op for op in walk_pre(func)[1:] if op.name == "func.call"]


def func_result_shardings(func, meshes) -> list[TensorSharding] | None:
    """Shardy's ``getFuncResultShardings``."""
    return func_shardings(func, "res_attrs", func_result_types(func), meshes)


def call_graph_post_order(module: Module) -> list:
    """Functions in the order of ``iterateFuncs`` (call-graph post-order of
    MLIR's CallGraph: DFS from the external node over functions in module
    order, callees in order of their first call)."""
    funcs = func_table(module)
    nodes = [op for op in module_ops(module) if op.name == "func.func" and has_body(op)]
    edges: dict = {}
    for f in nodes:
        out = []
        for mop in calls_in(f):
            callee = funcs.get(callee_name(mop))
            if callee is not None and has_body(callee) and callee not in out:
                out.append(callee)
        edges[key(f)] = out
    seen: set = set()
    order: list = []
    for root in nodes:
        if key(root) in seen:
            continue
        seen.add(key(root))
        stack = [(root, iter(edges[key(root)]))]
        while stack:
            f, callees = stack[-1]
            for g in callees:
                if key(g) not in seen:
                    seen.add(key(g))
                    stack.append((g, iter(edges[key(g)])))
                    break
            else:
                stack.pop()
                order.append(f)
    return order
