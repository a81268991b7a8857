"""``canonicalize{enable-patterns={sdy-collective}}`` against jaxlib's.

The pass erases dead ops by their memory effects (the Datalog stage
``canonicalize``).  Every op kind of the rule-registry cases, plus ops with
regions, side effects and unknown effects, is made unused and run through
both canonicalizers; then whole pipelines whose reshards end up unused.
``stablehlo.constant`` is written as ``sdy.constant`` (what the pipeline
has when it canonicalizes: jaxlib's canonicalizer would also move and merge
``ConstantLike`` ops).
"""

from __future__ import annotations

import re

import pytest

from oracle import assert_same, normalize, ours, shardy
from rules_cases import CASES

PIPELINE_PASS = "canonicalize{enable-patterns={sdy-collective}}"
MESH = 'sdy.mesh @mesh = <["a"=4, "b"=2]>\n'
T = "tensor<8x8xf32>"

#: Op kinds the rule cases do not cover: regions, side effects, unknown effects.
EXTRA = {
    "iota": f"%0 = stablehlo.iota dim = 0 : {T}",
    "tuple": f"%t = stablehlo.tuple %a, %a : tuple<{T}, {T}>\n"
             f"  %0 = stablehlo.get_tuple_element %t[0] : (tuple<{T}, {T}>) -> {T}",
    "custom_call_side_effect": f"%0 = stablehlo.custom_call @foo(%a) {{has_side_effect = true}} : ({T}) -> {T}",
    "custom_call": f"%0 = stablehlo.custom_call @foo(%a) : ({T}) -> {T}",
    "reshard": f'%0 = sdy.reshard %a <@mesh, [{{"a"}}, {{}}]> : {T}',
    "propagation_barrier": f"%0 = sdy.propagation_barrier %a allowed_direction=NONE : {T}",
    "sharding_constraint": f'%0 = sdy.sharding_constraint %a <@mesh, [{{"a"}}, {{}}]> : {T}',
    "all_gather": f'%0 = sdy.all_gather [{{"a"}}, {{}}] %a out_sharding=<@mesh, [{{}}, {{}}]> : {T}',
    "partition_id": "%0 = stablehlo.partition_id : tensor<ui32>",
    "token": "%t = stablehlo.create_token : !stablehlo.token\n"
             "  %0 = stablehlo.after_all %t : !stablehlo.token",
    "while": f"%0 = stablehlo.while(%x = %a) : {T}\n cond {{\n"
             "  %c = sdy.constant dense<true> : tensor<i1>\n  stablehlo.return %c : tensor<i1>\n"
             f" }} do {{\n  %y = stablehlo.negate %x : {T}\n  stablehlo.return %y : {T}\n }}",
    "while_side_effect": f"%0 = stablehlo.while(%x = %a) : {T}\n cond {{\n"
             "  %c = sdy.constant dense<true> : tensor<i1>\n  stablehlo.return %c : tensor<i1>\n"
             f" }} do {{\n  %y = stablehlo.custom_call @foo(%x) {{has_side_effect = true}} : ({T}) -> {T}\n"
             f"  stablehlo.return %y : {T}\n }}",
    "while_outer_value": f"%n = stablehlo.negate %a : {T}\n"
             f"  %0 = stablehlo.while(%x = %a) : {T}\n cond {{\n"
             "  %c = sdy.constant dense<true> : tensor<i1>\n  stablehlo.return %c : tensor<i1>\n"
             f" }} do {{\n  %y = stablehlo.add %x, %n : {T}\n  stablehlo.return %y : {T}\n }}",
    "case": f"%p = sdy.constant dense<0> : tensor<i32>\n"
            f"  %0 = \"stablehlo.case\"(%p) ({{\n  stablehlo.return %a : {T}\n }}) : (tensor<i32>) -> {T}",
    "manual_computation": f'%0 = sdy.manual_computation(%a) in_shardings=[<@mesh, [{{"a"}}, {{}}]>] '
                          f'out_shardings=[<@mesh, [{{"a"}}, {{}}]>] manual_axes={{"a"}} '
                          f"(%x: tensor<2x8xf32>) {{\n  %d = stablehlo.abs %x : tensor<2x8xf32>\n"
                          f"  %y = stablehlo.negate %x : tensor<2x8xf32>\n"
                          f"  sdy.return %y : tensor<2x8xf32>\n }} : ({T}) -> {T}\n"
                          f"  %1 = stablehlo.negate %0 : {T}\n  %2 = stablehlo.abs %1 : {T}",
    "named_computation": f'%0 = sdy.named_computation<"foo">(%a) (%x: {T}) {{\n'
                         f"  sdy.return %x : {T}\n }} : ({T}) -> {T}",
    "call": f"%0 = func.call @g(%a) : ({T}) -> {T}",
    "rng": f"%l = sdy.constant dense<0.0> : tensor<f32>\n"
           "  %s = sdy.constant dense<[8, 8]> : tensor<2xi64>\n"
           f"  %0 = stablehlo.rng %l, %l, %s, distribution = UNIFORM : (tensor<f32>, tensor<f32>, tensor<2xi64>) -> {T}",
    "chlo": f"%0 = chlo.erf %a : {T} -> {T}",
    "composite": f'%0 = stablehlo.composite "my.c" %a {{decomposition = @g}} : ({T}) -> {T}',
    "chain": f"%0 = stablehlo.negate %a : {T}\n  %1 = stablehlo.abs %0 : {T}\n"
             f"  %2 = stablehlo.add %0, %1 : {T}",
}


