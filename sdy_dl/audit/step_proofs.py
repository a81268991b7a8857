"""Proofs for the step nodes of derivation trees, from the engine the audit ran:
Soufflé's own provenance on the souffle engine, the proof search on clingo."""

from __future__ import annotations

from sdy_dl.audit.proofs import ProofSearch, _attach, _engine, _LazySearch, proof_program
from sdy_dl.audit.souffle_proofs import SouffleProvenance


def attach_proofs(audit, trees) -> None:
    """Give each step node of ``trees`` the proofs of its new axes (``node.proof``).

    On the souffle engine the proofs are Soufflé's own provenance
    (``souffle_proofs``), with the proof search for what it cannot explain;
    on clingo, the proof search."""
    nodes, causes, steps, program, facts = proof_program(audit, trees)
    if not nodes:
        return
    meshes = audit.propagated.meshes
    engine = _engine(audit)
    if engine.name == "souffle":
        search = SouffleProvenance(program, facts, engine.binary,
                                   fallback=_LazySearch(program, facts, engine.run))
    else:
        search = ProofSearch(program, facts, engine.run)
    try:
        _attach(nodes, causes, steps, meshes, search)
    finally:
        getattr(search, "close", lambda: None)()
