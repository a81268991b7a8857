"""Shardy's ``isEquivalent`` for the export passes, decided by the Datalog stage
``is_equivalent`` (``datalog/is_equivalent/``, whose macro
reshard-to-collectives and canonicalize call too).

:class:`IsEquivalent` asks the stage about pairs of shardings (one engine call
per batch of pairs it has not seen; an answer is kept for the pass's run).  A
missing first sharding is equivalent to any sharding without dim axes, as
Shardy's free ``isEquivalent`` says; ``ignore_unreduced`` is
``TensorShardingAttr::isEquivalent``'s ``ignoreUnreducedAxes``.
"""

from __future__ import annotations

from collections.abc import Iterable

from sdy_dl.passes import Stage
from sdy_dl.sharding import TensorSharding

STAGE = Stage("is_equivalent")

#: The input relations of the equivalence macro (``equivalence.dl.j2``).
RELATIONS = ("in_has_sharding", "in_mesh_ref", "in_rank", "in_dim_axis", "in_unreduced",
             "in_ignore_unreduced")

Pair = tuple[TensorSharding | None, TensorSharding | None, bool]


def equivalence_facts(facts: dict, key: int, side: str, sharding: TensorSharding | None) -> None:
    """The facts of the equivalence macro (``datalog/is_equivalent/equivalence.dl.j2``)
    for side ``side`` ("in" or "out") of pair ``key``: ``sharding`` (nothing when
    it is missing)."""
    if sharding is None:
        return
    facts["in_has_sharding"].add((key, side))
    facts["in_rank"].add((key, side, sharding.rank))
    facts["in_mesh_ref"].add((key, side, sharding.mesh_text()))
    for d, dim in enumerate(sharding.dims):
        for i, axis in enumerate(dim.axes):
            facts["in_dim_axis"].add((key, side, d, i, axis.to_text()))
    for axis in sharding.unreduced:
        facts["in_unreduced"].add((key, side, axis.to_text()))


class IsEquivalent:
    """``isEquivalent`` for one run of a pass: ``equivalent(a, b)`` or, for many
    pairs in one engine call, ``many([(a, b, ignore_unreduced), ...])``."""

    def __init__(self, options):
        self.options = options
        self._known: dict[Pair, bool] = {}

    def __call__(self, a: TensorSharding | None, b: TensorSharding | None,
                 ignore_unreduced: bool = False) -> bool:
        return self.many([(a, b, ignore_unreduced)])[0]

    def many(self, pairs: Iterable[Pair]) -> list[bool]:
        """The answer for each pair; the stage runs once for the pairs not seen yet."""
        pairs = list(pairs)
        todo = list(dict.fromkeys(p for p in pairs if p not in self._known))
        if todo:
            facts: dict[str, set] = {name: set() for name in RELATIONS}
            facts["in_pair"] = {(k,) for k in range(len(todo))}
            for k, (a, b, ignore) in enumerate(todo):
                equivalence_facts(facts, k, "in", a)
                equivalence_facts(facts, k, "out", b)
                if ignore:
                    facts["in_ignore_unreduced"].add((k,))
            found = {k for (k,) in STAGE.run(facts, self.options)["equivalent"]}
            for k, pair in enumerate(todo):
                self._known[pair] = k in found
        return [self._known[p] for p in pairs]
