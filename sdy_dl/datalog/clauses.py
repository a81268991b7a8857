"""The facts and rules of a program as syntax trees (the subset ``to_clingo`` documents).

Terms are tuples: ``("var", name)``, ``("anon",)``, ``("num", int)``,
``("str", text)``, ``("bin", op, left, right)`` and ``("agg", function,
expression or None, body)``.  Literals are ``("atom", relation, args,
negated)`` and ``("cmp", op, left, right)``.  A clause is ``(head atom,
body literals)``; a fact has an empty body.
"""

from __future__ import annotations

from dataclasses import dataclass

from sdy_dl.datalog.lexer import clauses as clause_tokens
from sdy_dl.errors import SdyError

AGGREGATES = ("count", "sum", "min", "max")
COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")


@dataclass(frozen=True)
class Clause:
    """One fact or rule."""

    head: tuple
    body: tuple
    line: int


def parse_clauses(text: str) -> list[Clause]:
    """Every fact and rule of the program ``text``."""
    return [_Parser(tokens).clause() for tokens in clause_tokens(text)]


def variables(term) -> set[str]:
    """The named variables of a term or literal (inside aggregates too)."""
    kind = term[0]
    if kind == "var":
        return {term[1]}
    if kind == "bin":
        return variables(term[2]) | variables(term[3])
    if kind == "atom":
        return set().union(*(variables(a) for a in term[2])) if term[2] else set()
    if kind == "cmp":
        return variables(term[2]) | variables(term[3])
    if kind == "agg":
        out = variables(term[2]) if term[2] is not None else set()
        for literal in term[3]:
            out |= variables(literal)
        return out
    return set()


class _Parser:
    def __init__(self, tokens):
        self.toks = tokens
        self.i = 0

    def error(self, message: str) -> SdyError:
        line = self.toks[min(self.i, len(self.toks) - 1)][2]
        return SdyError(message, file="<program>", line=line)

    def peek(self, ahead: int = 0) -> str:
        i = self.i + ahead
        return self.toks[i][1] if i < len(self.toks) else ""

    def take(self, text: str | None = None):
        if self.i >= len(self.toks):
            raise self.error("unexpected end of clause")
        tok = self.toks[self.i]
        if text is not None and tok[1] != text:
            raise self.error(f"expected {text!r}, found {tok[1]!r}")
        self.i += 1
        return tok

    def clause(self) -> Clause:
        line = self.toks[0][2]
        head = self.atom()
        body: list = []
        if self.peek() == ":-":
            self.take()
            body = self.body(".")
        self.take(".")
        if self.i != len(self.toks):
            raise self.error("text after the end of a clause")
        return Clause(head, tuple(body), line)

    def body(self, end: str) -> list:
        literals = [self.literal()]
        while self.peek() == ",":
            self.take()
            literals.append(self.literal())
        if self.peek() != end:
            raise self.error(f"expected ',' or {end!r}, found {self.peek()!r}")
        return literals

    def literal(self):
        if self.peek() == "!":
            self.take()
            atom = self.atom()
            return ("atom", atom[1], atom[2], True)
        kind, text, _ = self.toks[self.i]
        if kind == "ident" and text not in AGGREGATES and self.peek(1) == "(":
            return self.atom()
        left = self.expr()
        op = self.take()[1]
        if op not in COMPARISONS:
            raise self.error(f"expected a comparison, found {op!r}")
        return ("cmp", op, left, self.expr())

    def atom(self):
        kind, name, _ = self.take()
        if kind != "ident":
            raise self.error(f"expected a relation, found {name!r}")
        self.take("(")
        args: list = []
        if self.peek() != ")":
            args.append(self.expr())
            while self.peek() == ",":
                self.take()
                args.append(self.expr())
        self.take(")")
        return ("atom", name, tuple(args), False)

    def expr(self):
        left = self.product()
        while self.peek() in ("+", "-"):
            op = self.take()[1]
            left = ("bin", op, left, self.product())
        return left

    def product(self):
        left = self.factor()
        while self.peek() in ("*", "/", "%"):
            op = self.take()[1]
            left = ("bin", op, left, self.factor())
        return left

    def factor(self):
        kind, text, _ = self.take()
        if kind == "number":
            return ("num", int(text))
        if kind == "string":
            return ("str", _unquote(text))
        if text == "(":
            inner = self.expr()
            self.take(")")
            return inner
        if kind == "ident" and text in AGGREGATES and (self.peek() == ":" or text != "count"):
            expr = None if text == "count" else self.expr()
            self.take(":")
            self.take("{")
            body = self.body("}")
            self.take("}")
            return ("agg", text, expr, tuple(body))
        if kind == "ident" and text == "_":
            return ("anon",)
        if kind == "ident" and text[0].isupper():
            return ("var", text)
        self.i -= 1
        raise self.error(f"unexpected {text!r} in a term")


def _unquote(text: str) -> str:
    """A Soufflé string literal's value (``\\"`` and ``\\\\`` escapes)."""
    out, i, body = [], 0, text[1:-1]
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            out.append(body[i + 1])
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)
