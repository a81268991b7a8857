"""Helpers and JAX programs for the import-pass tests (``test_import_*.py``).

* Differential helpers: run a Shardy pass from jaxlib and the sdy-dl pass of
  the same name on the same text, and compare the modules as jaxlib prints
  them after a round-trip parse of both sides.
* JAX programs lowered on the 2x4 CPU mesh that exercise the import passes:
  loops (``scan``/``fori_loop``), conditionals (``cond``/``switch``), remat
  (``checkpoint``), ``shard_map`` fully and partially manual, chains of
  ``with_sharding_constraint``, ``shard_alike`` (sharding groups) and
  constants.  They reuse the mesh helpers of :mod:`jax_programs`;
  ``lowered(name)`` caches the module text.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil

import lowering

from sdy_dl.ir import parse_module_text
from oracle import normalize, shardy  # noqa: F401  (shared oracle helpers)
from sdy_dl.ir.context import mlir_context
from sdy_dl.passes import PASSES, PassOptions

# -- differential helpers ----------------------------------------------------------------


def _load_import_passes() -> None:
    """Register the import passes (only them: other pass modules may be in flux)."""
    import sdy_dl.passes.import_ as import_passes

    for info in pkgutil.iter_modules(import_passes.__path__):
        importlib.import_module(f"sdy_dl.passes.import_.{info.name}")


def ours(text: str, name: str, engine: str = "clingo", **options) -> str:
    """``text`` after sdy-dl's pass ``name`` with Shardy's pass ``options``."""
    _load_import_passes()
    module = parse_module_text(text, "<test>")
    out = PASSES[name].run(module, PassOptions.create(name, options, engine=engine))
    return normalize(out.print())


def assert_equal_modules(expected: str, actual: str) -> None:
    if expected != actual:
        diff = "\n".join(difflib.unified_diff(expected.splitlines(), actual.splitlines(),
                                              "shardy", "sdy-dl", lineterm="", n=2))
        raise AssertionError("modules differ:\n" + diff)


def check(text: str, name: str, pipeline: str | None = None, engine: str = "clingo",
          **extra) -> str:
    """Assert that sdy-dl's pass ``name`` prints exactly what Shardy's does."""
    expected = shardy(text, pipeline or f"sdy-{name}")
    actual = ours(text, name, engine=engine, **extra)
    assert_equal_modules(expected, actual)
    return actual


def shardy_fails(text: str, pipeline: str) -> str:
    """Shardy's error message when ``pipeline`` fails on ``text``."""
    from jaxlib.mlir import ir, passmanager

    with mlir_context():
        module = ir.Module.parse(text)
        try:
            passmanager.PassManager.parse(f"builtin.module({pipeline})").run(module.operation)
        except ir.MLIRError as e:
            return str(e)
    raise AssertionError(f"{pipeline} did not fail")


# -- JAX programs ----------------------------------------------------------------------------
# jax is imported inside the functions: jax_programs sets XLA_FLAGS first.

def _jax():
    from jax_programs import _f32, _ns, mesh  # noqa: F401  (sets XLA_FLAGS before jax)

    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import PartitionSpec as P
    return jax, jnp, lax, P, _f32, _ns, mesh


def scan_program() -> str:
    jax, jnp, lax, P, _f32, _ns, mesh = _jax()
    def f(xs, c0):
        def step(c, x):
            c = jnp.tanh(c * 2.0 + x)
            return c, c + 1.0
        return lax.scan(step, c0, xs)
    return jax.jit(f, in_shardings=(_ns(None, "data", "model"), _ns("data", None))).lower(
        _f32(5, 8, 16), _f32(8, 16)).as_text()


def fori_program() -> str:
    jax, jnp, lax, P, _f32, _ns, mesh = _jax()
    def f(x, w):
        def body(i, c):
            return jnp.maximum(c @ w, 0.0) + jnp.ones_like(c)
        return lax.fori_loop(0, 3, body, x)
    return jax.jit(f, in_shardings=(_ns("data", None), _ns(None, "model"))).lower(
        _f32(8, 16), _f32(16, 16)).as_text()


def cond_program() -> str:
    jax, jnp, lax, P, _f32, _ns, mesh = _jax()
    def f(p, x):
        return lax.cond(p > 0, lambda x: jnp.sin(x) * 3.0, lambda x: jnp.cos(x) + 1.0, x)
    return jax.jit(f, in_shardings=(None, _ns("data", "model"))).lower(
        jax.ShapeDtypeStruct((), jnp.int32), _f32(8, 16)).as_text()


