"""Check a program against the subset sdy-dl's engines implement, before any engine runs it.

:func:`checked_clauses` is every engine's entry point: it returns the
program's facts and rules (one clause per head) after checking, with one
located ``SdyError`` for the first problem found:

* directives: ``.decl``, ``.type T <: number|symbol``, ``.input``/``.output``
  (``.output a, b``; parameters ``IO=file``, and ``IO=stdout`` for outputs);
  any other directive (``.limitsize``, ``.plan``, ``.pragma``, ...) is an error;
* every atom names a declared relation with its arity;
* aggregates stand only as a whole side of a comparison, their bodies hold a
  positive atom;
* groundedness as Soufflé defines it: every variable is bound by a positive
  atom or an equality of the scope it occurs in; a variable of an aggregate
  is *injected* when the enclosing scopes bind it (it is then fixed inside
  the aggregate), otherwise *local*; a variable bound only inside an
  aggregate but used outside it (a "witness") and a variable of an
  aggregate's expression that also occurs outside it are errors;
* types, Soufflé's rules: arithmetic and ordered comparisons on numbers only;
  a variable's type is the meet of the columns of the positive atoms it
  stands in (a declared ``.type A <: number`` is below ``number``, two such
  types meet nowhere); the sides of a comparison are of one type; the head
  and positive atoms take subtypes of their columns' types, negated atoms
  values of their kind; constants, arithmetic and ``count`` fit any type of
  their kind, ``sum``, ``min`` and ``max`` are of their expression's type;
* stratification: no relation depends on itself through negation or an
  aggregate.

Local variables of aggregates are renamed apart (``X`` of the second
aggregate becomes ``X_2``), so after the check a variable that occurs both
inside and outside an aggregate is exactly an injected one.  The equalities
Soufflé removes before it evaluates a rule are left out of the clauses
(:func:`unevaluated_dropped`).
"""

from __future__ import annotations

from collections import Counter

from sdy_dl.datalog.clauses import Clause, map_leaves, parse_clauses, variables
from sdy_dl.datalog.lexer import is_directive, split_statements, tokenize
from sdy_dl.datalog.program import Program
from sdy_dl.datalog.stratify import check_stratification
from sdy_dl.errors import SdyError

SOURCE = "<program>"

_CHECKED: dict[str, list[Clause]] = {}


def checked_clauses(program: Program) -> list[Clause]:
    """``program``'s facts and rules, checked (see the module docstring); computed
    once per program text in a process."""
    found = _CHECKED.get(program.text)
    if found is None:
        found = _CHECKED[program.text] = _Checker(program).run()
    return found


# -- directives -----------------------------------------------------------------

_IO_PARAMS = {"input": {"file"}, "output": {"file", "stdout"}}


