"""The YAML ``einsum:`` form in JAX's ``custom_partitioning`` spelling
(``"i j, j k -> i k"``, ``...``, compound ``(i j)``), against JAX's own
translation of the same string (``sdy_sharding_rule_to_mlir``), and in rule files."""

from __future__ import annotations

import pytest

from rules_cases import op, write_rules as write
from sdy_dl.errors import SdyError
from sdy_dl.ir import parse_module_text
from sdy_dl.ir.context import mlir_context
from sdy_dl.rules.db import load_rule_db
from sdy_dl.rules.notation import parse_einsum

#: (rule, operand shapes, result shapes, JAX's kind arguments, JAX's factor sizes)
CASES = [
    ("i j, j k -> i k", [(4, 8), (8, 2)], [(4, 2)], {}, {}),
    ("... i j, ... j k -> ... i k", [(3, 5, 4, 8), (3, 5, 8, 2)], [(3, 5, 4, 2)],
     {"reduction_factors": ("j",)}, {}),
    ("... i j, ... j k -> ... i k", [(4, 8), (8, 2)], [(4, 2)], {}, {}),
    ("(i j) k -> i j k", [(8, 3)], [(2, 4, 3)], {}, {}),
    ("(i j) k -> (j i) k", [(8, 3)], [(8, 3)], {"permutation_factors": ("i",)}, {"i": 2, "j": 4}),
    ("...1 a, ...2 b -> ...1 a, ...2 b", [(2, 3), (4, 5, 6)], [(2, 3), (4, 5, 6)], {}, {}),
    ("batch seq, -> batch", [(2, 3), ()], [(2,)], {"need_replication_factors": ("seq",)}, {}),
    ("ij -> ij", [(6,)], [(6,)], {}, {}),
]


def _kinds_text(kinds: dict) -> str:
    return "".join(f" {k[:-len('_factors')]}={{{', '.join(v)}}}" for k, v in kinds.items())


@pytest.mark.parametrize("rule,operands,results,kinds,sizes", CASES)
def test_custom_partitioning_strings_give_jaxs_rule(rule, operands, results, kinds, sizes):
    from jax._src.custom_partitioning_sharding_rule import (sdy_sharding_rule_to_mlir,
                                                            str_to_sdy_sharding_rule)
    from jaxlib.mlir import ir

    from sdy_dl.rules.rule_attr import rule_of_attr

    size_block = " {" + ", ".join(f"{k}={v}" for k, v in sizes.items()) + "}" if sizes else ""
    note = parse_einsum(rule + size_block + _kinds_text(kinds) + ", custom")
    note = note.for_ranks([len(s) for s in operands], [len(s) for s in results])
    ours = note.to_instance(note.infer_sizes(operands, results))
    with mlir_context(), ir.Location.unknown():
        f32 = ir.F32Type.get()
        attr = sdy_sharding_rule_to_mlir(str_to_sdy_sharding_rule(rule, **kinds, **sizes),
                                         [ir.RankedTensorType.get(s, f32) for s in operands],
                                         [ir.RankedTensorType.get(s, f32) for s in results])
        assert ours == rule_of_attr(attr), (ours.to_text(), str(attr))


def test_shardys_printed_form_is_still_read_as_before():
    note = parse_einsum("([b, s, h], [h, f]) -> ([b, s, f]) reduction={h}")
    assert note.operands == [[["b"], ["s"], ["h"]], [["h"], ["f"]]]
    assert note.kinds == {"reduction": ["h"]}


@pytest.mark.parametrize("text,message", [
    ("i j -> ", None),            # an empty side is one scalar: valid
    ("i j k", "expected '->'"),
    ("i (j) -> i", "at least two factors"),
    ("i ... j -> i", "'...' must come first"),
    ("i 2j -> i", "expected a factor name"),
    ("i j -> i reduction={q}", None),   # checked by check_declared, below
])
def test_malformed_custom_partitioning_strings(text, message):
    if message is None:
        parse_einsum(text)
        return
    with pytest.raises(SdyError, match=message):
        parse_einsum(text)


def test_an_undeclared_kind_factor_is_an_error():
    with pytest.raises(SdyError, match="factor 'q' is used in reduction"):
        parse_einsum("i j -> i reduction={q}").check_declared()


def test_ellipsis_groups_must_agree():
    note = parse_einsum("... i, ... i -> i")
    with pytest.raises(SdyError, match="stands for 1 dim"):
        note.for_ranks([2, 3], [1])


def test_rule_files_take_the_custom_partitioning_form(tmp_path):
    path = write(tmp_path, """\
        description: x
        custom_calls:
          my_matmul:
            doc: A batched matmul in JAX's spelling.
            einsum: "... i j, ... j k -> ... i k reduction={j}"
          my_copy:
            doc: A copy.
            einsum: "ij->ij"
        """)
    db = load_rule_db([path])
    text = op(["tensor<2x4x8xf32>", "tensor<2x8x3xf32>"], ["tensor<2x4x3xf32>"],
              "stablehlo.custom_call @my_matmul(%arg0, %arg1) : "
              "(tensor<2x4x8xf32>, tensor<2x8x3xf32>) -> tensor<2x4x3xf32>")
    module = parse_module_text(text, "<test>")
    target = [o for o in module.ops if o.name == "stablehlo.custom_call"][0]
    assert db.rule_for(target, module).to_text() == (
        "#sdy.op_sharding_rule<([i, j, k], [i, k, l])->([i, j, l]) {i=2, j=4, k=8, l=3} "
        "reduction={k}>")
    text = op(["tensor<6xf32>"], ["tensor<6xf32>"],
              "stablehlo.custom_call @my_copy(%arg0) : (tensor<6xf32>) -> tensor<6xf32>")
    module = parse_module_text(text, "<test>")
    target = [o for o in module.ops if o.name == "stablehlo.custom_call"][0]
    assert db.rule_for(target, module).to_text() == "#sdy.op_sharding_rule<([i])->([i]) {i=6}>"