def switch_program() -> str:
    jax, jnp, lax, P, _f32, _ns, mesh = _jax()
    def f(i, x, y):
        branches = [lambda x, y: x + y, lambda x, y: x * y, lambda x, y: x - 2.0 * y]
        return lax.switch(i, branches, x, y)
    return jax.jit(f, in_shardings=(None, _ns("data", None), _ns(None, "model"))).lower(
        jax.ShapeDtypeStruct((), jnp.int32), _f32(8, 16), _f32(8, 16)).as_text()


def checkpoint_program() -> str:
    jax, jnp, lax, P, _f32, _ns, mesh = _jax()
    def loss(w, x):
        h = jax.checkpoint(lambda w, x: jnp.tanh(x @ w) * 2.0)(w, x)
        return jnp.sum(h * h)
    return jax.jit(jax.grad(loss), in_shardings=(_ns(None, "model"), _ns("data", None))).lower(
        _f32(16, 32), _f32(8, 16)).as_text()


def shard_map_full() -> str:
    jax, jnp, lax, P, _f32, _ns, mesh = _jax()
    def body(a, b):
        c = jnp.ones_like(a) * 2.0
        return lax.psum((a + c) @ b, "model")
    sm = jax.shard_map(body, mesh=mesh(), in_specs=(P("data", "model"), P("model", None)),
                       out_specs=P("data", None))
    return jax.jit(sm).lower(_f32(8, 16), _f32(16, 8)).as_text()


def shard_map_partial() -> str:
    jax, jnp, lax, P, _f32, _ns, mesh = _jax()
    def body(a):
        return lax.psum(a * 2.0, "model")
    sm = jax.shard_map(body, mesh=mesh(), in_specs=P(None, "model"), out_specs=P(None, None),
                       axis_names={"model"})

    def f(x):
        y = jax.lax.with_sharding_constraint(x + 1.0, _ns("data", None))
        return sm(y)
    return jax.jit(f).lower(_f32(8, 16)).as_text()


def constraint_chain() -> str:
    jax, jnp, lax, P, _f32, _ns, mesh = _jax()
    def f(x, y):
        a = x * 2.0
        a = jax.lax.with_sharding_constraint(a, _ns("data", None))
        a = jax.lax.with_sharding_constraint(a, _ns("data", "model"))
        b = jax.lax.with_sharding_constraint(y + 1.0, _ns(None, "model"))
        c = jax.lax.with_sharding_constraint(b, _ns(None, "model"))
        return a + x * 3.0, c * b, jnp.tanh(x * 2.0)
    return jax.jit(f).lower(_f32(8, 16), _f32(8, 16)).as_text()


def shard_alike_program() -> str:
    jax, jnp, lax, P, _f32, _ns, mesh = _jax()
    from jax.experimental.shard_alike import shard_alike

    def f(x, y, z):
        a, b = shard_alike(x * 2.0, y + 1.0)
        c, d = shard_alike(b, z * 3.0)
        return a + d, c
    return jax.jit(f, in_shardings=(_ns("data", None), None, None)).lower(
        _f32(8, 16), _f32(8, 16), _f32(8, 16)).as_text()


def constants_program() -> str:
    jax, jnp, lax, P, _f32, _ns, mesh = _jax()
    def f(x):
        c = jnp.arange(16, dtype=jnp.float32).reshape(1, 16)
        s = jnp.float32(2.0)
        return x * c + s, (x + c) * s, jnp.full((8, 16), 3.0) + x
    return jax.jit(f, in_shardings=_ns("data", "model")).lower(_f32(8, 16)).as_text()


def nested_jit() -> str:
    jax, jnp, lax, P, _f32, _ns, mesh = _jax()

    @jax.jit
    def table():
        return jnp.arange(16, dtype=jnp.float32).reshape(1, 16) * 0.5

    inner = jax.jit(lambda x: jnp.sin(x) + 1.0, out_shardings=_ns("data", "model"))

    def f(x):
        y = inner(x) + table()
        return inner(y) * table(), y
    return jax.jit(f, in_shardings=_ns("data", None)).lower(_f32(8, 16)).as_text()


PROGRAMS = {
    "scan": scan_program,
    "fori_loop": fori_program,
    "cond": cond_program,
    "switch": switch_program,
    "checkpoint": checkpoint_program,
    "shard_map_full": shard_map_full,
    "shard_map_partial": shard_map_partial,
    "constraint_chain": constraint_chain,
    "shard_alike": shard_alike_program,
    "constants": constants_program,
    "nested_jit": nested_jit,
}


def lowered(name: str) -> str:
    """The module text of program ``name`` (lowered once per test run, see ``lowering``)."""
    return lowering.once("import_programs", name, PROGRAMS[name])
