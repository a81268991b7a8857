"""Translate a checked Soufflé program into a clingo (ASP) program with the same relations.

The program is first checked (:func:`sdy_dl.datalog.check.checked_clauses`:
the subset and its errors are stated there and in docs/design.md); the
translation then renders the syntax trees.  Under stratified negation clingo
computes the same perfect model Soufflé does; what differs is bridged here:

* a rule with several heads is one rule per head (a clingo head ``b(X); c(X)``
  would be a disjunction);
* ``/`` and ``%`` call :class:`Context`'s functions (C's truncating division,
  an error on division by zero, which clingo would silently drop, and on
  ``-2147483648 / -1``, which stops clingo's process), only for the bindings
  the rest of the body admits (an auxiliary relation of them comes first,
  :func:`~sdy_dl.datalog.check.deferred`), and for each of them (a second
  auxiliary relation holds every variable of the body: clingo skips a rule
  whose head is already a fact); ``+ - *`` wrap at 32 bits in clingo as in
  Soufflé;
* clingo aggregates over a set of tuples: over the tuples of a single-atom
  body (Soufflé's count of the atom's tuples) the tuple lists the body's
  variables and a fresh variable for each ``_`` of the atom; over a
  materialised body (Soufflé's distinct bindings) it lists the named
  variables only;
* the value of an aggregate is bound to a fresh variable first, and an empty
  ``#min``/``#max`` (``#sup``/``#inf`` in clingo) derives nothing, as in Soufflé;
* clingo does not nest aggregates: an aggregate inside another one's body
  becomes an auxiliary relation of its injected variables and its value,
  derived under the literals that bind those variables;
* output relations are ``#show``n (``#show.`` alone when there are none).
"""

from __future__ import annotations

import clingo

from sdy_dl.datalog.check import checked_clauses, deferred, injected_variables, materialized
from sdy_dl.datalog.clauses import Clause, variables
from sdy_dl.datalog.program import Program
from sdy_dl.engines.arithmetic import c_div, c_mod
from sdy_dl.errors import SdyError

_OPS = {"=": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=",
        "+": "+", "-": "-", "*": "*"}
_STRING_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})


class Context:
    """The functions the translation's ``@sdy_div``/``@sdy_mod`` call while clingo
    grounds; an arithmetic error is kept in ``error`` (raised after grounding)."""

    def __init__(self):
        self.error: SdyError | None = None

    def _call(self, f, a, b, line, col):
        try:
            return clingo.Number(f(a.number, b.number, line.number, col.number))
        except SdyError as e:
            if self.error is None:
                self.error = e
            return clingo.Number(0)

    def sdy_div(self, a, b, line, col):
        return self._call(c_div, a, b, line, col)

    def sdy_mod(self, a, b, line, col):
        return self._call(c_mod, a, b, line, col)


def translate(program: Program) -> str:
    """The clingo program equivalent to the Soufflé ``program``."""
    out: list[str] = []
    aux = [0]
    for clause in checked_clauses(program):
        out.extend(_Rule(clause, aux).render())
    out.extend(f"#show {d.name}/{d.arity}." for d in program.outputs)
    if not program.outputs:
        out.append("#show.")
    return "\n".join(out) + "\n"


