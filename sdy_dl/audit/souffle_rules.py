"""Which clause of the program a rule number of Soufflé's provenance names.

Soufflé numbers the clauses of a relation ``(R1)``, ``(R2)``, .. as they are
after its own transformations, not as the program text lists them: it drops a
clause whose body has a relation known empty when it compiles (no rules, no
facts, no ``.input``); a clause it rewrites (an arithmetic argument of a body
atom becomes a variable ``_tmp_k`` and a constraint ``_tmp_k = (..)``) moves
to the end of its relation; a relation that copies another (one clause
``r(X1, .., Xn) :- s(X1, .., Xn).``, not read or written) is replaced by the
one it copies, its clause dropped.  Every explain answer lists, under
``"rules"``, the clause text of each rule number as Soufflé numbers it; this
module matches that text to the program's clauses of the same relation.

Both sides are parsed and compared in one form that undoes what Soufflé
prints differently: white space and the parentheses around arithmetic (the
parse), ``_`` printed ``+underscore_k`` and a variable an atom names once
(both ``_``), the ``_tmp_k`` constraints (substituted back), ``X = Y`` of two
variables (resolved), an aggregate's result variable printed ``@generator_k``
(variables compared up to renaming, by order of first occurrence), an
aggregate body printed as one atom of a relation ``__agg_subclause..`` (its
listed clause's body inlined back), copied relations (named by what they
copy) and string constants written as fact symbols (unescaped).  A rule number
whose text matches no clause, or more than one, names none: the caller
refuses it.
"""

from __future__ import annotations

import re

from sdy_dl.audit.proofs import Rule
from sdy_dl.datalog.clauses import map_leaves, parse_clauses
from sdy_dl.datalog.facts import unescape_symbol
from sdy_dl.errors import SdyError

_GENERATOR, _TMP = "SdyGenerator", "SdyTmp"
_SUBCLAUSE = "__agg_subclause"


def _printed_clause(text: str):
    """Soufflé's printing of a clause, parsed (None when it does not parse)."""
    if _GENERATOR in text or _TMP in text:
        return None
    text = re.sub(r"\+underscore_\d+", "_", text)
    text = re.sub(r"@generator_(\d+)", _GENERATOR + r"\1", text)
    text = re.sub(r"(?<![A-Za-z0-9_])_tmp_(\d+)", _TMP + r"\1", text)
    try:
        [clause] = parse_clauses(text, source="<souffle provenance>")
    except (SdyError, ValueError):
        return None
    return clause


