"""The call graph shared by the call passes (semantics §8.7, §9.2).

Functions by name, a call's callee, a clone's original name
(``sdy.original_func_name``), the calls in a function, a function's result
shardings (Shardy's ``getFuncResultShardings``), the call-graph
post-order in which Shardy's ``iterateFuncs`` visits functions (a recursive
call graph is an error) and cloning a function with its callees.
"""

from __future__ import annotations

from sdy_dl.ir.mlir_ops import (ORIGINAL_FUNC_NAME_ATTR, SymbolNamer, func_result_types,
                                module_ops, op_error, symbol_name)
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import may_hold, ops_named
from sdy_dl.ir.value_sharding import func_shardings
from sdy_dl.ir.walk import key, walk_named
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
    """The ``func.call`` ops nested in ``func`` in walk order (walked now)."""
    return walk_named(func, ("func.call",))


def calls_with_callees(module: Module) -> list[tuple]:
    """``(call, callee)`` for every ``func.call`` of the module, in post-order."""
    table = func_table(module)
    return [(op, table[callee_name(op)])
            for op in ops_named(module, ("func.call",), post=True)]


def func_result_shardings(func, meshes) -> list[TensorSharding] | None:
    """Shardy's ``getFuncResultShardings``."""
    return func_shardings(func, "res_attrs", func_result_types(func), meshes)


def call_graph_post_order(module: Module) -> list:
    """Functions in the order of ``iterateFuncs`` (call-graph post-order of
    MLIR's CallGraph: DFS from the external node over functions in module
    order, callees in order of their first call).  A recursive call graph is
    an error (Shardy's passes recurse without end on one)."""
    return call_graph(module)[0]


def call_graph(module: Module, calls_of=None) -> tuple[list, dict]:
    """:func:`call_graph_post_order` and the calls of each function in it (by
    ``key``, in walk order), from the op index (``calls_of(f)``: the calls of
    function ``f`` in walk order, when the caller has them)."""
    if calls_of is None:   # (no walk for calls where the module's op names hold none)
        calls_of = ((lambda f: ops_named(module, ("func.call",), top=f))
                    if may_hold(module, "func.call") else (lambda f: []))
    funcs = func_table(module)
    nodes = [op for op in module_ops(module) if op.name == "func.func" and has_body(op)]
    edges: dict = {}
    calls: dict = {}
    for f in nodes:
        out: dict = {}
        calls[key(f)] = calls_of(f)
        for mop in calls[key(f)]:
            callee = funcs.get(callee_name(mop))
            if callee is not None and has_body(callee) and key(callee) not in out:
                out[key(callee)] = (callee, mop)
        edges[key(f)] = list(out.values())
    seen: set = set()
    on_path: set = set()
    order: list = []
    for root in nodes:
        if key(root) in seen:
            continue
        seen.add(key(root))
        on_path.add(key(root))
        stack = [(root, iter(edges[key(root)]))]  # iterative DFS: chains are not bounded
        while stack:
            f, callees = stack[-1]
            nxt = next(callees, None)
            if nxt is None:
                stack.pop()
                on_path.discard(key(f))
                order.append(f)
                continue
            g, call = nxt
            if key(g) in on_path:
                raise _recursion_error(module, call, [h for h, _ in stack], g)
            if key(g) not in seen:
                seen.add(key(g))
                on_path.add(key(g))
                stack.append((g, iter(edges[key(g)])))
    return order, calls


def _recursion_error(module: Module, call, path: list, callee):
    cycle = [symbol_name(h) for h in path[[key(h) for h in path].index(key(callee)):]]
    through = " -> ".join(f"@{n}" for n in cycle + [cycle[0]])
    return op_error(module, call, f"recursive call graph ({through}); Shardy's passes "
                                  "need an acyclic call graph")


def clone_func(module: Module, namer: SymbolNamer, func, funcs: dict | None = None) -> str:
    """``cloneFuncRecursively`` then ``SymbolTable::insert``: the clone's name.
    Nested callees are cloned first (iteratively: call chains are not bounded).
    ``funcs``: the module's :func:`func_table`, kept current here (read anew
    when not given)."""
    from jaxlib.mlir import ir

    if funcs is None:
        funcs = func_table(module)

    def start(f):
        clone = f.clone(ip=False)
        clone.attributes[ORIGINAL_FUNC_NAME_ATTR] = ir.StringAttr.get(original_name(f))
        return clone, iter(walk_named(clone, ("func.call",), post=True))

    stack, waiting, name = [start(func)], [], None
    while stack:
        clone, calls = stack[-1]
        call = next(calls, None)
        if call is not None:
            waiting.append(call)
            stack.append(start(funcs[callee_name(call)]))
            continue
        stack.pop()
        name = namer.insert(symbol_name(clone))
        clone.attributes["sym_name"] = ir.StringAttr.get(name)
        ir.InsertionPoint(module.mlir.body).insert(clone)
        funcs[name] = clone
        if waiting:
            waiting.pop().attributes["callee"] = ir.FlatSymbolRefAttr.get(name)
    return name
