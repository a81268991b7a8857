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

from sdy_dl.datalog.facts import Facts, checked_relations
from sdy_dl.datalog.program import Decl, Program
from sdy_dl.engines.base import Relations
from sdy_dl.engines.to_clingo import Context, translate
from sdy_dl.errors import SdyError
from sdy_dl.resources import cached_text, code_digest


_PARSED: dict[str, list] = {}


def _statements(program: Program) -> list:
    """The clingo AST of ``program``'s translation (translated and parsed once per program)."""
    stms = _PARSED.get(program.text)
    if stms is None:
        from sdy_dl.datalog import check, clauses, lexer, program as program_module, stratify
        from sdy_dl.engines import to_clingo

        stms = []
        # The translation is built from the checked clauses, so one in the cache (keyed
        # by the checker's code too) belongs to a program that passed the check.
        key = program.digest + "-" + code_digest(to_clingo, check, clauses, lexer,
                                                 program_module, stratify)
        clingo.ast.parse_string(cached_text("clingo", key, lambda: translate(program)), stms.append)
        _PARSED[program.text] = stms
    return stms


_STRING_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})


def _string_bodies(column: tuple[str, ...]) -> tuple[str, ...]:
    """The bodies of the clingo string literals of ``column``: each ``\\``, ``"`` and
    newline escaped (the exact inverse of clingo's unescaping); the column itself
    when it holds none of them."""
    text = "".join(column)
    if "\\" in text or '"' in text or "\n" in text:
        return tuple(value.translate(_STRING_ESCAPES) for value in column)
    return column


def relation_text(decl: Decl, rows: list[tuple]) -> str:
    """The checked facts ``rows`` of ``decl`` as clingo program text: one
    ``name(args).`` line per row, symbols as string literals."""
    if not decl.columns:
        return f"{decl.name}.\n" * len(rows)
    if not rows:
        return ""
    columns = [column if typ == "number" else _string_bodies(column)
               for column, typ in zip(zip(*rows), decl.types)]
    args = ",".join("%s" if typ == "number" else '"%s"' for typ in decl.types)
    template = f"{decl.name}({args}).\n"
    return "".join(map(template.__mod__, zip(*columns)))


class ClingoEngine:
    """Evaluates programs with clingo's grounder (stratified: one stable model)."""

    name = "clingo"

    def grounds(self, program: Program) -> bool:
        return True

    def compiles(self) -> bool:
        return False

    def run(self, program: Program, facts: Facts) -> Relations:
        ctl = clingo.Control(["--warn=none"])
        with clingo.ast.ProgramBuilder(ctl) as builder:
            for stm in _statements(program):
                builder.add(stm)
        ctl.add("base", [], "".join(relation_text(decl, rows)
                                    for decl, rows in checked_relations(program, facts)))
        context = Context()
        ctl.ground([("base", [])], context=context)
        if context.error is not None:
            raise context.error
        readers = {d.name: tuple(t == "number" for t in d.types) for d in program.outputs}
        out: Relations = {name: set() for name in readers}
        models = 0
        with ctl.solve(yield_=True) as handle:
            for model in handle:
                models += 1
                for sym in model.symbols(shown=True):
                    name = sym.name
                    numbers = readers[name]
                    out[name].add(tuple(a.number if n else a.string
                                        for a, n in zip(sym.arguments, numbers)))
        if models != 1:
            raise SdyError(f"clingo found {models} models; the program is not stratified")
        return out
