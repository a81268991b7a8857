"""The facts and rules of a program as syntax trees (the subset docs/design.md states).

Terms are tuples: ``("var", name)``, ``("anon",)``, ``("num", int)``,
``("str", text)``, ``("bin", op, left, right)`` and ``("agg", function,
expression or None, body, place)``.  Literals are ``("atom", relation, args,
negated, place)`` and ``("cmp", op, left, right, place)``; a place is
``(line, column)``.  A clause is a head atom and body literals; a fact has an
empty body.  A rule with several heads (``b(X), c(X) :- a(X).``) is one
clause per head.  What the parser does not know is an error at its place:
disjunction ``;``, ``not``/``!`` before anything but an atom, functors,
numbers outside 32 bits, unknown string escapes.
"""

from __future__ import annotations

from dataclasses import dataclass

from sdy_dl.datalog.lexer import Token, is_directive, split_statements, tokenize
from sdy_dl.errors import SdyError

AGGREGATES = ("count", "sum", "min", "max")
COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")
INT_MIN, INT_MAX = -2**31, 2**31 - 1

#: Soufflé's string escapes and the characters they stand for.
ESCAPES = {'"': '"', "'": "'", "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "n": "\n",
           "r": "\r", "t": "\t", "v": "\v"}


@dataclass(frozen=True)
class Clause:
    """One fact or rule (one head)."""

    head: tuple
    body: tuple
    line: int
    col: int = 1


def parse_clauses(text: str, source: str = "<program>") -> list[Clause]:
    """Every fact and rule of the program ``text`` (directives left out)."""
    out: list[Clause] = []
    for stmt in split_statements(tokenize(text, source), source):
        if not is_directive(stmt):
            out.extend(_Parser(stmt, source).clauses())
    return out


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


def map_leaves(term, leaf):
    """``term`` (a term or literal, aggregates included) with every leaf term ``t``
    (a variable, ``_``, a number or a string) written ``leaf(t)``."""
    kind = term[0]
    if kind == "bin":
        return ("bin", term[1], map_leaves(term[2], leaf), map_leaves(term[3], leaf))
    if kind == "atom":
        return ("atom", term[1], tuple(map_leaves(a, leaf) for a in term[2]), term[3], term[4])
    if kind == "cmp":
        return ("cmp", term[1], map_leaves(term[2], leaf), map_leaves(term[3], leaf), term[4])
    if kind == "agg":
        return ("agg", term[1], map_leaves(term[2], leaf) if term[2] is not None else None,
                tuple(map_leaves(b, leaf) for b in term[3]), term[4])
    return leaf(term)


def aggregates(literals) -> list[tuple]:
    """The aggregates that are sides of the comparisons among ``literals`` (not
    those nested inside them)."""
    return [side for lit in literals if lit[0] == "cmp"
            for side in (lit[2], lit[3]) if side[0] == "agg"]


