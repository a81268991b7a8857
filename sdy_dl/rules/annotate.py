"""Attach every op's rule to the module as ``sdy.sharding_rule`` (``rules annotate``)."""

from __future__ import annotations

from dataclasses import dataclass

from sdy_dl.ir.context import mlir_context
from sdy_dl.ir.traits import CUSTOM_CALL_OP
from sdy_dl.rules.db import RULE_ATTR, RuleDB
from sdy_dl.rules.instance import RuleInstance


@dataclass(frozen=True)
class OpRule:
    """One op of a module and its rule (None: no rule)."""

    op: object              # sdy_dl.ir.Op
    rule: RuleInstance | None
    own: bool               # the op already carried the rule as an attribute


def module_rules(module, db: RuleDB, op_name: str | None = None) -> list[OpRule]:
    """The rule of every op of ``module`` (only ops named ``op_name``, or custom calls
    with target ``@op_name``, when given), in pre-order."""
    out = []
    for op in module.ops:
        if op_name is not None and not _matches(op, op_name):
            continue
        out.append(OpRule(op, db.rule_for(op, module), op.attr(RULE_ATTR) is not None))
    return out


def _matches(op, name: str) -> bool:
    if op.name == name:
        return True
    target = op.attr("call_target_name") if op.name == CUSTOM_CALL_OP else None
    if target is None:
        return False
    from jaxlib.mlir import ir
    return name.lstrip("@") == ir.StringAttr(target).value


def annotate_module(module, db: RuleDB) -> int:
    """Set ``sdy.sharding_rule`` on every op that has a rule; returns how many were set.

    Ops that already carry the attribute keep it as it is (it wins, as in Shardy).
    """
    from sdy_dl.rules.rule_attr import rule_attr

    count = 0
    with mlir_context():
        for item in module_rules(module, db):
            if item.rule is None or item.own:
                continue
            _check_static(module, item.op)
            item.op.mlir.attributes[RULE_ATTR] = rule_attr(item.rule)
            count += 1
    return count


def _check_static(module, op) -> None:
    """A rule needs static shapes (Shardy's verifier of ``sdy.sharding_rule``)."""
    from sdy_dl.errors import SdyError

    for kind, values in (("operand", op.operands), ("result", op.results)):
        for i, v in enumerate(values):
            if v.shape is not None and not v.static:
                raise SdyError(f"'{op.name}' op {kind} {i} - expected a ranked tensor with a "
                               f"static shape. type: '{v.type_text}'",
                               module.file, op.line, op.col)
