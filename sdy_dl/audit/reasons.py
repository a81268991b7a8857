"""Why a value of the output has no sharding (or only part of one)."""

from __future__ import annotations


def unsharded_reasons(explainer, out) -> list[str]:
    """One line per reason the propagation left ``out`` without a sharding."""
    key = out.key
    tracer = explainer.tracer
    if key is None or (tracer.initial.get(key) is None and tracer.final(key) is None):
        return ["no annotation reaches it: no step gave it a sharding "
                "(no sharded value is connected to it through ops with sharding rules)"]
    return ["the export passes left it without a sharding"]
