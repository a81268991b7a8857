"""``import-func-calls`` (Shardy's ``sdy-import-func-calls``, semantics §8.7, §9.2).

Calls are visited function by function in call-graph post-order (callees
first).  Each ``func.call`` becomes an ``sdy.named_computation<"original
name">`` with the call's operands and result types:

* ``in_shardings``: the callee's argument shardings (missing ones fully open
  on the first non-maximal mesh), absent when no argument has one;
* ``out_shardings``: the call's ``sdy.sharding``;
* the call's other discardable attributes and the callee's
  ``execution_thread``;
* the body: the callee's body is moved in (``func.return`` becomes
  ``sdy.return``) at its first call; later calls of the same callee copy
  the first named computation's body.

Imported callees are erased.  Then data-flow edges are added on every named
computation (option ``add-data-flow-edges-on-named-computations``, default
true), as ``add-data-flow-edges`` does.
"""

from __future__ import annotations

from sdy_dl.ir.meshes import module_meshes
from sdy_dl.ir.mlir_ops import func_arg_types, move_region_body, op_error
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import op_index
from sdy_dl.ir.storage import SHARDING_ATTR, read_per_value, write_per_value
from sdy_dl.ir.value_sharding import func_shardings
from sdy_dl.ir.walk import key, walk_named
from sdy_dl.passes import PassOptions, register, rewrite
from sdy_dl.passes.call_graph import call_graph, callee_name, func_table, has_body, original_name
from sdy_dl.passes.import_.add_data_flow_edges import add_edges
from sdy_dl.passes.options import Option
from sdy_dl.sharding import TensorSharding

EXECUTION_THREAD_ATTR = "execution_thread"
#: Inherent attributes of ``func.call`` (not copied onto the named computation).
CALL_INHERENT = frozenset({"callee", "arg_attrs", "res_attrs", "no_inline"})
#: The ops the pass creates: named computations with their terminators and data-flow edges.
IMPORTED_OPS = frozenset({"sdy.named_computation", "sdy.return", "sdy.data_flow_edge"})
#: Inherent attributes of ``sdy.named_computation``.
NAMED_INHERENT = frozenset({"name", "in_shardings", "out_shardings"})


def func_arg_shardings(func, meshes) -> list[TensorSharding] | None:
    """Shardy's ``getFuncArgShardings``."""
    return func_shardings(func, "arg_attrs", func_arg_types(func), meshes)


def discardable_attrs(mop, inherent: frozenset, skip: frozenset) -> list:
    """(name, attribute) of ``mop``'s attributes that are neither inherent nor skipped."""
    attrs = mop.attributes
    return [(name, attrs[name]) for name in list(attrs)
            if name not in inherent and name not in skip]


def set_call_attrs(named, call) -> None:
    for name, attr in discardable_attrs(call, CALL_INHERENT, frozenset({SHARDING_ATTR})):
        named.attributes[name] = attr
    out = read_per_value(call, SHARDING_ATTR)
    if out is not None:
        write_per_value(named, "out_shardings", out)


def import_call(call, func, meshes, moved: dict) -> None:
    from jaxlib.mlir import ir

    name = callee_name(call)
    if name in moved:
        named = moved[name].clone(ip=ir.InsertionPoint(call))
        for i, v in enumerate(call.operands):
            named.operands[i] = v
        for attr_name, _ in discardable_attrs(named, NAMED_INHERENT,
                                              frozenset({EXECUTION_THREAD_ATTR})):
            del named.attributes[attr_name]
        if "out_shardings" in named.attributes:
            del named.attributes["out_shardings"]
        set_call_attrs(named, call)
    else:
        attrs = {"name": ir.StringAttr.get(original_name(func))}
        named = ir.Operation.create("sdy.named_computation",
                                    results=[r.type for r in call.results],
                                    operands=list(call.operands), attributes=attrs,
                                    regions=1, loc=call.location)
        ir.InsertionPoint(call).insert(named)
        ins = func_arg_shardings(func, meshes)
        if ins is not None:
            write_per_value(named, "in_shardings", ins)
        set_call_attrs(named, call)
        if EXECUTION_THREAD_ATTR in func.attributes:
            named.attributes[EXECUTION_THREAD_ATTR] = func.attributes[EXECUTION_THREAD_ATTR]
        move_region_body(func, named, "func.return", "sdy.return")
        moved[name] = named
    for old, new in zip(call.results, named.results):
        old.replace_all_uses_with(new)
    call.erase()


ADD_DATA_FLOW_EDGES_ON_NAMED_COMPUTATIONS = Option(
    "add-data-flow-edges-on-named-computations", "bool", True,
    "Add sdy.data_flow_edge ops on the named computations calls become.")


@register("import-func-calls",
          "Turn every func.call into an sdy.named_computation (with data-flow edges).",
          (ADD_DATA_FLOW_EDGES_ON_NAMED_COMPUTATIONS,))
def run(module: Module, options: PassOptions) -> Module:
    def edit() -> bool:
        meshes = module_meshes(module)
        funcs = func_table(module)
        moved: dict = {}
        changed = False
        order, calls = call_graph(module)
        # (importing a call moves a callee's body, whose calls were imported
        # before: the calls of a function do not change before its turn)
        for func in order:
            for call in calls[key(func)]:
                callee = funcs[callee_name(call)]
                if not has_body(callee):
                    raise op_error(module, call, f"call to @{callee_name(call)}, a function "
                                   "without a body; Shardy's passes need the callee's body")
                import_call(call, callee, meshes, moved)
                changed = True
        for name in moved:
            funcs[name].erase()
        if options[ADD_DATA_FLOW_EDGES_ON_NAMED_COMPUTATIONS]:
            for mop in walk_named(module.mlir, ("sdy.named_computation",), post=True):
                add_edges(mop)
                changed = True
        return changed

    # The op names read before, without the calls (every call of a function with
    # a body is imported, the others are errors) and with the ops the pass
    # creates (None: not read since the module's last edit): the passes after
    # it need not walk for them.
    names = op_index(module).names
    if names is not None:
        names = (names - {"func.call"}) | IMPORTED_OPS
    return rewrite(module, edit, names=names)
