"""``dedup-functions-fully=true``: add-func-data-flow-edges, propagation through
``sdy.func_data_flow_edge`` and sink-func-data-flow-edges against jaxlib's
passes, and the whole pipeline with that option, on hand-written modules and
real JAX programs with repeated calls (``call_programs``)."""

from __future__ import annotations

import re
import shutil

import pytest

import call_programs
from oracle import assert_same, ours, shardy
from sdy_dl.ir import parse_module_text
from sdy_dl.pipeline import make_options
from sdy_dl.pipeline import propagate

#: A function called twice (one call with a sharding on its result), a
#: callee argument with a sharding, a token argument (no edge), a call nested
#: in a while body and a callee that calls another function.
REPEATED = '''sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                %arg1: tensor<8x8xf32>, %arg2: !stablehlo.token) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = call @f(%arg0, %arg2) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b"}, {}]>]>}
      : (tensor<8x8xf32>, !stablehlo.token) -> tensor<8x8xf32>
  %1 = call @f(%arg1, %arg2) : (tensor<8x8xf32>, !stablehlo.token) -> tensor<8x8xf32>
  %2 = stablehlo.add %0, %1 : tensor<8x8xf32>
  %c = stablehlo.constant dense<0> : tensor<i32>
  %3:2 = stablehlo.while(%iterArg = %2, %i = %c) : tensor<8x8xf32>, tensor<i32>
    cond {
      %c1 = stablehlo.constant dense<4> : tensor<i32>
      %p = stablehlo.compare LT, %i, %c1 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %4 = func.call @g(%iterArg) : (tensor<8x8xf32>) -> tensor<8x8xf32>
      %c1 = stablehlo.constant dense<1> : tensor<i32>
      %5 = stablehlo.add %i, %c1 : tensor<i32>
      stablehlo.return %4, %5 : tensor<8x8xf32>, tensor<i32>
    }
  return %3#0, %1 : tensor<8x8xf32>, tensor<8x8xf32>
}
func.func private @f(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"a"}]>},
                     %arg1: !stablehlo.token) -> tensor<8x8xf32> {
  %0 = stablehlo.multiply %arg0, %arg0 : tensor<8x8xf32>
  %1 = func.call @g(%0) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
func.func private @g(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = stablehlo.negate %arg0 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
'''

#: The only function is the main one: nothing to add.
SINGLE = '''sdy.mesh @mesh = <["a"=2]>
func.func @only(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>}) -> tensor<8xf32> {
  %0 = stablehlo.negate %arg0 : tensor<8xf32>
  return %0 : tensor<8xf32>
}
'''

MODULES = {"repeated": REPEATED, "single": SINGLE}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_add_func_data_flow_edges(name):
    text = MODULES[name]
    assert_same(shardy(text, "sdy-add-func-data-flow-edges"), ours(text, "add-func-data-flow-edges"))


@pytest.mark.parametrize("propagated", [False, True])
def test_sink_func_data_flow_edges(propagated):
    text = shardy(REPEATED, "sdy-add-func-data-flow-edges")
    if propagated:
        text = shardy(text, "sdy-aggressive-propagate")
    assert "func_data_flow_edge" in text
    assert_same(shardy(text, "func.func(sdy-sink-func-data-flow-edges)"),
                ours(text, "sink-func-data-flow-edges"))


@pytest.mark.parametrize("strategy", ["basic", "aggressive"])
@pytest.mark.parametrize("prefix", ["sdy-add-data-flow-edges,sdy-add-func-data-flow-edges",
                                    "sdy-add-func-data-flow-edges"],
                         ids=["both_edges", "func_edges_only"])
def test_propagation_through_func_edges(prefix, strategy):
    """A propagation pass alone, on the module with both kinds of edges in place
    (as the pipeline has them) and with function edges only (the while then
    keeps the sharding of its results and block arguments itself)."""
    text = shardy(REPEATED, prefix)
    assert_same(shardy(text, f"sdy-{strategy}-propagate"),
                ours(text, f"{strategy}-propagate", engine="clingo"))


CALL = re.compile(r"\bcall @")


def check_pipeline(text: str) -> None:
    """sdy-dl's pipeline with dedup-functions-fully=true equals jaxlib's."""
    expected = shardy(text, "sdy-propagation-pipeline{dedup-functions-fully=true}")
    actual = propagate(parse_module_text(text, "<test>"),
                       make_options({"dedup_functions_fully": True}, engine="clingo")).print()
    assert_same(expected, actual)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_pipeline_dedup_functions_fully(name):
    check_pipeline(MODULES[name])


@pytest.mark.parametrize("name", sorted(call_programs.PROGRAMS))
def test_jax_programs_with_repeated_calls(name):
    text = call_programs.lowered(name)
    assert len(CALL.findall(text)) >= 2
    check_pipeline(text)


@pytest.mark.slow
@pytest.mark.souffle
@pytest.mark.skipif(shutil.which("souffle") is None, reason="souffle is not on PATH")
def test_souffle_equals_clingo():
    def run(engine):
        options = make_options({"dedup_functions_fully": True}, engine=engine)
        return propagate(parse_module_text(call_programs.lowered("scan_calls"), "<t>"),
                         options).print()
    assert run("souffle") == run("clingo")
