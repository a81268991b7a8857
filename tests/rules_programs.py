"""Real JAX programs (no shardings) whose ops the rule tests compare with Shardy.

Each entry of ``RULE_PROGRAMS`` returns the text of
``jax.jit(f).lower(*args).as_text()``; ``lowered(name)`` caches it.  Together
they cover the op kinds of Shardy's registry as JAX emits them: a transformer
training step, a convnet with pooling and its gradient, gather/scatter
indexing, sort, FFT, cumulative ops, top-k, control flow and einsums.
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import lowering  # noqa: E402


def _f32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def _i32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.int32)


def _lower(f, *args) -> str:
    return jax.jit(f).lower(*args).as_text()


def transformer_training_step() -> str:
    """One SGD step of a pre-norm transformer block (attention + MLP)."""
    def layer_norm(x, g):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) * lax.rsqrt(var + 1e-5) * g

    def block(p, x):
        h = layer_norm(x, p["g1"])
        q = jnp.einsum("bsd,dhk->bshk", h, p["wq"])
        k = jnp.einsum("bsd,dhk->bshk", h, p["wk"])
        v = jnp.einsum("bsd,dhk->bshk", h, p["wv"])
        s = jnp.einsum("bqhk,bshk->bhqs", q, k) / 4.0
        mask = jnp.tril(jnp.ones((x.shape[1], x.shape[1]), bool))
        s = jnp.where(mask, s, -1e9)
        a = jnp.einsum("bhqs,bshk->bqhk", jax.nn.softmax(s, -1), v)
        x = x + jnp.einsum("bqhk,hkd->bqd", a, p["wo"])
        h = layer_norm(x, p["g2"])
        return x + jax.nn.gelu(h @ p["w1"]) @ p["w2"]

    def loss(p, x, y):
        logits = block(p, x) @ p["emb"].T
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[..., None], -1))

    def step(p, x, y):
        grads = jax.grad(loss)(p, x, y)
        return jax.tree_util.tree_map(lambda w, g: w - 0.01 * g, p, grads)

    d, h, k, f, vocab = 16, 2, 8, 32, 24
    params = {"g1": _f32(d), "g2": _f32(d), "wq": _f32(d, h, k), "wk": _f32(d, h, k),
              "wv": _f32(d, h, k), "wo": _f32(h, k, d), "w1": _f32(d, f), "w2": _f32(f, d),
              "emb": _f32(vocab, d)}
    return _lower(step, params, _f32(2, 8, d), _i32(2, 8))


def convnet_training_step() -> str:
    """Conv layers (plain, strided, depthwise), max/avg pooling and their gradients."""
    def net(p, x):
        y = lax.conv_general_dilated(x, p["k1"], (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = jax.nn.relu(y)
        y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        y = lax.conv_general_dilated(y, p["k2"], (2, 2), ((1, 1), (1, 1)),
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = lax.conv_general_dilated(y, p["dw"], (1, 1), "SAME", feature_group_count=8,
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = lax.reduce_window(y, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "SAME") / 4.0
        return y.mean(axis=(1, 2)) @ p["fc"]

    def step(p, x, labels):
        def loss(p):
            return -jnp.mean(jax.nn.log_softmax(net(p, x))[jnp.arange(4), labels])
        g = jax.grad(loss)(p)
        return jax.tree_util.tree_map(lambda w, d: w - 0.1 * d, p, g)

    params = {"k1": _f32(3, 3, 3, 8), "k2": _f32(3, 3, 8, 8), "dw": _f32(3, 3, 1, 8),
              "fc": _f32(8, 10)}
    return _lower(step, params, _f32(4, 16, 16, 3), _i32(4))


def indexing() -> str:
    """Gathers and scatters: take, fancy indexing, .at[] updates, batched (vmap) gathers."""
    def f(table, idx, idx2, upd):
        rows = table[idx]
        cols = jnp.take(table, idx2, axis=1)
        t = table.at[idx].add(rows * 2.0)
        t = t.at[idx, 0].set(1.0)
        t = t.at[:, idx2].max(cols)
        t = t.at[idx].mul(2.0)
        batched = jax.vmap(lambda r, i: r[i])(table[:4], idx2[:, :2] % 4)
        dyn = lax.dynamic_slice(table, (idx[0], 0), (2, 8))
        t = lax.dynamic_update_slice(t, upd, (idx[1], 0))
        t = lax.dynamic_update_slice(t, upd, (3, 0))
        return t, rows, cols, batched, dyn

    return _lower(f, _f32(16, 8), _i32(4), _i32(4, 3), _f32(2, 8))


def sort_topk_cumulative() -> str:
    """Sort, argsort, multi-operand sort, top_k, cumulative sums/products/max."""
    def f(x, y):
        s = jnp.sort(x, axis=-1)
        a = jnp.argsort(x, axis=0)
        ks, vs = lax.sort((x, y), dimension=1, num_keys=1)
        tv, ti = lax.top_k(x, 3)
        return (s, a, ks, vs, tv, ti, jnp.cumsum(x, axis=1), jnp.cumprod(x, axis=0),
                lax.cummax(x, axis=1), jnp.sort(x[:1], axis=1))

    return _lower(f, _f32(8, 16), _f32(8, 16))


def fft_program() -> str:
    """Complex and real FFTs, forward and inverse, 1-D and 2-D."""
    def f(x):
        c = jnp.fft.fft(x.astype(jnp.complex64))
        r = jnp.fft.rfft(x, axis=-1)
        i = jnp.fft.irfft(r, n=16, axis=-1)
        two = jnp.fft.fft2(x.astype(jnp.complex64))
        return c, r, i, jnp.fft.ifft(two), jnp.fft.rfft2(x)

    return _lower(f, _f32(4, 8, 16))


def control_flow() -> str:
    """fori_loop/while, scan, cond and switch with non-trivial bodies."""
    def f(x, n, w):
        def body(i, c):
            return jnp.tanh(c @ w) + i
        y = lax.fori_loop(0, n, body, x)
        y = lax.cond(n > 3, lambda v: v * 2.0, lambda v: jnp.flip(v, 0), y)
        z = lax.switch(n % 3, [jnp.sin, jnp.cos, lambda v: v.T @ v[:, :8].T], y)
        carry, ys = lax.scan(lambda c, r: (c + r.sum(), r * c), 0.0, y)
        return z, carry, ys

    return _lower(f, _f32(8, 8), jax.ShapeDtypeStruct((), jnp.int32), _f32(8, 8))


def einsums() -> str:
    """Einsums and dots of many shapes: batch, outer, trace, vector, matrix-vector."""
    def f(a, b, v, m):
        return (jnp.einsum("bij,bjk->bik", a, b), jnp.einsum("i,j->ij", v, v),
                jnp.einsum("ii->i", m), jnp.einsum("bij,j->bi", a, v[:4]),
                jnp.dot(v, v), jnp.dot(m, v), jnp.dot(v, m), m @ m,
                jnp.einsum("abc,cba->b", a, b.transpose(2, 1, 0).reshape(4, 4, 3)),
                jnp.tensordot(a, b, axes=([1, 2], [2, 1])))

    return _lower(f, _f32(3, 4, 4), _f32(3, 4, 4), _f32(8), _f32(8, 8))


def shapes_misc() -> str:
    """Pad, concatenate (of slices and not), reverse, bitcast, clamp, select, broadcasting,
    reshapes that split/merge dims, iota, convert, rng_bit_generator, collectives-free."""
    def f(x, y, key):
        p = jnp.pad(x, ((1, 2), (0, 3)))
        p2 = lax.pad(x, 0.0, ((1, -1, 0), (2, 0, 1)))
        c1 = jnp.concatenate([x[:, :4], x[:, 4:]], axis=1)
        c2 = jnp.concatenate([x, y], axis=0)
        c3 = jnp.concatenate([x[:2], x], axis=0)
        r = jnp.roll(x, 3, axis=1)
        b = lax.bitcast_convert_type(x, jnp.int32)
        b2 = lax.bitcast_convert_type(x, jnp.uint8)                 # adds a minor dim of 4
        b3 = lax.bitcast_convert_type(b2, jnp.float32)               # removes it
        cl = jnp.clip(x, -1.0, 1.0)
        cl2 = lax.clamp(y, x, y + 1.0)
        s = jnp.where(x > 0, x, y)
        rs = x.reshape(4, 2, 8).transpose(1, 0, 2).reshape(2, 32)
        bc = jnp.broadcast_to(x[:, :1], (8, 8)) + jnp.arange(8.0)
        bits = jax.random.bits(key, (4, 4))
        return p, p2, c1, c2, c3, r, b, b3, cl, cl2, s, rs, bc, bits, jnp.flip(x, (0, 1))

    key = jax.random.key(0, impl="rbg")
    return _lower(f, _f32(8, 8), _f32(8, 8), key)


def linalg() -> str:
    """Cholesky and triangular solves (on CPU: LAPACK custom calls, which have no rule)."""
    def f(a, b):
        spd = a @ a.T + 8.0 * jnp.eye(8)
        l_ = lax.linalg.cholesky(spd)
        x1 = lax.linalg.triangular_solve(l_, b, left_side=True, lower=True)
        x2 = lax.linalg.triangular_solve(l_, b.T, left_side=False, lower=True, transpose_a=True)
        return l_, x1, x2

    return _lower(f, _f32(8, 8), _f32(8, 4))


RULE_PROGRAMS = {
    "transformer_training_step": transformer_training_step,
    "convnet_training_step": convnet_training_step,
    "indexing": indexing,
    "sort_topk_cumulative": sort_topk_cumulative,
    "fft": fft_program,
    "control_flow": control_flow,
    "einsums": einsums,
    "shapes_misc": shapes_misc,
    "linalg": linalg,
}


def lowered(name: str) -> str:
    """The module text of program ``name`` (lowered once per test run, see ``lowering``)."""
    return lowering.once("rules_programs", name, RULE_PROGRAMS[name])
