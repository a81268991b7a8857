"""Stage ``find_common_axes_heuristic`` (Shardy's ``findCommonAxesHeuristic`` in
the full version of insert-explicit-reshards) on both embedded engines, on
cases where the greedy order decides: a tie on the total broken by the
factor's precedence, a larger total beating precedence (beyond 32 bits), a
pick cutting another factor's candidate to a sub-axis, a fully sharded factor
releasing the factor after it in a dim (and one that does not), the axes
breaking a full tie, and a factor taking a longer candidate after its prefix.
The stage-level answers follow Shardy's loop by hand; the same situations as
modules are compared with jaxlib's pass."""

from __future__ import annotations

import pytest

from oracle import assert_same, normalize, ours, read_mesh, shardy
from sdy_dl.passes import PassOptions, RunContext
from sdy_dl.passes.export import explicit_reshards_common_axes
from sdy_dl.passes.export.find_common_axes_heuristic import (STAGE, find_common_axes_heuristic,
                                                             heuristic_facts)
from sdy_dl.rules.instance import Factor, RuleInstance
from sdy_dl.sharding import parse_axis_ref

MESH = read_mesh('<["x"=2, "y"=4, "z"=2]>')
P, R = "pass_through", "reduction"
ENGINES = ["python", "clingo"]


def axes(*texts: str) -> tuple:
    return tuple(parse_axis_ref(t) for t in texts)


def rule(factors, operands, results):
    """Factors ``(size, kind)``; tensors as lists of dims of factor indices."""
    return RuleInstance(tuple(Factor(z, k) for z, k in factors),
                        tuple(tuple(tuple(d) for d in t) for t in operands),
                        tuple(tuple(tuple(d) for d in t) for t in results))


#: dot_general's rule: lhs [i, k], rhs [k, j], result [i, j]; i, j pass-through, k reduction.
DOT = rule([(8, P), (8, P), (8, R)], [[[0], [2]], [[2], [1]]], [[[0], [1]]])
#: An elementwise op on two 2-d operands: factors 0 and 1 on every tensor.
ADD = rule([(8, P), (8, P)], [[[0], [1]], [[0], [1]]], [[[0], [1]]])
#: A reshape that merges dims: [i], [j] -> [i * j] (j depends on i).
MERGE = rule([(4, P), (8, P)], [[[0], [1]]], [[[0, 1]]])
#: The same with i of size 8 (the operand 8x8 -> 64): y does not shard i fully.
MERGE_8 = rule([(8, P), (8, P)], [[[0], [1]]], [[[0, 1]]])
#: A one-factor op with three tensors.
COPY3 = rule([(8, P)], [[[0]], [[0]]], [[[0]]])

CASES = {
    # (k, [x]) and (i, [x]) shard tensors of 64 elements each: pass-through
    # (3) beats reduction (2); k's candidate is then cut to nothing.
    "precedence": (DOT, [{0: (), 2: axes('"x"')}, {2: (), 1: ()}, {0: axes('"x"'), 1: ()}],
                   [64, 64, 64], [axes('"x"'), (), ()]),
    # The lhs is larger (2^32 + 1 elements against 2^32): the total beats precedence.
    "total_beyond_32_bits": (DOT, [{0: (), 2: axes('"x"')}, {2: (), 1: ()},
                                   {0: axes('"x"'), 1: ()}],
                             [2 ** 32 + 1, 64, 2 ** 32], [(), (), axes('"x"')]),
    # Factor 0's "y":(2)2 has the larger total (two tensors); factor 1's "y"
    # is then cut to its prefix without overlap, "y":(1)2, and picked next.
    "overlap_truncation": (ADD, [{0: axes('"y":(2)2'), 1: ()}, {0: axes('"y":(2)2'), 1: ()},
                                 {0: (), 1: axes('"y"')}],
                           [64, 64, 64], [axes('"y":(2)2'), axes('"y":(1)2')]),
    # (i, [y]) shards more than (i, [x]) and shards i (size 4) fully, which
    # releases j (right after i in the result's dim): j then takes "x".
    "dependency_release": (MERGE, [{0: axes('"y"'), 1: axes('"x"')}, {0: axes('"x"'), 1: ()}],
                           [32, 32], [axes('"y"'), axes('"x"')]),
    # The same with i of size 8: "y" does not shard it fully, j stays blocked.
    "no_release": (MERGE_8, [{0: axes('"y"'), 1: axes('"x"')}, {0: axes('"x"'), 1: ()}],
                   [64, 64], [axes('"y"'), ()]),
    # (0, [x]) and (0, [z]): same total, precedence, sharding and factor; the
    # larger axes ("z") win.
    "axes_break_the_tie": (COPY3, [{0: axes('"x"')}, {0: axes('"z"')}, {0: ()}], [8, 8, 8],
                           [axes('"z"')]),
    # [x] (two tensors) first, then [x, y], which it strictly prefixes and which
    # adds y's sharding.
    "extend_a_pick": (COPY3, [{0: axes('"x"')}, {0: axes('"x"', '"y"')}, {0: ()}], [8, 8, 8],
                      [axes('"x"', '"y"')]),
}


