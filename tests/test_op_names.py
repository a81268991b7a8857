"""The op-name census of a module (``op_index.op_names``) that lets passes
looking for rare ops return at once: read once, renewed after every edit
that invalidates the module's op walks."""

from __future__ import annotations

from sdy_dl.ir.loader import parse_module_text
from sdy_dl.ir.op_index import op_names
from sdy_dl.passes import PassOptions, get_pass

WHILE = """
func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%iterArg = %arg0, %i = %c) : tensor<8xf32>, tensor<i32>
    cond {
      %1 = stablehlo.compare LT, %i, %c : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %1 = stablehlo.add %iterArg, %iterArg : tensor<8xf32>
      stablehlo.return %1, %i : tensor<8xf32>, tensor<i32>
    }
  return %0#0 : tensor<8xf32>
}
"""


def test_names_are_read_once_until_the_module_is_invalidated():
    module = parse_module_text(WHILE)
    names = op_names(module)
    assert {"func.func", "stablehlo.while", "stablehlo.add", "stablehlo.return"} <= names
    assert "sdy.data_flow_edge" not in names
    module.mlir.operation.regions[0].blocks[0].operations[0].erase()   # behind its back
    assert op_names(module) is names
    module.invalidate()
    assert op_names(module) == {"builtin.module"}   # (main was erased)


def test_a_pass_that_finds_none_of_its_ops_leaves_the_module_as_it_was():
    module = parse_module_text(WHILE)
    names, ops = op_names(module), module.ops
    for name in ("manual-axes-cleanup", "sharding-group-import", "apply-sharding-constraints",
                 "remove-sharding-groups", "sharding-constraint-to-reshard"):
        assert get_pass(name).run(module, PassOptions()) is module
        assert op_names(module) is names and module.ops is ops, name


def test_an_edit_hands_on_a_module_with_the_new_names():
    module = parse_module_text(WHILE)
    assert "sdy.data_flow_edge" not in op_names(module)
    edged = get_pass("add-data-flow-edges").run(module, PassOptions())
    assert "sdy.data_flow_edge" in op_names(edged)
    assert any(op.name == "sdy.data_flow_edge" for op in edged.ops)
    sunk = get_pass("sink-data-flow-edges").run(edged, PassOptions())
    assert "sdy.data_flow_edge" not in op_names(sunk)
    assert not any(op.name == "sdy.data_flow_edge" for op in sunk.ops)


CALLS = """
func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %c = stablehlo.constant dense<1.0> : tensor<8xf32>
  %0 = call @f(%arg0) : (tensor<8xf32>) -> tensor<8xf32>
  %1 = stablehlo.add %0, %c : tensor<8xf32>
  return %1 : tensor<8xf32>
}
func.func private @f(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}
func.func private @unused(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}
"""


def test_erasing_passes_hand_on_names_that_may_name_erased_ops_but_miss_none():
    module = parse_module_text(CALLS)
    names = op_names(module)
    kept = get_pass("symbol-dce").run(module, PassOptions())
    assert kept.walks.names is names   # @unused erased, names kept
    split = get_pass("constant-or-scalar-splitter").run(kept, PassOptions())
    after = split.walks.names
    assert after is not None and "sdy.constant" in after and "stablehlo.constant" not in after
    fresh = parse_module_text(str(split.mlir))
    assert op_names(fresh) <= after


def test_may_hold_is_true_unless_the_known_names_lack_the_op():
    from sdy_dl.ir.op_index import may_hold
    from sdy_dl.passes.call_graph import call_graph

    module = parse_module_text(CALLS)
    assert may_hold(module, "func.call") and may_hold(module, "sdy.reshard")   # names unread
    order, calls = call_graph(module)
    assert [len(c) for c in calls.values()] == [1, 0, 0]
    op_names(module)
    assert may_hold(module, "func.call") and not may_hold(module, "sdy.reshard")
    assert [len(c) for c in call_graph(module)[1].values()] == [1, 0, 0]
    imported = get_pass("import-func-calls").run(module, PassOptions())
    assert "func.call" not in op_names(imported) and not may_hold(imported, "func.call")
    assert all(not c for c in call_graph(imported)[1].values())
