"""The engine interface: a program and its facts in, output relations out."""

from __future__ import annotations

from typing import Protocol

from sdy_dl.datalog.facts import Facts
from sdy_dl.datalog.program import Program

Relations = dict[str, set[tuple]]


class Engine(Protocol):
    """Evaluates a Soufflé program on facts and returns its output relations."""

    name: str

    def run(self, program: Program, facts: Facts) -> Relations:
        """The output relations of ``program`` on ``facts``."""
        ...
