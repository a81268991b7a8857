"""Differential tests on generated ops: random shapes and attributes vs Shardy.

Hypothesis builds single-op modules (elementwise, dot_general, transpose,
broadcast_in_dim, reshape, reduce, concatenate, slice, pad, reduce_window,
convolution); every op's rule must equal Shardy's in normal and conservative
mode.  The ``slow`` variant runs many more examples.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from oracle_rules import compare
from rules_cases import module, op
from sdy_dl.rules.db import load_rule_db

DBS = {False: load_rule_db(), True: load_rule_db(conservative=True)}


def t(shape) -> str:
    return f"tensor<{'x'.join(map(str, shape))}{'x' if shape else ''}f32>"


def check(text: str) -> None:
    """Our rules equal Shardy's in both modes."""
    for conservative, db in DBS.items():
        result = compare(text, db)
        assert not result.diffs, "\n".join(result.diffs) + "\n" + text


dims = st.integers(min_value=1, max_value=6)
shapes = st.lists(st.integers(min_value=0, max_value=6), min_size=0, max_size=4)
nonempty = st.lists(dims, min_size=1, max_size=4)


@st.composite
def elementwise(draw):
    shape = draw(shapes)
    name = draw(st.sampled_from(["add", "multiply", "maximum", "atan2", "subtract"]))
    unary = draw(st.sampled_from(["negate", "exponential", "tanh", "abs", "sqrt"]))
    ty = t(shape)
    body = (f"  %0 = stablehlo.{name} %arg0, %arg1 : {ty}\n"
            f"  %1 = stablehlo.{unary} %0 : {ty}\n  return %1 : {ty}")
    return module([ty, ty], [ty], body)


@st.composite
def dot_general(draw):
    batch = draw(st.lists(dims, max_size=2))
    contract = draw(st.lists(dims, max_size=2))
    lhs_free = draw(st.lists(dims, max_size=2))
    rhs_free = draw(st.lists(dims, max_size=2))
    lhs_roles = [("b", i) for i in range(len(batch))] + [("c", i) for i in range(len(contract))] \
        + [("f", i) for i in range(len(lhs_free))]
    rhs_roles = [("b", i) for i in range(len(batch))] + [("c", i) for i in range(len(contract))] \
        + [("f", i) for i in range(len(rhs_free))]
    lhs_roles = draw(st.permutations(lhs_roles))
    rhs_roles = draw(st.permutations(rhs_roles))
    size = {"b": batch, "c": contract}

    def shape(roles, free):
        return [free[i] if r == "f" else size[r][i] for r, i in roles]

    def pos(roles, role):
        return [roles.index((role, i)) for i in range(len(size[role]))]

    lhs, rhs = shape(lhs_roles, lhs_free), shape(rhs_roles, rhs_free)
    out = batch + [lhs[d] for d, (r, _) in enumerate(lhs_roles) if r == "f"] + \
        [rhs[d] for d, (r, _) in enumerate(rhs_roles) if r == "f"]
    text = (f"stablehlo.dot_general %arg0, %arg1, batching_dims = {pos(lhs_roles, 'b')} x "
            f"{pos(rhs_roles, 'b')}, contracting_dims = {pos(lhs_roles, 'c')} x "
            f"{pos(rhs_roles, 'c')} : ({t(lhs)}, {t(rhs)}) -> {t(out)}")
    return op([t(lhs), t(rhs)], [t(out)], text)


@st.composite
def transpose(draw):
    shape = draw(nonempty)
    perm = draw(st.permutations(range(len(shape))))
    out = [shape[p] for p in perm]
    return op([t(shape)], [t(out)], f"stablehlo.transpose %arg0, dims = {list(perm)} : "
                                    f"({t(shape)}) -> {t(out)}")


@st.composite
def broadcast_in_dim(draw):
    in_shape = draw(st.lists(st.integers(1, 4), max_size=3))
    out_rank = draw(st.integers(len(in_shape), len(in_shape) + 2))
    positions = draw(st.permutations(range(out_rank)))[:len(in_shape)]
    out = [draw(st.integers(1, 5)) for _ in range(out_rank)]
    for i, p in enumerate(positions):
        out[p] = in_shape[i] if in_shape[i] != 1 else draw(st.sampled_from([1, out[p]]))
    return op([t(in_shape)], [t(out)], f"stablehlo.broadcast_in_dim %arg0, dims = "
                                       f"{list(positions)} : ({t(in_shape)}) -> {t(out)}")


