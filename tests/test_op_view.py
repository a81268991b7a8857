"""Views of single MLIR ops (``sdy_dl.ir.op_view``) read like the indexed model."""

from __future__ import annotations

import pytest

from rules_programs import RULE_PROGRAMS, lowered
from sdy_dl.ir import parse_module_text
from sdy_dl.ir.context import mlir_context
from sdy_dl.ir.op_view import OpViews
from sdy_dl.rules.db import load_rule_db

NESTED = '''
sdy.mesh @mesh = <["a"=2, "b"=4]>
func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = stablehlo.constant dense<0> : tensor<i32>
  %1:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %0) : tensor<8x16xf32>, tensor<i32>
    cond {
    %3 = stablehlo.compare LT, %iterArg_0, %0 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %3 : tensor<i1>
  } do {
    %3 = stablehlo.add %iterArg, %arg1 : tensor<8x16xf32>
    stablehlo.return %3, %iterArg_0 : tensor<8x16xf32>, tensor<i32>
  }
  %2 = stablehlo.add %1#0, %arg1 : tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}
'''


def _same_value(view, value) -> None:
    assert view.mlir == value.mlir
    assert (view.shape, view.static, view.index, view.type_text, view.name) == \
        (value.shape, value.static, value.index, value.type_text, value.name)
    assert view.is_block_arg == value.is_block_arg
    if value.is_block_arg:
        assert [a.mlir for a in view.block.args] == [a.mlir for a in value.block.args]
        assert view.block.region.owner.mlir == value.block.region.owner.mlir
    else:
        assert view.defining_op.mlir == value.defining_op.mlir
    assert [(op.mlir, n) for op, n in view.uses] == [(op.mlir, n) for op, n in value.uses]


def _same_op(view, op) -> None:
    assert (view.name, view.mlir, view.line, view.col) == (op.name, op.mlir, op.line, op.col)
    assert (view.parent is None) == (op.parent is None)
    if op.parent is not None:
        assert view.parent.mlir == op.parent.mlir
        assert view in view.block.ops and view.block.region.owner is view.parent
    for v, m in zip(view.operands + view.results, op.operands + op.results, strict=True):
        _same_value(v, m)
    assert [[[o.mlir for o in b.ops] for b in r.blocks] for r in view.regions] == \
        [[[o.mlir for o in b.ops] for b in r.blocks] for r in op.regions]


def test_views_read_like_the_model():
    module = parse_module_text(NESTED)
    with mlir_context():
        for op in module.ops:
            _same_op(OpViews().op(op.mlir), op)


def test_one_view_per_mlir_object():
    module = parse_module_text(NESTED)
    add = [op for op in module.ops if op.name == "stablehlo.add"][-1]
    with mlir_context():
        views = OpViews()
        view = views.op(add.mlir)
        assert views.op(add.mlir) is view
        assert view.operands[0].defining_op.results[0] is view.operands[0]
        assert view.operands[1].block.args[1] is view.operands[1]
        assert {u for u, _ in view.operands[1].uses} >= {view}


@pytest.mark.parametrize("name", sorted(RULE_PROGRAMS))
def test_rules_of_views_equal_rules_of_the_model(name):
    module = parse_module_text(lowered(name))
    db = load_rule_db()
    with mlir_context():
        for op in module.ops:
            assert db.rule_for(OpViews().op(op.mlir), module) == db.rule_for(op, module), op.name
