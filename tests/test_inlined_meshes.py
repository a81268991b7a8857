"""The propagation passes run alone on shardings that inline their mesh (§8.5).

jaxlib 0.10.2's Shardy propagation passes crash (a segmentation fault) on such
modules as soon as an op's common mesh is an inlined one: ``getCommonMeshName``
casts the mesh attribute to a symbol reference.  sdy-dl refuses them with a
located error naming the lift-inlined-meshes pass (``sdy-dl propagate`` lifts
the meshes first, as Shardy's pipeline does).
"""

from __future__ import annotations

import pytest

from oracle_isolated import shardy_each
from sdy_dl.errors import SdyError
from sdy_dl.ir import parse_module_text
from sdy_dl.passes import PassOptions, get_pass
from sdy_dl.pipeline import make_options, propagate

PASSES = ["basic-propagate", "aggressive-propagate", "op-priority-propagate",
          "user-priority-propagate"]

INLINED = {
    "argument": '''func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<mesh<["a"=2, "b"=4]>, [{"a"}, {"b"}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.negate %arg0 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}''',
    "constraint": '''func.func @main(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = stablehlo.negate %arg0 : tensor<8x8xf32>
  %1 = sdy.sharding_constraint %0 <mesh<["a"=2, "b"=4]>, [{"a", ?}, {?}]> : tensor<8x8xf32>
  %2 = stablehlo.add %1, %1 : tensor<8x8xf32>
  return %2 : tensor<8x8xf32>
}''',
    "next_to_a_symbol": '''sdy.mesh @m = <["a"=2, "b"=4]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<mesh<["a"=2, "b"=4]>, [{"a"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@m, [{}, {"b"}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}''',
}


@pytest.mark.slow
@pytest.mark.parametrize("pass_name", PASSES)
def test_refused_where_shardy_crashes(pass_name):
    names = sorted(INLINED)
    crashed = shardy_each([INLINED[n] for n in names], f"sdy-{pass_name}")
    assert crashed == [None] * len(names)
    for name in names:
        with pytest.raises(SdyError, match="inlined mesh.*lift-inlined-meshes"):
            get_pass(pass_name).run(parse_module_text(INLINED[name], "<test>"),
                                    PassOptions.create(pass_name))


def test_the_pipeline_lifts_them():
    text = propagate(parse_module_text(INLINED["argument"], "<test>"), make_options()).print()
    assert "mesh<[" not in text
    assert 'stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>]>}' in text
