"""``insert-func-call-reshards`` (Shardy's ``sdy-insert-func-call-reshards``, §9.2 step 8).

For every ``func.call`` (walk order) the callee's result shardings
(``getFuncResultShardings``: missing entries fully open on the first
non-maximal mesh; when the callee has none, fully closed shardings like the
call's own, and nothing happens when the call has none either) are compared
with the shardings of the call's results.  Each result whose sharding is not
equivalent (Shardy's ``isEquivalent``, decided in Datalog:
:mod:`.is_equivalent`; unreduced axes ignored as jaxlib's pass ignores them)
gets an
``sdy.reshard`` right after the call to its current sharding (or fully
closed when it has none), which all its other uses now read.  The call's
``sdy.sharding`` becomes the callee's result shardings.
"""

from __future__ import annotations

from sdy_dl.ir.meshes import module_meshes
from sdy_dl.ir.mlir_ops import insert_sharding_op_after
from sdy_dl.ir.model import Module
from sdy_dl.ir.storage import SHARDING_ATTR, read_per_value, write_per_value
from sdy_dl.ir.value_sharding import get_sharding
from sdy_dl.passes import PassOptions, register, rewrite
from sdy_dl.passes.call_graph import calls_with_callees, func_result_shardings
from sdy_dl.passes.export.is_equivalent import IsEquivalent
from sdy_dl.sharding import DimSharding, TensorSharding


def fully_closed_like(s: TensorSharding) -> TensorSharding:
    """``TensorShardingAttr::getFullyClosedLike``."""
    return TensorSharding(s.mesh, tuple(DimSharding((), True) for _ in s.dims))


def insert_reshards(call, func, meshes, is_equivalent: IsEquivalent) -> tuple[bool, bool]:
    """Reshard the results of ``call`` (of ``func``) as the pass does: (whether
    anything changed, whether an op was inserted)."""
    wanted = func_result_shardings(func, meshes)
    if wanted is None:
        current = read_per_value(call, SHARDING_ATTR)
        if not current:
            return False, False
        wanted = [fully_closed_like(s) for s in current]
    inserted = False
    haves = [get_sharding(result) for result in call.results]
    same = is_equivalent.many((want, have, True) for want, have in zip(wanted, haves))
    for want, result, have, equivalent in zip(wanted, call.results, haves, same):
        if equivalent:
            continue
        target = have if have is not None else fully_closed_like(want)
        reshard = insert_sharding_op_after("sdy.reshard", result, target, call.location)
        result.replace_all_uses_except(reshard.results[0], reshard)
        inserted = True
    write_per_value(call, SHARDING_ATTR, wanted)
    return True, inserted


@register("insert-func-call-reshards",
          "Insert sdy.reshard ops where call result and callee result shardings differ.")
def run(module: Module, options: PassOptions) -> Module:
    def edit():
        meshes = module_meshes(module)
        is_equivalent = IsEquivalent(options)
        changed = inserted = False
        for call, callee in calls_with_callees(module):
            call_changed, call_inserted = insert_reshards(call, callee, meshes, is_equivalent)
            changed |= call_changed
            inserted |= call_inserted
        # (only shardings written: the op walks stay)
        return changed and {"ops_kept": not inserted}
    return rewrite(module, edit)
