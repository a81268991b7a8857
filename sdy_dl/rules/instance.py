"""The concrete sharding rule of one op: factors and tensor mappings.

A :class:`RuleInstance` is what the Datalog facts writer consumes: a list of
factors (size, kind, blocked flag) and, for every operand and result, one dim
mapping per dimension listing that dim's factor indices from major to minor.

``to_text`` prints the rule exactly as Shardy prints an
``#sdy.op_sharding_rule`` attribute; :mod:`.rule_attr` reads that attribute
back (the ``sdy.sharding_rule`` an op may already carry) through jaxlib's
bindings.  Its syntax is also one of the forms of user rules (:mod:`.notation`).
"""

from __future__ import annotations

from sdy_dl.frozen import Frozen, HashedOnce


#: The factor kinds, as Shardy names them (``pass_through`` has no list).
FACTOR_KINDS = ("pass_through", "reduction", "need_replication", "permutation")

#: Printed type lists, in Shardy's order.
_KIND_LISTS = ("reduction", "need_replication", "permutation")

_LETTERS = "ijklmnopqrstuvwxyz"


class Factor(Frozen):
    """One factor of a rule: its size, kind and blocked-propagation flag."""

    _fields = ("size", "kind", "blocked")

    def __init__(self, size: int, kind: str = "pass_through", blocked: bool = False):
        if kind not in FACTOR_KINDS:
            raise ValueError(f"unknown factor kind {kind!r}")
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "blocked", blocked)


TensorMapping = tuple[tuple[int, ...], ...]


class RuleInstance(HashedOnce):
    """An op's sharding rule (Shardy's ``OpShardingRuleAttr``)."""

    _fields = ("factors", "operands", "results", "is_custom")

    def __init__(self, factors: tuple[Factor, ...], operands: tuple[TensorMapping, ...],
                 results: tuple[TensorMapping, ...], is_custom: bool = False):
        object.__setattr__(self, "factors", factors)
        # per operand, per dim: factor indices major->minor
        object.__setattr__(self, "operands", operands)
        object.__setattr__(self, "results", results)
        object.__setattr__(self, "is_custom", is_custom)

    def to_text(self) -> str:
        """The rule printed exactly as Shardy prints ``#sdy.op_sharding_rule``
        (printed once per instance: it is immutable)."""
        try:
            return self.__dict__["_text"]
        except KeyError:
            text = self._print()
            object.__setattr__(self, "_text", text)
            return text

    def _print(self) -> str:
        def tensors(mappings) -> str:
            return ", ".join(
                "[" + ", ".join("".join(factor_name(f) for f in dim) for dim in t) + "]"
                for t in mappings)

        text = f"#sdy.op_sharding_rule<({tensors(self.operands)})->({tensors(self.results)})"
        if self.factors:
            text += " {" + ", ".join(f"{factor_name(i)}={f.size}"
                                     for i, f in enumerate(self.factors)) + "}"
        for kind in _KIND_LISTS:
            text += _factor_list(kind, [i for i, f in enumerate(self.factors) if f.kind == kind])
        text += _factor_list("blocked_propagation",
                             [i for i, f in enumerate(self.factors) if f.blocked])
        if self.is_custom:
            text += ", custom"
        return text + ">"

    def __str__(self) -> str:
        return self.to_text()

    def kind_of(self, index: int) -> str:
        return self.factors[index].kind


def _factor_list(label: str, indices: list[int]) -> str:
    if not indices:
        return ""
    return f" {label}={{" + ", ".join(factor_name(i) for i in indices) + "}"


def factor_name(i: int) -> str:
    """Shardy's printed name of factor ``i`` (``factorSymbolString``): ``i`` .. ``z``, then
    ``z_1``, ``z_2``, ..."""
    if i < 0:
        raise ValueError("factor index must be >= 0")
    if i < len(_LETTERS):
        return _LETTERS[i]
    return f"z_{i - len(_LETTERS) + 1}"
