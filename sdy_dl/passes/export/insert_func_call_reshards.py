"""``insert-func-call-reshards`` (Shardy's ``sdy-insert-func-call-reshards``, §9.2 step 8).

For every ``func.call`` (walk order) the callee's result shardings
(``getFuncResultShardings``: missing entries fully open on the first
non-maximal mesh; when the callee has none, fully closed shardings like the
call's own, and nothing happens when the call has none either) are compared
with the shardings of the call's results.  Each result whose sharding is not
equivalent (same mesh and dimension axes, unreduced axes ignored as jaxlib's
pass ignores them; a missing or fully replicated sharding equals only a
fully replicated one) gets an
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
from sdy_dl.sharding import DimSharding, TensorSharding


def fully_closed_like(s: TensorSharding) -> TensorSharding:
    """``TensorShardingAttr::getFullyClosedLike``."""
    return TensorSharding(s.mesh, tuple(DimSharding((), True) for _ in s.dims))


def is_equivalent(a: TensorSharding | None, b: TensorSharding | None,
                  ignore_unreduced: bool = False) -> bool:
    """``TensorShardingAttr::isEquivalent`` (unreduced axes compared unless
    ``ignore_unreduced``)."""
    def replicated(s):
        return s is None or ((ignore_unreduced or not s.unreduced)
                             and all(not d.axes for d in s.dims))

    if replicated(a):
        return replicated(b)
    if b is None or a.mesh != b.mesh or (not ignore_unreduced and a.unreduced != b.unreduced):
        return False
    return len(a.dims) == len(b.dims) and all(x.axes == y.axes for x, y in zip(a.dims, b.dims))


def insert_reshards(call, func, meshes) -> bool:
    wanted = func_result_shardings(func, meshes)
    if wanted is None:
        current = read_per_value(call, SHARDING_ATTR)
        if not current:
            return False
        wanted = [fully_closed_like(s) for s in current]
    for want, result in zip(wanted, call.results):
        have = get_sharding(result)
        if is_equivalent(want, have, ignore_unreduced=True):
            continue
        target = have if have is not None else fully_closed_like(want)
        reshard = insert_sharding_op_after("sdy.reshard", result, target, call.location)
        result.replace_all_uses_except(reshard.results[0], reshard)
    write_per_value(call, SHARDING_ATTR, wanted)
    return True


@register("insert-func-call-reshards",
          "Insert sdy.reshard ops where call result and callee result shardings differ.")
def run(module: Module, options: PassOptions) -> Module:
    def edit() -> bool:
        meshes = module_meshes(module)
        changed = False
        for call, callee in calls_with_callees(module):
            changed |= insert_reshards(call, callee, meshes)
        return changed
    return rewrite(module, edit)
