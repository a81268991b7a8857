"""Real programs lowered by JAX on a 2x4 CPU mesh, shared by the test files.

Each entry of ``PROGRAMS`` is a function returning the module text of
``jax.jit(f, ...).lower(...).as_text()``.  ``lowered(name)`` caches them.
The mesh has axes ``data`` (2) and ``model`` (4).
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

import lowering  # noqa: E402


def mesh():
    """The 2x4 ("data", "model") mesh over the 8 host devices."""
    devices = np.array(jax.devices()[:8]).reshape(2, 4)
    return jax.sharding.Mesh(devices, ("data", "model"))


def _ns(*spec):
    return NamedSharding(mesh(), P(*spec))


def _f32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def mlp() -> str:
    def f(x, w1, w2):
        return jax.nn.relu(x @ w1) @ w2
    return jax.jit(f, in_shardings=(_ns("data", None), _ns(None, "model"), _ns("model", None))
                   ).lower(_f32(16, 32), _f32(32, 64), _f32(64, 32)).as_text()


def while_loop() -> str:
    def f(x):
        return lax.fori_loop(0, 5, lambda i, c: jnp.sin(c) * 2.0, x)
    return jax.jit(f, in_shardings=_ns("data", "model")).lower(_f32(8, 16)).as_text()


def shard_map_program() -> str:
    def body(a, b):
        return lax.psum(a @ b, "model")
    sm = jax.shard_map(body, mesh=mesh(), in_specs=(P("data", "model"), P("model", None)),
                   out_specs=P("data", None))
    return jax.jit(sm).lower(_f32(8, 16), _f32(16, 8)).as_text()


def sharding_constraint() -> str:
    def f(x):
        y = jnp.tanh(x) + 1.0
        y = jax.lax.with_sharding_constraint(y, _ns(None, "model"))
        return y * 3.0
    return jax.jit(f).lower(_f32(8, 16)).as_text()


def attention() -> str:
    def f(x, wq, wk, wv, wo):
        q, k, v = x @ wq, x @ wk, x @ wv
        s = jnp.einsum("bqd,bkd->bqk", q, k) / 8.0
        p = jax.nn.softmax(s, axis=-1)
        return jnp.einsum("bqk,bkd->bqd", p, v) @ wo
    shard = (_ns("data", None, None), _ns(None, "model"), _ns(None, "model"),
             _ns(None, "model"), _ns("model", None))
    return jax.jit(f, in_shardings=shard).lower(
        _f32(4, 8, 16), _f32(16, 32), _f32(16, 32), _f32(16, 32), _f32(32, 16)).as_text()


def training_step() -> str:
    def loss(params, x, y):
        w1, w2 = params
        h = jax.nn.gelu(x @ w1)
        return jnp.mean((h @ w2 - y) ** 2)

    def step(params, x, y):
        g = jax.grad(loss)(params, x, y)
        return jax.tree_util.tree_map(lambda p, d: p - 0.1 * d, params, g)
    shard = ((_ns(None, "model"), _ns("model", None)), _ns("data", None), _ns("data", None))
    return jax.jit(step, in_shardings=shard).lower(
        (_f32(16, 64), _f32(64, 16)), _f32(8, 16), _f32(8, 16)).as_text()


def convnet() -> str:
    def f(x, k):
        y = lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = jax.nn.relu(y)
        return lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    return jax.jit(f, in_shardings=(_ns("data", None, None, None), _ns(None, None, None, "model"))
                   ).lower(_f32(4, 8, 8, 3), _f32(3, 3, 3, 8)).as_text()


def gather_scatter() -> str:
    def f(table, idx):
        rows = table[idx]
        return table.at[idx].add(rows * 2.0), rows
    return jax.jit(f, in_shardings=(_ns(None, "model"), _ns("data"))).lower(
        _f32(16, 8), jax.ShapeDtypeStruct((4,), jnp.int32)).as_text()


def reductions_reshapes() -> str:
    def f(x):
        y = x.reshape(8, 4, 16).sum(axis=1)
        z = jnp.transpose(y).reshape(4, 4, 8)
        return jnp.max(z, axis=0), jnp.cumsum(x, axis=1)
    return jax.jit(f, in_shardings=_ns("data", "model")).lower(_f32(32, 16)).as_text()


@jax.jit
def _tanh_dense(c, w):
    return jnp.tanh(c @ w)


@jax.jit
def _affine(c):
    return c * 2.0 + 1.0


def grad_scan_helpers() -> str:
    """The gradient of a ``lax.scan`` whose body calls two jitted helpers: the
    backward loop calls the helpers' transposes on the loop-invariant weight
    (semantics §11.26)."""
    def loss(w, x):
        def body(c, _):
            c = _affine(_tanh_dense(c, w))
            return c, c.sum()
        c, ys = lax.scan(body, x, None, length=3)
        return c.sum() + ys.sum()
    return jax.jit(jax.grad(loss), in_shardings=(_ns(None, "model"), _ns("data", None))).lower(
        _f32(16, 16), _f32(8, 16)).as_text()


PROGRAMS = {
    "mlp": mlp,
    "while_loop": while_loop,
    "shard_map": shard_map_program,
    "sharding_constraint": sharding_constraint,
    "attention": attention,
    "training_step": training_step,
    "convnet": convnet,
    "gather_scatter": gather_scatter,
    "reductions_reshapes": reductions_reshapes,
    "grad_scan_helpers": grad_scan_helpers,
}


def lowered(name: str) -> str:
    """The module text of program ``name`` (lowered once per test run, see ``lowering``)."""
    return lowering.once("jax_programs", name, PROGRAMS[name])
