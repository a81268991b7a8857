"""JAX programs whose printed modules reuse names: several loops, conds, calls and
``shard_map``s in one function, lowered on the 2x4 ("data", "model") CPU mesh.

MLIR's printer numbers the values of sibling regions alike (a while's ``cond``
and ``do``, a case's branches, two loops one after the other), so these
modules print one ``%N`` or ``%iterArg`` for several values: the names the
audit gives must still tell every value apart.  ``lowered(name)`` caches them.
"""

from __future__ import annotations

import jax_programs  # sets the 8 host devices before jax is imported
import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

import lowering

_ns, _f32, mesh = jax_programs._ns, jax_programs._f32, jax_programs.mesh


def _shift(a):
    """``a`` passed on to the next "model" shard (inside a shard_map)."""
    return lax.ppermute(a, "model", perm=[(i, (i + 1) % 4) for i in range(4)])


def two_loops() -> str:
    """A fori_loop, then a while_loop, then a scan: three loops in main."""
    def f(x, w):
        a = lax.fori_loop(0, 3, lambda i, c: jnp.tanh(c @ w), x)
        b = lax.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, jnp.sin(c[1]) * 2.0), (0, a))[1]
        c, ys = lax.scan(lambda c, r: (c + r, c * r), b[0], b)
        return c, ys
    return jax.jit(f, in_shardings=(_ns("data", "model"), _ns("model", None))).lower(
        _f32(8, 16), _f32(16, 16)).as_text()


def cond() -> str:
    """A lax.cond whose branches compute on sharded operands."""
    def f(p, x, w):
        y = lax.cond(p + x.sum() > 0, lambda x, w: jnp.tanh(x @ w), lambda x, w: (x * 2.0) @ w, x, w)
        return y + 1.0
    return jax.jit(f, in_shardings=(_ns(), _ns("data", None), _ns(None, "model"))).lower(
        jax.ShapeDtypeStruct((), jnp.float32), _f32(8, 16), _f32(16, 32)).as_text()


def switch_loops() -> str:
    """A three-way lax.switch whose branches hold loops."""
    def f(i, x):
        branches = [lambda x: lax.fori_loop(0, 2, lambda k, c: c * 2.0, x),
                    lambda x: lax.fori_loop(0, 3, lambda k, c: jnp.sin(c), x),
                    lambda x: x + 1.0]
        return lax.switch(i, branches, x)
    return jax.jit(f, in_shardings=(_ns(), _ns("data", "model"))).lower(
        jax.ShapeDtypeStruct((), jnp.int32), _f32(8, 16)).as_text()


def nested_while() -> str:
    """A while loop inside a while loop, twice."""
    def inner(c):
        return lax.fori_loop(0, 2, lambda k, d: jnp.cos(d) + c, c)

    def f(x):
        y = lax.fori_loop(0, 3, lambda i, c: inner(c), x)
        return lax.fori_loop(0, 2, lambda i, c: inner(c) * 0.5, y)
    return jax.jit(f, in_shardings=_ns("data", "model")).lower(_f32(8, 16)).as_text()


def nested_jit_loops() -> str:
    """A jitted helper with a loop, called twice (a call of a function with regions)."""
    @jax.jit
    def helper(c, w):
        return lax.fori_loop(0, 2, lambda i, c: jnp.tanh(c @ w), c)

    def f(x, w):
        return helper(helper(x, w) * 2.0, w)
    return jax.jit(f, in_shardings=(_ns("data", None), _ns(None, "model"))).lower(
        _f32(8, 16), _f32(16, 16)).as_text()


def shard_map_loops() -> str:
    """Two shard_maps, each with a loop inside, and a loop between them."""
    def body(a):
        return lax.fori_loop(0, 2, lambda i, c: _shift(c) * 0.25, a)
    sm = jax.shard_map(body, mesh=mesh(), in_specs=P("data", "model"), out_specs=P("data", "model"))

    def f(x):
        y = sm(x)
        y = lax.fori_loop(0, 2, lambda i, c: jnp.sin(c), y)
        return sm(y)
    return jax.jit(f, in_shardings=_ns("data", "model")).lower(_f32(8, 16)).as_text()