def _check_directive(stmt, program: Program) -> None:
    def error(message, tok=None):
        tok = tok or stmt[0]
        return SdyError(message, file=SOURCE, line=tok[2], col=tok[3])

    if len(stmt) < 2 or stmt[1][0] != "ident":
        raise error("a directive needs a name after '.'")
    name, texts = stmt[1][1], [t[1] for t in stmt]
    if name == "decl":
        if len(stmt) < 3 or stmt[2][1] not in program.decls:
            raise error("declaration not understood: write '.decl name(col: type, ...)' "
                        "on one line, name in lower case, with a '//' doc comment above",
                        stmt[2] if len(stmt) > 2 else None)
        decl = program.decls[stmt[2][1]]
        shape = [".", "decl", decl.name, "("]
        for k, (col, _) in enumerate(decl.columns):
            shape += ([","] if k else []) + [col, ":", decl.type_names[k]]
        shape.append(")")
        if texts != shape:
            at = next((t for t, s in zip(stmt, shape) if t[1] != s), stmt[min(len(stmt), len(shape)) - 1])
            raise error("declaration not understood (qualifiers, choice domains and "
                        "other extensions are not supported)", at)
    elif name == "type":
        if len(stmt) != 5 or stmt[3][1] != "<:" or stmt[4][1] not in ("number", "symbol"):
            raise error("only '.type T <: number' and '.type T <: symbol' are supported")
    elif name in ("input", "output"):
        i = 2
        while True:
            if i >= len(stmt) or stmt[i][0] != "ident":
                raise error(f".{name} needs a relation name", stmt[min(i, len(stmt) - 1)])
            if stmt[i][1] not in program.decls:
                raise error(f".{name} of undeclared relation {stmt[i][1]}", stmt[i])
            i += 1
            if i < len(stmt) and stmt[i][1] == "(":
                i += 1
                while i < len(stmt) and stmt[i][1] != ")":
                    key = stmt[i]
                    if (i + 2 >= len(stmt) or stmt[i + 1][1] != "="
                            or key[1] != "IO" or stmt[i + 2][1] not in _IO_PARAMS[name]):
                        raise error(f"parameter of .{name} not supported (only IO="
                                    f"{'/'.join(sorted(_IO_PARAMS[name]))})", key)
                    i += 3
                    if i < len(stmt) and stmt[i][1] == ",":
                        i += 1
                if i >= len(stmt):
                    raise error(f".{name}: missing ')'", stmt[-1])
                i += 1
            if i == len(stmt):
                break
            if stmt[i][1] != ",":
                raise error(f".{name}: expected ',' or the end of the line", stmt[i])
            i += 1
    else:
        raise error(f"directive .{name} is not supported by sdy-dl's engines", stmt[1])


# -- clauses --------------------------------------------------------------------

