"""The JAX API: ``sdy_dl.jax.explain(jitted, *args, **kwargs)`` (needs ``sdy-dl[jax]``).

Lowers the jitted function with JAX's debug info, so that ops carry their
Python source lines and function arguments their paths (``params[0]``,
``x``), propagates it once, and returns a :class:`~sdy_dl.api.PropagationResult`
whose values can also be named by argument path or by JAX's result names::

    result = sdy_dl.jax.explain(jax.jit(f, in_shardings=...), params, x,
                                engine="clingo", pass_options={"conservative-propagation": True})
    print(result.explain("params[1]"))     # a step says "python train.py:12"
    after, changes = result.whatif(set={"params['w1']": "P('data', None)"})

What-if edits may give ``PartitionSpec`` text (:func:`spec_to_sdy`), and each
applied edit says the line to write in the JAX program (:func:`edit_line`;
both in :mod:`sdy_dl.audit.partition_spec`).

``engine``, ``pass_options``, ``conservative``, ``keep_sharding_rules``,
``rules`` and ``explicit_collectives`` are :func:`sdy_dl.propagate`'s; every
other keyword argument is the jitted function's.
"""

from __future__ import annotations

from sdy_dl.api import PropagationResult, propagate
from sdy_dl.audit.partition_spec import edit_line, sdy_to_spec, spec_to_sdy


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


__all__ = ["explain", "spec_to_sdy", "sdy_to_spec", "edit_line"]