@st.composite
def reshape(draw):
    primes = draw(st.lists(st.sampled_from([2, 2, 3, 5]), max_size=5))

    def group(ps):
        cuts = sorted(draw(st.sets(st.integers(1, max(len(ps) - 1, 1)), max_size=len(ps))))
        bounds = [0] + [c for c in cuts if c < len(ps)] + [len(ps)]
        dims_ = [math.prod(ps[a:b]) for a, b in zip(bounds, bounds[1:]) if b > a]
        for _ in range(draw(st.integers(0, 2))):
            dims_.insert(draw(st.integers(0, len(dims_))), 1)
        return dims_

    in_shape = group(draw(st.permutations(primes)))
    out_shape = group(draw(st.permutations(primes)))
    return op([t(in_shape)], [t(out_shape)],
              f"stablehlo.reshape %arg0 : ({t(in_shape)}) -> {t(out_shape)}")


@st.composite
def reduce(draw):
    shape = draw(nonempty)
    reduced = sorted(draw(st.sets(st.integers(0, len(shape) - 1), min_size=1)))
    out = [s for d, s in enumerate(shape) if d not in reduced]
    n = draw(st.integers(1, 2))
    pre = "".join(f"  %i{k} = stablehlo.constant dense<0.0> : tensor<f32>\n" for k in range(n))
    operands = ", ".join(f"(%arg{k} init: %i{k})" for k in range(n))
    params = " ".join(f"(%a{k}: tensor<f32>, %b{k}: tensor<f32>)" for k in range(n))
    adds = "".join(f"      %s{k} = stablehlo.add %a{k}, %b{k} : tensor<f32>\n" for k in range(n))
    res = t(out) if n == 1 else f"({', '.join([t(out)] * n)})"
    text = (f"stablehlo.reduce {operands} across dimensions = {reduced} : "
            f"({', '.join([t(shape)] * n + ['tensor<f32>'] * n)}) -> {res}\n"
            f"    reducer{params} {{\n{adds}      stablehlo.return "
            f"{', '.join(f'%s{k}' for k in range(n))} : {', '.join(['tensor<f32>'] * n)}\n    }}")
    return op([t(shape)] * n, [t(out)] * n, text, pre)


@st.composite
def concatenate(draw):
    shape = draw(nonempty)
    dim = draw(st.integers(0, len(shape) - 1))
    sizes = draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    source = list(shape)
    source[dim] = 6
    pre, names, types = "", [], []
    mode = draw(st.sampled_from(["args", "slices", "one_source"]))
    args = [t(source)] if mode == "one_source" else []
    for k, size in enumerate(sizes):
        part = list(shape)
        part[dim] = size
        if mode == "args":
            args.append(t(part))
            names.append(f"%arg{k}")
        elif mode == "one_source" and draw(st.booleans()):
            part[dim] = 6
            names.append("%arg0")
        else:
            src = "%arg0" if mode == "one_source" else f"%arg{len(args)}"
            if mode == "slices":
                args.append(t(source))
            bounds = ", ".join(f"0:{size if d == dim else s}" for d, s in enumerate(source))
            pre += f"  %s{k} = stablehlo.slice {src} [{bounds}] : ({t(source)}) -> {t(part)}\n"
            names.append(f"%s{k}")
        types.append(t(part))
    out = list(shape)
    out[dim] = sum(int(ty[7:].split("x")[dim]) for ty in types)
    return op(args, [t(out)], f"stablehlo.concatenate {', '.join(names)}, dim = {dim} : "
                              f"({', '.join(types)}) -> {t(out)}", pre)


