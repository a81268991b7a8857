"""Real JAX programs that call the same jitted helper several times (the
lowered module keeps one function and several ``func.call`` ops), for the
``dedup-functions-fully`` tests.  Lowered on the 2x4 ("data", "model") mesh of
``jax_programs``; ``lowered(name)`` caches them (``lowering``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

import lowering
from jax_programs import _affine as _scale, _f32, _ns, _tanh_dense as _dense


@jax.jit
def _constrained(x):
    y = jnp.sin(x)
    return jax.lax.with_sharding_constraint(y, _ns(None, "model"))


def repeated_dense() -> str:
    """One helper called three times on differently sharded operands."""
    def f(x, w1, w2, w3):
        return _dense(_dense(_dense(x, w1), w2), w3)
    return jax.jit(f, in_shardings=(_ns("data", None), _ns(None, "model"), _ns("model", None),
                                    None)).lower(_f32(16, 32), _f32(32, 32), _f32(32, 32),
                                                 _f32(32, 32)).as_text()


def helper_with_constraint() -> str:
    """A helper with a sharding constraint inside, called on two inputs."""
    def f(a, b):
        return _constrained(a) + _constrained(b).T
    return jax.jit(f, in_shardings=(_ns("data", None), None)).lower(
        _f32(8, 8), _f32(8, 8)).as_text()


def scan_calls() -> str:
    """A scan whose body calls a helper that calls another helper."""
    @jax.jit
    def step(c, x):
        return _scale(c) + _scale(x)

    def f(xs, c0):
        return lax.scan(lambda c, x: (step(c, x), c), c0, xs)
    return jax.jit(f, in_shardings=(_ns(None, "data", "model"), None)).lower(
        _f32(4, 8, 16), _f32(8, 16)).as_text()


def grad_of_calls() -> str:
    """The gradient of a loss that calls the same helper twice."""
    def loss(w, x):
        return jnp.sum(_dense(_dense(x, w), w) ** 2)
    return jax.jit(jax.grad(loss), in_shardings=(_ns(None, "model"), _ns("data", None))).lower(
        _f32(16, 16), _f32(8, 16)).as_text()


PROGRAMS = {"repeated_dense": repeated_dense, "helper_with_constraint": helper_with_constraint,
            "scan_calls": scan_calls, "grad_of_calls": grad_of_calls}


def lowered(name: str) -> str:
    """The module text of program ``name`` (lowered once per test run)."""
    return lowering.once("call_programs", name, PROGRAMS[name])