class _Checker:
    def __init__(self, program: Program):
        self.program = program
        self.clause: Clause | None = None
        self.renamed = 0

    def error(self, message: str, place=None) -> SdyError:
        line, col = place or (self.clause.line, self.clause.col)
        return SdyError(message, file=SOURCE, line=line, col=col)

    def run(self) -> list[Clause]:
        for stmt in split_statements(tokenize(self.program.text, SOURCE), SOURCE):
            if is_directive(stmt):
                _check_directive(stmt, self.program)
        out = []
        for clause in parse_clauses(self.program.text, SOURCE):
            self.clause = clause
            out.append(self.check(clause))
        check_stratification(out)
        return out

    # structure ----------------------------------------------------------------

    def atom_shape(self, atom) -> None:
        decl = self.program.decls.get(atom[1])
        if decl is None:
            raise self.error(f"{atom[1]}(...) is not a declared relation", atom[4])
        if len(atom[2]) != decl.arity:
            raise self.error(f"{atom[1]} has {decl.arity} columns, not {len(atom[2])}", atom[4])
        for a in atom[2]:
            self.no_aggregate(a, atom[4], "an aggregate as an atom's argument is not supported")

    def no_aggregate(self, term, place, message) -> None:
        if term[0] == "agg":
            raise self.error(message, term[4])
        if term[0] == "bin":
            self.no_aggregate(term[2], place, "an aggregate inside arithmetic is not supported")
            self.no_aggregate(term[3], place, "an aggregate inside arithmetic is not supported")

    def no_anon(self, term, place) -> None:
        if term[0] == "anon":
            raise self.error("'_' stands only as an atom's argument", place)
        if term[0] == "bin":
            self.no_anon(term[2], place)
            self.no_anon(term[3], place)

    def structure(self, literals) -> None:
        for lit in literals:
            if lit[0] == "atom":
                self.atom_shape(lit)
                for a in lit[2]:
                    if a[0] == "bin":
                        self.no_anon(a, lit[4])
                continue
            for side in (lit[2], lit[3]):
                self.no_anon(side, lit[4])
                if side[0] == "agg":
                    if side[2] is not None:
                        self.no_aggregate(side[2], side[4], "an aggregate inside an aggregate's "
                                          "expression is not supported")
                        self.no_anon(side[2], side[4])
                    if not any(b[0] == "atom" and not b[3] for b in side[3]):
                        raise self.error("an aggregate's body needs a positive atom", side[4])
                    self.structure(side[3])
                else:
                    self.no_aggregate(side, lit[4], "an aggregate inside arithmetic is not supported")

    # grounding and renaming -----------------------------------------------------

    def grounded(self, literals, bound: set[str]) -> set[str]:
        """The variables ``literals`` bind, given ``bound`` (aggregates bind values)."""
        return _bound_by(literals, bound,
                         lambda other, lit, known: other[0] == "agg" or variables(other) <= known)

    def scope(self, literals, bound: set[str], outside: set[str]) -> tuple:
        """Check the scope ``literals`` (``bound``: variables fixed from outside;
        ``outside``: variables that occur outside it) and rename the local
        variables of its aggregates; the renamed literals."""
        bound = self.grounded(literals, bound)
        out = []
        for lit in literals:
            unbound = variables(lit) - bound if lit[0] == "atom" else set()
            if lit[0] == "atom":
                if lit[3] and unbound:
                    raise self.error(f"variable {min(unbound)} of a negated atom is not bound "
                                     "by a positive atom or an equality", lit[4])
                for a in lit[2]:
                    if a[0] == "bin" and not variables(a) <= bound:
                        raise self.error(f"variable {min(variables(a) - bound)} is not bound "
                                         "(an atom's arithmetic argument binds nothing)", lit[4])
                out.append(lit)
                continue
            sides = []
            for side in (lit[2], lit[3]):
                if side[0] != "agg":
                    if not variables(side) <= bound:
                        raise self.error(f"variable {min(variables(side) - bound)} is not bound "
                                         "by a positive atom or an equality", lit[4])
                    sides.append(side)
                    continue
                sides.append(self.aggregate(side, literals, lit, bound, outside))
            out.append(("cmp", lit[1], sides[0], sides[1], lit[4]))
        return tuple(out)

    def aggregate(self, agg, literals, lit, bound: set[str], outside: set[str]):
        """Check aggregate ``agg`` (a side of ``lit`` among ``literals``) and rename its locals."""
        here = set(outside)
        for other in literals:
            if other is not lit:
                here |= variables(other)
        other_side = lit[3] if lit[2] is agg else lit[2]
        here |= variables(other_side)
        target = variables(agg[2]) if agg[2] is not None else set()
        mine = variables(agg)
        if target & here:
            raise self.error(f"variable {min(target & here)} of the aggregate's expression also "
                             "occurs outside the aggregate (Soufflé reads it as a different "
                             "variable there)", agg[4])
        injected = (mine & bound) - target
        witnesses = (mine & here) - bound
        if witnesses:
            raise self.error(f"variable {min(witnesses)} is bound only inside an aggregate but "
                             "used outside it (witnesses are not supported)", agg[4])
        local = mine - injected
        self.renamed += 1
        taken = variables(self.clause.head) | set().union(*(variables(b) for b in self.clause.body))
        names = {}
        for var in sorted(local):
            new = f"{var}_{self.renamed}"
            while new in taken:
                new += "_"
            names[var] = new
            taken.add(new)
        body = tuple(_rename(b, names) for b in agg[3])
        expr = _rename(agg[2], names) if agg[2] is not None else None
        body = self.scope(body, injected, injected)
        inner = self.grounded(body, injected)
        if expr is not None and not variables(expr) <= inner:
            raise self.error(f"variable {min(variables(expr) - inner)} of the aggregate's "
                             "expression is not bound by its body", agg[4])
        return ("agg", agg[1], expr, body, agg[4])

    def check(self, clause: Clause) -> Clause:
        head = clause.head
        self.atom_shape(head)
        for a in head[2]:
            self.no_anon(a, head[4])
        if not clause.body:
            for a in head[2]:
                if a[0] not in ("num", "str"):
                    raise self.error("a fact's arguments must be constants", head[4])
            self.types(head, ())
            return clause
        self.structure(clause.body)
        body = self.scope(clause.body, set(), variables(head))
        free = variables(head) - self.grounded(body, set())
        if free:
            raise self.error(f"variable {min(free)} of the head is not bound by the body",
                             head[4])
        self.types(head, body)
        return Clause(head, unevaluated_dropped(head, body), clause.line, clause.col)

    # types ------------------------------------------------------------------------

    def types(self, head, body) -> None:
        """Soufflé's typing of the clause (see the module docstring); the first
        disagreement is one located error."""
        decls = self.program.decls
        kinds = {"number": "number", "symbol": "symbol"}
        for decl in decls.values():
            kinds.update(zip(decl.type_names or decl.types, decl.types))
        sources, sinks, comparisons = [], [(head, False)], []

        def collect(literals):
            for lit in literals:
                if lit[0] == "atom":
                    if lit[3]:
                        sinks.append((lit, True))
                    else:
                        sources.append(lit)
                    continue
                comparisons.append(lit)
                for side in (lit[2], lit[3]):
                    if side[0] == "agg":
                        collect(side[3])
        collect(body)

        # a variable's type: the meet of the columns of the positive atoms it stands in
        found: dict[str, set[str]] = {}
        for atom in sources:
            for a, typ in zip(atom[2], _column_types(decls[atom[1]])):
                if a[0] == "var":
                    found.setdefault(a[1], set()).add(typ)
        vtype: dict[str, str] = {}
        for var, types in found.items():
            meet = "number?" if kinds[next(iter(types))] == "number" else "symbol?"
            for t in types:
                meet = _meet(meet, t, kinds)
                if meet is None:
                    raise self.error(f"variable {var} is used with types "
                                     f"{' and '.join(sorted(types))}")
            vtype[var] = meet

        def term_type(term, place) -> str | None:
            """The term's type (``number?``: a constant's, arithmetic's or a count's,
            fitting any number column); None while a variable's is unknown."""
            kind = term[0]
            if kind == "var":
                return vtype.get(term[1])
            if kind in ("num", "str"):
                return "number?" if kind == "num" else "symbol?"
            if kind == "bin":
                for side in (term[2], term[3]):
                    t = term_type(side, place)
                    if t is not None and _kind(t, kinds) != "number":
                        raise self.error(f"arithmetic '{term[1]}' on a symbol", place)
                return "number?"
            if kind == "agg":
                if term[2] is None:
                    return "number?"
                t = term_type(term[2], place)
                if t is not None and _kind(t, kinds) != "number":
                    raise self.error(f"{term[1]} over symbols is not supported", term[4])
                return t   # sum, min and max are of their expression's type
            return None

        def narrow(term, typ: str) -> bool:
            """Give a variable side (or an aggregate's variable expression) ``typ``."""
            if term[0] == "agg" and term[2] is not None:
                return narrow(term[2], typ)
            if term[0] == "var" and vtype.get(term[1]) != typ:
                vtype[term[1]] = typ
                return True
            return False

        # both sides of a comparison are of one type (Soufflé: each a subtype of the other)
        changed = True
        while changed:
            changed = False
            for lit in comparisons:
                left, right = term_type(lit[2], lit[4]), term_type(lit[3], lit[4])
                if left is None and right is None:
                    continue
                meet = left if right is None else right if left is None else _meet(left, right, kinds)
                if meet is None:
                    raise self.error(f"comparison '{lit[1]}' of a {left.rstrip('?')} "
                                     f"with a {right.rstrip('?')}", lit[4])
                if lit[1] not in ("=", "!=") and _kind(meet, kinds) == "symbol":
                    raise self.error(f"ordered comparison '{lit[1]}' of symbols is not supported",
                                     lit[4])
                changed |= narrow(lit[2], meet) | narrow(lit[3], meet)

        # positive atoms take subtypes of their columns' types (the head too); negated
        # atoms, values of their columns' kind
        for atom, negated in [(a, False) for a in sources] + sinks:
            for a, typ in zip(atom[2], _column_types(decls[atom[1]])):
                t = term_type(a, atom[4])
                if t is None or (_kind(t, kinds) == kinds[typ] and (
                        negated or t.endswith("?") or t == typ or typ == kinds[typ])):
                    continue
                what = (f"variable {a[1]} of type {t.rstrip('?')}" if a[0] == "var"
                        else f"a {t.rstrip('?')}")
                raise self.error(f"{atom[1]}: {what} where column of type {typ} is declared",
                                 atom[4])