def dead(text: str) -> str:
    """``text`` (one function ``@main``) with its results dropped: every op unused."""
    text = re.sub(r"\) -> \((.*)\) \{\n", ") -> () {\n", text, count=1)
    text = re.sub(r"\n  return [^\n]*\n\}", "\n  return\n}", text)
    return text.replace("stablehlo.constant", "sdy.constant")


def extra_module(body: str) -> str:
    return (MESH + f'func.func @main(%a: {T} {{sdy.sharding = #sdy.sharding<@mesh, [{{"a"}}, {{}}]>}}) '
            f"-> {T} {{\n  {body}\n  return %a : {T}\n}}\n"
            f"func.func private @g(%a: {T}) -> {T} {{\n  return %a : {T}\n}}\n")


@pytest.mark.parametrize("name", sorted(CASES))
def test_dead_op_of_every_rule_case(name):
    text = dead(CASES[name])
    assert_same(shardy(text, PIPELINE_PASS), normalize(ours(text, "canonicalize")))


@pytest.mark.parametrize("name", sorted(EXTRA))
def test_dead_op_with_regions_and_effects(name):
    text = extra_module(EXTRA[name])
    expected = shardy(text, PIPELINE_PASS)
    assert_same(expected, normalize(ours(text, "canonicalize")))


# Sharding constraints that end up unused and reshards that are dead after export.
PIPELINE_CASES = {
    "dead_constraint": MESH + f'''func.func @main(%arg0: {T} {{sdy.sharding = #sdy.sharding<@mesh, [{{"a"}}, {{}}]>}}) -> {T} {{
  %0 = stablehlo.negate %arg0 : {T}
  %1 = sdy.sharding_constraint %0 <@mesh, [{{"b"}}, {{}}]> : {T}
  %2 = sdy.reshard %0 <@mesh, [{{}}, {{"b"}}]> : {T}
  %3 = stablehlo.abs %0 : {T}
  return %3 : {T}
}}
''',
    "dead_constraint_in_loop": MESH + f'''func.func @main(%arg0: {T} {{sdy.sharding = #sdy.sharding<@mesh, [{{"a"}}, {{}}]>}}) -> {T} {{
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%i = %c, %x = %arg0) : tensor<i32>, {T}
    cond {{
      %t = stablehlo.compare LT, %i, %i : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %t : tensor<i1>
    }} do {{
      %y = stablehlo.negate %x : {T}
      %z = sdy.sharding_constraint %y <@mesh, [{{}}, {{"b"}}]> : {T}
      stablehlo.return %i, %y : tensor<i32>, {T}
    }}
  return %0#1 : {T}
}}
''',
}


