"""One MLIR context with the stablehlo, chlo, func and sdy dialects registered."""

from __future__ import annotations

import functools

from sdy_dl.signals import deferred


@functools.lru_cache(maxsize=None)
def mlir_context():
    """The process-wide MLIR context (created on first use)."""
    with deferred:   # (the bindings' imports run Python code from C++)
        from jaxlib.mlir import ir
        from jaxlib.mlir._mlir_libs import _jax_mlir_ext
        from jaxlib.mlir.dialects import chlo, sdy, stablehlo

        registry = ir.DialectRegistry()
        _jax_mlir_ext.register_dialects(registry)
        ctx = ir.Context()
        ctx.append_dialect_registry(registry)
        sdy.register_dialect(ctx)
        stablehlo.register_dialect(ctx)
        chlo.register_dialect(ctx)
        ctx.load_all_available_dialects()
    return ctx


def allow_unregistered_dialects(allow: bool) -> None:
    """Accept (or reject) ops of dialects that are not registered when parsing,
    like ``mlir-opt --allow-unregistered-dialect``."""
    mlir_context().allow_unregistered_dialects = allow
