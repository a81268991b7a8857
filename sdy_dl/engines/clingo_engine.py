"""The embedded engine: clingo runs the translated program (``to_clingo``)."""

from __future__ import annotations

import clingo
import clingo.ast

from sdy_dl.datalog.facts import Facts, check_facts
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


def _fact_text(name: str, row: tuple) -> str:
    args = ",".join(str(v) if isinstance(v, int) else f'"{v}"' for v in row)
    return f"{name}({args}).\n" if row else f"{name}.\n"


class ClingoEngine:
    """Evaluates programs with clingo's grounder (stratified: one stable model)."""

    name = "clingo"

    def run(self, program: Program, facts: Facts) -> Relations:
        check_facts(program, facts)
        ctl = clingo.Control(["--warn=none"])
        with clingo.ast.ProgramBuilder(ctl) as builder:
            for stm in _statements(program):
                builder.add(stm)
        ctl.add("base", [], "".join(_fact_text(n, r) for n, rows in facts.items() for r in rows))
        ctl.ground([("base", [])])
        out: Relations = {d.name: set() for d in program.outputs}
        models = 0
        with ctl.solve(yield_=True) as handle:
            for model in handle:
                models += 1
                for sym in model.symbols(shown=True):
                    out[sym.name].add(tuple(_value(a) for a in sym.arguments))
        if models != 1:
            raise SdyError(f"clingo found {models} models; the program is not stratified")
        return out


def _value(sym: clingo.Symbol):
    if sym.type == clingo.SymbolType.Number:
        return sym.number
    if sym.type == clingo.SymbolType.String:
        return sym.string
    raise SdyError(f"unexpected clingo term {sym} in an output relation")
