"""What a Datalog stage decided for a rewrite, kept for provenance."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple


class Decision(NamedTuple):
    """What a Datalog stage decided for a rewrite cause (user priorities, group
    syncs): the stage, the facts it ran on, and per tracer key the derived
    tuples (relation, args) behind that key's write, which ``explain --proof``
    proves (:mod:`sdy_dl.audit.decision_proofs`)."""

    stage: str
    facts: Mapping
    tuples: Mapping
