"""Randomized differential tests of the import analyses against Shardy.

Random modules (sharding groups that merge in arbitrary orders; constant
sub-computations with shared uses, scalar broadcasts, nested regions, named
computations and calls; sharding constraints with chains, data-flow edges,
manual computations and unreduced axes) go through Shardy's pass and
sdy-dl's; the printed modules must be equal.  The default run is small; the
``slow`` variants run many more examples.
"""

from __future__ import annotations

import random
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from import_programs import check, shardy

T = "tensor<4x4xf32>"
S = "tensor<f32>"


# -- sharding groups ----------------------------------------------------------------------------

def gen_groups(rng: random.Random) -> str:
    nv, ng = rng.randint(1, 6), rng.randint(1, 7)
    lines = []
    for _ in range(rng.randint(1, 12)):
        g = rng.randrange(ng) if rng.random() < 0.7 else rng.randrange(1000)
        lines.append(f"  sdy.sharding_group %arg{rng.randrange(nv)} group_id={g} : {T}")
    args = ", ".join(f"%arg{i}: {T}" for i in range(nv))
    return f"func.func @main({args}) {{\n" + "\n".join(lines) + "\n  return\n}\n"


# -- constant sub-computations ----------------------------------------------------------------------

class _ConstGen:
    def __init__(self, rng: random.Random):
        self.rng = rng
        self.n = 0

    def new(self) -> str:
        self.n += 1
        return f"%v{self.n}"

    def block(self, vals, svals, depth, funcs, regions=True):
        rng, lines = self.rng, []
        vals, svals = list(vals), list(svals)
        for _ in range(rng.randint(1, 7)):
            k, v = rng.random(), self.new()
            if k < 0.15:
                lines.append(f"{v} = stablehlo.constant dense<1.0> : {T}")
                vals.append(v)
            elif k < 0.22:
                lines.append(f"{v} = stablehlo.constant dense<2.0> : {S}")
                svals.append(v)
            elif k < 0.3 and svals:
                lines.append(f"{v} = stablehlo.broadcast_in_dim {rng.choice(svals)}, dims = [] "
                             f": ({S}) -> {T}")
                vals.append(v)
            elif k < 0.38:
                op = rng.choice(["add", "multiply", "maximum"])
                lines.append(f"{v} = stablehlo.{op} {rng.choice(vals)}, {rng.choice(vals)} : {T}")
                vals.append(v)
            elif k < 0.44:
                lines.append(f"{v} = stablehlo.iota dim = 0 : {T}")
                vals.append(v)
            elif k < 0.5:
                op = rng.choice(["reshape", "transpose", "slice"])
                a = rng.choice(vals)
                text = {"reshape": f"stablehlo.reshape {a} : ({T}) -> {T}",
                        "transpose": f"stablehlo.transpose {a}, dims = [1, 0] : ({T}) -> {T}",
                        "slice": f"stablehlo.slice {a} [0:4, 0:4] : ({T}) -> {T}"}[op]
                lines.append(f"{v} = {text}")
                vals.append(v)
            elif k < 0.56:
                lines.append(f"sdy.sharding_group {rng.choice(vals)} group_id={rng.randint(0, 2)} : {T}")
            elif k < 0.64 and funcs:
                lines.append(f"{v} = func.call @{rng.choice(funcs)}({rng.choice(vals)}) : ({T}) -> {T}")
                vals.append(v)
            elif k < 0.72 and depth < 2 and regions:
                a, arg = rng.choice(vals), f"%nca{self.n}"
                inner, res = self.block([arg], [], depth + 1, funcs)
                body = "\n".join(inner)
                lines.append(f'{v} = sdy.named_computation<"nc{rng.randint(0, 1)}">({a}) ({arg}: {T}) '
                             f'{{\n{body}\nsdy.return {res} : {T}\n}} : ({T}) -> {T}')
                vals.append(v)
            elif k < 0.8 and depth < 2 and regions:
                a, it = rng.choice(vals), f"%it{self.n}"
                inner, res = self.block(vals + [it], svals, depth + 1, funcs)
                body = "\n".join(inner)
                lines.append(f"{v} = stablehlo.while({it} = {a}) : {T}\n cond {{\n"
                             f"%cc{self.n} = stablehlo.constant dense<true> : tensor<i1>\n"
                             f"stablehlo.return %cc{self.n} : tensor<i1>\n}} do {{\n{body}\n"
                             f"stablehlo.return {res} : {T}\n}}")
                vals.append(v)
            else:
                lines.append(f"{v} = stablehlo.custom_call @foo({rng.choice(vals)}) : ({T}) -> {T}")
                vals.append(v)
        return lines, rng.choice(vals)


def gen_constants(rng: random.Random) -> str:
    g, funcs, out = _ConstGen(rng), [], []
    for i in range(rng.randint(0, 2)):
        lines, res = g.block(["%fa"], [], 2, list(funcs), regions=False)
        body = "\n".join(lines)
        out.append(f"func.func private @f{i}(%fa: {T}) -> {T} {{\n{body}\nreturn {res} : {T}\n}}")
        funcs.append(f"f{i}")
    lines, res = g.block(["%arg0"], [], 0, funcs)
    body = "\n".join(lines)
    main = f"func.func @main(%arg0: {T}) -> ({T}, {T}) {{\n{body}\nreturn {res}, {res} : {T}, {T}\n}}"
    return "\n".join([main] + out)


