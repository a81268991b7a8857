"""RuleInstance: Shardy's printed syntax, read back through the bindings, and the
shared notation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdy_dl.errors import SdyError
from sdy_dl.ir.context import mlir_context
from sdy_dl.rules.instance import FACTOR_KINDS, Factor, RuleInstance, factor_name
from sdy_dl.rules.notation import parse_notation
from sdy_dl.rules.rule_attr import rule_of_attr


def mlir_roundtrip(text: str) -> str:
    """Shardy's own print of ``text`` (parsed by jaxlib)."""
    from jaxlib.mlir import ir
    with mlir_context():
        return str(ir.Attribute.parse(text))


def rule_of_text(text: str) -> RuleInstance:
    """The rule of the attribute printed ``text``, read through jaxlib's bindings."""
    from jaxlib.mlir import ir
    with mlir_context():
        return rule_of_attr(ir.Attribute.parse(text))


def shardy_fields(text: str):
    """The structure jaxlib's binding reads from ``text``."""
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import sdy
    with mlir_context():
        a = sdy.OpShardingRuleAttr(ir.Attribute.parse(text))

        def tensors(ms):
            return tuple(tuple(tuple(sdy.DimMappingAttr(d).factor_indices)
                               for d in sdy.TensorMappingAttr(m).dim_mappings) for m in ms)
        return (tuple(a.factor_sizes), tensors(a.operand_mappings), tensors(a.result_mappings),
                tuple(a.reduction_factors), tuple(a.need_replication_factors),
                tuple(a.permutation_factors), tuple(a.blocked_propagation_factors), a.is_custom)


def fields(rule: RuleInstance):
    kinds = [tuple(i for i, f in enumerate(rule.factors) if f.kind == k) for k in FACTOR_KINDS[1:]]
    return (tuple(f.size for f in rule.factors), rule.operands, rule.results, *kinds,
            tuple(i for i, f in enumerate(rule.factors) if f.blocked), rule.is_custom)


def test_factor_names():
    assert [factor_name(i) for i in (0, 1, 17, 18, 19, 30)] == ["i", "j", "z", "z_1", "z_2", "z_13"]


@pytest.mark.parametrize("text", [
    "#sdy.op_sharding_rule<([i, k], [k, j])->([i, j]) {i=8, j=16, k=4} reduction={k}>",
    "#sdy.op_sharding_rule<([ij, k])->([i, jk]) {i=2, j=4, k=16}>",
    "#sdy.op_sharding_rule<([i])->([i]) {i=8} need_replication={i} blocked_propagation={i}, "
    "custom>",
    "#sdy.op_sharding_rule<([], [])->([])>",
    "#sdy.op_sharding_rule<([i, j], [])->([i, j]) {i=2, j=1} permutation={i, j}>",
])
def test_examples_roundtrip(text):
    rule = rule_of_text(text)
    assert rule.to_text() == text == mlir_roundtrip(text)
    assert fields(rule) == shardy_fields(text)


def test_to_text_of_a_built_instance():
    rule = RuleInstance((Factor(8), Factor(16), Factor(4, "reduction")),
                        (((0,), (2,)), ((2,), (1,))), (((0,), (1,)),))
    assert rule.to_text() == ("#sdy.op_sharding_rule<([i, k], [k, j])->([i, j]) "
                              "{i=8, j=16, k=4} reduction={k}>")


def test_bad_kind_is_rejected():
    with pytest.raises(ValueError):
        Factor(2, "reduce")


@st.composite
def instances(draw):
    n = draw(st.integers(0, 24))
    factors = tuple(Factor(draw(st.integers(0, 64)), draw(st.sampled_from(FACTOR_KINDS)),
                           draw(st.booleans())) for _ in range(n))

    def tensors(count):
        out = []
        for _ in range(count):
            rank = draw(st.integers(0, 3)) if n else 0
            out.append(tuple(tuple(draw(st.lists(st.integers(0, n - 1), min_size=1,
                                                 max_size=3, unique=True)))
                             for _ in range(rank)))
        return tuple(out)

    return RuleInstance(factors, tensors(draw(st.integers(1, 3))),
                        tensors(draw(st.integers(1, 2))), draw(st.booleans()))


@settings(max_examples=200, deadline=None)
@given(instances())
def test_random_instances_print_like_shardy(rule):
    text = rule.to_text()
    assert mlir_roundtrip(text) == text
    assert fields(rule) == shardy_fields(text)
    assert rule_of_text(text) == rule


@pytest.mark.parametrize("text, message", [
    ("([i])->([i]) {i=2} reduction={j}", "not declared"),
    ("([i)->([i]) {i=2}", "malformed rule"),
    ("([i])->([i]) {i=2} reduction={i} permutation={i}", "two kinds"),
])
def test_parse_errors(text, message):
    with pytest.raises(SdyError, match=message):
        parse_notation(text).check_declared()


def test_notation_infers_sizes_and_orders_factors():
    note = parse_notation("([b, s, h], [h, f]) -> ([b, s, f]) reduction={h}")
    sizes = note.infer_sizes([(2, 8, 16), (16, 32)], [(2, 8, 32)])
    rule = note.to_instance(sizes)
    assert rule.to_text() == ("#sdy.op_sharding_rule<([i, j, k], [k, l])->([i, j, l]) "
                              "{i=2, j=8, k=16, l=32} reduction={k}>")


def test_notation_compound_dims_infer_the_unknown_factor():
    note = parse_notation("([ab])->([a, b]) {a=2}")
    assert note.infer_sizes([(8,)], [(2, 4)]) == {"a": 2, "b": 4}


@pytest.mark.parametrize("text, shapes, message", [
    ("([a, b])->([a, b])", ([(2, 3)], [(2, 4)]), "size mismatch"),
    ("([ab])->([ab])", ([(6,)], [(6,)]), "cannot infer"),
    ("([a])->([a])", ([(2,), (2,)], [(2,)]), "operand mapping"),
    ("([a, b])->([a])", ([(2,)], [(2,)]), "rank 1"),
])
def test_notation_size_errors(text, shapes, message):
    with pytest.raises(SdyError, match=message):
        parse_notation(text).infer_sizes(*shapes)
