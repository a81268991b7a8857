"""Real JAX programs the audit's answers are checked on (``test_audit_answers``):
loops over layers calling jitted functions, remat, nested scans, a while loop
with a sharding constraint, a partly manual ``shard_map`` (with and without a call in its body), reshapes of
sharded dims, a mixture-of-experts layer, attention with heads split out of the hidden
dim, an embedding lookup with its scatter-add gradient, an embedding lookup whose
table and ids contend for one axis feeding a softmax, ``vmap`` of a per-example
gradient, a ``custom_vjp``, a convolution's gradient, ``top_k`` and ``sort``,
``cumsum`` along sharded dims, donated arguments with ``P(None)`` and
``P(("data", "model"))``, a ``shard_map`` pipeline passing activations on with
``ppermute``, expert parallelism written with ``all_to_all`` and ``psum_scatter``,
an MLP on explicit mesh axes, a decoding loop updating a donated KV cache, a cond
whose branches constrain differently, and ``pad``/``concatenate``/``roll``.  Lowered on the 2x4 ("data", "model") mesh of ``jax_programs``;
``lowered(name)`` caches them (``lowering``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

import lowering
from jax_programs import _f32, _ns, mesh


@jax.jit
def _layer(x, w):
    return jnp.tanh(x @ w)


def scan_layers_cond() -> str:
    """A scan over stacked weights whose body calls a jitted layer and constrains
    its output, a cond on the result and a head matmul: the head's "model" (on its
    contracting dim) reaches the loop carry backwards through the cond and the loop."""
    def f(params, x):
        def body(c, w):
            h = lax.with_sharding_constraint(_layer(c, w), _ns("data", None))
            return h, jnp.sum(h)
        y, sums = lax.scan(body, x, params["ws"])
        z = lax.cond(jnp.sum(y) > 0, lambda a: a * 2, lambda a: a - 1, y)
        return jnp.mean((z @ params["head"]) ** 2), sums
    shardings = ({"ws": _ns(None, None, "model"), "head": _ns("model", None)}, _ns("data", None))
    return jax.jit(f, in_shardings=shardings).lower(
        {"ws": _f32(3, 64, 64), "head": _f32(64, 16)}, _f32(32, 64)).as_text()


def remat_transformer() -> str:
    """The training step of a two-layer transformer scanned over layers, each layer
    rematerialised (``jax.checkpoint``), its attention rematerialised again, the
    MLP's hidden activation constrained."""
    def block(x, p):
        wq, wk, wv, wo, w1, w2 = p

        def attention(x):
            b, s, d = x.shape
            q, k, v = ((x @ w).reshape(b, s, 4, d // 4) for w in (wq, wk, wv))
            weights = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / 4.0, axis=-1)
            return jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, s, d) @ wo
        x = x + jax.checkpoint(attention)(x)
        h = lax.with_sharding_constraint(jax.nn.gelu(x @ w1), _ns("data", None, "model"))
        return x + h @ w2, None

    def loss(params, x):
        y, _ = lax.scan(jax.checkpoint(block), x, params)
        return jnp.mean(y ** 2)

    def step(params, x):
        value, grads = jax.value_and_grad(loss)(params, x)
        return value, jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)
    layers, d, ff = 2, 32, 64
    shapes = (_f32(layers, d, d),) * 4 + (_f32(layers, d, ff), _f32(layers, ff, d))
    shardings = ((_ns(None, None, "model"),) * 3 + (_ns(None, "model", None),)
                 + (_ns(None, None, "model"), _ns(None, "model", None)))
    return jax.jit(step, in_shardings=(shardings, _ns("data", None, None))).lower(
        shapes, _f32(4, 8, d)).as_text()


@jax.jit
def _relu_dense(x, w):
    return jax.nn.relu(x @ w)


@jax.jit
def _rms_norm(x):
    return x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)


