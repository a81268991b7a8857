"""``HashedOnce``: a frozen dataclass that hashes its field tree once.

Shardings and rules are immutable trees used as dict keys on every worklist
visit (inside the propagation steps, themselves named tuples); Python's
generated ``__hash__`` walks the whole tree each time.  The mixin computes it once and keeps it on the instance (never
pickled: string hashes differ between processes).
"""

from __future__ import annotations

import dataclasses

#: The field names of each HashedOnce class, in order.
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


class HashedOnce:
    """Mixin for ``@dataclass(frozen=True)`` classes (declare ``__hash__ =
    HashedOnce.__hash__`` in the class body so the dataclass keeps it)."""

    __slots__ = ()

    def __hash__(self) -> int:
        values = self.__dict__
        try:
            return values["_hash"]
        except KeyError:
            cls = type(self)
            names = _FIELD_NAMES.get(cls)
            if names is None:
                names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
            h = hash(tuple([values[name] for name in names]))
            object.__setattr__(self, "_hash", h)
            return h

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state
