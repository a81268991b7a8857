"""Shardy's ``distributeAxisRefsToBatchingFactors`` in the full version of
insert-explicit-reshards, decided by the Datalog stage of the same name
(``datalog/distribute_axis_refs_to_batching_factors/``) for every op whose
common axes the heuristic of :mod:`.find_common_axes_heuristic` chose, in
one engine call: which factors lose their axes (those that need replication)
and which batching factor each of their axes goes to.  This module writes the
facts and carries the answer out (an axis goes to the end of its batching
factor's axes, merged with the last one when they make one axis)."""

from __future__ import annotations

from sdy_dl.passes import Stage
from sdy_dl.sharding import add_axis_or_merge

STAGE = Stage("distribute_axis_refs_to_batching_factors")


def batching_facts(ops) -> dict[str, set]:
    """The facts of the stage for ``ops``: op ``o`` is ``(rule, common, mesh)``,
    ``common`` its axes per factor."""
    facts: dict[str, set] = {"in_factor": set(), "in_factor_of": set(), "in_non_scalar": set(),
                             "in_common_axis": set()}
    for o, (rule, common, mesh) in enumerate(ops):
        for f, factor in enumerate(rule.factors):
            facts["in_factor"].add((o, f, factor.kind, factor.size))
            for i, axis in enumerate(common[f]):
                facts["in_common_axis"].add((o, f, i, axis.ref_size(mesh)))
        for t, mapping in enumerate(list(rule.operands) + list(rule.results)):
            if mapping:
                facts["in_non_scalar"].add((o, t))
            for dim in mapping:
                for f in dim:
                    facts["in_factor_of"].add((o, f, t))
    return facts


def distribute_to_batching_factors(ops, options) -> list[list[tuple]]:
    """The common axes per factor of each op of ``ops`` (``(rule, common, mesh)``)
    once the axes of its factors that need replication have moved."""
    if not ops:
        return []
    decided = STAGE.run(batching_facts(ops), options)
    out = [list(common) for _, common, _ in ops]
    for o, f in decided["cleared"]:
        out[o][f] = ()
    for o, f, i, b in sorted(decided["moved"]):
        _, common, mesh = ops[o]
        axes = list(out[o][b])
        add_axis_or_merge(axes, common[f][i], mesh)
        out[o][b] = tuple(axes)
    return out