def _column_types(decl) -> tuple[str, ...]:
    """The declared types of ``decl``'s columns (``number``, ``symbol`` or a ``.type``)."""
    return decl.type_names or decl.types


def _kind(typ: str, kinds: dict[str, str]) -> str:
    """``number`` or ``symbol``: the kind of a type (``number?`` is a constant's)."""
    return kinds[typ.rstrip("?")]


def _meet(a: str, b: str, kinds: dict[str, str]) -> str | None:
    """The largest type below both ``a`` and ``b`` in Soufflé's subtype order (a
    constant's type ``number?`` above ``number`` above each ``.type T <:
    number``, likewise for symbols), or None when there is none."""
    if a == b:
        return a
    if _kind(a, kinds) != _kind(b, kinds):
        return None
    for x, y in ((a, b), (b, a)):
        if x.endswith("?"):
            return y
    for x, y in ((a, b), (b, a)):
        if x == kinds[x]:
            return y
    return None


def unevaluated_dropped(head, body) -> tuple:
    """``body`` without the equalities Soufflé removes before it evaluates a rule
    (its alias resolution, in the rule's own body, not in aggregates): ``V = t``
    or ``t = V`` where the variable ``V`` occurs nowhere else in the clause, and
    ``t = t``, for ``t`` without an aggregate.  Such an equality holds for every
    binding, but a division in ``t`` would stop the run on a zero divisor, which
    Soufflé never meets; a body is never left empty."""
    body = list(body)
    while len(body) > 1:
        counts: Counter = Counter()
        for node in (head, *body):
            _count_variables(node, counts)
        for k, lit in enumerate(body):
            if (lit[0] == "cmp" and lit[1] == "=" and not _has_aggregate(lit)
                    and (lit[2] == lit[3] or any(side[0] == "var" and counts[side[1]] == 1
                                                 for side in (lit[2], lit[3])))):
                del body[k]
                break
        else:
            break
    return tuple(body)


