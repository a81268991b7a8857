"""``drop-sharding-rules`` (Shardy's ``sdy-drop-sharding-rules``, §2.3, §9.3):
every ``sdy.sharding_rule`` that is not a custom rule is removed."""

from __future__ import annotations

from sdy_dl.ir.model import Module
from sdy_dl.passes import PassOptions, register
from sdy_dl.passes.export.common import funcs
from sdy_dl.passes.import_common import SHARDING_RULE_ATTR, attr_text, rebuild, walk_post


@register("drop-sharding-rules", "Remove every non-custom sdy.sharding_rule.")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.rules.instance import parse_rule_text

    with mlir_context():
        for func in funcs(module):
            for op in walk_post(func):
                text = attr_text(op, SHARDING_RULE_ATTR)
                if text is not None and not parse_rule_text(text).is_custom:
                    del op.attributes[SHARDING_RULE_ATTR]
        return rebuild(module)