def shard_map_cond() -> str:
    """A cond inside a shard_map, and a cond outside it."""
    def body(p, a):
        return lax.cond(p[0] > 0, lambda a: a * 2.0, lambda a: _shift(a), a)
    sm = jax.shard_map(body, mesh=mesh(), in_specs=(P(), P("data", "model")),
                       out_specs=P("data", "model"))

    def f(p, x):
        y = sm(p, x)
        return lax.cond(p[0] > 1, lambda y: jnp.tanh(y), lambda y: y - 1.0, y)
    return jax.jit(f, in_shardings=(_ns(), _ns("data", "model"))).lower(
        _f32(1), _f32(8, 16)).as_text()


def scan_grad() -> str:
    """The gradient of a scan: a forward and a backward loop."""
    def loss(w, xs):
        def step(c, x):
            c = jnp.tanh(c @ w + x)
            return c, c.sum()
        c, ys = lax.scan(step, xs[0], xs)
        return (c * c).sum() + ys.sum()

    def f(w, xs):
        return jax.grad(loss)(w, xs)
    return jax.jit(f, in_shardings=(_ns(None, "model"), _ns(None, "data", None))).lower(
        _f32(16, 16), _f32(4, 8, 16)).as_text()


def cond_in_loop() -> str:
    """A cond in a loop body, a loop in a cond branch."""
    def f(x, w):
        def body(i, c):
            return lax.cond(i % 2 == 0, lambda c: c @ w, lambda c: jnp.sin(c), c)
        y = lax.fori_loop(0, 4, body, x)
        return lax.cond(y.sum() > 0, lambda y: lax.fori_loop(0, 2, lambda i, c: c * 2.0, y),
                        lambda y: y, y)
    return jax.jit(f, in_shardings=(_ns("data", None), _ns(None, "model"))).lower(
        _f32(8, 16), _f32(16, 16)).as_text()


def constraints_in_loops() -> str:
    """Sharding constraints inside two loops and a cond (annotations in regions)."""
    def f(x):
        def body(i, c):
            return jax.lax.with_sharding_constraint(jnp.sin(c), _ns("data", "model"))
        y = lax.fori_loop(0, 2, body, x)
        y = lax.fori_loop(0, 2, lambda i, c: jax.lax.with_sharding_constraint(c * 2.0, _ns(None, "model")), y)
        return lax.cond(y.sum() > 0, lambda y: jax.lax.with_sharding_constraint(y, _ns("data")),
                        lambda y: y + 1.0, y)
    return jax.jit(f).lower(_f32(8, 16)).as_text()


def training_loop() -> str:
    """A few SGD steps of an MLP in a fori_loop, with a nested jit and a shard_map."""
    def dense(w, x):
        return jnp.tanh(x @ w)

    def loss(params, x):
        h = jax.jit(dense)(params[0], x)
        return (jax.jit(dense)(params[1], h) ** 2).mean()

    def norm(g):
        return g / (lax.psum(jnp.abs(g).sum(), "model") + 1.0)
    sm = jax.shard_map(norm, mesh=mesh(), in_specs=P(None, "model"), out_specs=P(None, "model"))

    def f(params, x):
        def step(i, params):
            grads = jax.grad(loss)(params, x)
            return [p - 0.1 * sm(g) for p, g in zip(params, grads)]
        return lax.fori_loop(0, 3, step, params)
    return jax.jit(f, in_shardings=([_ns(None, "model"), _ns("model", None)], _ns("data", None))
                   ).lower([_f32(16, 32), _f32(32, 16)], _f32(8, 16)).as_text()


PROGRAMS = {
    "two_loops": two_loops,
    "cond": cond,
    "switch_loops": switch_loops,
    "nested_while": nested_while,
    "nested_jit_loops": nested_jit_loops,
    "shard_map_loops": shard_map_loops,
    "shard_map_cond": shard_map_cond,
    "scan_grad": scan_grad,
    "cond_in_loop": cond_in_loop,
    "constraints_in_loops": constraints_in_loops,
    "training_loop": training_loop,
}


def lowered(name: str) -> str:
    """The module text of program ``name`` (lowered once per test run, see ``lowering``)."""
    return lowering.once("naming_programs", name, PROGRAMS[name])