class _Parser:
    def __init__(self, tokens: list[Token], source: str):
        self.toks = tokens
        self.source = source
        self.i = 0

    def error(self, message: str, at: int | None = None) -> SdyError:
        tok = self.toks[min(self.i if at is None else at, len(self.toks) - 1)]
        return SdyError(message, file=self.source, line=tok[2], col=tok[3])

    def place(self) -> tuple[int, int]:
        tok = self.toks[min(self.i, len(self.toks) - 1)]
        return tok[2], tok[3]

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

    def clauses(self) -> list[Clause]:
        line, col = self.place()
        heads = [self.atom()]
        while self.peek() == ",":
            self.take()
            heads.append(self.atom())
        body: list = []
        if self.peek() == ":-":
            self.take()
            body = self.body(".")
        elif len(heads) > 1:
            raise self.error("several facts in one statement: end each with '.'")
        self.take(".")
        if self.i != len(self.toks):
            raise self.error("text after the end of a clause")
        for head in heads:
            if head[3]:
                raise self.error("a head cannot be negated")
        return [Clause(head, tuple(body), line, col) for head in heads]

    def body(self, end: str) -> list:
        literals = [self.literal()]
        while self.peek() == ",":
            self.take()
            literals.append(self.literal())
        if self.peek() == ";":
            raise self.error("disjunction ';' is not supported (write one rule per alternative)")
        if self.peek() != end:
            raise self.error(f"expected ',' or {end!r}, found {self.peek()!r}")
        return literals

    def literal(self):
        if self.peek() == "!":
            place = self.place()
            self.take()
            if self.peek() == "(" or self.peek(1) != "(":
                raise self.error("negation '!' applies to one atom only")
            atom = self.atom()
            return ("atom", atom[1], atom[2], True, place)
        if self.peek() == "not":
            raise self.error("'not' is not Soufflé's negation (write '!atom')")
        if self.i >= len(self.toks):
            raise self.error("unexpected end of clause")
        kind, text, _, _ = self.toks[self.i]
        if kind == "ident" and text not in AGGREGATES and self.peek(1) == "(":
            return self.atom()
        if text in ("true", "false") and self.peek(1) in (",", ".", "}"):
            raise self.error(f"'{text}' literals are not supported")
        place = self.place()
        left = self.expr()
        op_at = self.i
        op = self.take()[1]
        if op not in COMPARISONS:
            raise self.error(f"expected a comparison, found {op!r}", at=op_at)
        return ("cmp", op, left, self.expr(), place)

    def atom(self):
        place = self.place()
        kind, name, _, _ = self.take()
        if kind != "ident" or name == "_":
            raise self.error(f"expected a relation, found {name!r}", at=self.i - 1)
        if name in AGGREGATES:
            raise self.error(f"an aggregate cannot stand where an atom is expected", at=self.i - 1)
        self.take("(")
        args: list = []
        if self.peek() != ")":
            args.append(self.expr())
            while self.peek() == ",":
                self.take()
                args.append(self.expr())
        self.take(")")
        return ("atom", name, tuple(args), False, place)

    def expr(self):
        left = self.product()
        while self.peek() in ("+", "-"):
            op = self.take()[1]
            left = ("bin", op, left, self.product())
        return left

    def product(self):
        left = self.unary()
        while self.peek() in ("*", "/", "%"):
            op = self.take()[1]
            left = ("bin", op, left, self.unary())
        return left

    def unary(self):
        if self.peek() != "-":
            return self.factor()
        self.take()
        at = self.i
        if at < len(self.toks) and self.toks[at][0] == "number":   # a negative number
            self.take()
            return self.number(-int(self.toks[at][1]), at)
        inner = self.unary()
        if inner[0] == "num":   # -(...) of a constant: 32-bit negation
            return ("num", inner[1] if inner[1] == INT_MIN else -inner[1])
        if inner[0] in ("str", "agg"):
            raise self.error("'-' applies to numbers only", at=at)
        return ("bin", "-", ("num", 0), inner)

    def number(self, value: int, at: int):
        if not INT_MIN <= value <= INT_MAX:
            raise self.error(f"number {value} does not fit in 32 bits", at=at)
        return ("num", value)

    def factor(self):
        at = self.i
        kind, text, line, col = self.take()
        if kind == "number":
            if len(text) > 1 and text[0] == "0" and self.peek() in ("x", "b"):
                raise self.error("hexadecimal and binary numbers are not supported", at=at)
            if self.peek() == "." and self.i + 1 < len(self.toks) and self.toks[self.i + 1][0] == "number":
                raise self.error("floats are not supported", at=at)
            return self.number(int(text), at)
        if kind == "string":
            return ("str", self._unquote(text, at))
        if text == "(":
            inner = self.expr()
            self.take(")")
            return inner
        if kind == "ident" and text in AGGREGATES and (self.peek() == ":" or text != "count"):
            if text != "count" and self.peek() == "(" and self._after_parens() != ":":
                raise self.error(f"{text}(...) is a functor; functors are not supported", at=at)
            expr = None if text == "count" else self.expr()
            if self.peek() != ":":
                raise self.error(f"{text}: expected an aggregate '{text} E : {{ ... }}' "
                                 "(functors are not supported)", at=at)
            self.take(":")
            if self.peek() != "{":
                raise self.error(f"{text} aggregate: expected '{{' (aggregates over one "
                                 "atom without braces are not supported)")
            self.take("{")
            if self.peek() == "}":
                raise self.error("an aggregate's body cannot be empty")
            body = self.body("}")
            self.take("}")
            return ("agg", text, expr, tuple(body), (line, col))
        if kind == "ident" and text == "_":
            return ("anon",)
        if kind == "ident" and self.peek() == "(":
            raise self.error(f"{text}(...) is not a relation or aggregate here "
                             "(functors are not supported)", at=at)
        if kind == "ident" and text[0].isupper():
            return ("var", text)
        if kind == "ident":
            raise self.error(f"{text!r}: variables must start with an upper-case letter", at=at)
        raise self.error(f"unexpected {text!r} in a term", at=at)

    def _after_parens(self) -> str:
        """The token after the parenthesis that closes the one at the cursor."""
        depth = 0
        for j in range(self.i, len(self.toks)):
            depth += {"(": 1, ")": -1}.get(self.toks[j][1], 0)
            if depth == 0:
                return self.toks[j + 1][1] if j + 1 < len(self.toks) else ""
        return ""

    def _unquote(self, text: str, at: int) -> str:
        """A Soufflé string literal's value (:func:`string_value`), or its located error."""
        try:
            return string_value(text)
        except ValueError as e:
            raise self.error(f"unknown escape sequence \\{e.args[0]} in a string", at=at) from None


def string_value(literal: str) -> str:
    """The value of the Soufflé string literal ``literal`` (quotes included; its
    escapes: ``ESCAPES``); ValueError naming the character after a ``\\`` that
    is no escape."""
    out, i, body = [], 0, literal[1:-1]
    while i < len(body):
        if body[i] == "\\":
            char = ESCAPES.get(body[i + 1]) if i + 1 < len(body) else None
            if char is None:
                raise ValueError(body[i + 1:i + 2])
            out.append(char)
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)