def nested_scans() -> str:
    """Groups of layers: a scan over groups whose body scans over the group's layers,
    each layer a pipeline of two jitted calls."""
    def f(ws, x):
        def group(c, weights):
            return lax.scan(lambda c2, w: (_rms_norm(_relu_dense(c2, w)), jnp.sum(c2)), c, weights)
        return lax.scan(group, x, ws)
    return jax.jit(f, in_shardings=(_ns(None, None, "model", None), _ns("data", None))).lower(
        _f32(2, 3, 32, 32), _f32(16, 32)).as_text()


def while_constraint() -> str:
    """A while loop whose body constrains its carry onto "model"."""
    def f(x, w):
        def body(state):
            i, c = state
            return i + 1, lax.with_sharding_constraint(jnp.tanh(c @ w), _ns(None, "model"))
        _, c = lax.while_loop(lambda state: state[0] < 4, body, (0, x))
        return c.sum(axis=0)
    return jax.jit(f, in_shardings=(_ns("data", None), _ns("model", None))).lower(
        _f32(16, 32), _f32(32, 32)).as_text()


def partly_manual(matmul=lambda a, b: a @ b) -> str:
    """A ``shard_map`` manual over "model" only (its body's matmul: ``matmul``),
    between automatically sharded ops."""
    inner = jax.shard_map(lambda a, b: lax.psum(matmul(a, b), "model"), mesh=mesh(),
                          in_specs=(P(None, "model"), P("model", None)), out_specs=P(),
                          axis_names={"model"})

    def f(a, b):
        return jnp.tanh(inner(jnp.sin(a), b)) @ b.T
    return jax.jit(f, in_shardings=(_ns("data", "model"), _ns("model", None))).lower(
        _f32(16, 32), _f32(32, 8)).as_text()


@jax.jit
def _sin_matmul(a, b):
    return jnp.sin(a @ b)


def partly_manual_call() -> str:
    """:func:`partly_manual` with the body's matmul in a jitted function it calls."""
    return partly_manual(_sin_matmul)


def split_reshapes() -> str:
    """Reshapes that split and merge a dim sharded on ("data", "model")."""
    def f(x, w):
        y = jnp.tanh(x.reshape(8, 4, 32)) @ w
        z = y.reshape(32, 16)
        return z, z.T.reshape(4, 4, 32).sum(axis=1)
    return jax.jit(f, in_shardings=(_ns(("data", "model"), None), _ns(None, "model"))).lower(
        _f32(32, 32), _f32(32, 16)).as_text()


def split_sub_axes() -> str:
    """A dim sharded on ("data", "model") split by a reshape into two dims of 4: the
    second half of "model" goes onto the new dim ("model":(1)2 and "model":(2)2),
    then a matmul with a weight sharded on "model", a reduction and a reshape back."""
    def f(x, w):
        z = jnp.einsum("abd,de->abe", jnp.tanh(x).reshape(4, 4, 32), w)
        return z.sum(axis=0), z.reshape(16, 8)
    return jax.jit(f, in_shardings=(_ns(("data", "model"), None), _ns(None, "model"))).lower(
        _f32(16, 32), _f32(32, 8)).as_text()


def loop_constraint_clash() -> str:
    """A loop whose carry enters sharded on "data" and whose body constrains it onto
    "model" on the same dim: the two meet at the loop's data-flow edge."""
    def f(x):
        return lax.fori_loop(0, 3, lambda i, c: lax.with_sharding_constraint(
            jnp.tanh(c), _ns("model", None)), x)
    return jax.jit(f, in_shardings=_ns("data", None)).lower(_f32(16, 32)).as_text()


