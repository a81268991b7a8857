"""``sdy-dl conflicts``: where propagation could not agree, and what decided."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sdy_dl.audit import Audit
from sdy_dl.cli import main
from sdy_dl.ir import parse_module_text
from sdy_dl.passes import PassOptions
from test_propagate import CASES

CLINGO = PassOptions(engine="clingo")

FREE = '''sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  %1 = stablehlo.multiply %0, %arg1 : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
'''

WITHIN = '''sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
'''
CASES = {**CASES, "within": WITHIN}


@pytest.mark.parametrize("name,kind,factor", [
    ("within", "within-factor", "i"),
    ("dot_across_factor", "across-factor", "j"),
    ("lifo_order", "across-factor", None),
    ("basic_blocks_factor", "replicated", "i"),
])
def test_conflicting_programs(name, kind, factor):
    found = Audit(parse_module_text(CASES[name]), CLINGO).conflicts()
    matching = [c for c in found if c.kind == kind and (factor is None or c.factor == factor)]
    assert matching, [(c.op, c.factor, c.kind) for c in found]
    c = matching[0]
    assert c.place.startswith("<string>:") and c.decided.startswith("aggressive strategy")
    assert any(comp["annotations"] for comp in c.competitors)
    assert all(a.startswith("%") for comp in c.competitors for a in comp["annotations"])


def test_conflict_free_program_has_none(tmp_path):
    path = tmp_path / "free.mlir"
    path.write_text(FREE)
    result = CliRunner().invoke(main, ["conflicts", str(path), "--format", "json",
                                       "--engine", "clingo", "--quiet"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == []


def test_conflicts_cli_text(tmp_path):
    path = tmp_path / "across.mlir"
    path.write_text(CASES["dot_across_factor"])
    result = CliRunner().invoke(main, ["conflicts", str(path), "--engine", "clingo", "--quiet"])
    assert result.exit_code == 0, result.output
    assert "stablehlo.dot_general at" in result.output and "across-factor conflict" in result.output
    assert "decided by: aggressive strategy" in result.output


CONSTRAINED = '''sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{}, {"b"}]> : tensor<8x8xf32>
  %2 = stablehlo.multiply %1, %arg1 : tensor<8x8xf32>
  return %2 : tensor<8x8xf32>
}
'''


def test_conflict_says_whether_the_output_reshards_there():
    """The add's result goes through a constraint, printed as an ``sdy.reshard``
    by the export passes: the add's conflict says so; the unconstrained one not."""
    constrained = Audit(parse_module_text(CONSTRAINED), CLINGO)
    assert "sdy.reshard" in constrained.text
    adds = [c for c in constrained.conflicts() if c.op == "stablehlo.add"]
    assert adds and all(c.reshard for c in adds)
    plain = Audit(parse_module_text(WITHIN), CLINGO).conflicts()
    assert plain and not any(c.reshard for c in plain)
