"""The embedded engine: clingo runs the translated program (``to_clingo``).

The program is translated and parsed once; every call builds a fresh
``Control`` from the parsed statements and adds the facts as ground atoms.
Names from modules are data: every symbol is a clingo string literal with
each character clingo's string syntax interprets (``\\``, ``"``, newline)
escaped, so no name can end the literal or the fact.  (Facts as text parse
2-3x faster than building the same atoms through clingo's backend API from
Python, which matters for the whole-module analyses.)
"""

from __future__ import annotations

import clingo
import clingo.ast

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


_STRING_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})


def string_literal(text: str) -> str:
    """``text`` as a clingo string literal (the exact inverse of clingo's unescaping)."""
    return '"' + text.translate(_STRING_ESCAPES) + '"'


def _fact_text(name: str, row: tuple) -> str:
    if not row:
        return f"{name}.\n"
    args = ",".join(string_literal(v) if isinstance(v, str) else str(v) for v in row)
    return f"{name}({args}).\n"


class ClingoEngine:
    """Evaluates programs with clingo's grounder (stratified: one stable model)."""

    name = "clingo"

    def grounds(self, program: Program) -> bool:
        return True

    def run(self, program: Program, facts: Facts) -> Relations:
        ctl = clingo.Control(["--warn=none"])
        with clingo.ast.ProgramBuilder(ctl) as builder:
            for stm in _statements(program):
                builder.add(stm)
        ctl.add("base", [], "".join(_fact_text(decl.name, row)
                                    for decl, row in typed_rows(program, facts)))
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