def moe() -> str:
    """A top-1 mixture-of-experts layer: router, ``top_k``, one-hot dispatch and
    combine einsums (``cumsum`` gives each token its slot), the expert activations
    constrained onto "model" on the expert dim, expert weights sharded on it."""
    experts, capacity = 4, 4

    def f(x, router, w1, w2):
        probs = jax.nn.softmax(x @ router, axis=-1)
        gate, idx = lax.top_k(probs, 1)
        mask = jax.nn.one_hot(idx[:, 0], experts)
        slot = (jnp.cumsum(mask, axis=0) * mask - 1).astype(jnp.int32)
        dispatch = mask[:, :, None] * jax.nn.one_hot(slot, capacity)
        xe = lax.with_sharding_constraint(jnp.einsum("tec,td->ecd", dispatch, x),
                                          _ns("model", None, None))
        h = jax.nn.gelu(jnp.einsum("ecd,edf->ecf", xe, w1))
        return jnp.einsum("tec,ecd->td", dispatch * gate[:, :, None],
                          jnp.einsum("ecf,efd->ecd", h, w2))
    return jax.jit(f, in_shardings=(_ns("data", None), _ns(None, None), _ns("model", None, None),
                                    _ns("model", None, None))).lower(
        _f32(16, 32), _f32(32, experts), _f32(experts, 32, 64), _f32(experts, 64, 32)).as_text()


def attention_heads() -> str:
    """Self-attention whose fused QKV projection is reshaped into (3, heads, head_dim)
    out of the hidden dim sharded on "model"; the queries constrained with heads on
    "model"."""
    def f(x, wqkv, wo):
        b, s, d = x.shape
        qkv = (x @ wqkv).reshape(b, s, 3, 4, d // 4)
        q = lax.with_sharding_constraint(qkv[:, :, 0], _ns("data", None, "model", None))
        w = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, qkv[:, :, 1]) / 4.0, axis=-1)
        return jnp.einsum("bhqk,bkhd->bqhd", w, qkv[:, :, 2]).reshape(b, s, d) @ wo
    return jax.jit(f, in_shardings=(_ns("data", None, None), _ns(None, "model"), _ns("model", None))
                   ).lower(_f32(4, 8, 32), _f32(32, 96), _f32(32, 32)).as_text()


def embed_scatter() -> str:
    """An embedding table sharded on "model" over its vocabulary: ``jnp.take`` of
    token ids sharded on "data", its gradient (a scatter-add) and a count of each
    token (``.at[].add``)."""
    def loss(table, ids, y):
        return jnp.mean((jnp.take(table, ids, axis=0).sum(axis=1) - y) ** 2)

    def step(table, ids, y):
        counts = jnp.zeros((table.shape[0],), jnp.float32).at[ids.reshape(-1)].add(1.0)
        return table - 0.1 * jax.grad(loss)(table, ids, y), counts
    return jax.jit(step, in_shardings=(_ns("model", None), _ns("data", None), _ns("data", None))
                   ).lower(_f32(64, 16), jax.ShapeDtypeStruct((8, 4), jnp.int32),
                           _f32(8, 16)).as_text()


def embed_softmax() -> str:
    """Token embeddings scored against a query vector, a softmax over the tokens: the
    table sharded on "data" over its features, the token ids on "data" over the
    batch.  The lookup's result cannot hold "data" on both dims (the table's won),
    and the scores contract the features: the softmax is never sharded, so no
    step of it ever ran."""
    def f(table, ids, q):
        return jax.nn.softmax(jnp.take(table, ids, axis=0) @ q, axis=-1)
    return jax.jit(f, in_shardings=(_ns(None, "data"), _ns("data", None), _ns(None))).lower(
        _f32(64, 16), jax.ShapeDtypeStruct((8, 4), jnp.int32), _f32(16)).as_text()


def vmap_grad() -> str:
    """``vmap`` of a per-example weight gradient over a batch sharded on "data"."""
    def per_example(x, w):
        return jnp.tanh(w @ x).sum()
    return jax.jit(jax.vmap(jax.grad(per_example, argnums=1), in_axes=(0, None)),
                   in_shardings=(_ns("data", None), _ns("model", None))).lower(
        _f32(8, 32), _f32(16, 32)).as_text()


@jax.custom_vjp
def _clipped_matmul(x, w):
    return x @ w


def _clipped_matmul_fwd(x, w):
    return x @ w, (x, w)


def _clipped_matmul_bwd(saved, g):
    x, w = saved
    g = jnp.clip(g, -1.0, 1.0)
    return g @ w.T, x.T @ g


_clipped_matmul.defvjp(_clipped_matmul_fwd, _clipped_matmul_bwd)


