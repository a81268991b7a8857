"""The embedded engine: clingo runs the translated program (``to_clingo``).

The program is translated and parsed once; every call builds a fresh
``Control`` from the parsed statements and hands it the facts through
clingo's backend API as symbols (``Function(relation, [Number | String])``),
so names from modules are data and never program text.
"""

from __future__ import annotations

import clingo
import clingo.ast
from clingo import Function, Number, String

from sdy_dl.datalog.facts import Facts, typed_rows
from sdy_dl.datalog.program import Program
from sdy_dl.engines.base import Relations
from sdy_dl.engines.to_clingo import translate
from sdy_dl.errors import SdyError


_PARSED: dict[str, list] = {}


def _statements(program: Program) -> list:
    """The clingo AST of ``program``'s translation (translated and parsed once per program)."""
    stms = _PARSED.get(program.text)
    if stms is None:
        stms = []
        clingo.ast.parse_string(translate(program), stms.append)
        _PARSED[program.text] = stms
    return stms


def _symbol(value) -> clingo.Symbol:
    return String(value) if isinstance(value, str) else Number(value)


class ClingoEngine:
    """Evaluates programs with clingo's grounder (stratified: one stable model)."""

    name = "clingo"

    def run(self, program: Program, facts: Facts) -> Relations:
        ctl = clingo.Control(["--warn=none"])
        with clingo.ast.ProgramBuilder(ctl) as builder:
            for stm in _statements(program):
                builder.add(stm)
        with ctl.backend() as backend:
            add_atom, add_rule = backend.add_atom, backend.add_rule
            for decl, row in typed_rows(program, facts):
                add_rule([add_atom(Function(decl.name, [_symbol(v) for v in row]))])
        ctl.ground([("base", [])])
        readers = {d.name: tuple(t == "number" for t in d.types) for d in program.outputs}
        out: Relations = {name: set() for name in readers}
        models = 0
        with ctl.solve(yield_=True) as handle:
            for model in handle:
                models += 1
                for sym in model.symbols(shown=True):
                    numbers = readers[sym.name]
                    out[sym.name].add(tuple(a.number if n else a.string
                                            for a, n in zip(sym.arguments, numbers)))
        if models != 1:
            raise SdyError(f"clingo found {models} models; the program is not stratified")
        return out
