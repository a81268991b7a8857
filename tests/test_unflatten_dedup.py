"""unflatten-call-graph with dedup-functions-fully=true against jaxlib's:
clones of one function merge whatever their shardings, into the callee whose
shardings are called most often (the first to reach that count)."""

from __future__ import annotations

import pytest

from oracle import assert_same, normalize, ours, shardy

MESH = 'sdy.mesh @mesh = <["x"=2, "y"=2]>\n'
T = "tensor<8x2xi32>"


def clone(name: str, arg: str, res: str, original: str = "f") -> str:
    return (f'func.func private @{name}(%arg0: {T} {{sdy.sharding = #sdy.sharding<@mesh, {arg}>}}) '
            f'-> ({T} {{sdy.sharding = #sdy.sharding<@mesh, {res}>}}) '
            f'attributes {{sdy.original_func_name = "{original}"}} {{\n'
            f"  %0 = stablehlo.multiply %arg0, %arg0 : {T}\n  return %0 : {T}\n}}\n")


def module(calls: list[str], clones: list[str]) -> str:
    body = "".join(f"  %{i + 1} = call @{c}(%{i if i else 'arg0'}) : ({T}) -> {T}\n"
                   .replace("%0)", "%arg0)") for i, c in enumerate(calls))
    return (MESH + f"func.func @main(%arg0: {T}) -> {T} {{\n{body}  return %{len(calls)} : {T}\n}}\n"
            + "".join(clones))


A, B, C = '[{"x"}, {}]', '[{}, {"y"}]', '[{}, {}]'
CASES = {
    "first_wins_ties": module(["f_a", "f_b"], [clone("f_a", A, A), clone("f_b", B, B)]),
    "most_called_wins": module(["f_a", "f_b", "f_b2"],
                               [clone("f_a", A, A), clone("f_b", B, B), clone("f_b2", B, B)]),
    "overtaken_late": module(["f_a", "f_b", "f_c", "f_b2", "f_a2", "f_a3"],
                             [clone("f_a", A, A), clone("f_b", B, B), clone("f_c", C, C),
                              clone("f_b2", B, B), clone("f_a2", A, A), clone("f_a3", A, A)]),
    "two_groups": module(["f_a", "g_b", "g_b2", "f_b"],
                         [clone("f_a", A, A), clone("g_b", B, B, "g"), clone("g_b2", A, A, "g"),
                          clone("f_b", B, B)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dedup", [True, False])
def test_unflatten_call_graph(name, dedup):
    text = CASES[name]
    expected = shardy(text, "sdy-unflatten-call-graph{dedup-functions-fully=%s}"
                      % str(dedup).lower())
    assert_same(expected, normalize(ours(text, "unflatten-call-graph",
                                         options={"dedup_functions_fully": dedup})))


@pytest.mark.souffle
@pytest.mark.skipif(__import__("shutil").which("souffle") is None, reason="souffle is not on PATH")
@pytest.mark.parametrize("name", sorted(CASES))
def test_engines_agree(name):
    extra = {"dedup_functions_fully": True}
    assert ours(CASES[name], "unflatten-call-graph", engine="souffle", options=extra) == \
        ours(CASES[name], "unflatten-call-graph", engine="clingo", options=extra)
