"""Datalog engines behind one interface.

``get_engine(name)`` returns an engine for ``auto`` (Soufflé if ``souffle``
is on PATH, else clingo), ``souffle`` or ``clingo``.  ``engine.run(program,
facts)`` returns ``{relation: set of tuples}`` for every output relation.
"""

from __future__ import annotations

import shutil

from sdy_dl.engines.base import Engine
from sdy_dl.errors import SdyError

ENGINE_NAMES = ("auto", "souffle", "clingo")


def get_engine(name: str = "auto", compiled: bool = False) -> Engine:
    """The engine called ``name``."""
    if name == "auto":
        name = "souffle" if shutil.which("souffle") else "clingo"
    if name == "clingo":
        from sdy_dl.engines.clingo_engine import ClingoEngine
        return ClingoEngine()
    if name == "souffle":
        from sdy_dl.engines.souffle_engine import SouffleEngine
        return SouffleEngine(compiled=compiled)
    raise SdyError(f"unknown engine {name!r} (expected one of {', '.join(ENGINE_NAMES)})")


__all__ = ["ENGINE_NAMES", "Engine", "get_engine"]