def custom_vjp() -> str:
    """The value and gradient of a loss through a ``custom_vjp`` matmul whose
    backward pass clips the cotangent."""
    def loss(w, x):
        return jnp.sum(jnp.tanh(_clipped_matmul(x, w)) ** 2)
    return jax.jit(jax.value_and_grad(loss), in_shardings=(_ns(None, "model"), _ns("data", None))
                   ).lower(_f32(32, 64), _f32(16, 32)).as_text()


def conv_grad() -> str:
    """The kernel gradient of a convolution: batch on "data", output features on
    "model"."""
    def loss(k, x):
        y = lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.mean(jax.nn.relu(y) ** 2)
    return jax.jit(jax.grad(loss), in_shardings=(_ns(None, None, None, "model"),
                                                 _ns("data", None, None, None))).lower(
        _f32(3, 3, 8, 16), _f32(4, 8, 8, 8)).as_text()


def topk_sort() -> str:
    """``top_k`` (``chlo.top_k``, which has no sharding rule) and a ``sort`` along
    the dim sharded on "data"."""
    def f(x):
        values, indices = lax.top_k(x, 4)
        return values, indices, jnp.sort(x, axis=0)[:2]
    return jax.jit(f, in_shardings=_ns("data", "model")).lower(_f32(16, 32)).as_text()


def cumsum_axes() -> str:
    """``cumsum`` along each of two sharded dims (a ``reduce_window`` whose window
    spans the dim)."""
    def f(x):
        return jnp.cumsum(x, axis=1), jnp.cumsum(x, axis=0)[-1]
    return jax.jit(f, in_shardings=_ns("data", "model")).lower(_f32(16, 32)).as_text()


def donated_specs() -> str:
    """A donated weight given as ``P(None)`` (replicated, its dims closed), the
    activations as ``P(("data", "model"))`` (both axes on one dim), out_shardings
    given."""
    def f(x, w, b):
        return x @ w + b, w * 0.9
    return jax.jit(f, in_shardings=(_ns(("data", "model"), None), _ns(None), _ns(None)),
                   out_shardings=(_ns(("data", "model"), None), _ns(None)),
                   donate_argnums=(1,)).lower(_f32(32, 16), _f32(16, 16), _f32(16)).as_text()


def ppermute_pipeline() -> str:
    """A pipeline over "model" in a partly manual ``shard_map``: a loop whose body
    calls the stage (a jitted matmul) and passes its activation on with
    ``ppermute``; outside, a matmul with the first stage's weight."""
    stages = 4

    def stage(w, x):
        def body(i, carry):
            h = jnp.tanh(carry @ w[0])
            return lax.ppermute(h, "model", perm=[(j, (j + 1) % stages) for j in range(stages)])
        return lax.fori_loop(0, stages, body, x)
    pipeline = jax.shard_map(stage, mesh=mesh(), in_specs=(P("model"), P()), out_specs=P(),
                             axis_names={"model"}, check_vma=False)

    def f(w, x):
        return jnp.sin(pipeline(w, jnp.cos(x))) @ w[0]
    return jax.jit(f, in_shardings=(_ns("model"), _ns("data", None))).lower(
        _f32(stages, 32, 32), _f32(16, 32)).as_text()


def ep_all_to_all() -> str:
    """Expert parallelism written by hand: a shard_map whose body sends each expert's
    slots to the device holding it (``all_to_all`` over "model"), applies the expert
    and sends the results back, then reduce-scatters over "data" (``psum_scatter``)."""
    def body(x, w):
        y = lax.all_to_all(x, "model", 0, 0, tiled=True)
        h = jnp.tanh(jnp.einsum("ecd,edf->ecf", y, w))
        return lax.psum_scatter(lax.all_to_all(h, "model", 0, 0, tiled=True), "data",
                                scatter_dimension=1, tiled=True)
    experts = jax.shard_map(body, mesh=mesh(), in_specs=(P("data", None, None), P("model", None, None)),
                            out_specs=P(None, "data", None), check_vma=False)
    return jax.jit(experts, in_shardings=(_ns("data", None, None), _ns("model", None, None))).lower(
        _f32(8, 8, 16), _f32(4, 16, 16)).as_text()


