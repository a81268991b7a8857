"""``unflatten-call-graph`` (Shardy's ``sdy-unflatten-call-graph``, §9.2 step 6).

Deduplicates the clones ``flatten-call-graph`` made: functions with the
same computation key (original name, ``sdy.func_manual_axes``, argument
shardings and result shardings) are merged into the callee of the first
call (walk order) with that key, and every call is redirected to it (the
Datalog stage ``unflatten_call_graph`` decides which).  Then
``sdy.original_func_name`` and ``sdy.func_manual_axes`` are removed from
every function; the unused clones are left to ``symbol-dce``.  With the
pass option ``dedup-functions-fully`` (false in the propagation pipeline)
shardings are left out of the key, and each key keeps the callee whose full
key is called most often (first to reach that count).
"""

from __future__ import annotations

from sdy_dl.ir.meshes import module_meshes
from sdy_dl.ir.mlir_ops import ORIGINAL_FUNC_NAME_ATTR
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import ops_named
from sdy_dl.passes import PassOptions, Stage, register, rewrite
from sdy_dl.passes.call_graph import callee_name, func_result_shardings, func_table, original_name
from sdy_dl.passes.import_.import_func_calls import func_arg_shardings
from sdy_dl.passes.import_.import_pipeline import DEDUP_FUNCTIONS_FULLY

#: The Datalog stage this pass runs (``datalog/unflatten_call_graph/``).
STAGE = Stage("unflatten_call_graph")

FUNC_MANUAL_AXES_ATTR = "sdy.func_manual_axes"


def shardings_text(shardings) -> str:
    return "none" if shardings is None else "[" + ", ".join(s.to_text() for s in shardings) + "]"


def computation_key(func, meshes, ignore_shardings: bool = False) -> str:
    """The printed ``ComputationKey`` of ``func`` (its shardings left out when
    ``ignore_shardings``, as with dedup-functions-fully)."""
    attrs = func.attributes
    manual = str(attrs[FUNC_MANUAL_AXES_ATTR]) if FUNC_MANUAL_AXES_ATTR in attrs else "none"
    if ignore_shardings:
        return "\n".join([original_name(func), manual, "none", "none"])
    return "\n".join([original_name(func), manual,
                      shardings_text(func_arg_shardings(func, meshes)),
                      shardings_text(func_result_shardings(func, meshes))])


@register("unflatten-call-graph",
          "Merge cloned functions with the same origin and the same in/out shardings.",
          (DEDUP_FUNCTIONS_FULLY,))
def run(module: Module, options: PassOptions) -> Module:
    from jaxlib.mlir import ir

    dedup = options[DEDUP_FUNCTIONS_FULLY]

    def edit() -> bool:
        meshes = module_meshes(module)
        funcs = func_table(module)
        names = list(funcs)
        func_ids = {n: i for i, n in enumerate(names)}
        key_ids: dict[str, int] = {}
        facts: dict[str, set] = {"in_call": set(), "in_func_key": set(), "in_func_group": set()}
        group_ids: dict[str, int] = {}
        calls = ops_named(module, ("func.call",), post=True)
        for c, call in enumerate(calls):
            facts["in_call"].add((c, func_ids[callee_name(call)]))
        for name in {callee_name(call) for call in calls}:
            k = key_ids.setdefault(computation_key(funcs[name], meshes), len(key_ids))
            facts["in_func_key"].add((func_ids[name], k))
            g = group_ids.setdefault(computation_key(funcs[name], meshes, True), len(group_ids))
            facts["in_func_group"].add((func_ids[name], g))
        changed = False
        if calls:
            if not dedup:
                del facts["in_func_group"]
            out = STAGE.run(facts, options, dedup=dedup)
            for c, f in sorted(out["retarget"]):
                if callee_name(calls[c]) != names[f]:
                    calls[c].attributes["callee"] = ir.FlatSymbolRefAttr.get(names[f])
                    changed = True
        for func in funcs.values():
            for attr in (ORIGINAL_FUNC_NAME_ATTR, FUNC_MANUAL_AXES_ATTR):
                if attr in func.attributes:
                    del func.attributes[attr]
                    changed = True
        return changed
    return rewrite(module, edit, ops_kept=True)
