"""``drop-sharding-rules`` (Shardy's ``sdy-drop-sharding-rules``, §2.3, §9.3):
every ``sdy.sharding_rule`` that is not a custom rule is removed."""

from __future__ import annotations

from sdy_dl.ir.mlir_ops import SHARDING_RULE_ATTR, funcs
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import ops_of
from sdy_dl.passes import PassOptions, register


@register("drop-sharding-rules", "Remove every non-custom sdy.sharding_rule.")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.rules.rule_attr import is_custom_rule

    with mlir_context():
        for func in funcs(module):
            for op in ops_of(module, func, post=True):
                attrs = op.attributes
                rule = attrs.get(SHARDING_RULE_ATTR)
                if rule is not None and not is_custom_rule(rule):
                    del attrs[SHARDING_RULE_ATTR]
        return module.invalidate(ops_kept=True)
