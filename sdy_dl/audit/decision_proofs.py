"""Proofs for the rewrite nodes of derivation trees whose cause a Datalog stage
decided (user priorities: ``user_priority_propagation``; sharding-group syncs
and copies: ``sharding_group_map``): the proof search over the stage's program and the
facts it ran on, for the tuples behind the node's write."""

from __future__ import annotations

from sdy_dl.audit.proofs import ProofSearch, _engine


def attach_decision_proofs(audit, trees) -> None:
    """Give each node of ``trees`` whose cause carries a
    :class:`~sdy_dl.audit.provenance.Decision` the proofs of its tuples."""
    from sdy_dl.datalog.compiler import compile_stage

    causes = {w.cause.index: w.cause for w in audit.tracer.writes
              if w.cause.decision is not None}
    nodes = [n for t in trees for n in t.walk() if n.cause in causes
             and causes[n.cause].decision.tuples.get(n.key)]
    if not nodes:
        return
    engine = _engine(audit)
    searches: dict[int, ProofSearch] = {}   # id of the facts -> their search (a sync's
    for n in nodes:                           # copies share the sync's facts)
        decision = causes[n.cause].decision
        search = searches.get(id(decision.facts))
        if search is None:
            facts = {k: list(v) for k, v in decision.facts.items()}
            search = searches[id(decision.facts)] = ProofSearch(compile_stage(decision.stage),
                                                                facts, engine.run)
        n.proof = [p for p in (search.proof(r, args) for r, args in decision.tuples[n.key])
                   if p is not None]