class SouffleRuleNumbers:
    """Soufflé's rule numbers ``(relation, k)`` -> the program's clause they name."""

    def __init__(self, rules: list[Rule], io: set[str]):
        self.by_head: dict[str, list[Rule]] = {}
        for r in rules:
            if ":-" in r.text:
                self.by_head.setdefault(r.head[0], []).append(r)
        self.copies = copies(rules, io)
        self.printed: dict[tuple[str, int], str] = {}
        self._found: dict[tuple[str, int], Rule | None] = {}
        self._matches: dict[tuple[str, int], Rule | None] = {}
        self._ours: dict[int, tuple | None] = {}

    def add(self, listed: list[dict]) -> None:
        """Take the ``"rules"`` list of an explain answer."""
        for entry in listed:
            number = re.fullmatch(r"\(R(\d+)\)", entry.get("rule-number", ""))
            head = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(", entry.get("rule", ""))
            if number and head:
                self.printed.setdefault((head.group(1), int(number.group(1))), entry["rule"])

    def rule(self, relation: str, number: int) -> Rule | None:
        """The one clause of ``relation`` that Soufflé's ``(R<number>)`` is, or None
        (also when another rule number of ``relation`` Soufflé listed names the same
        clause: a mapping that is not one-to-one names none)."""
        key = (relation, number)
        if key not in self._found:
            clause = self._match(key)
            others = [k for k in self.printed if k[0] == relation and k != key]
            self._found[key] = None if clause is None or any(
                self._match(k) is clause for k in others) else clause
        return self._found[key]

    def _match(self, key) -> Rule | None:
        """The one clause of ``key``'s relation whose text Soufflé's text for ``key``
        is (None: none or several), compared once per rule number."""
        if key not in self._matches:
            theirs = self._canonical_printed(key)
            matches = [] if theirs is None else \
                [r for r in self.by_head.get(key[0], ()) if self._canonical_ours(r) == theirs]
            self._matches[key] = matches[0] if len(matches) == 1 else None
        return self._matches[key]

    def _canonical_ours(self, rule: Rule):
        if rule.index not in self._ours:
            try:
                [clause] = parse_clauses(rule.text, source="<rule>")
            except (SdyError, ValueError):
                self._ours[rule.index] = None
            else:
                self._ours[rule.index] = canonical(clause.head, clause.body, self.copies)
        return self._ours[rule.index]

    def _canonical_printed(self, key, inlining: tuple = ()):
        text = self.printed.get(key)
        clause = None if text is None or key in inlining else _printed_clause(text)
        if clause is None:
            return None
        body = self._restore(clause.body, inlining + (key,))
        return None if body is None else canonical(_unescaped(clause.head), body, self.copies)

    def _restore(self, literals, inlining):
        """``literals`` with the ``_tmp_k`` constraints substituted back and every
        aggregate over one ``__agg_subclause`` atom given that atom's clause body."""
        bound = {lit[2][1]: lit[3] for lit in literals
                 if lit[0] == "cmp" and lit[1] == "=" and lit[2][0] == "var"
                 and lit[2][1].startswith(_TMP)}
        out = []
        for lit in literals:
            if lit[0] == "cmp" and lit[2][0] == "var" and lit[2][1] in bound:
                continue
            lit = _unescaped(_substitute(lit, bound))
            if lit[0] == "cmp":
                sides = [self._inline(side, inlining) if side[0] == "agg" else side
                         for side in (lit[2], lit[3])]
                if any(side is None for side in sides):
                    return None
                lit = ("cmp", lit[1], sides[0], sides[1], lit[4])
            out.append(lit)
        return tuple(out)

    def _inline(self, agg, inlining):
        body = agg[3]
        if len(body) == 1 and body[0][0] == "atom" and body[0][1].startswith(_SUBCLAUSE):
            _, name, args, negated, _ = body[0]
            text = self.printed.get((name, 1))
            sub = None if negated or text is None or (name, 1) in inlining else _printed_clause(text)
            if sub is None or len(sub.head[2]) != len(args) or \
                    any(p[0] != "var" for p in sub.head[2]):
                return None
            inner = self._restore(sub.body, inlining + ((name, 1),))
            if inner is None:
                return None
            rename = {p[1]: a for p, a in zip(sub.head[2], args) if a[0] != "anon"}
            body = tuple(_substitute(lit, rename) for lit in inner)
        else:
            body = self._restore(body, inlining)
            if body is None:
                return None
        return ("agg", agg[1], agg[2], body, agg[4])


def _substitute(term, bound: dict):
    return map_leaves(term, lambda t: bound.get(t[1], t) if t[0] == "var" else t)


def _unescaped(term):
    """``term`` with its string constants as the values they were written for."""
    return map_leaves(term, lambda t: ("str", unescape_symbol(t[1])) if t[0] == "str" else t)


def copies(rules: list[Rule], io: set[str]) -> dict[str, Rule]:
    """The relations Soufflé replaces by the one they copy -> their one clause: not
    read or written, defined by one clause ``r(X1, .., Xn) :- s(X1, .., Xn).`` of
    distinct variables (a cycle of copies is none)."""
    clauses: dict[str, list] = {}
    for r in rules:
        try:
            found = parse_clauses(r.text, source="<rule>")
        except (SdyError, ValueError):
            found = [None]
        clauses.setdefault(r.head[0], []).extend((r, c) for c in found)
    direct = {}
    for name, found in clauses.items():
        if name in io or len(found) != 1 or found[0][1] is None or len(found[0][1].body) != 1:
            continue
        rule, (head, [lit]) = found[0][0], (found[0][1].head, found[0][1].body)
        names = [a[1] for a in head[2] if a[0] == "var"]
        if lit[0] == "atom" and not lit[3] and len(names) == len(head[2]) == len(set(names)) \
                and tuple(lit[2]) == tuple(head[2]):
            direct[name] = rule
    return {name: rule for name, rule in direct.items() if copied(name, direct) is not None}


def copied(name: str, copies: dict[str, Rule]) -> str | None:
    """The relation at the end of ``name``'s chain of copies (None on a cycle)."""
    seen = {name}
    while name in copies:
        name = copies[name].atoms[0][0]
        if name in seen:
            return None
        seen.add(name)
    return name


def canonical(head, body, copies: dict[str, Rule]) -> tuple:
    """The clause as Soufflé keeps it, without places, up to the names of its
    variables: ``X = Y`` of two variables resolved, copied relations named by what
    they copy, a variable an atom names once in the whole clause written ``_``,
    variables named by order of first occurrence."""
    body = list(body)
    while True:
        eq = next((lit for lit in body if lit[0] == "cmp" and lit[1] == "="
                   and lit[2][0] == "var" and lit[3][0] == "var"), None)
        if eq is None:
            break
        body.remove(eq)
        bound = {eq[2][1]: eq[3]}
        head, body = _substitute(head, bound), [_substitute(lit, bound) for lit in body]
    counts: dict[str, int] = {}

    def count(term):
        for t in _terms(term):
            if t[0] == "var":
                counts[t[1]] = counts.get(t[1], 0) + 1

    count(head)
    for lit in body:
        count(lit)
    names: dict[str, str] = {}

    def walk(term, in_atom=False):
        kind = term[0]
        if kind == "var":
            if in_atom and counts[term[1]] == 1:
                return ("anon",)
            return ("var", names.setdefault(term[1], f"V{len(names)}"))
        if kind == "bin":
            return ("bin", term[1], walk(term[2]), walk(term[3]))
        if kind == "atom":
            return ("atom", copied(term[1], copies), tuple(walk(a, True) for a in term[2]),
                    term[3])
        if kind == "cmp":
            return ("cmp", term[1], walk(term[2]), walk(term[3]))
        if kind == "agg":
            expr = None if term[2] is None else walk(term[2])
            return ("agg", term[1], expr, tuple(walk(lit) for lit in term[3]))
        return term

    return walk(head), tuple(walk(lit) for lit in body)


def _terms(term):
    """``term`` and every term inside it."""
    yield term
    kind = term[0]
    inner = (term[2], term[3]) if kind in ("bin", "cmp") else term[2] if kind == "atom" else \
        ((term[2],) if term[2] is not None else ()) + term[3] if kind == "agg" else ()
    for t in inner:
        yield from _terms(t)