# The all-reduce patterns: of sharded_to_unreduced on its axes (an all-gather),
# of replicated_to_unreduced on the same axes, with no axes, chained; and one
# whose replicated_to_unreduced stays in use.
ALL_REDUCES = '''sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> tensor<8x8xf32> {
  %0 = sdy.sharded_to_unreduced [{"a"}, {}] %arg0 out_sharding=<@mesh, [{}, {}], unreduced={"a"}> : tensor<8x8xf32>
  %1 = sdy.all_reduce {"a"} %0 out_sharding=<@mesh, [{}, {}]> : tensor<8x8xf32>
  %2 = sdy.replicated_to_unreduced {"b"} %arg0 out_sharding=<@mesh, [{"a"}, {}], unreduced={"b"}> : tensor<8x8xf32>
  %3 = sdy.all_reduce {"b"} %2 out_sharding=<@mesh, [{"a"}, {}]> : tensor<8x8xf32>
  %4 = sdy.all_reduce {} %3 out_sharding=<@mesh, [{"a"}, {}]> : tensor<8x8xf32>
  %5 = stablehlo.add %1, %4 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : tensor<8x8xf32>
  %6 = sdy.replicated_to_unreduced {"b"} %5 out_sharding=<@mesh, [{}, {}], unreduced={"b"}> : tensor<8x8xf32>
  %7 = sdy.all_reduce {"b"} %6 out_sharding=<@mesh, [{}, {}]> : tensor<8x8xf32>
  %8 = stablehlo.negate %6 : tensor<8x8xf32>
  %9 = stablehlo.add %7, %8 : tensor<8x8xf32>
  return %9 : tensor<8x8xf32>
}
'''


def test_all_reduce_patterns():
    assert_same(shardy(ALL_REDUCES, PIPELINE_PASS), normalize(ours(ALL_REDUCES, "canonicalize")))


# Unreduced constraints whose explicit all-reduces fold away in the pipeline.
PIPELINE_CASES.update({
    "replicated_to_unreduced_then_all_reduce": '''sdy.mesh @mesh3d = <["a"=4, "b"=4, "c"=4]>
func.func @main(%arg0 : tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh3d, [{"c"}, {}], unreduced={"b"}>})
      -> (tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh3d, [{"c"}, {}], unreduced={"b"}>}) {
  %0 = sdy.sharding_constraint %arg0 <@mesh3d, [{"c"}, {}], unreduced={"a", "b"}> : tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}
''',
    "sharded_to_unreduced_then_all_reduce": '''sdy.mesh @mesh = <["a"=4, "b"=2]>
func.func @main(%arg0 : tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>})
      -> (tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  %0 = sdy.sharding_constraint %arg0 <@mesh, [{"a":(1)2}, {}], unreduced={"a":(2)2}> : tensor<16x8xf32>
  %1 = stablehlo.negate %0 : tensor<16x8xf32>
  return %1 : tensor<16x8xf32>
}
''',
})


@pytest.mark.parametrize("name", sorted(PIPELINE_CASES))
def test_pipeline_erases_dead_reshards(name):
    from sdy_dl.pipeline import propagate
    from sdy_dl.ir import parse_module_text
    from sdy_dl.pipeline import make_options

    text = PIPELINE_CASES[name]
    expected = shardy(text, "sdy-propagation-pipeline")
    actual = propagate(parse_module_text(text, "<test>"), make_options(engine="clingo")).print()
    assert_same(expected, normalize(actual))