@st.composite
def slice_(draw):
    shape = draw(nonempty)
    starts, limits, strides, out = [], [], [], []
    for s in shape:
        a = draw(st.integers(0, s - 1))
        b = draw(st.integers(a + 1, s))
        k = draw(st.integers(1, 3))
        starts.append(a)
        limits.append(b)
        strides.append(k)
        out.append((b - a + k - 1) // k)
    spec = ", ".join(f"{a}:{b}:{k}" for a, b, k in zip(starts, limits, strides))
    return op([t(shape)], [t(out)], f"stablehlo.slice %arg0 [{spec}] : ({t(shape)}) -> {t(out)}")


@st.composite
def pad(draw):
    shape = draw(nonempty)
    low, high, interior, out = [], [], [], []
    for s in shape:
        i = draw(st.integers(0, 1))
        lo = draw(st.integers(-1, 2))
        hi = draw(st.integers(-1, 2))
        size = s + (s - 1) * i + lo + hi
        if size < 0:
            lo, hi, size = 0, 0, s + (s - 1) * i
        low.append(lo)
        high.append(hi)
        interior.append(i)
        out.append(size)
    return op([t(shape), "tensor<f32>"], [t(out)],
              f"stablehlo.pad %arg0, %arg1, low = {low}, high = {high}, interior = {interior} : "
              f"({t(shape)}, tensor<f32>) -> {t(out)}")


@st.composite
def reduce_window(draw):
    shape = draw(nonempty)
    use_strides, use_padding = draw(st.booleans()), draw(st.booleans())
    window, strides, padding, out = [], [], [], []
    for s in shape:
        w = draw(st.integers(1, min(s, 3)))
        k = draw(st.integers(1, 2)) if use_strides else 1
        lo, hi = (draw(st.integers(-1, 1)), draw(st.integers(0, 1))) if use_padding else (0, 0)
        if s + lo + hi < w:
            lo = hi = 0
        window.append(w)
        strides.append(k)
        padding.append([lo, hi])
        out.append((s + lo + hi - w) // k + 1)
    attrs = f"window_dimensions = array<i64: {', '.join(map(str, window))}>"
    if use_strides:
        attrs += f", window_strides = array<i64: {', '.join(map(str, strides))}>"
    if use_padding:
        attrs += f", padding = dense<{padding}> : tensor<{len(shape)}x2xi64>"
    text = ('"stablehlo.reduce_window"(%arg0, %arg1) ({\n'
            "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
            "    %m = stablehlo.maximum %a, %b : tensor<f32>\n"
            "    stablehlo.return %m : tensor<f32>\n"
            f"  }}) {{{attrs}}} : ({t(shape)}, tensor<f32>) -> {t(out)}")
    return op([t(shape), "tensor<f32>"], [t(out)], text)


@st.composite
def convolution(draw):
    n_spatial = draw(st.integers(1, 2))
    groups = draw(st.sampled_from([1, 2]))
    batch_groups = 1 if groups > 1 else draw(st.sampled_from([1, 2]))
    batch = draw(st.integers(1, 2)) * batch_groups
    in_feat = draw(st.integers(1, 3)) * groups
    out_feat = draw(st.integers(1, 3)) * groups * batch_groups
    spatial = [draw(st.integers(3, 12)) for _ in range(n_spatial)]
    window = [draw(st.integers(1, 4)) for _ in range(n_spatial)]
    stride = [draw(st.integers(1, 3)) for _ in range(n_spatial)]
    pads = [[draw(st.integers(0, 2)), draw(st.integers(0, 2))] for _ in range(n_spatial)]
    out_spatial = [(s + p[0] + p[1] - w) // k + 1
                   for s, w, k, p in zip(spatial, window, stride, pads)]
    sp = ", ".join(str(i) for i in range(n_spatial))
    if draw(st.booleans()):   # NHWC / HWIO
        lhs = [batch] + spatial + [in_feat]
        rhs = window + [in_feat // groups, out_feat]
        out = [batch // batch_groups] + out_spatial + [out_feat]
        dims_ = f"[b, {sp}, f]x[{sp}, i, o]->[b, {sp}, f]"
    else:                      # NCHW / OIHW
        lhs = [batch, in_feat] + spatial
        rhs = [out_feat, in_feat // groups] + window
        out = [batch // batch_groups, out_feat] + out_spatial
        dims_ = f"[b, f, {sp}]x[o, i, {sp}]->[b, f, {sp}]"
    text = (f"stablehlo.convolution(%arg0, %arg1) dim_numbers = {dims_}, window = {{stride = "
            f"{stride}, pad = {pads}}} {{batch_group_count = {batch_groups} : i64, "
            f"feature_group_count = {groups} : i64}} : ({t(lhs)}, {t(rhs)}) -> {t(out)}")
    return op([t(lhs), t(rhs)], [t(out)], text)


@st.composite
def _indexing(draw):
    """Operand/indices/slices shapes and dimension numbers of a valid gather/scatter."""
    operand = draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
    r = len(operand)
    roles = [draw(st.sampled_from("bco")) for _ in range(r)]   # batching/collapsed/offset
    batching = [d for d in range(r) if roles[d] == "b"]
    collapsed = [d for d in range(r) if roles[d] == "c"]
    offset = [d for d in range(r) if roles[d] == "o"]
    index_map = draw(st.permutations([d for d in range(r) if roles[d] != "b"]))
    assume(index_map)
    index_map = index_map[:draw(st.integers(1, len(index_map)))]
    n_batch = len(batching) + draw(st.integers(0, 2))
    batch_sizes = [draw(st.integers(1, 4)) for _ in range(n_batch)]
    order = draw(st.permutations(range(n_batch)))
    indices_batching = []
    for k, b in enumerate(batching):      # explicit batch dims take operand sizes
        batch_sizes[order[k]] = operand[b]
        indices_batching.append(order[k])
    implicit = len(index_map) == 1 and draw(st.booleans())
    ivd = n_batch if implicit else draw(st.integers(0, n_batch))
    indices = list(batch_sizes)
    if not implicit:
        indices.insert(ivd, len(index_map))
    indices_batching = [i if i < ivd else i + 1 for i in indices_batching]
    window = [draw(st.integers(1, operand[d])) for d in offset]
    out_rank = n_batch + len(offset)
    offset_dims = sorted(draw(st.permutations(range(out_rank)))[:len(offset)])
    slices, wi, bi = [], 0, 0
    for d in range(out_rank):
        if d in offset_dims:
            slices.append(window[wi])
            wi += 1
        else:
            slices.append(batch_sizes[bi])
            bi += 1
    sizes = [1] * r
    for d, w in zip(offset, window):
        sizes[d] = w
    return operand, indices, slices, offset_dims, collapsed, batching, indices_batching, \
        index_map, ivd, sizes


def _ints(xs) -> str:
    return "[" + ", ".join(map(str, xs)) + "]"


@st.composite
def gather(draw):
    (operand, indices, slices, offset_dims, collapsed, batching, indices_batching, index_map,
     ivd, sizes) = draw(_indexing())
    it = t(indices).replace("f32", "i32")
    dn = (f"offset_dims = {_ints(offset_dims)}, collapsed_slice_dims = {_ints(collapsed)}, "
          f"operand_batching_dims = {_ints(batching)}, "
          f"start_indices_batching_dims = {_ints(indices_batching)}, "
          f"start_index_map = {_ints(index_map)}, index_vector_dim = {ivd}")
    text = (f'"stablehlo.gather"(%arg0, %arg1) {{dimension_numbers = #stablehlo.gather<{dn}>, '
            f"slice_sizes = array<i64: {', '.join(map(str, sizes))}>}} : "
            f"({t(operand)}, {it}) -> {t(slices)}")
    return op([t(operand), it], [t(slices)], text)


@st.composite
def scatter(draw):
    (operand, indices, updates, window_dims, inserted, batching, indices_batching, index_map,
     ivd, _) = draw(_indexing())
    it = t(indices).replace("f32", "i32")
    n = draw(st.integers(1, 2))
    combiner = draw(st.sampled_from(["add", "multiply", "maximum", "overwrite", "mixed",
                                     "swapped"]))
    block = ", ".join(f"%a{k}: tensor<f32>" for k in range(2 * n))
    lines, rets = "", []
    for k in range(n):
        if combiner == "overwrite":
            rets.append(f"%a{k + n}")
            continue
        name = ("add" if k == 0 else "multiply") if combiner == "mixed" else \
            ("minimum" if combiner == "swapped" else combiner)
        lhs, rhs = (f"%a{k + n}", f"%a{k}") if combiner == "swapped" else (f"%a{k}", f"%a{k + n}")
        lines += f"    %s{k} = stablehlo.{name} {lhs}, {rhs} : tensor<f32>\n"
        rets.append(f"%s{k}")
    dn = (f"update_window_dims = {_ints(window_dims)}, inserted_window_dims = {_ints(inserted)}, "
          f"input_batching_dims = {_ints(batching)}, "
          f"scatter_indices_batching_dims = {_ints(indices_batching)}, "
          f"scatter_dims_to_operand_dims = {_ints(index_map)}, index_vector_dim = {ivd}")
    args = [t(operand)] * n + [it] + [t(updates)] * n
    res = t(operand) if n == 1 else f"({', '.join([t(operand)] * n)})"
    text = (f'"stablehlo.scatter"({", ".join(f"%arg{i}" for i in range(len(args)))}) ({{\n'
            f"  ^bb0({block}):\n{lines}    stablehlo.return {', '.join(rets)} : "
            f"{', '.join(['tensor<f32>'] * n)}\n  }}) {{scatter_dimension_numbers = "
            f"#stablehlo.scatter<{dn}>}} : ({', '.join(args)}) -> {res}")
    return op(args, [t(operand)] * n, text)


STRATEGIES = {
    "elementwise": elementwise(), "dot_general": dot_general(), "transpose": transpose(),
    "broadcast_in_dim": broadcast_in_dim(), "reshape": reshape(), "reduce": reduce(),
    "concatenate": concatenate(), "slice": slice_(), "pad": pad(),
    "reduce_window": reduce_window(), "convolution": convolution(), "gather": gather(),
    "scatter": scatter(),
}


def _run(strategy, examples: int) -> None:
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(strategy)
    def inner(text):
        check(text)
    inner()


@pytest.mark.parametrize("kind", sorted(STRATEGIES))
def test_generated_ops_agree_with_shardy(kind):
    _run(STRATEGIES[kind], 25)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(STRATEGIES))
def test_generated_ops_agree_with_shardy_many(kind):
    _run(STRATEGIES[kind], 300)
