"""The named generators: rules that templates cannot express, in Python.

A rule file calls one with ``generator: NAME`` (optionally ``with:`` for its
parameters).  Each generator adds factors through the same
:class:`~sdy_dl.rules.builder.RuleBuilder` as templates, so the numbering
conventions hold for them too.  There are three:

``reshape``
    Shardy's compound-factor walk over the operand and result shapes
    (semantics §3.3): shared factors of the gcd of what is left of the current
    dims, operand- or result-only factors while the two sides diverge, size-1
    dims on their own factor.
``gather`` / ``scatter``
    The walk over the slice dims with the dimension numbers (semantics §3.4):
    offset dims, batch dims (explicit or implicit), then collapsed/inserted
    dims and the index vector dim.  Scatter maps every input factor to the
    results too, and types an implicit batch factor ``reduction`` when the
    update computation is a supported reduction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from sdy_dl.errors import SdyError
from sdy_dl.rules.builder import RuleBuilder


@dataclass(frozen=True)
class Generator:
    """A named generator: ``run(op, scope, builder, params)`` adds factors."""

    name: str
    doc: str
    run: Callable[[Any, Any, RuleBuilder, dict], None]
    params: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- reshape

def reshape_factors(in_shape, out_shape, add: Callable) -> None:
    """The compound-factor walk; ``add(in_dim, out_dim, size)`` (None: no dim)."""
    in_rank, out_rank = len(in_shape), len(out_shape)
    a = b = 0
    dims_in = dims_out = factors_in = factors_out = 1
    while a < in_rank or b < out_rank:
        if a < in_rank and in_shape[a] == 1:
            add(a, None, 1)
            a += 1
            continue
        if b < out_rank and out_shape[b] == 1:
            add(None, b, 1)
            b += 1
            continue
        if a < in_rank and dims_in == factors_in:
            dims_in *= in_shape[a]
        if b < out_rank and dims_out == factors_out:
            dims_out *= out_shape[b]
        next_in = dims_in // factors_in
        next_out = dims_out // factors_out
        g = math.gcd(next_in, next_out)

        def catch_up(nxt: int, smaller: int, larger: int) -> int:
            if larger % smaller == 0 and nxt % (larger // smaller) == 0:
                return larger // smaller
            return nxt // g if nxt > g else nxt

        if factors_in == factors_out:
            if g > 1:
                add(a, b, g)
                factors_in *= g
                factors_out *= g
            else:
                if next_in <= 1 or next_out <= 1:
                    raise SdyError(f"reshape {tuple(in_shape)} -> {tuple(out_shape)}: "
                                   "shapes of different sizes")
                add(a, None, next_in)
                factors_in *= next_in
                add(None, b, next_out)
                factors_out *= next_out
        elif factors_in < factors_out:
            s = catch_up(next_in, factors_in, factors_out)
            add(a, None, s)
            factors_in *= s
        else:
            s = catch_up(next_out, factors_out, factors_in)
            add(None, b, s)
            factors_out *= s
        if a < in_rank and dims_in == factors_in:
            a += 1
        if b < out_rank and dims_out == factors_out:
            b += 1


def _run_reshape(op, scope, builder: RuleBuilder, params: dict) -> None:
    in_shape = scope.lookup("operands")[0].shape
    out_shape = scope.lookup("results")[0].shape
    if math.prod(in_shape) != math.prod(out_shape):
        raise SdyError(f"reshape {in_shape} -> {out_shape} changes the number of elements")
    reshape_factors(in_shape, out_shape,
                    lambda i, o, size: builder.add([i], [o], size))


# --------------------------------------------------------------------------- gather/scatter

@dataclass(frozen=True)
class _Walk:
    """The inputs of the gather/scatter walk, with Shardy's role names."""

    input_shape: tuple[int, ...]
    slices_shape: tuple[int, ...]
    indices_shape: tuple[int, ...]
    index_vector_dim: int
    offset_dims: tuple[int, ...]
    collapsed_dims: tuple[int, ...]
    input_batching_dims: tuple[int, ...]
    indices_batching_dims: tuple[int, ...]