def _count_variables(node, counts: Counter) -> None:
    """Add each occurrence of a named variable in ``node`` (aggregates included) to ``counts``."""
    kind = node[0]
    if kind == "var":
        counts[node[1]] += 1
    elif kind == "bin":
        _count_variables(node[2], counts)
        _count_variables(node[3], counts)
    elif kind == "atom":
        for a in node[2]:
            _count_variables(a, counts)
    elif kind == "cmp":
        _count_variables(node[2], counts)
        _count_variables(node[3], counts)
    elif kind == "agg":
        if node[2] is not None:
            _count_variables(node[2], counts)
        for b in node[3]:
            _count_variables(b, counts)


def _has_aggregate(node) -> bool:
    kind = node[0]
    if kind == "agg":
        return True
    if kind in ("bin", "cmp"):
        return _has_aggregate(node[2]) or _has_aggregate(node[3])
    return False


def injected_variables(clause: Clause) -> dict[tuple, set[str]]:
    """For each aggregate of ``clause`` (by its place): its injected variables, those
    that also occur outside it (the check renamed every local variable apart)."""
    out: dict[tuple, set[str]] = {}

    def occurrences(node, skip, acc: set[str]) -> None:
        kind = node[0]
        if node is skip:
            return
        if kind == "var":
            acc.add(node[1])
        elif kind == "bin":
            occurrences(node[2], skip, acc)
            occurrences(node[3], skip, acc)
        elif kind == "atom":
            for a in node[2]:
                occurrences(a, skip, acc)
        elif kind == "cmp":
            occurrences(node[2], skip, acc)
            occurrences(node[3], skip, acc)
        elif kind == "agg":
            if node[2] is not None:
                occurrences(node[2], skip, acc)
            for b in node[3]:
                occurrences(b, skip, acc)

    def visit(literals):
        for lit in literals:
            if lit[0] == "cmp":
                for side in (lit[2], lit[3]):
                    if side[0] == "agg":
                        outside: set[str] = set()
                        occurrences(clause.head, side, outside)
                        for b in clause.body:
                            occurrences(b, side, outside)
                        out[side[4]] = variables(side) & outside
                        visit(side[3])

    visit(clause.body)
    return out