class _Rule:
    """One checked clause and the auxiliary rules of its nested aggregates."""

    def __init__(self, clause: Clause, aux: list[int]):
        self.clause = clause
        self.injected = injected_variables(clause)
        self.aux = aux            # counter of auxiliary relations, shared by the program
        self.rules: list[str] = []
        self.fresh = 0

    def var(self, prefix: str) -> str:
        self.fresh += 1
        return f"_{prefix}{self.fresh}"   # Soufflé variables never start with '_'

    def render(self) -> list[str]:
        head = self.atom(self.clause.head)
        if not self.clause.body:
            return [f"{head}."]
        late = deferred(self.clause.body)
        if not any(late):
            body = self.conjunction(self.clause.body, [], 0)
            return self.rules + [f"{head} :- {', '.join(body)}."]
        # Divisions only for the bindings the rest of the body admits: the rest first
        # derives an auxiliary relation of the variables the divisions need; then
        # one of every variable of the body, so that clingo evaluates each division
        # (it skips a rule whose head is already a fact).
        early = [lit for lit, is_late in zip(self.clause.body, late) if not is_late]
        rest = [lit for lit, is_late in zip(self.clause.body, late) if is_late]
        used = set().union(variables(self.clause.head), *(self.top_vars(x) for x in rest))
        shared = sorted(set().union(*(self.top_vars(x) for x in early)) & used)
        body = []
        if early:
            pre = self.relation("sdy_pre", shared)
            self.rules.append(f"{pre} :- {', '.join(self.conjunction(early, [], 0))}.")
            body.append(pre)
        body += self.conjunction(rest, early, 0)
        evaluated = self.relation("sdy_eval", sorted(set(shared) | used))
        self.rules.append(f"{evaluated} :- {', '.join(body)}.")
        return self.rules + [f"{head} :- {evaluated}."]

    def relation(self, prefix: str, args: list[str]) -> str:
        """An atom of a new auxiliary relation over ``args``."""
        self.aux[0] += 1
        return f"{prefix}_{self.aux[0]}" + (f"({', '.join(args)})" if args else "")

    def top_vars(self, lit) -> set[str]:
        """The variables of ``lit`` outside its aggregates' own (their injected ones)."""
        if lit[0] == "atom":
            return variables(lit)
        out: set[str] = set()
        for side in (lit[2], lit[3]):
            out |= self.injected[side[4]] if side[0] == "agg" else variables(side)
        return out

    def term(self, t) -> str:
        kind = t[0]
        if kind == "var":
            return t[1]
        if kind == "anon":
            return "_"
        if kind == "num":
            return str(t[1]) if t[1] >= 0 else f"({t[1]})"
        if kind == "str":
            return '"' + t[1].translate(_STRING_ESCAPES) + '"'
        if kind == "bin":
            left, right = self.term(t[2]), self.term(t[3])
            if t[1] in ("/", "%"):
                func = "sdy_div" if t[1] == "/" else "sdy_mod"
                return f"@{func}({left}, {right}, {self.clause.line}, {self.clause.col})"
            return f"({left} {_OPS[t[1]]} {right})"
        raise SdyError(f"unexpected {kind} in a term", file="<program>", line=self.clause.line)

    def atom(self, a, anon: list[str] | None = None) -> str:
        """``a`` in clingo; with ``anon``, each ``_`` a fresh variable appended to it."""
        args = []
        for arg in a[2]:
            if arg[0] == "anon" and anon is not None:
                name = self.var("A")
                anon.append(name)
                args.append(name)
            else:
                args.append(self.term(arg))
        text = f"{a[1]}({', '.join(args)})" if args else a[1]
        return ("not " if a[3] else "") + text

    def conjunction(self, literals, context: list, depth: int,
                    anon: list[str] | None = None) -> list[str]:
        """The clingo literals of ``literals`` inside ``depth`` aggregates;
        ``context``: the enclosing scopes' other literals (they bind the
        injected variables of an aggregate nested in another)."""
        out = []
        for lit in literals:
            if lit[0] == "atom":
                out.append(self.atom(lit, anon if not lit[3] else None))
                continue
            sides = []
            for side in (lit[2], lit[3]):
                if side[0] != "agg":
                    sides.append(self.term(side))
                    continue
                around = context + [x for x in literals if x is not lit]
                value, parts = self.aggregate(side, around, depth)
                out.extend(parts)
                sides.append(value)
            out.append(f"{sides[0]} {_OPS[lit[1]]} {sides[1]}")
        return out

    def aggregate(self, agg, around: list, depth: int) -> tuple[str, list[str]]:
        """(the variable holding ``agg``'s value, the clingo literals binding it);
        ``around``: the literals of the enclosing scopes besides ``agg``'s own."""
        func, expr, body = agg[1], agg[2], agg[3]
        value = self.var("V")
        anon: list[str] | None = None if materialized(agg) else []
        cond = self.conjunction(body, around, depth + 1, anon)
        if func in ("min", "max"):
            elements = self.term(expr)
        else:
            named = sorted(self.scope_vars(body) | set(anon or ()))
            elements = ", ".join(([self.term(expr)] if expr is not None else []) + named) or "0"
        parts = [f"{value} = #{func}{{ {elements} : {', '.join(cond)} }}"]
        if func in ("min", "max"):   # an empty group: no value (clingo's #sup / #inf)
            parts.append(f"{value} != {'#sup' if func == 'min' else '#inf'}")
        if depth == 0:
            return value, parts
        # Inside another aggregate's body: an auxiliary relation of the injected
        # variables, derived under the literals around that bind them (more
        # bindings than the body reaches do no harm: the relation is joined back).
        self.aux[0] += 1
        name = f"sdy_agg_{self.aux[0]}"
        args = ", ".join(sorted(self.injected[agg[4]]) + [value])
        binding = self.conjunction(_binding(around), [], 0)
        self.rules.append(f"{name}({args}) :- {', '.join(binding + parts)}.")
        return value, [f"{name}({args})"]

    def scope_vars(self, body) -> set[str]:
        """The named variables of an aggregate's body, an inner aggregate's only by
        its injected ones (its own are renamed apart and occur nowhere else)."""
        out: set[str] = set()
        for lit in body:
            if lit[0] == "atom":
                out |= variables(lit)
                continue
            for side in (lit[2], lit[3]):
                out |= self.injected[side[4]] if side[0] == "agg" else variables(side)
        return out


def _binding(literals) -> list:
    """The positive atoms of ``literals`` with plain arguments and the equalities that
    bind a variable from them: a safe conjunction binding what ``literals`` bind."""
    out = [lit for lit in literals if lit[0] == "atom" and not lit[3]
           and all(a[0] in ("var", "anon", "num", "str") for a in lit[2])]
    bound = set().union(*(variables(lit) for lit in out)) if out else set()
    changed = True
    while changed:
        changed = False
        for lit in literals:
            if lit[0] != "cmp" or lit[1] != "=" or lit in out:
                continue
            for var, other in ((lit[2], lit[3]), (lit[3], lit[2])):
                if (var[0] == "var" and other[0] != "agg" and variables(other) <= bound
                        and (var[1] not in bound or lit not in out)):
                    out.append(lit)
                    bound.add(var[1])
                    changed = True
                    break
    return out