def gather_scatter_factors(w: _Walk, is_scatter: bool, implicit_batch_kind: str,
                           add: Callable) -> None:
    """The shared walk; ``add(input_dim, indices_dim, slices_dim, size, kind, blocked)``."""
    p = 0
    q = 0
    for s, m in enumerate(w.slices_shape):
        if s in w.offset_dims:
            while p in w.collapsed_dims or p in w.input_batching_dims:
                p += 1
            if p >= len(w.input_shape):
                raise SdyError("offset dims do not match the input rank")
            n = w.input_shape[p]
            if n == m:
                add(p, None, s, n, "pass_through", False)
            elif is_scatter:
                add(p, None, None, n, "need_replication", False)
                add(None, None, s, m, "need_replication", False)
            elif m == 1:
                add(p, None, None, n, "reduction", False)
                add(None, None, s, m, "need_replication", False)
            else:
                add(p, None, s, n, "need_replication", True)
            p += 1
        else:
            indices_dim = q if q < w.index_vector_dim else q + 1
            explicit = indices_dim in w.indices_batching_dims
            input_dim = (w.input_batching_dims[w.indices_batching_dims.index(indices_dim)]
                         if explicit else None)
            kind = implicit_batch_kind if is_scatter and not explicit else "pass_through"
            add(input_dim, indices_dim, s, m, kind, False)
            q += 1
    for c in w.collapsed_dims:
        size = w.input_shape[c]
        kind = "pass_through" if is_scatter else (
            "need_replication" if size == 1 else "reduction")
        add(c, None, None, size, kind, False)
    if w.index_vector_dim < len(w.indices_shape):
        add(None, w.index_vector_dim, None, w.indices_shape[w.index_vector_dim],
            "need_replication", False)


def _run_gather(op, scope, builder: RuleBuilder, params: dict) -> None:
    dn = scope.lookup("attr").dimension_numbers
    operands = scope.lookup("operands")
    walk = _Walk(operands[0].shape, scope.lookup("results")[0].shape, operands[1].shape,
                 dn.index_vector_dim, dn.offset_dims, dn.collapsed_slice_dims,
                 dn.operand_batching_dims, dn.start_indices_batching_dims)

    def add(i, x, s, size, kind, blocked):
        builder.add([i, x], [s], size, kind, blocked)

    gather_scatter_factors(walk, False, "pass_through", add)


def _run_scatter(op, scope, builder: RuleBuilder, params: dict) -> None:
    dn = scope.lookup("attr").scatter_dimension_numbers
    operands = scope.lookup("operands")
    n = len(scope.lookup("results"))
    walk = _Walk(operands[0].shape, operands[n + 1].shape, operands[n].shape,
                 dn.index_vector_dim, dn.update_window_dims, dn.inserted_window_dims,
                 dn.input_batching_dims, dn.scatter_indices_batching_dims)
    kind = "reduction" if common_reduction(op) is not None else "need_replication"

    def add(i, x, s, size, kind, blocked):
        builder.add([i] * n + [x] + [s] * n, [i] * n, size, kind, blocked)

    gather_scatter_factors(walk, True, kind, add)


_REDUCTIONS = frozenset({"stablehlo.add", "stablehlo.multiply", "stablehlo.maximum",
                         "stablehlo.minimum"})
_LOGICAL = frozenset({"stablehlo.and", "stablehlo.or"})


def common_reduction(op) -> str | None:
    """The one binary reduction op kind the scatter's update computation applies
    to every (input, update) pair, or None (Shardy's supported reductions)."""
    if not op.regions or not op.regions[0].blocks:
        return None
    block = op.regions[0].blocks[0]
    n = len(op.results)
    if len(block.args) != 2 * n or not block.ops:
        return None
    ret = block.ops[-1]
    if ret.name != "stablehlo.return" or len(ret.operands) != n:
        return None
    kind = None
    for index, value in enumerate(ret.operands):
        producer = value.defining_op
        if producer is None or len(producer.operands) != 2 or value.shape is None:
            return None
        is_i1 = value.type_text.endswith("xi1>") or value.type_text == "tensor<i1>"
        if not (producer.name in _REDUCTIONS or (is_i1 and producer.name in _LOGICAL)):
            return None
        if kind is None:
            kind = producer.name
        elif kind != producer.name:
            return None
        args = [v.index if v.block is block else None for v in producer.operands]
        if sorted(a for a in args if a is not None) != [index, index + n] or None in args:
            return None
    return kind


GENERATORS: dict[str, Generator] = {g.name: g for g in (
    Generator("reshape", "Shardy's compound-factor reshape walk (semantics §3.3).",
              _run_reshape),
    Generator("gather", "The gather walk over slice dims with the dimension numbers "
              "(semantics §3.4).", _run_gather),
    Generator("scatter", "The scatter walk over update dims with the dimension numbers "
              "(semantics §3.4); implicit batch factors are reductions when the update "
              "computation is a supported reduction.", _run_scatter),
)}
