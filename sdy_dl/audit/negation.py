"""Negation provenance: why a tuple is *not* derived by a Datalog program.

The program is evaluated once on its facts with every relation an output
(:class:`Model`; the engine the audit ran).  Asked why no tuple matching a
pattern (``fin_axis(0, 2, 1, _, "x", _, _)``) is in the model,
:meth:`Model.why_not` tries every rule whose head can give it: the rule's
body literals are matched left to right against the model, with the head's
bindings, and the first literal that leaves no instance alive is the one that
did not hold (a positive atom without a matching tuple, a negated atom whose
tuple exists — the *blocking* tuple —, a comparison or an aggregate that
fails).  A missing positive atom of a derived relation is explained in turn
(to ``depth``).  Among a relation's rules the answer leads with the rule
that got furthest (most of its literals held), so a chain
of answers ends at the literal where the derivation really stopped (ties:
the furthest below; chains the caller sets aside, last).  Every
rule is named by its template line in ``datalog/`` (:func:`proofs.rule_origin`).
Soufflé's ``explainnegation`` answers the same question interactively and
one rule deep; this answer is the whole chain.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sdy_dl.audit.proofs import parse_rules, rule_origin
from sdy_dl.datalog.clauses import parse_clauses
from sdy_dl.datalog.program import Program, parse_declarations

#: Partial instances kept per literal (a rule's join is cut there; the answer says so).
MAX_INSTANCES = 4096


@dataclass
class Failure:
    """One rule that could give the tuple, and the body literal that did not hold."""

    rule: str                     # datalog/<template>:line
    text: str                     # the rule as rendered
    held: list[str]               # literals that held, instantiated (first instance)
    failed: str                   # the literal that did not hold, instantiated
    kind: str                     # missing, blocked, comparison, aggregate; head (the body
                                  # holds but the head's values differ), derivable
    relation: str = ""            # the failed literal's relation (atoms)
    args: tuple = ()              # ... and its arguments (None: unbound)
    blocking: str = ""            # blocked: the tuple that exists
    below: "Absence | None" = None

    def progress(self) -> int:
        """How far the derivation got: literals held here and further below."""
        return len(self.held) + (self.below.progress() if self.below else 0)

    def chain(self) -> list["Failure"]:
        """This failure and the first failures below it, outermost first."""
        return [self] + (self.below.failures[0].chain() if self.below and self.below.failures else [])

    def to_json(self) -> dict:
        out = {"rule": self.rule, "text": self.text, "held": self.held, "failed": self.failed,
               "kind": self.kind}
        if self.blocking:
            out["blocking"] = self.blocking
        if self.below is not None:
            out["below"] = self.below.to_json()
        return out


@dataclass
class Absence:
    """Why no tuple matching ``atom`` is derived: one :class:`Failure` per rule, furthest first."""

    atom: str
    failures: list[Failure] = field(default_factory=list)
    input_relation: bool = False   # an input relation: the fact is not given

    def progress(self) -> int:
        return max((f.progress() for f in self.failures), default=0)

    def to_json(self) -> dict:
        return {"atom": self.atom, "input": self.input_relation,
                "rules": [f.to_json() for f in self.failures]}

    def lines(self, indent: str = "", top: int = 1) -> list[str]:
        """The answer as indented lines: the ``top`` furthest rules, each with its chain."""
        if self.input_relation:
            return [f"{indent}{self.atom}: not among the input facts"]
        out = [f"{indent}no {self.atom}:"]
        for f in self.failures[:top]:
            out.append(f"{indent}  rule {f.rule}: {f.text}")
            for h in f.held:
                out.append(f"{indent}    holds: {h}")
            what = {"missing": "no tuple", "blocked": "blocked by " + f.blocking,
                    "comparison": "false", "aggregate": "no value",
                    "head": "the rule derives only this, not the tuple asked for",
                    "derivable": "derivable: the tuple is in the model"}
            label = "derives" if f.kind in ("head", "derivable") else "fails"
            out.append(f"{indent}    {label}: {f.failed}  ({what[f.kind]})")
            if f.below is not None:
                out += f.below.lines(indent + "    ", 1)
        return out


_PARSED: dict[str, dict[str, list]] = {}


def _clauses_by_head(program: Program) -> dict[str, list]:
    """head relation -> its (clause, rule) pairs, parsed once per program text (the
    step programs of an audit are a few, by their ``max_factors``)."""
    found = _PARSED.get(program.text)
    if found is None:
        found = {}
        clauses, rules = parse_clauses(program.text), parse_rules(program)
        if len(clauses) != len(rules):   # (a rule with several heads: not in sdy-dl's programs)
            raise ValueError("negation provenance needs one head per rule")
        for clause, rule in zip(clauses, rules):
            if clause.body:
                found.setdefault(clause.head[1], []).append((clause, rule))
        if len(_PARSED) >= 8:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[program.text] = found
    return found


def _show(v) -> str:
    return str(v) if isinstance(v, int) else '"' + str(v).replace('"', '\\"') + '"'


class Model:
    """Every relation of ``program`` evaluated on ``facts`` by ``run`` (an engine's
    ``run(program, facts)``), and why-not answers over it."""

    def __init__(self, program: Program, facts: dict, run, aside=None):
        """``aside(chain)``: whether a chain of failures explains little (it is ranked
        after the others: e.g. "the tensor did not have the axis already")."""
        extra = "".join(f"\n.output {name}" for name, d in program.decls.items()
                        if d not in program.outputs)
        text = program.text + extra + "\n"
        everything = Program(text, parse_declarations(text, source="<why-not program>"))
        relations = run(everything, facts)
        self.rel: dict[str, set] = {name: set(map(tuple, rows)) for name, rows in relations.items()}
        for name, rows in facts.items():
            self.rel.setdefault(name, set()).update(map(tuple, rows))
        self.inputs = {d.name for d in program.inputs}
        self.clauses = _clauses_by_head(program)
        self._memo: dict[tuple, Absence] = {}
        self.aside = aside or (lambda chain: False)

    def rows(self, relation: str) -> list[tuple]:
        return sorted(self.rel.get(relation, ()))

    def has(self, relation: str, pattern: tuple) -> bool:
        return next(self._matching(relation, pattern), None) is not None

    def _matching(self, relation: str, pattern: tuple):
        for row in self.rel.get(relation, ()):
            if len(row) == len(pattern) and all(p is None or p == v for p, v in zip(pattern, row)):
                yield row

    # -- why not ----------------------------------------------------------------

    def why_not(self, relation: str, pattern: tuple, depth: int = 12) -> Absence:
        """Why no tuple of ``relation`` matches ``pattern`` (None: any value)."""
        key = (relation, tuple(pattern), depth)
        if key in self._memo:
            return self._memo[key]
        atom = f"{relation}({', '.join('_' if p is None else _show(p) for p in pattern)})"
        absence = Absence(atom)
        self._memo[key] = absence   # (a recursive ask sees no failures: it ends there)
        if relation in self.inputs or relation not in self.clauses:
            absence.input_relation = True
            return absence
        for clause, rule in self.clauses[relation]:
            binding = _unify_head(clause.head[2], pattern)
            if binding is None:
                continue
            absence.failures.append(self._try(clause, rule, binding, tuple(pattern), depth))
        absence.failures.sort(key=lambda f: (self.aside(f.chain()), f.kind == "head",
                                             -len(f.held), -f.progress()))
        # (stable: program order on ties)
        return absence

    def _try(self, clause, rule, binding: dict, pattern: tuple, depth: int) -> Failure:
        instances = [binding]
        held = []
        for literal in clause.body:
            survivors = self._literal(literal, instances)
            if not survivors:
                return self._failure(clause, rule, literal, instances, held, depth)
            instances = survivors[:MAX_INSTANCES]
            held.append(_literal_text(literal, instances[0]))
        # Every literal holds: the head's computed arguments (N + 1) decide.
        head = clause.head
        matching = [b for b in instances if all(
            p is None or _value(a, b) == p for a, p in zip(head[2], pattern))]
        text = _literal_text(head, (matching or instances)[0])
        if matching:
            return Failure(rule_origin(rule), rule.text, held, text, "derivable")
        return Failure(rule_origin(rule), rule.text, held, text, "head")

    def _failure(self, clause, rule, literal, instances, held, depth) -> Failure:
        first = sorted(instances, key=lambda b: sorted((k, str(v)) for k, v in b.items()))[0]
        text = _literal_text(literal, first)
        f = Failure(rule_origin(rule), rule.text, held, text, "comparison")
        if literal[0] == "atom":
            f.relation = literal[1]
            f.args = tuple(_value(a, first) for a in literal[2])
            if literal[3]:
                f.kind = "blocked"
                pattern = tuple(_value(a, first) for a in literal[2])
                row = next(iter(sorted(self._matching(literal[1], pattern))), None)
                f.blocking = (f"{literal[1]}({', '.join(_show(v) for v in row)})"
                              if row is not None else "")
            else:
                f.kind = "missing"
                if depth > 0:
                    pattern = tuple(_value(a, first) for a in literal[2])
                    f.below = self.why_not(literal[1], pattern, depth - 1)
        elif _has_aggregate(literal):
            f.kind = "aggregate"
        return f

    def _literal(self, literal, instances: list[dict]) -> list[dict]:
        out = []
        kind = literal[0]
        for b in instances:
            if kind == "atom":
                name, args, negated = literal[1], literal[2], literal[3]
                if negated:
                    pattern = tuple(_value(a, b) for a in args)
                    if not self.has(name, pattern):
                        out.append(b)
                else:
                    out += self._extend(name, args, b)
            else:
                out += self._compare(literal, b)
        return out

    def _extend(self, name, args, b: dict) -> list[dict]:
        pattern = tuple(_value(a, b) for a in args)
        found = []
        for row in self._matching(name, pattern):
            nb = dict(b)
            ok = True
            for a, v in zip(args, row):
                if a[0] == "var":
                    if a[1] in nb and nb[a[1]] != v:
                        ok = False
                        break
                    nb[a[1]] = v
                elif a[0] == "bin":
                    if _eval(a, nb) != v:
                        ok = False
                        break
            if ok:
                found.append(nb)
        return found

    def _compare(self, literal, b: dict) -> list[dict]:
        _, op, left, right = literal[:4]
        lv, rv = self._term(left, b), self._term(right, b)
        if op == "=" and (lv is _UNBOUND) != (rv is _UNBOUND):
            var, value = (left, rv) if lv is _UNBOUND else (right, lv)
            if var[0] != "var" or value is _NONE:
                return []
            return [{**b, var[1]: value}]
        if lv is _NONE or rv is _NONE or lv is _UNBOUND or rv is _UNBOUND:
            return []
        ok = {"=": lv == rv, "!=": lv != rv, "<": lv < rv, "<=": lv <= rv, ">": lv > rv,
              ">=": lv >= rv}[op]
        return [b] if ok else []

    def _term(self, term, b: dict):
        kind = term[0]
        if kind == "var":
            return b.get(term[1], _UNBOUND)
        if kind == "agg":
            values = []
            instances = [dict(b)]
            for literal in term[3]:
                instances = self._literal(literal, instances)
            if term[1] == "count":
                return len({tuple(sorted(i.items())) for i in instances})
            values = [_eval(term[2], i) for i in instances]
            if term[1] == "sum":
                return sum(values)
            if not values:
                return _NONE
            return min(values) if term[1] == "min" else max(values)
        try:
            return _eval(term, b)
        except KeyError:
            return _UNBOUND


class _Marker:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


_UNBOUND = _Marker("unbound")
_NONE = _Marker("none")


def _unify_head(args, pattern) -> dict | None:
    """The bindings a head's arguments take from ``pattern`` (None: they cannot match)."""
    binding: dict = {}
    if len(args) != len(pattern):
        return None
    for a, p in zip(args, pattern):
        if p is None:
            continue
        if a[0] == "var":
            if a[1] in binding and binding[a[1]] != p:
                return None
            binding[a[1]] = p
        elif a[0] in ("num", "str"):
            if a[1] != p:
                return None
    return binding