def materialized(agg) -> bool:
    """Whether Soufflé materialises the body of ``agg`` into a relation of its named
    variables (more than one positive atom, an inner aggregate, or a variable twice
    in its atom), so that it aggregates over their distinct bindings; otherwise
    it aggregates over the tuples of its one positive atom (``_`` positions too)."""
    atoms = [lit for lit in agg[3] if lit[0] == "atom" and not lit[3]]
    if len(atoms) > 1:
        return True
    if any(side[0] == "agg" for lit in agg[3] if lit[0] == "cmp" for side in lit[2:4]):
        return True
    names: list[str] = []

    def collect(term):
        if term[0] == "var":
            names.append(term[1])
        elif term[0] == "bin":
            collect(term[2])
            collect(term[3])
    for a in atoms[0][2]:
        collect(a)
    return len(names) != len(set(names))


def divides(node) -> bool:
    """Whether ``node`` (a term or literal) holds a ``/`` or ``%``, inside aggregates too."""
    kind = node[0]
    if kind == "bin":
        return node[1] in ("/", "%") or divides(node[2]) or divides(node[3])
    if kind == "atom":
        return any(divides(a) for a in node[2])
    if kind == "cmp":
        return divides(node[2]) or divides(node[3])
    if kind == "agg":
        return (node[2] is not None and divides(node[2])) or any(divides(b) for b in node[3])
    return False


def deferred(literals, outside: set[str] = frozenset()) -> list[bool]:
    """For each of ``literals`` (one scope; ``outside``: the variables bound before
    it), whether it runs after the others: it divides, or needs a variable that
    only a dividing literal binds.  Both engines evaluate a division only for
    the bindings that satisfy the rest of the scope, so whether a division by
    zero stops the run does not depend on the order they join in."""
    late = [divides(lit) for lit in literals]
    if not any(late):
        return late
    early = [lit for lit, is_late in zip(literals, late) if not is_late]
    bound = _bound_by(early, outside, lambda other, lit, known:
                      variables(other) & _around(other, lit, literals) <= known)
    out = []
    for lit, is_late in zip(literals, late):
        if is_late:
            out.append(True)
        elif lit[0] == "atom" and not lit[3]:
            out.append(not all(variables(a) <= bound for a in lit[2] if a[0] != "var"))
        elif lit[0] == "atom":
            out.append(not variables(lit) <= bound)
        else:
            need = set()
            for side in (lit[2], lit[3]):
                need |= variables(side) & _around(side, lit, literals)
            out.append(not need <= bound)
    return out


def _bound_by(literals, bound: set[str], known) -> set[str]:
    """``bound`` and the variables ``literals`` bind: those of their positive atoms,
    then, until none is added, the variable side ``X`` of an equality whose other
    side does not hold ``X`` and is known (``known(other side, equality, bound so
    far)``)."""
    bound = set(bound)
    for lit in literals:
        if lit[0] == "atom" and not lit[3]:
            bound |= {a[1] for a in lit[2] if a[0] == "var"}
    changed = True
    while changed:
        changed = False
        for lit in literals:
            if lit[0] != "cmp" or lit[1] != "=":
                continue
            for var, other in ((lit[2], lit[3]), (lit[3], lit[2])):
                if (var[0] == "var" and var[1] not in bound and var[1] not in variables(other)
                        and known(other, lit, bound)):
                    bound.add(var[1])
                    changed = True
    return bound


def _around(side, lit, literals) -> set[str]:
    """The variables of ``side`` that matter outside it: all of a term's; an
    aggregate's that occur elsewhere in the scope (its injected ones)."""
    if side[0] != "agg":
        return variables(side)
    other = lit[3] if lit[2] is side else lit[2]
    return set().union(variables(other), *(variables(x) for x in literals if x is not lit))


def _rename(term, names: dict[str, str]):
    return map_leaves(term, lambda t: ("var", names.get(t[1], t[1])) if t[0] == "var" else t)


