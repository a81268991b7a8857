"""``sdy-dl explain``: derivation trees of propagated shardings."""

from __future__ import annotations

import json

from click.testing import CliRunner

from jax_programs import lowered
from sdy_dl.cli import main
from sdy_dl.explain import explain_value
from sdy_dl.ir import parse_module_text
from sdy_dl.passes import PassOptions
from sdy_dl.pipeline import propagate

CHAIN = '''sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  %1 = stablehlo.dot_general %0, %arg1, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
'''


def leaves(node):
    return [node] if not node.children else [x for c in node.children for x in leaves(c)]


def test_tree_ends_in_user_annotations_and_matches_the_propagated_module():
    options = PassOptions(engine="clingo")
    tree = explain_value(parse_module_text(CHAIN), "%1", options)
    propagated = propagate(parse_module_text(CHAIN), options).print()
    assert tree.sharding == '#sdy.sharding<@mesh, [{"a", ?}, {?}]>'
    assert "stablehlo.dot_general" in tree.because and "rule #sdy.op_sharding_rule" in tree.because
    assert '<@mesh, [{"a"}, {}]>' in propagated  # the same sharding, closed by the export passes
    assert [leaf.what for leaf in leaves(tree)] == ["%arg0", "%arg0"]
    assert all(leaf.because.startswith("given in the module") for leaf in leaves(tree))


def test_explain_cli_json_and_results(tmp_path):
    path = tmp_path / "m.mlir"
    path.write_text(lowered("training_step"))
    result = CliRunner().invoke(main, ["explain", str(path), "result:0", "--format", "json",
                                       "--engine", "clingo"])
    assert result.exit_code == 0, result.output
    tree = json.loads(result.output)
    assert tree["value"] == "result:0" and "model" in tree["sharding"]
    assert tree["from"], "a propagated result has a derivation"


def test_unknown_value_is_an_error(tmp_path):
    path = tmp_path / "m.mlir"
    path.write_text(CHAIN)
    result = CliRunner().invoke(main, ["explain", str(path), "%99", "--engine", "clingo"])
    assert result.exit_code == 1
    assert "sdy-dl: error:" in result.output and "%99" in result.output
