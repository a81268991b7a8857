"""JAX programs whose collectives and memory the comms/memory tests check, lowered on
the 2x4 ("data", "model") CPU mesh of ``jax_programs``, and XLA's own view of them.

``PROGRAMS[name]()`` returns the ``jax.jit(...).lower(...)`` object (``lowered_text``
caches its module text per run; ``compiled`` compiles it once per process).
:func:`xla_collectives` reads the collectives of ``compiled.as_text()``.
"""

from __future__ import annotations

import functools
import math
import re

import jax_programs  # noqa: F401  (sets XLA_FLAGS and JAX_PLATFORMS before jax loads)
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

import lowering  # noqa: E402


def _ns(*spec):
    return NamedSharding(jax_programs.mesh(), P(*spec))


def _f32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def fsdp_gather():
    """FSDP: the weight is sharded on "data" and gathered whole before its matmul."""
    def f(x, w):
        w = jax.lax.with_sharding_constraint(w, _ns(None, None))
        return jnp.tanh(x @ w)
    return jax.jit(f, in_shardings=(_ns("data", None), _ns("data", None))).lower(
        _f32(16, 32), _f32(32, 64))


def dp_gradient():
    """Data parallelism: the gradient of a replicated weight is all-reduced over "data"."""
    def step(w, x, y):
        g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
        return w - 0.1 * g
    return jax.jit(step, in_shardings=(_ns(None, None), _ns("data", None), _ns("data", None)),
                   out_shardings=_ns(None, None)).lower(_f32(32, 16), _f32(16, 32), _f32(16, 16))


def megatron_mlp():
    """Megatron: column-parallel then row-parallel matmul, all-reduced over "model"."""
    def f(x, w1, w2):
        return jax.nn.relu(x @ w1) @ w2
    return jax.jit(f, in_shardings=(_ns("data", None), _ns(None, "model"), _ns("model", None)),
                   out_shardings=_ns("data", None)).lower(_f32(16, 32), _f32(32, 64), _f32(64, 32))


def resharding_constraint():
    """A constraint moving "model" from dim 0 to dim 1: an all-to-all."""
    def f(x):
        y = jax.lax.with_sharding_constraint(jnp.sin(x), _ns(None, "model"))
        return jnp.cos(y)
    return jax.jit(f, in_shardings=_ns("model", None), out_shardings=_ns(None, "model")).lower(
        _f32(16, 32))


def lm_head():
    """A language-model head whose [vocab, d] weight is left replicated on every
    device (the tt-xla#6055 situation)."""
    def f(tokens, emb, w_out):
        h = jnp.tanh(emb[tokens])
        return h @ w_out.T
    return jax.jit(f, in_shardings=(_ns("data"), _ns(None, "model"), _ns(None, None))).lower(
        jax.ShapeDtypeStruct((8,), jnp.int32), _f32(512, 64), _f32(1024, 64))


def manual_collectives():
    """A shard_map over both axes whose body writes its own collectives: a psum over
    "model", a ppermute over "data" and an all_gather over "model"."""
    from jax import lax

    def body(x, w):
        h = lax.psum(jnp.tanh(x @ w), "model")
        h = lax.ppermute(h, "data", perm=[(0, 1), (1, 0)])
        return lax.all_gather(h, "model", axis=1, tiled=True)
    sm = jax.shard_map(body, mesh=jax_programs.mesh(), in_specs=(P("data", "model"), P("model", None)),
                       out_specs=P("data", None), check_vma=False)
    return jax.jit(sm, in_shardings=(_ns("data", "model"), _ns("model", None))).lower(
        _f32(16, 32), _f32(32, 8))


PROGRAMS = {"fsdp_gather": fsdp_gather, "dp_gradient": dp_gradient,
            "megatron_mlp": megatron_mlp, "resharding_constraint": resharding_constraint,
            "lm_head": lm_head, "manual_collectives": manual_collectives}


def lowered_text(name: str) -> str:
    return lowering.once("comms_programs", name, lambda: PROGRAMS[name]().as_text())


@functools.lru_cache(maxsize=None)
def compiled(name: str):
    return PROGRAMS[name]().compile()


# -- XLA's collectives ---------------------------------------------------------------------

_ELEMENT_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
                  "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
_SHAPE = re.compile(r"\b([a-z]+\d*)\[([\d,]*)\]")
_INSTR = re.compile(r"^\s*(?:ROOT )?%\S+ = (.+?) (all-gather|all-reduce|reduce-scatter|all-to-all|"
                    r"collective-permute)(?:-start)?\((.*)$")


def _shape_bytes(text: str) -> int:
    return sum(math.prod(int(d) for d in dims.split(",") if d) * _ELEMENT_BYTES[t]
               for t, dims in _SHAPE.findall(text) if t in _ELEMENT_BYTES)


def _group_size(rest: str, operand_shapes: dict, line: str) -> int:
    m = re.search(r"replica_groups=mesh\[([^\]]*)\].*? \{('[^}]*)\}", rest)
    if m:
        sizes = dict(re.findall(r"'([^']+)'=(\d+)", m.group(1)))
        return math.prod(int(sizes[a]) for a in re.findall(r"'([^']+)'", m.group(2)))
    m = re.search(r"replica_groups=\{\{([\d,]*)\}", rest)
    if m:
        return len(m.group(1).split(","))
    m = re.search(r"replica_groups=\[([\d,]+)\]<=", rest)
    if m:
        return int(m.group(1).split(",")[-1])
    raise ValueError(f"no replica groups in {line}")


def xla_collectives(hlo_text: str) -> list[dict]:
    """The collectives of a compiled module's text: kind (as sdy-dl names kinds),
    devices n, the per-device bytes of their result and operands, and the bytes one
    device sends by the same ring formulas as ``sdy_dl.audit.cost_model``."""
    shapes: dict[str, str] = {}
    out = []
    for line in hlo_text.splitlines():
        d = re.match(r"^\s*(?:ROOT )?(%\S+) = (.+?) [a-z\-]+\(", line)
        if d:
            shapes[d.group(1)] = d.group(2)
        m = _INSTR.match(line)
        if not m:
            continue
        result, kind, rest = m.group(1), m.group(2), m.group(3)
        operands = re.findall(r"%[\w.\-]+", rest.split(")")[0])
        in_bytes = sum(_shape_bytes(shapes.get(o, "")) for o in operands)
        out_bytes = _shape_bytes(result)
        kind = kind.replace("-", "_")
        if kind == "collective_permute":
            pairs = re.findall(r"\{(\d+),(\d+)\}", rest.split("source_target_pairs=")[1])
            n = 2 if any(a != b for a, b in pairs) else 1
            sent = in_bytes if n > 1 else 0
        else:
            n = _group_size(rest, shapes, line)
            sent = {"all_gather": (n - 1) * in_bytes, "reduce_scatter": (n - 1) * out_bytes,
                    "all_reduce": round(2 * (n - 1) * in_bytes / n),
                    "all_to_all": round((n - 1) * in_bytes / n)}[kind]
        out.append({"kind": kind, "devices": n, "in_bytes": in_bytes, "out_bytes": out_bytes,
                    "bytes": sent, "line": line.strip()})
    return out
