"""Hypothesis-generated single-op steps against Shardy.

Random meshes (axis sizes 1, 2, 3, 4, 6, 8), random valid shardings (full
axes and sub-axes, open/closed dims, replicated and unreduced axes) on the
operands and the result of one random op (elementwise, dot_general, reshape,
transpose, broadcast_in_dim, reduce), under both strategies and conservative
mode.  Each hypothesis example is a batch of cases evaluated in ONE engine
call, which also checks that steps of a batch do not interfere.
"""

from __future__ import annotations

import math
import shutil

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sdy_dl.sharding import AxisRef, DimSharding, Mesh, MeshAxis, TensorSharding, merge_adjacent
from test_sharding import jax_module_error
from test_step_common import check_batch, module_text

AXIS_SIZES = (1, 2, 2, 3, 4, 4, 6, 8)
DIM_SIZES = (1, 2, 3, 4, 6, 8, 12, 16)


def chains(n: int) -> list[tuple[int, ...]]:
    """The ways to cut an axis of size n into consecutive sub-axes (sizes > 1)."""
    if n == 1:
        return [(1,)]
    out = [(n,)]
    for d in range(2, n):
        if n % d == 0:
            out += [(d,) + rest for rest in chains(n // d) if rest != (1,)]
    return out


@st.composite
def meshes(draw):
    k = draw(st.integers(1, 3))
    sizes = [draw(st.sampled_from(AXIS_SIZES)) for _ in range(k)]
    assume(math.prod(sizes) <= 64)
    return Mesh(tuple(MeshAxis(n, s) for n, s in zip("abc", sizes)))


@st.composite
def shardings(draw, mesh: Mesh, shape: tuple[int, ...]):
    if draw(st.integers(0, 9)) < 2:
        return None
    rank = len(shape)
    dims: list[list[AxisRef]] = [[] for _ in range(rank)]
    rep: list[AxisRef] = []
    unred: list[AxisRef] = []
    for axis in mesh.axes:
        pre = 1
        for part in draw(st.sampled_from(chains(axis.size))):
            ref = AxisRef(axis.name) if part == axis.size else AxisRef(axis.name, pre, part)
            pre *= part
            choice = draw(st.integers(0, 9))
            if choice < 6 and rank:
                dims[draw(st.integers(0, rank - 1))].append(ref)
            elif choice == 6:
                rep.append(ref)
            elif choice == 7 and draw(st.integers(0, 2)) == 0:
                unred.append(ref)
    def merged(refs):
        return merge_adjacent(refs, mesh)

    dim_shardings = []
    for d in range(rank):
        axes = merged(draw(st.permutations(dims[d])) if len(dims[d]) > 1 else dims[d])
        closed = draw(st.integers(0, 4)) == 0
        prio = None
        if draw(st.integers(0, 15)) == 0 and (axes or not closed):
            prio = draw(st.integers(0, 2))
        dim_shardings.append(DimSharding(tuple(axes), closed, prio))
    key = lambda r: r.sort_key_in(mesh)  # noqa: E731
    s = TensorSharding("mesh", tuple(dim_shardings), tuple(merged(sorted(rep, key=key))),
                       tuple(merged(sorted(unred, key=key))))
    assume(jax_module_error(s, mesh, rank) is None)
    return s


def ttype(shape) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + "f32>"


@st.composite
def ops(draw):
    """(operand shapes, result shapes, op line template with {attr})."""
    kind = draw(st.sampled_from(["add", "dot", "reshape", "transpose", "broadcast", "reduce", "multi"]))
    if kind == "add":
        shape = tuple(draw(st.lists(st.sampled_from(DIM_SIZES), min_size=1, max_size=3)))
        t = ttype(shape)
        op = draw(st.sampled_from(["stablehlo.add", "stablehlo.multiply", "stablehlo.maximum"]))
        return [shape, shape], [shape], f"%0 = {op} %arg0, %arg1@ATTR@ : {t}"
    if kind == "dot":
        b, m, k, n = (draw(st.sampled_from(DIM_SIZES)) for _ in range(4))
        if draw(st.booleans()):
            lhs, rhs, res = (b, m, k), (b, k, n), (b, m, n)
            dims = "batching_dims = [0] x [0], contracting_dims = [2] x [1]"
        else:
            lhs, rhs, res = (m, k), (k, n), (m, n)
            dims = "contracting_dims = [1] x [0]"
        return [lhs, rhs], [res], (f"%0 = stablehlo.dot_general %arg0, %arg1, {dims}@ATTR@ : "
                                   f"({ttype(lhs)}, {ttype(rhs)}) -> {ttype(res)}")
    if kind == "reshape":
        factors = draw(st.lists(st.sampled_from([2, 2, 3, 4]), min_size=1, max_size=4))
        total = math.prod(factors)

        def split():
            perm = draw(st.permutations(factors))
            cuts = sorted(draw(st.sets(st.integers(1, max(1, len(perm) - 1)), max_size=len(perm) - 1)))
            shape, prev = [], 0
            for c in cuts + [len(perm)]:
                if c > prev:
                    shape.append(math.prod(perm[prev:c]))
                prev = c
            if draw(st.integers(0, 5)) == 0:
                shape.insert(draw(st.integers(0, len(shape))), 1)
            return tuple(shape)

        a, r = split(), split()
        assume(math.prod(a) == total == math.prod(r))
        return [a], [r], f"%0 = stablehlo.reshape %arg0@ATTR@ : ({ttype(a)}) -> {ttype(r)}"
    if kind == "transpose":
        shape = tuple(draw(st.lists(st.sampled_from(DIM_SIZES), min_size=2, max_size=3)))
        perm = draw(st.permutations(range(len(shape))))
        res = tuple(shape[p] for p in perm)
        return [shape], [res], (f"%0 = stablehlo.transpose %arg0, dims = [{', '.join(map(str, perm))}]"
                                f"@ATTR@ : ({ttype(shape)}) -> {ttype(res)}")
    if kind == "broadcast":
        res = tuple(draw(st.lists(st.sampled_from(DIM_SIZES), min_size=1, max_size=3)))
        keep = sorted(draw(st.sets(st.integers(0, len(res) - 1), max_size=len(res))))
        shape = tuple(res[d] if draw(st.integers(0, 3)) else 1 for d in keep)
        return [shape], [res], (f"%0 = stablehlo.broadcast_in_dim %arg0, dims = [{', '.join(map(str, keep))}]"
                                f"@ATTR@ : ({ttype(shape)}) -> {ttype(res)}")
    if kind == "reduce":
        shape = tuple(draw(st.lists(st.sampled_from(DIM_SIZES), min_size=1, max_size=3)))
        red = sorted(draw(st.sets(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape))))
        res = tuple(s for d, s in enumerate(shape) if d not in red)
        return [shape, ()], [res], (f"%0 = stablehlo.reduce(%arg0 init: %arg1) applies stablehlo.add "
                                    f"across dimensions = [{', '.join(map(str, red))}]@ATTR@ : "
                                    f"({ttype(shape)}, tensor<f32>) -> {ttype(res)}")
    # a custom rule with two results and a compound dim
    i, j, k = (draw(st.sampled_from([2, 3, 4])) for _ in range(3))
    a, b, r0, r1 = (i * j, k), (k,), (i, j, k), (k, i * j)
    rule = f"([ij, k], [k])->([i, j, k], [k, ij]) {{i={i}, j={j}, k={k}}}"
    return [a, b], [r0, r1], (f"%0:2 = stablehlo.custom_call @foo(%arg0, %arg1) {{sdy.sharding_rule = "
                              f"#sdy.op_sharding_rule<{rule}, custom>@EXTRA@}} : ({ttype(a)}, {ttype(b)}) "
                              f"-> ({ttype(r0)}, {ttype(r1)})")


@st.composite
def custom_ops(draw):
    """A custom_call with a random rule: factors, compound dims, blocked factors, 1-4 operands."""
    from sdy_dl.rules.instance import Factor, RuleInstance
    n = draw(st.integers(1, 5))
    sizes = [draw(st.sampled_from([1, 2, 2, 3, 4, 4, 6, 8])) for _ in range(n)]

    def tensor():
        free = list(range(n))
        dims = []
        for _ in range(draw(st.integers(0, 3))):
            if not free:
                break
            big = [f for f in free if sizes[f] > 1]  # compound dims have no size-1 factor
            k = draw(st.integers(1, min(3, len(big)))) if len(big) >= 2 else 1
            pool = big if k > 1 else free
            picked = [pool.pop(draw(st.integers(0, len(pool) - 1))) for _ in range(k)]
            free = [f for f in free if f not in picked]
            dims.append(tuple(picked))
        return dims

    tensors = [tensor() for _ in range(draw(st.integers(1, 4)) + draw(st.integers(1, 2)))]
    n_operands = draw(st.integers(1, len(tensors) - 1))
    used = {f for t in tensors for d in t for f in d}
    for f in range(n):  # every factor appears somewhere
        if f not in used:
            t = tensors[draw(st.integers(0, len(tensors) - 1))]
            t.insert(draw(st.integers(0, len(t))), (f,))
    operands = tuple(tuple(t) for t in tensors[:n_operands])
    results = tuple(tuple(t) for t in tensors[n_operands:])
    blocked = [draw(st.integers(0, 5)) == 0 for _ in range(n)]
    rule = RuleInstance(tuple(Factor(z, blocked=b) for z, b in zip(sizes, blocked)), operands, results)
    text = rule.to_text()[len("#sdy.op_sharding_rule<"):-1]
    shape = lambda t: tuple(math.prod(sizes[f] for f in d) for d in t)  # noqa: E731
    ins, outs = [shape(t) for t in operands], [shape(t) for t in results]
    lhs = "%0" if len(outs) == 1 else f"%0:{len(outs)}"
    out_t = ttype(outs[0]) if len(outs) == 1 else "(" + ", ".join(map(ttype, outs)) + ")"
    args = ", ".join(f"%arg{i}" for i in range(len(ins)))
    return ins, outs, (f"{lhs} = stablehlo.custom_call @foo({args}) {{sdy.sharding_rule = "
                       f"#sdy.op_sharding_rule<{text}, custom>@EXTRA@}} : "
                       f"({', '.join(map(ttype, ins))}) -> {out_t}")


@st.composite
def cases(draw, custom: bool = False):
    mesh = draw(meshes())
    ins, outs, template = draw(custom_ops() if custom else ops())
    args = [draw(shardings(mesh, s)) for s in ins]
    res = [draw(shardings(mesh, s)) for s in outs]
    attr = ""
    if any(r is not None for r in res):
        filled = [r if r is not None else TensorSharding.open_empty("mesh", len(s)) for r, s in zip(res, outs)]
        inner = ", ".join(r.to_text().removeprefix("#sdy.sharding") for r in filled)
        attr = f"sdy.sharding = #sdy.sharding_per_value<[{inner}]>"
    if "@EXTRA@" in template:
        line = template.replace("@EXTRA@", f", {attr}" if attr else "")
    else:
        line = template.replace("@ATTR@", " {" + attr + "}" if attr else "")
    arg_list = [(ttype(s), a.to_text().removeprefix("#sdy.sharding") if a else None) for s, a in zip(ins, args)]
    text = module_text({"mesh": mesh.to_text()}, arg_list, line, [ttype(s) for s in outs])
    strategy = draw(st.sampled_from(["basic", "aggressive"]))
    conservative = draw(st.integers(0, 3)) == 0
    return text, strategy, conservative


SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                                      HealthCheck.data_too_large])


@settings(max_examples=50, **SETTINGS)
@given(st.lists(cases(), min_size=1, max_size=12))
def test_random_steps(batch):
    check_batch(batch)


@settings(max_examples=30, **SETTINGS)
@given(st.lists(cases(custom=True), min_size=1, max_size=12))
def test_random_custom_rules(batch):
    check_batch(batch)


@pytest.mark.slow
@settings(max_examples=400, **SETTINGS)
@given(st.lists(cases(), min_size=1, max_size=16))
def test_random_steps_many(batch):
    check_batch(batch)


@pytest.mark.slow
@settings(max_examples=400, **SETTINGS)
@given(st.lists(cases(custom=True), min_size=1, max_size=16))
def test_random_custom_rules_many(batch):
    check_batch(batch)


@pytest.mark.souffle
@pytest.mark.skipif(shutil.which("souffle") is None, reason="souffle not on PATH")
@settings(max_examples=5, **SETTINGS)
@given(st.lists(cases(), min_size=5, max_size=12))
def test_random_steps_souffle(batch):
    check_batch(batch, "souffle")
