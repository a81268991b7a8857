"""The interface of one propagation step on one op (semantics §5.1–§6).

A step reads the current shardings of an op's operands and results, its
rule, and a direction per factor; it returns the tensors whose sharding
changes.  Every decision of a step (common mesh, projection, compatible
major axes, conflicts, expansion, projection back, "updated") is made by
the Datalog program of stage ``step``; Python only turns ``StepInput``s into
facts and the derived relations back into ``StepOutput``s.  Many steps are
evaluated in one engine call (each with its own instance id).
"""

from __future__ import annotations

from typing import NamedTuple

from sdy_dl.frozen import Frozen
from sdy_dl.rules.instance import RuleInstance
from sdy_dl.sharding import TensorSharding

DIRECTIONS = ("BOTH", "FORWARD", "BACKWARD", "NONE")
STRATEGIES = ("basic", "aggressive")


class StepInput(NamedTuple):
    """One op step to evaluate.

    ``operands``/``results`` are the current shardings (None: the tensor has
    no sharding).  Every sharding names its mesh by symbol (meshes are lifted
    before propagation).  ``directions`` has one entry per factor of
    ``rule`` (the blocked flag is applied inside Datalog).  ``elementwise``
    is the aggressive strategy's notion (§6).

    A step is a memo key looked up on nearly every worklist visit: as a named
    tuple it is hashed and compared in C (its shardings and rule keep their
    own hashes).
    """

    rule: RuleInstance
    operands: tuple[TensorSharding | None, ...]
    results: tuple[TensorSharding | None, ...]
    directions: tuple[str, ...]
    strategy: str = "aggressive"
    conservative: bool = False
    elementwise: bool = False


class StepOutput(Frozen):
    """The new shardings of the tensors a step updated (None: unchanged)."""

    _fields = ("operands", "results")

    def __init__(self, operands: tuple[TensorSharding | None, ...],
                 results: tuple[TensorSharding | None, ...]):
        object.__setattr__(self, "operands", operands)
        object.__setattr__(self, "results", results)

    @property
    def changed(self) -> bool:
        return any(s is not None for s in self.operands + self.results)
