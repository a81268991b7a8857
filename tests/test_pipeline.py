"""Import pipeline + propagation, end to end, against Shardy on real JAX programs.

Shardy side: ``sdy-import-pipeline`` followed by the passes the propagation
pipeline runs before propagating (apply-sharding-constraints,
sharding-group-import) and the propagation pass.  sdy-dl side: the same
passes of sdy-dl.  Data-flow edges (while, cond, scan), manual computations
(shard_map), sharding groups (shard_alike) and constraints are all exercised.
"""

from __future__ import annotations

import pytest

import import_programs
import jax_programs
from oracle import assert_same, shardy
from sdy_dl.ir import parse_module_text
from sdy_dl.passes import PassOptions, get_pass
from sdy_dl.pipeline import make_options

PROGRAMS = {**{f"jax_{n}": jax_programs.lowered for n in jax_programs.PROGRAMS},
            **{f"import_{n}": import_programs.lowered for n in import_programs.PROGRAMS}}

CHAIN = ["import-pipeline", "apply-sharding-constraints", "sharding-group-import"]


def lowered(name: str) -> str:
    kind, _, program = name.partition("_")
    return PROGRAMS[name](program)


def run_ours(text: str, passes: list[str], **context) -> str:
    module = parse_module_text(text, "<test>")
    for name in passes:
        module = get_pass(name).run(module, PassOptions.create(name, **context))
    return module.print()


@pytest.mark.parametrize("strategy", ["basic", "aggressive"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_import_then_propagate(name, strategy):
    text = lowered(name)
    expected = shardy(text, ",".join(f"sdy-{p}" for p in CHAIN) + f",sdy-{strategy}-propagate")
    actual = run_ours(text, CHAIN + [f"{strategy}-propagate"], engine="clingo")
    assert_same(expected, actual)


GROUPS = '''sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>},
                %arg2: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = stablehlo.abs %arg0 : tensor<8x8xf32>
  %1 = stablehlo.abs %arg1 : tensor<8x8xf32>
  %2 = sdy.propagation_barrier %arg2 allowed_direction=NONE : tensor<8x8xf32>
  %3 = stablehlo.negate %2 : tensor<8x8xf32>
  sdy.sharding_group %0 group_id=0 : tensor<8x8xf32>
  sdy.sharding_group %1 group_id=0 : tensor<8x8xf32>
  sdy.sharding_group %3 group_id=0 : tensor<8x8xf32>
  return %0, %1, %3 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}
'''

GROUP_CONFLICT = '''sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32>, %arg1: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = stablehlo.abs %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>} : tensor<8x8xf32>
  %1 = stablehlo.abs %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"b"}]>]>} : tensor<8x8xf32>
  sdy.sharding_group %0 group_id=0 : tensor<8x8xf32>
  sdy.sharding_group %1 group_id=0 : tensor<8x8xf32>
  %2 = stablehlo.add %0, %1 : tensor<8x8xf32>
  return %2, %0 : tensor<8x8xf32>, tensor<8x8xf32>
}
'''


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_propagate_command_equals_shardy_import_and_user_priority(name):
    """The whole ``propagate`` pipeline (import, propagation, export) against
    Shardy's ``sdy-propagation-pipeline``, programs with calls included."""
    text = lowered(name)
    expected = shardy(text, "sdy-propagation-pipeline")
    from sdy_dl.pipeline import propagate
    actual = propagate(parse_module_text(text, "<test>"), make_options(engine="clingo")).print()
    assert_same(expected, actual)


@pytest.mark.parametrize("text", [GROUPS, GROUP_CONFLICT], ids=["accumulate", "conflict"])
@pytest.mark.parametrize("strategy", ["basic", "aggressive"])
def test_sharding_groups(text, strategy):
    expected = shardy(text, f"sdy-{strategy}-propagate")
    assert_same(expected, run_ours(text, [f"{strategy}-propagate"], engine="clingo"))


def test_the_pipeline_verifies_its_result():
    """The pipeline verifies last, so its result says it was (and is printed
    without a second verification)."""
    from sdy_dl.pipeline import propagate

    module = parse_module_text(jax_programs.lowered("mlp"), "mlp.mlir")
    assert not module.verified
    result = propagate(module, make_options(engine="python"))
    assert result.verified
    assert result.print(binary=True) == str(result.mlir).encode("utf-8")
