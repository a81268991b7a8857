"""Datalog engines behind one interface.

``get_engine(name)`` returns an engine for ``auto``, ``python``, ``clingo``
or ``souffle``.  ``engine.run(program, facts)`` returns ``{relation: set of
tuples}`` for every output relation.

``python`` evaluates the program's rules compiled to Python loops (no
dependency; milliseconds per call on the step program); ``clingo`` grounds
a translation of the program with clingo (~30 ms per step-program call
before any fact is read).  ``auto`` runs a call with the program's compiled
Soufflé binary when ``souffle`` is on PATH and the binary cache already has
it, else with ``python`` (also when a binary is broken: it is removed from
the cache, or its server gives no answer in time: a warning, and the run
continues on ``python``); it never compiles and never starts Soufflé's
interpreter, which costs seconds per call on the step program.  A binary
that cannot serve calls as one process (:mod:`sdy_dl.engines.souffle_server`)
runs only calls with at least ``BINARY_MIN_FACTS`` facts (its process start
costs more than a small batch's evaluation).
``souffle`` is the interpreter, or with ``compiled`` the binaries
(``background``: compiled by a detached process while ``python`` stands
in).  Every engine gives the same relations.
"""

from __future__ import annotations

from sdy_dl.engines.base import Engine
from sdy_dl.errors import SdyError

ENGINE_NAMES = ("auto", "python", "clingo", "souffle")

#: ``auto`` runs a binary that cannot serve only for calls with at least this
#: many facts: such a call costs a process start and fact files (~3-7 ms),
#: more than the Python engine spends on a step batch of a few hundred facts.
BINARY_MIN_FACTS = 5000


class AutoEngine:
    """Cached compiled Soufflé binaries where there are some, the Python engine elsewhere."""

    name = "auto"

    def __init__(self):
        import shutil

        from sdy_dl.engines.python_engine import PythonEngine
        self.embedded = PythonEngine()
        self.souffle = shutil.which("souffle") is not None

    def _binary(self, program):
        from sdy_dl.engines.souffle_engine import cached_binary, gave_up, souffle_program
        exe = cached_binary(souffle_program(program)) if self.souffle else None
        return None if exe is None or gave_up(exe) else exe

    def grounds(self, program) -> bool:
        return False

    def compiles(self) -> bool:
        return self.souffle   # it runs the binaries a compiled run leaves in the cache

    def run(self, program, facts):
        from sdy_dl.engines.souffle_engine import (discard_broken, give_up, run_binary,
                                                   souffle_program)
        from sdy_dl.engines.souffle_server import BrokenBinary, ServerTimeout, server
        facts = {name: rows if isinstance(rows, list) else list(rows)
                 for name, rows in facts.items()}
        exe = self._binary(program)
        if exe:
            try:
                if (server(exe) is not None
                        or sum(map(len, facts.values())) >= BINARY_MIN_FACTS):
                    return run_binary(exe, souffle_program(program), facts)
            except BrokenBinary as e:   # built again by the next compiled run
                discard_broken(exe, e)
            except ServerTimeout as e:
                give_up(exe, e)
        return self.embedded.run(program, facts)


def get_engine(name: str = "auto", compiled: bool = False, background: bool = False) -> Engine:
    """The engine called ``name``."""
    if name == "auto":
        return AutoEngine()
    if name == "python":
        from sdy_dl.engines.python_engine import PythonEngine
        return PythonEngine()
    if name == "clingo":
        from sdy_dl.engines.clingo_engine import ClingoEngine
        return ClingoEngine()
    if name == "souffle":
        from sdy_dl.engines.souffle_engine import SouffleEngine
        return SouffleEngine(compiled=compiled, background=background)
    raise SdyError(f"unknown engine {name!r} (expected one of {', '.join(ENGINE_NAMES)})")


__all__ = ["ENGINE_NAMES", "Engine", "get_engine"]
