"""``#sdy.op_sharding_rule`` attributes read and built through jaxlib's ``sdy``
bindings (``OpShardingRuleAttr``, ``TensorMappingAttr``, ``DimMappingAttr``):
the rule an op already carries, and the rules sdy-dl attaches (§2.3)."""

from __future__ import annotations

import functools

from jaxlib.mlir.dialects import sdy

from sdy_dl.ir.context import mlir_context
from sdy_dl.rules.instance import Factor, RuleInstance


def _mappings(tensors) -> tuple:
    return tuple(tuple(tuple(sdy.DimMappingAttr(d).factor_indices)
                       for d in sdy.TensorMappingAttr(t).dim_mappings) for t in tensors)


@functools.lru_cache(maxsize=1 << 14)
def rule_of_attr(attr) -> RuleInstance:
    """An ``#sdy.op_sharding_rule`` attribute as a :class:`RuleInstance` (once per
    distinct attribute: attributes are uniqued in their context)."""
    rule = sdy.OpShardingRuleAttr(attr)
    kind = {}
    for name, indices in (("reduction", rule.reduction_factors),
                          ("need_replication", rule.need_replication_factors),
                          ("permutation", rule.permutation_factors)):
        kind.update((i, name) for i in indices)
    blocked = set(rule.blocked_propagation_factors)
    factors = tuple(Factor(size, kind.get(i, "pass_through"), i in blocked)
                    for i, size in enumerate(rule.factor_sizes))
    return RuleInstance(factors, _mappings(rule.operand_mappings),
                        _mappings(rule.result_mappings), rule.is_custom)


def is_custom_rule(attr) -> bool:
    """Whether an ``#sdy.op_sharding_rule`` attribute is a custom rule."""
    return sdy.OpShardingRuleAttr(attr).is_custom


@functools.lru_cache(maxsize=1 << 14)
def rule_attr(rule: RuleInstance):
    """The ``#sdy.op_sharding_rule`` attribute of ``rule``."""
    ctx = mlir_context()

    def mappings(tensors):
        return [sdy.TensorMappingAttr.get([sdy.DimMappingAttr.get(list(dim), context=ctx)
                                           for dim in t], context=ctx) for t in tensors]

    def of_kind(kind):
        return [i for i, f in enumerate(rule.factors) if f.kind == kind]

    return sdy.OpShardingRuleAttr.get(
        [f.size for f in rule.factors], mappings(rule.operands), mappings(rule.results),
        of_kind("reduction"), of_kind("need_replication"), of_kind("permutation"),
        [i for i, f in enumerate(rule.factors) if f.blocked], rule.is_custom, context=ctx)
