"""Stage ``is_on_full_version`` (Shardy's ``isOnFullVersion`` in
insert-explicit-reshards) on both embedded engines; the pass is compared with
Shardy's in test_insert_explicit_reshards*.py."""

from __future__ import annotations

import pytest

from sdy_dl.passes import PassOptions, RunContext
from sdy_dl.passes.export.is_on_full_version import is_on_full_version

MODULE = '''sdy.mesh @mesh = <["x"=2, "y"=2]>
func.func @f(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
  return %arg0 : tensor<4x4xf32>
}
func.func @main(%arg0: tensor<4x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>},
                %arg1: tensor<4x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>},
                %arg2: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = stablehlo.concatenate %arg0, %arg1, dim = 0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %1 = stablehlo.concatenate %arg0, %arg1, dim = 0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x", ?}]>]>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %2 = stablehlo.concatenate %arg0, %arg2, dim = 0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %3 = stablehlo.concatenate %arg2, %arg2, dim = 0 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %4 = stablehlo.concatenate %arg0, %arg2, dim = 0 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %5 = call @f(%arg2) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %6 = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"y"}, {}]>]>} : tensor<4x4xf32>
  return %6 : tensor<4x4xf32>
}
'''

#: Per op of @main (the return left out), treated in full with the option off:
#: concatenates whose operands are sharded like the result are not (an open dim
#: or a missing sharding counts as unlike), calls always are.
OFF = [False, True, True, False, True, True, False]


@pytest.mark.parametrize("engine", ["python", "clingo"])
@pytest.mark.parametrize("enable", [False, True])
def test_is_on_full_version_as_shardy(engine, enable):
    from sdy_dl.ir import parse_module_text
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.mlir_ops import funcs
    from sdy_dl.ir.op_index import ops_of

    with mlir_context():
        module = parse_module_text(MODULE, "t.mlir")
        main = funcs(module)[-1]
        ops = ops_of(module, main)[1:-1]
        assert [op.name for op in ops][-2:] == ["func.call", "stablehlo.add"]
        got = is_on_full_version(ops, enable, PassOptions(RunContext(engine=engine)))
    assert got == ([True] * len(OFF) if enable else OFF)