@pytest.mark.souffle
@pytest.mark.skipif(__import__("shutil").which("souffle") is None, reason="souffle is not on PATH")
@pytest.mark.parametrize("name", ["while_outer_value", "manual_computation", "chain",
                                  "custom_call_side_effect"])
def test_engines_agree(name):
    text = extra_module(EXTRA[name])
    assert ours(text, "canonicalize", engine="souffle") == ours(text, "canonicalize", engine="clingo")


# -- no-op collectives: an all-gather, all-slice, reduce-scatter or all-reduce naming no
# axis (on a scalar its list of dims is empty) is its input; one naming an axis stays; a
# collective permute is its input when its operand's sharding is equivalent to its own.

def collective_module(kind: str, rank: int, axis: str | None) -> str:
    """One ``sdy.<kind>`` on ``%arg0`` of rank ``rank``, along ``axis`` (on dim 0) or none."""
    shape = "x".join(["8"] * rank)
    t = f"tensor<{shape + 'x' if shape else ''}f32>"
    empty = ", ".join(["{}"] * rank)
    named = ", ".join([f'{{"{axis}"}}'] + ["{}"] * (rank - 1)) if axis else empty
    if kind == "collective_permute":   # "a": from "a" to "b"; "same": "a" to "a"
        same = ", ".join(['{"a"}'] + ["{}"] * (rank - 1)) if rank else ""
        moved = same.replace('"a"', '"b"')
        attr, sharded_in, out = "", *{None: (empty, empty), "a": (same, moved),
                                      "same": (same, same)}[axis]
        return (f'sdy.mesh @mesh = <["a"=2, "b"=2]>\n'
                f"func.func @main(%arg0: {t} {{sdy.sharding = #sdy.sharding<@mesh, [{sharded_in}]>}})"
                f" -> {t} {{\n"
                f"  %0 = sdy.collective_permute %arg0 out_sharding=<@mesh, [{out}]> : {t}\n"
                f"  %1 = stablehlo.negate %0 : {t}\n"
                f"  return %1 : {t}\n}}\n")
    if kind == "all_reduce":
        attr, sharded_in, out = (f'{{"{axis}"}}' if axis else "{}"), empty, empty
    elif kind == "all_gather":
        attr, sharded_in, out = f"[{named}]", named, empty
    else:   # all_slice, reduce_scatter
        attr, sharded_in, out = f"[{named}]", empty, named
    return (f'sdy.mesh @mesh = <["a"=2, "b"=2]>\n'
            f"func.func @main(%arg0: {t} {{sdy.sharding = #sdy.sharding<@mesh, [{sharded_in}]>}})"
            f" -> {t} {{\n"
            f"  %0 = sdy.{kind} {attr} %arg0 out_sharding=<@mesh, [{out}]> : {t}\n"
            f"  %1 = stablehlo.negate %0 : {t}\n"
            f"  return %1 : {t}\n}}\n")


COLLECTIVES = {f"{kind}-rank{rank}-{axis or 'noop'}": collective_module(kind, rank, axis)
               for kind in ("all_slice", "all_gather", "reduce_scatter", "all_reduce",
                            "collective_permute")
               for rank in (0, 1, 2) for axis in (None, "a", "same")
               if (rank or axis is None) and (axis != "same" or kind == "collective_permute")}


@pytest.mark.parametrize("name", sorted(COLLECTIVES))
def test_noop_collectives(name):
    """The no-op patterns, in the pass and in the whole pipeline."""
    from sdy_dl.ir import parse_module_text
    from sdy_dl.passes import PassOptions
    from sdy_dl.pipeline import propagate

    text = COLLECTIVES[name]
    assert_same(shardy(text, PIPELINE_PASS), normalize(ours(text, "canonicalize")))
    actual = propagate(parse_module_text(text, "<test>"), PassOptions()).print()
    assert_same(shardy(text, "sdy-propagation-pipeline"), normalize(actual))