def _value(term, b: dict):
    """A term's value under ``b``, or None when it has an unbound variable."""
    if term[0] == "anon":
        return None
    try:
        return _eval(term, b)
    except KeyError:
        return None


def _eval(term, b: dict):
    kind = term[0]
    if kind == "var":
        return b[term[1]]
    if kind in ("num", "str"):
        return term[1]
    if kind == "bin":
        x, y = _eval(term[2], b), _eval(term[3], b)
        return {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y,
                "/": lambda: int(x / y) if y else 0, "%": lambda: x % y if y else 0}[term[1]]()
    raise KeyError(kind)


def _has_aggregate(literal) -> bool:
    return literal[0] == "cmp" and (literal[2][0] == "agg" or literal[3][0] == "agg")


def _term_text(term, b: dict) -> str:
    kind = term[0]
    if kind == "var":
        return _show(b[term[1]]) if term[1] in b else term[1]
    if kind == "anon":
        return "_"
    if kind in ("num", "str"):
        return _show(term[1])
    if kind == "bin":
        return f"{_term_text(term[2], b)} {term[1]} {_term_text(term[3], b)}"
    if kind == "agg":
        inner = ", ".join(_literal_text(lit, b) for lit in term[3])
        head = term[1] + ("" if term[2] is None else " " + _term_text(term[2], b))
        return f"{head} : {{ {inner} }}"
    return "?"


def _literal_text(literal, b: dict) -> str:
    if literal[0] == "atom":
        text = f"{literal[1]}({', '.join(_term_text(a, b) for a in literal[2])})"
        return "!" + text if literal[3] else text
    return f"{_term_text(literal[2], b)} {literal[1]} {_term_text(literal[3], b)}"
