"""Immutable records: ``Frozen``, compared, hashed and printed by its fields, and
``HashedOnce``, which hashes its field tree once.

Shardings and rules are immutable trees used as dict keys on every worklist
visit (inside the propagation steps, themselves named tuples); hashing the
whole tree each time costs; ``HashedOnce`` computes the hash once and keeps it
on the instance (never pickled: string hashes differ between processes).
"""

from __future__ import annotations

from operator import attrgetter


class Frozen:
    """Base of an immutable record compared, hashed and printed by its fields:
    what ``@dataclass(frozen=True)`` makes, written once here instead of compiled
    from generated source for every class at every start (~2M instructions a
    class, ~50M for the classes a ``propagate`` defines).

    A subclass names its fields in ``_fields`` (its ``__init__``'s arguments, in
    order), sets them in ``__init__`` with ``object.__setattr__``, and keeps a
    ``__dict__`` (for ``functools.cached_property`` and pickling)."""

    _fields: tuple[str, ...] = ()
    #: The fields' values of an instance (one value for a single field; set per class).
    _values: attrgetter

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls._fields:
            cls._values = attrgetter(*cls._fields)

    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return self._values(self) == other._values(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values(self))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__qualname__}({fields})"

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"cannot delete field {name!r}")

    def replace(self, **changes):
        """A copy with the fields ``changes`` names changed (``dataclasses.replace``)."""
        values = {name: getattr(self, name) for name in self._fields}
        values.update(changes)
        return type(self)(**values)


class HashedOnce(Frozen):
    """A :class:`Frozen` record that hashes its fields once (a tree of records)."""

    def __hash__(self) -> int:
        values = self.__dict__
        try:
            return values["_hash"]
        except KeyError:
            h = hash(self._values(self))
            object.__setattr__(self, "_hash", h)
            return h

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state