# -- sharding constraints --------------------------------------------------------------------------

T8 = "tensor<8x8xf32>"
SHARDINGS = ['<@mesh, [{}, {"b"}]>', '<@mesh, [{"a"}, {}]>', '<@mesh, [{}, {"b", ?}]>',
             '<@mesh, [{}, {}]>', '<@mesh, [{"a"}, {}], unreduced={"b"}>']


def gen_constraints(rng: random.Random) -> str:
    lines, vals, cons, n = [], [], [], 0
    args = []
    for i in range(rng.randint(1, 3)):
        attr = (f" {{sdy.sharding = #sdy.sharding{rng.choice(SHARDINGS[:4])}}}"
                if rng.random() < 0.3 else "")
        args.append(f"%arg{i}: {T8}{attr}")
        vals.append(f"%arg{i}")
    for _ in range(rng.randint(2, 10)):
        n += 1
        k, v = rng.random(), f"%v{n}"
        if k < 0.4:
            x = rng.choice(cons) if cons and rng.random() < 0.4 else rng.choice(vals)
            lines.append(f"{v} = sdy.sharding_constraint {x} {rng.choice(SHARDINGS)} : {T8}")
            cons.append(v)
        elif k < 0.55:
            attr = (f" {{sdy.sharding = #sdy.sharding_per_value<[{rng.choice(SHARDINGS[:4])}]>}}"
                    if rng.random() < 0.3 else "")
            lines.append(f"{v} = stablehlo.add {rng.choice(vals)}, {rng.choice(vals)}{attr} : {T8}")
        elif k < 0.65:
            lines.append(f"{v} = stablehlo.optimization_barrier {rng.choice(vals)} : {T8}")
        elif k < 0.75:
            it, w = f"%it{n}", f"%w{n}"
            inner = (f"{w} = sdy.sharding_constraint {it} {rng.choice(SHARDINGS)} : {T8}"
                     if rng.random() < 0.6 else f"{w} = stablehlo.negate {it} : {T8}")
            ret = w if rng.random() < 0.7 else it
            lines.append(f"{v} = stablehlo.while({it} = {rng.choice(vals)}) : {T8}\n cond {{\n"
                         f"%cc{n} = stablehlo.constant dense<true> : tensor<i1>\n"
                         f"stablehlo.return %cc{n} : tensor<i1>\n}} do {{\n{inner}\n"
                         f"stablehlo.return {ret} : {T8}\n}}")
        elif k < 0.85:
            s1 = rng.choice(['<@mesh, [{"a"}, {}]>', '<@mesh, [{"a", ?}, {}]>',
                             '<@mesh, [{"a"}, {"b"}]>'])
            s2 = rng.choice(['<@mesh, [{"a"}, {}]>', '<@mesh, [{"a", ?}, {?}]>'])
            lines.append(
                f"{v} = sdy.manual_computation({rng.choice(vals)}, {rng.choice(vals)}) "
                f"in_shardings=[{s1}, {s2}] out_shardings=[<@mesh, [{{\"a\"}}, {{}}]>] "
                f"manual_axes={{\"a\"}} (%m{n}: tensor<4x8xf32>, %mm{n}: tensor<4x8xf32>) {{\n"
                f"sdy.return %m{n} : tensor<4x8xf32>\n}} : ({T8}, {T8}) -> {T8}")
        else:
            lines.append(f"{v} = stablehlo.custom_call @foo({rng.choice(vals)}) : ({T8}) -> {T8}")
        vals.append(v)
    rets = [rng.choice(vals) for _ in range(rng.randint(1, 3))]
    types = ", ".join([T8] * len(rets))
    body = "\n".join(lines)
    text = (f'sdy.mesh @mesh = <["a"=2, "b"=2]>\nfunc.func @main({", ".join(args)}) -> ({types}) '
            f'{{\n{body}\nreturn {", ".join(rets)} : {types}\n}}')
    if rng.random() < 0.5:
        text = shardy(text, "sdy-add-data-flow-edges")
    return text


GENERATORS = {
    "sharding-group-import": gen_groups,
    "constant-or-scalar-splitter": gen_constants,
    "apply-sharding-constraints": gen_constraints,
}


def _check_seed(name: str, seed: int, engine: str = "clingo") -> None:
    check(GENERATORS[name](random.Random(seed)), name, engine=engine)


@pytest.mark.parametrize("name", list(GENERATORS))
@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_modules(name, seed):
    _check_seed(name, seed)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(GENERATORS))
@settings(max_examples=400, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_modules_many(name, seed):
    _check_seed(name, seed)


@pytest.mark.souffle
@pytest.mark.skipif(shutil.which("souffle") is None, reason="no souffle on PATH")
@pytest.mark.parametrize("name", list(GENERATORS))
@settings(max_examples=10, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_modules_with_souffle(name, seed):
    """The same analyses evaluated by Soufflé instead of clingo."""
    _check_seed(name, seed, engine="souffle")
