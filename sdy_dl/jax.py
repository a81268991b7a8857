"""The JAX API: ``sdy_dl.jax.explain(jitted, *args, **kwargs)`` (needs ``sdy-dl[jax]``).

Lowers the jitted function with JAX's debug info, so that ops carry their
Python source lines and function arguments their paths (``params[0]``,
``x``), propagates it once, and returns a :class:`~sdy_dl.api.PropagationResult`
whose values can also be named by argument path or by JAX's result names::

    result = sdy_dl.jax.explain(jax.jit(f, in_shardings=...), params, x,
                                engine="clingo", pass_options={"conservative-propagation": True})
    print(result.explain("params[1]"))     # a step says "python train.py:12"

``engine``, ``pass_options``, ``conservative``, ``keep_sharding_rules``,
``rules`` and ``explicit_collectives`` are :func:`sdy_dl.propagate`'s; every
other keyword argument is the jitted function's.
"""

from __future__ import annotations

from sdy_dl.api import PropagationResult, propagate


def explain(jitted, *args, engine: str = "auto", pass_options: dict | None = None,
            conservative: bool = False, keep_sharding_rules: bool = False, rules=(),
            explicit_collectives: bool = False, **kwargs) -> PropagationResult:
    """Lower ``jitted(*args, **kwargs)`` with debug info and propagate it with
    :func:`sdy_dl.propagate`'s options."""
    try:
        lowered = jitted.lower(*args, **kwargs)
    except AttributeError:
        raise TypeError("sdy_dl.jax.explain needs a jax.jit-ed function") from None
    return propagate(lowered.as_text(debug_info=True), engine=engine, pass_options=pass_options,
                     conservative=conservative, keep_sharding_rules=keep_sharding_rules,
                     rules=rules, explicit_collectives=explicit_collectives, file="<jax>")


__all__ = ["explain"]
