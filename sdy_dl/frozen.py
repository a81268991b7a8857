"""``HashedOnce``: a frozen dataclass that hashes its field tree once.

Shardings, rules and propagation steps are immutable trees used as dict keys
on every worklist visit; Python's generated ``__hash__`` walks the whole tree
each time.  The mixin computes it once and keeps it on the instance (never
pickled: string hashes differ between processes).
"""

from __future__ import annotations

import dataclasses


class HashedOnce:
    """Mixin for ``@dataclass(frozen=True)`` classes (declare ``__hash__ =
    HashedOnce.__hash__`` in the class body so the dataclass keeps it)."""

    __slots__ = ()

    def __hash__(self) -> int:
        try:
            return self.__dict__["_hash"]
        except KeyError:
            h = hash(tuple(getattr(self, f.name) for f in dataclasses.fields(self)))
            object.__setattr__(self, "_hash", h)
            return h

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state
