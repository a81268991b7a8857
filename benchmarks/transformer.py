"""Benchmark: aggressive propagation of N-layer transformer training steps, sdy-dl vs Shardy.

Lowers a training step with JAX (batch on "data", Megatron-style model
sharding on "model", 2x4 CPU mesh) for several layer counts, then times, in
one process and one run, module text → printed module text (parse + pass +
print) for Shardy's ``sdy-aggressive-propagate`` and for sdy-dl's
``aggressive-propagate`` with each engine, and prints the ratio per size.

    python benchmarks/transformer.py --layers 1 12 48 --engines clingo souffle
"""

from __future__ import annotations

import argparse
import os
import shutil
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

D_MODEL, D_FF, HEADS, SEQ, BATCH = 64, 256, 4, 32, 8


def transformer_step(layers: int) -> str:
    """The module text of one SGD step of a ``layers``-layer transformer."""
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))

    def ns(*spec):
        return NamedSharding(mesh, P(*spec))

    def layer(x, p):
        h = x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)
        q = (h @ p["wq"]).reshape(BATCH, SEQ, HEADS, -1)
        k = (h @ p["wk"]).reshape(BATCH, SEQ, HEADS, -1)
        v = (h @ p["wv"]).reshape(BATCH, SEQ, HEADS, -1)
        a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / 4.0, axis=-1)
        o = jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(BATCH, SEQ, D_MODEL)
        x = x + o @ p["wo"]
        h = x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)
        return x + jax.nn.gelu(h @ p["w1"]) @ p["w2"]

    def loss(params, x):
        for p in params:
            x = layer(x, p)
        return jnp.mean(x * x)

    def step(params, x):
        grads = jax.grad(loss)(params, x)
        return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)

    def f32(*shape):
        return jax.ShapeDtypeStruct(shape, jnp.float32)

    params = [{"wq": f32(D_MODEL, D_MODEL), "wk": f32(D_MODEL, D_MODEL), "wv": f32(D_MODEL, D_MODEL),
               "wo": f32(D_MODEL, D_MODEL), "w1": f32(D_MODEL, D_FF), "w2": f32(D_FF, D_MODEL)}
              for _ in range(layers)]
    col, row = ns(None, "model"), ns("model", None)
    shardings = [{"wq": col, "wk": col, "wv": col, "wo": row, "w1": col, "w2": row}
                 for _ in range(layers)]
    return jax.jit(step, in_shardings=(shardings, ns("data", None, None))).lower(
        params, f32(BATCH, SEQ, D_MODEL)).as_text()


def time_shardy(text: str) -> float:
    from jaxlib.mlir import ir, passmanager

    from sdy_dl.ir.context import mlir_context

    start = time.perf_counter()
    with mlir_context():
        module = ir.Module.parse(text)
        passmanager.PassManager.parse("builtin.module(sdy-aggressive-propagate)").run(module.operation)
        str(module)
    return time.perf_counter() - start


ENGINES = {  # benchmark name -> (engine, compiled)
    "clingo": ("clingo", False),
    "souffle": ("souffle", False),
    "souffle-compiled": ("souffle", True),
}


def time_sdy_dl(text: str, engine: str) -> float:
    from sdy_dl.ir import parse_module_text
    from sdy_dl.passes import get_pass
    from sdy_dl.pipeline import make_options

    name, compiled = ENGINES[engine]
    start = time.perf_counter()
    module = parse_module_text(text, "<bench>")
    get_pass("aggressive-propagate").run(module, make_options(engine=name, compiled=compiled)).print()
    return time.perf_counter() - start


def warm_up(engine: str) -> None:
    """Compile (and cache) the Soufflé programs before timing, like a second run would."""
    if ENGINES[engine][1]:
        time_sdy_dl(transformer_step(1), engine)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[4, 56, 220])
    parser.add_argument("--engines", nargs="+", default=["clingo", "souffle-compiled"],
                        choices=sorted(ENGINES))
    args = parser.parse_args()
    engines = [e for e in args.engines if not e.startswith("souffle") or shutil.which("souffle")]
    for engine in engines:
        warm_up(engine)
    print(f"{'layers':>6} {'ops':>7} {'shardy s':>9} " +
          " ".join(f"{e + ' s':>10} {'ratio':>7}" for e in engines))
    for n in args.layers:
        text = transformer_step(n)
        ops = sum(1 for line in text.splitlines() if " = " in line or line.strip().startswith(("stablehlo.", "sdy.")))
        shardy = min(time_shardy(text) for _ in range(3))
        cells = []
        for engine in engines:
            t = time_sdy_dl(text, engine)
            cells.append(f"{t:>10.2f} {t / shardy:>7.0f}x")
        print(f"{n:>6} {ops:>7} {shardy:>9.3f} " + " ".join(cells), flush=True)


if __name__ == "__main__":
    main()
