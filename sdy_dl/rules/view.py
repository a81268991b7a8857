"""What a rule template sees of one op: its tensors, attributes and neighbours.

:func:`op_scope` builds the expression scope for an op:

* ``operands`` / ``results``: tuples of :class:`TensorView`;
* the op's ODS operand groups by name (``lhs``, ``rhs``, ``inputs``,
  ``init_values``, ``updates``, ...): a tensor, or a tuple for variadic groups;
* ``attr``: the op's attributes as plain values (``attr.dimension``); an
  attribute the op does not carry reads as ``None``;
* ``users``: names of the ops that use any result;
* ``conservative``: whether rules are built for conservative propagation.
"""

from __future__ import annotations

from typing import Any

from sdy_dl.ir.traits import CONSTANT_OPS
from sdy_dl.rules.attrs import OpSignature, convert, operand_groups, op_signature
from sdy_dl.rules.expr import BUILTINS, CONSTANTS, Exposed, Scope

#: The names :func:`op_scope` defines besides the operand groups.
OP_NAMES = frozenset({"operands", "results", "attr", "users", "conservative"})

#: Scope names that are not ODS operand groups (an ODS group of that name is
#: only reachable through ``operands[...]``).
RESERVED = OP_NAMES | frozenset(BUILTINS) | frozenset(CONSTANTS)


class TensorView(Exposed):
    """An operand or result as rules see it."""

    RULE_FIELDS = frozenset({"shape", "rank", "shaped", "size", "producer", "users",
                             "is_constant", "behind"})

    def __init__(self, value):
        self.value = value

    @property
    def shaped(self) -> bool:
        """A ranked tensor (tokens and tuples are not)."""
        return self.value.shape is not None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape) if self.value.shape is not None else ()

    @property
    def rank(self) -> int:
        """The rank (0 for non-tensors, as in Shardy's rule builder)."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """The number of elements."""
        out = 1
        for d in self.shape:
            out *= d
        return out

    @property
    def producer(self) -> str | None:
        """The name of the op that defines this value (None for block arguments)."""
        op = self.value.defining_op
        return None if op is None else op.name

    @property
    def users(self) -> tuple[str, ...]:
        return tuple(op.name for op, _ in self.value.uses)

    @property
    def is_constant(self) -> bool:
        """Defined by a constant-like op."""
        return self.producer in CONSTANT_OPS

    def behind(self, op_name: str):
        """The value behind one ``op_name`` op (its operand 0), else this value."""
        op = self.value.defining_op
        if op is not None and op.name == op_name and op.operands:
            return op.operands[0]
        return self.value

    def __repr__(self) -> str:
        return f"TensorView({self.value.type_text})"


class AttrView(Exposed):
    """The op's attributes, converted on first use."""

    OPEN_FIELDS = True

    def __init__(self, op, signature: OpSignature):
        self._op = op
        self._signature = signature
        self._cache: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._cache:
            a = self._op.attr(name)
            self._cache[name] = None if a is None else convert(a)
        return self._cache[name]


def op_scope(op, conservative: bool, groups: dict[str, tuple[int, ...]] | None = None) -> Scope:
    """The expression scope of ``op`` (a :class:`sdy_dl.ir.Op`); ``groups`` are its
    operand groups (:func:`group_indices`, computed when not given)."""
    signature = op_signature(op.name)
    groups = group_indices(op, signature) if groups is None else groups
    operands = tuple(TensorView(v) for v in op.operands)
    results = tuple(TensorView(v) for v in op.results)
    values: dict[str, Any] = {
        "operands": operands,
        "results": results,
        "attr": AttrView(op, signature),
        "users": tuple(u.name for r in op.results for u, _ in r.uses),
        "conservative": conservative,
    }
    for name, indices in groups.items():
        kind = dict(signature.operand_groups).get(_ods_name(name, signature), "single")
        if kind == "variadic":
            values[name] = tuple(operands[i] for i in indices)
        else:
            values[name] = operands[indices[0]] if indices else None
    return Scope(None, values)


def group_names(signature: OpSignature) -> tuple[str, ...]:
    """The ODS operand group names usable in rules (reserved names excluded)."""
    names = []
    for ods, _ in signature.operand_groups:
        name = ods.rstrip("_")
        if name and name not in RESERVED:
            names.append(name)
    return tuple(names)


def _ods_name(name: str, signature: OpSignature) -> str:
    for ods, _ in signature.operand_groups:
        if ods.rstrip("_") == name:
            return ods
    return name


def group_indices(op, signature: OpSignature | None = None) -> dict[str, tuple[int, ...]]:
    """Operand indices of each usable ODS operand group of ``op``."""
    signature = signature or op_signature(op.name)
    usable = set(group_names(signature))
    return {ods.rstrip("_"): idx for ods, idx in operand_groups(op.mlir, signature).items()
            if ods.rstrip("_") in usable}
