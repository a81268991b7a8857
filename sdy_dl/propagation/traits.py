"""Op traits of the model's ops that propagation asks about (§6, §7.1).

The facts are the op-trait table (``rules/traits/op_traits.yaml``, read by
:mod:`sdy_dl.ir.traits`); here they are applied to ops of the model:

* whether an op is *elementwise* in Shardy's sense (aggressive strategy §6,
  op priorities §7.1);
* whether the greedy driver may erase an op when unused
  (``isOpTriviallyDead``): ops without memory effects, and region ops with
  recursive memory effects whose nested ops all have none.
"""

from __future__ import annotations

from sdy_dl.ir import Op
from sdy_dl.ir.traits import (CUSTOM_CALL_OP, EFFECTFUL_OPS, EFFECT_FREE_DIALECTS, PURE_OPS,
                              RECURSIVE_EFFECT_OPS, is_elementwise as is_elementwise_op)
from sdy_dl.ir.walk import walk_model


def is_elementwise(op: Op) -> bool:
    """Shardy's ``isElementwise`` (§6)."""
    return is_elementwise_op(op.name, lambda: (op.operands[0].shape if op.operands else None,
                                               op.results[0].shape if op.results else None))


def has_no_effects(op: Op) -> bool:
    """Whether ``op`` (ignoring its uses) would be trivially dead: no effects at all
    (ops with recursive effects: none of the ops nested in them has any)."""
    if not op.regions:   # (most ops: no walk)
        return _has_recursive_effects(op) or _own_effects_free(op)
    for op, entering in walk_model(op, _has_recursive_effects):
        if entering and not _has_recursive_effects(op) and not _own_effects_free(op):
            return False
    return True


def _has_recursive_effects(op: Op) -> bool:
    return op.name in RECURSIVE_EFFECT_OPS


def _own_effects_free(op: Op) -> bool:
    if op.name == CUSTOM_CALL_OP:
        side = op.attr_text("has_side_effect")
        return side is None or side == "false"
    if op.name in EFFECTFUL_OPS:
        return False
    return op.dialect in EFFECT_FREE_DIALECTS or op.name in PURE_OPS