@pytest.mark.parametrize("engine", ENGINES)
def test_heuristic_as_shardy(engine):
    names = sorted(CASES)
    got = find_common_axes_heuristic(
        [(CASES[n][0], CASES[n][1], CASES[n][2], "mesh", MESH) for n in names],
        PassOptions(RunContext(engine=engine)))
    assert dict(zip(names, got)) == {n: CASES[n][3] for n in names}


@pytest.mark.parametrize("engine", ENGINES)
def test_an_op_needing_more_picks_runs_again(engine):
    """One layer decides only the first pick: the stage reports the op
    unfinished, and the caller's second run (more layers) finishes it."""
    r, tensors, sizes, _ = CASES["overlap_truncation"]
    out = STAGE.run(heuristic_facts([(r, tensors, sizes, "mesh", MESH)]),
                    PassOptions(RunContext(engine=engine)), picks=1)
    assert out["unfinished"] == {(0,)} and not out["common_axis"]
    out = STAGE.run(heuristic_facts([(r, tensors, sizes, "mesh", MESH)]),
                    PassOptions(RunContext(engine=engine)), picks=2)
    assert not out["unfinished"]
    assert sorted(out["common_axis"]) == [(0, 0, 0, "y", 2, 2), (0, 1, 0, "y", 1, 2)]


FULL = "func.func(sdy-insert-explicit-reshards{enable-full-version=true})"


def module(args: list[tuple[str, str]], op: str, result: str, result_sharding: str) -> str:
    params = ", ".join(f'%arg{i}: {t} {{sdy.sharding = #sdy.sharding<@mesh, {s}>}}'
                       for i, (t, s) in enumerate(args))
    return ('sdy.mesh @mesh = <["x"=2, "y"=4, "z"=2]>\n'
            f'func.func @main({params}) -> {result} {{\n'
            f'  %0 = {op} {{sdy.sharding = #sdy.sharding_per_value<[<@mesh, {result_sharding}>]>}} : '
            f'({", ".join(t for t, _ in args)}) -> {result}\n'
            f'  return %0 : {result}\n}}\n')


M8 = "tensor<8x8xf32>"
DOT_OP = "stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0]"
MODULES = {
    "precedence": module([(M8, '[{}, {"x"}]'), (M8, '[{}, {}]')], DOT_OP, M8, '[{"x"}, {}]'),
    "total": module([("tensor<8x16xf32>", '[{}, {"x"}]'), ("tensor<16x8xf32>", '[{}, {}]')],
                    DOT_OP, M8, '[{"x"}, {}]'),
    "overlap_truncation": module([(M8, '[{"y":(2)2}, {}]'), (M8, '[{"y":(2)2}, {}]')],
                                 "stablehlo.add %arg0, %arg1", M8, '[{}, {"y"}]'),
    "dependency_release": module([("tensor<4x8xf32>", '[{"y"}, {"x"}]')],
                                 "stablehlo.reshape %arg0", "tensor<32xf32>", '[{"x"}]'),
    "no_release": module([(M8, '[{"y"}, {"x"}]')], "stablehlo.reshape %arg0",
                         "tensor<64xf32>", '[{"x"}]'),
    "axes_break_the_tie": module([(M8, '[{"x"}, {}]'), (M8, '[{"z"}, {}]')],
                                 "stablehlo.add %arg0, %arg1", M8, '[{}, {}]'),
    "extend_a_pick": module([(M8, '[{"x"}, {}]'), (M8, '[{"x", "y"}, {}]')],
                            "stablehlo.add %arg0, %arg1", M8, '[{}, {}]'),
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(MODULES))
def test_pass_as_shardy(name, engine, monkeypatch):
    """The pass on a module whose op the heuristic decides equals jaxlib's."""
    calls = []
    real = explicit_reshards_common_axes.find_common_axes_heuristic

    def spy(ops, options):
        calls.extend(ops)
        return real(ops, options)

    monkeypatch.setattr(explicit_reshards_common_axes, "find_common_axes_heuristic", spy)
    text = MODULES[name]
    expected = shardy(text, FULL)
    assert expected != normalize(text), "the case must make jaxlib insert something"
    assert_same(expected, normalize(ours(text, "insert-explicit-reshards", engine=engine,
                                         options={"enable_full_version": True})))
    assert calls, "the heuristic must decide the op"


@pytest.mark.parametrize("picks", [1, 4])
def test_relations_are_documented(picks):
    """Every relation of the stage says what it holds (a doc comment above its
    ``.decl``), inputs are the ``in_*`` relations, the program is stratified
    whatever its number of layers, and its outputs are the axes and the ops
    it did not finish."""
    from sdy_dl.datalog.compiler import compile_stage
    from sdy_dl.datalog.stratify import check_stratified

    program = compile_stage("find_common_axes_heuristic", picks=picks)
    check_stratified(program.text)
    for decl in program.decls.values():
        assert decl.doc.strip(), decl.name
        assert decl.is_input == decl.name.startswith("in_"), decl.name
    assert {d.name for d in program.outputs} == {"common_axis", "unfinished"}
    # one set of relations per layer: the state before every pick and after the last
    assert f"alive_{picks}" in program.decls and f"best_{picks - 1}" in program.decls
    assert f"best_{picks}" not in program.decls
