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

    def grounds(self, program: Program) -> bool:
        """Whether running ``program`` costs time for each of its rules on every
        call (clingo grounds it), rather than once per distinct program (a
        compiled Soufflé binary)."""
        ...

    def compiles(self) -> bool:
        """Whether each distinct program costs a compilation (compiled Soufflé
        binaries): callers then prefer fewer, larger programs."""
        ...