def explicit_mlp() -> str:
    """An MLP on a mesh of explicit axes (sharding in types) with a ``reshard`` between
    its matmuls."""
    from jax.sharding import AxisType, NamedSharding

    explicit = jax.make_mesh((2, 4), ("data", "model"),
                             axis_types=(AxisType.Explicit, AxisType.Explicit))

    def f(x, w1, w2):
        return jax.sharding.reshard(jax.nn.relu(x @ w1), P("data", None)) @ w2
    with jax.set_mesh(explicit):
        def typed(shape, spec):
            return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(explicit, spec))
        return jax.jit(f).lower(typed((16, 32), P("data", None)), typed((32, 64), P(None, "model")),
                                typed((64, 32), P(None, "model"))).as_text()


def kv_cache() -> str:
    """A decoding loop writing each step's keys into a donated cache
    (``dynamic_update_slice`` at the step's position) and attending over it."""
    def f(cache, xs, wk):
        def body(c, step):
            i, x = step
            k = jnp.tanh(x @ wk)
            c = lax.dynamic_update_slice(c, k[:, None, :], (0, i, 0))
            return c, jnp.einsum("bd,bsd->bs", k, c).max(axis=-1)
        return lax.scan(body, cache, (jnp.arange(xs.shape[0]), xs))
    return jax.jit(f, in_shardings=(_ns("data", None, "model"), _ns(None, "data", None),
                                    _ns(None, "model")), donate_argnums=(0,)).lower(
        _f32(8, 6, 32), _f32(6, 8, 16), _f32(16, 32)).as_text()


def cond_branches() -> str:
    """A cond whose branches constrain their results differently (one on "model" for
    dim 0, the other on ("data", "model")): they meet at the case's data-flow edge."""
    def f(x, w, flag):
        def a(x):
            return lax.with_sharding_constraint(jnp.tanh(x @ w), _ns("data", "model"))

        def b(x):
            return lax.with_sharding_constraint(jnp.sin(x @ w), _ns("model", None))
        return lax.cond(flag, a, b, x).sum(axis=0)
    return jax.jit(f, in_shardings=(_ns("data", None), _ns(None, "model"), _ns())).lower(
        _f32(16, 32), _f32(32, 32), jax.ShapeDtypeStruct((), jnp.bool_)).as_text()


def pad_concat() -> str:
    """``jnp.pad`` and ``jnp.concatenate`` of sharded dims, a ``jnp.roll`` and a matmul
    of the result with its transpose."""
    def f(x, y):
        z = jnp.concatenate([jnp.pad(x, ((0, 0), (2, 2))), y], axis=0)
        return jnp.roll(z, 1, axis=1) @ z.T
    return jax.jit(f, in_shardings=(_ns("data", "model"), _ns(None, "model"))).lower(
        _f32(16, 28), _f32(8, 32)).as_text()


PROGRAMS = {"scan_layers_cond": scan_layers_cond, "remat_transformer": remat_transformer,
            "nested_scans": nested_scans, "while_constraint": while_constraint,
            "partly_manual": partly_manual, "partly_manual_call": partly_manual_call,
            "split_reshapes": split_reshapes, "split_sub_axes": split_sub_axes,
            "loop_constraint_clash": loop_constraint_clash, "moe": moe,
            "attention_heads": attention_heads, "embed_scatter": embed_scatter,
            "embed_softmax": embed_softmax,
            "vmap_grad": vmap_grad, "custom_vjp": custom_vjp, "conv_grad": conv_grad,
            "topk_sort": topk_sort, "cumsum_axes": cumsum_axes, "donated_specs": donated_specs,
            "ppermute_pipeline": ppermute_pipeline, "ep_all_to_all": ep_all_to_all,
            "explicit_mlp": explicit_mlp, "kv_cache": kv_cache, "cond_branches": cond_branches,
            "pad_concat": pad_concat}



def lowered(name: str) -> str:
    """The module text of program ``name`` (lowered once per test run)."""
    return lowering.once("audit_programs", name, PROGRAMS[name])
