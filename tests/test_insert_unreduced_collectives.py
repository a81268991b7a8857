"""Stage ``insert_unreduced_collectives`` (Shardy's ``insertUnreducedCollectives``
in insert-explicit-reshards) on both embedded engines: which dims give their
axes up to ``sdy.sharded_to_unreduced`` and whether the value is resharded to
the target's dims first, on hand-derived cases (a rest that is a sub-axis,
a target that is no prefix, a rest not among the added axes, an empty target
dim); the same situations as modules are compared with jaxlib's pass.  Also
stage ``insert_explicit_reshards``'s check that a reduction factor is sharded
alike on every tensor (the non-full version's reduction axes)."""

from __future__ import annotations

import pytest

from oracle import assert_same, normalize, ours, read_mesh, shardy
from sdy_dl.passes import PassOptions, RunContext
from sdy_dl.passes.export.explicit_reshards_projection import OpShardings, project
from sdy_dl.passes.export.insert_unreduced_collectives import unreduced_split
from sdy_dl.rules.instance import Factor, RuleInstance
from sdy_dl.sharding import parse_axis_ref, parse_tensor_sharding

MESH = read_mesh('<["x"=4, "y"=2, "z"=2]>')
ENGINES = ["python", "clingo"]


def axes(*texts: str) -> tuple:
    return tuple(parse_axis_ref(t) for t in texts)


def sharding(text: str):
    return parse_tensor_sharding(f"<@mesh, {text}>")


#: name -> (value's sharding, target's sharding, added axes,
#:          (axes per dim given up, resharded first))
SPLITS = {
    # dim 0's target "x":(1)2 is a strict prefix of "x": the rest "x":(2)2 is added.
    "sub_axis_rest": ('[{"x"}, {"y"}]', '[{"x":(1)2}, {"y"}], unreduced={"x":(2)2}',
                      axes('"x":(2)2'), ({0: axes('"x":(2)2')}, False)),
    # An empty target dim is a strict prefix of any: dim 0 gives "x" up; "z" is not on a dim.
    "empty_target_dim": ('[{"x"}, {"y"}]', '[{}, {"y"}], unreduced={"x", "z"}',
                         axes('"x"', '"z"'), ({0: axes('"x"')}, False)),
    # dim 0's target "y" is not a prefix of "x": a reshard to the target's dims first.
    "not_a_prefix": ('[{"x"}, {}]', '[{"y"}, {}], unreduced={"x"}', axes('"x"'), ({}, True)),
    # "x" prefixes "x", "y", but the rest "y" is not added: a reshard first.
    "rest_not_added": ('[{"x", "y"}, {}]', '[{"x"}, {}], unreduced={"z"}', axes('"z"'),
                       ({}, True)),
    # Equal dims give nothing up and need no reshard.
    "equal_dims": ('[{"x"}, {}]', '[{"x"}, {}], unreduced={"y"}', axes('"y"'), ({}, False)),
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(SPLITS))
def test_split_as_shardy(name, engine):
    have, out, added, expected = SPLITS[name]
    got = unreduced_split(sharding(have), sharding(out), added, MESH,
                          PassOptions(RunContext(engine=engine)))
    assert got == expected


MODULE_MESH = 'sdy.mesh @mesh = <["x"=4, "y"=2, "z"=2]>\n'


def reshard_module(have: str, target: str) -> str:
    t = "tensor<8x8xf32>"
    return MODULE_MESH + (
        f'func.func @main(%arg0: {t} {{sdy.sharding = #sdy.sharding<@mesh, {have}>}}) -> {t} {{\n'
        f'  %0 = sdy.reshard %arg0 <@mesh, {target}> : {t}\n'
        f'  %1 = stablehlo.negate %0 {{sdy.sharding = #sdy.sharding_per_value<[<@mesh, {target}>]>}} : {t}\n'
        f'  return %1 : {t}\n}}\n')


PASS = "func.func(sdy-insert-explicit-reshards{enable-full-version=false})"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(SPLITS))
def test_reshard_to_unreduced_as_shardy(name, engine):
    """A reshard to the case's target becomes jaxlib's unreduced collectives."""
    have, out, _, _ = SPLITS[name]
    text = reshard_module(have, out)
    expected = shardy(text, PASS)
    assert "_to_unreduced" in expected
    assert_same(expected, normalize(ours(text, "insert-explicit-reshards", engine=engine)))


#: dot_general's rule: lhs [i, k], rhs [k, j], result [i, j]; k is a reduction factor.
DOT = RuleInstance((Factor(8, "pass_through"), Factor(8, "pass_through"), Factor(8, "reduction")),
                   (((0,), (2,)), ((2,), (1,))), (((0,), (1,)),))


@pytest.mark.parametrize("engine", ENGINES)
def test_reduction_factor_sharded_unlike(engine):
    """``reduction_differs``: the contracting factor is "x" on the lhs and "y"
    on the rhs; not when both have "x" (whatever the other factors)."""
    ops = [OpShardings(DOT, "mesh", tuple(sharding(s) for s in shardings)) for shardings in (
        ('[{}, {"x"}]', '[{"y"}, {}]', '[{}, {}]'),
        ('[{}, {"x"}]', '[{"x"}, {}]', '[{}, {}]'),
        ('[{"y"}, {"x"}]', '[{"x"}, {"z"}]', '[{"y"}, {}]'))]
    got = project(ops, [(64, 64, 64)] * 3, {"mesh": MESH}, PassOptions(RunContext(engine=engine)))
    assert [p.reduction_differs for p in got] == [True, False, False]
