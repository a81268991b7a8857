"""The python engine's code generator: a Soufflé program's rules as a Python module.

Each rule becomes a block of nested loops over the hash indexes of
:mod:`sdy_dl.engines.python_engine` (``index.of[IndexKey(...)]``), the rules of
one component one function, and, in a recursive component, the delta
variants reading one relation another; ``EVALUATE`` runs the components in
dependency order.  Only a program whose plan is not in the cache is
generated (the engine keys the cache by this module's code).
"""

from __future__ import annotations

from sdy_dl.datalog.check import checked_clauses, deferred, injected_variables, materialized
from sdy_dl.datalog.clauses import Clause, variables
from sdy_dl.datalog.program import Program
from sdy_dl.datalog.stratify import components as relation_components, dependencies
from sdy_dl.errors import SdyError

_PY_OPS = {"=": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=",
           "+": "+", "-": "-", "*": "*"}


def program_source(program: Program) -> str:
    """The Python module evaluating ``program``: per component, one function of
    its rules and, for a recursive component, one per member relation of the
    variants of its rules reading that relation's delta (a rule has one per
    recursive body atom); ``FACTS`` (relation, its facts), ``COMPONENTS``
    (members, the rules' function, the variants' functions by the relation
    whose delta they read, the other relations the rules read) in evaluation
    order, and ``EVALUATE(rel, index, memoised, off)``, the components one
    after the other: each passed over unless a relation of its :func:`_guard`
    has tuples, evaluated by ``memoised(cid)`` until the memo stops keying it
    (``off[cid]``), then directly.

    A scan whose key holds the key of another scan of the same relation looks
    its tuples up in that one's index (:func:`_served_by_subsets`): the rules'
    code is made with those lookups left open (:class:`_Lookup`), and written
    out once the keys every scan uses are known."""
    clauses = checked_clauses(program)
    rules = [c for c in clauses if c.body]
    edges = dependencies(clauses)
    comp = relation_components({(h, b) for h, b, _ in edges})
    for c in rules:   # a rule without relations in its body depends on nothing
        comp.setdefault(c.head[1], -1)
    functions: list[tuple[str, list[_Gen]]] = []   # (name, its rules' code)
    used: dict[str, set] = {}   # relation -> the keys its scans look up

    def function(items: list[tuple[Clause, int | None]]) -> str:
        name = f"r{len(functions)}"
        functions.append((name, _rules(items, used)))
        return name

    components = []
    driver = ["def EVALUATE(rel, index, memoised, off):"]
    unpacked = []   # a recursive component's members and variants, as globals
    for cid, comp_id in enumerate(sorted({comp[c.head[1]] for c in rules})):
        members = sorted(name for name, c in comp.items() if c == comp_id)
        group = [c for c in rules if comp[c.head[1]] == comp_id]
        compiled = function([(c, None) for c in group])
        variants: dict[str, list] = {}   # delta relation -> the variants reading it
        for c in group:
            for k, lit in enumerate(c.body):
                if lit[0] == "atom" and not lit[3] and lit[1] in members:
                    variants.setdefault(lit[1], []).append((c, k))
        by_source = ", ".join(f"{name!r}: {function(items)}" for name, items in variants.items())
        inputs = sorted({b for h, b, _ in edges if comp.get(h) == comp_id} - set(members))
        # (the members as a set display in sorted order, not a set's repr: the text,
        # cached as code, is the same whatever the process's hash seed)
        components.append(f"({{{', '.join(map(repr, members))}}}, {compiled}, {{{by_source}}}, "
                          f"{tuple(inputs)!r})")
        guard = _guard(group, members, comp)
        indent = "    "
        if guard:   # (else every rule joins an empty relation: nothing to derive)
            driver.append(f"    if {' or '.join(f'rel[{name!r}]' for name in guard)}:")
            indent += "    "
        if variants:
            unpacked.append(f"M{cid}, _, V{cid}, _ = COMPONENTS[{cid}]")
            direct = f"_recursive(rel, index, M{cid}, {compiled}, V{cid})"
        else:
            direct = f"{compiled}(rel, index, None, rel)"
        driver += [f"{indent}if off[{cid}]:", f"{indent}    {direct}",
                   f"{indent}else:", f"{indent}    memoised({cid})"]
    facts: dict[str, list] = {}
    for c in clauses:
        if not c.body:
            facts.setdefault(c.head[1], []).append(tuple(_constant(a) for a in c.head[2]))
    served = _served_by_subsets(used)
    lines: list[str] = []
    keys: dict[str, str] = {}   # global -> the IndexKey it holds
    for name, gens in functions:
        lines += _rules_lines(name, gens, keys, served)
    lines += [f"{var} = {key}" for var, key in keys.items()]
    lines.append(f"FACTS = {list(facts.items())!r}")
    lines.append("COMPONENTS = [\n    " + ",\n    ".join(components) + "]")
    lines += unpacked
    lines += driver if len(driver) > 1 else driver + ["    pass"]
    return "\n".join(lines) + "\n"


def _served_by_subsets(used: dict[str, set]) -> dict:
    """(relation, key positions) -> the positions of the index where the tuples
    with those key values are looked up, when another index is: the smallest key
    of at least two positions that some scan of the relation uses and that the
    key holds (the key's other positions are compared in the loop).  Fewer
    indexes are built per call (~20% fewer tuples indexed in the step program:
    ``in_dim`` by step, tensor and dim serves four keys), for a few more tuples
    looked at per lookup (a key of two positions or more, such as a step and a
    tensor, picks out a few tuples; one position, often the step, most of
    them)."""
    served = {}
    for name, keys in used.items():
        for key in keys:
            held = [k for k in keys if 2 <= len(k) < len(key) and set(k) < set(key)]
            if held:
                served[(name, key)] = min(held, key=lambda k: (len(k), k))
    return served


def _guard(group: list[Clause], members: list[str], comp: dict[str, int]) -> tuple[str, ...]:
    """Relations of which at least one has tuples whenever a rule of ``group`` (one
    component, ``members``) can derive anything, before its first round: one
    relation that each rule's body joins (a positive atom outside aggregates),
    preferably a member (empty before the round unless given facts), else the
    one derived last.  Empty when some rule joins no relation."""
    chosen = set()
    for c in group:
        joined = {lit[1] for lit in c.body if lit[0] == "atom" and not lit[3]}
        if not joined:
            return ()
        chosen.add(max(joined, key=lambda name: (name in members, comp.get(name, -2), name)))
    return tuple(sorted(chosen))


def _wrapped(expr: str) -> str:
    """``expr`` wrapped to a 32-bit signed number, as the engine's ``_w`` does,
    written out (a call per arithmetic operation costs more than the operation)."""
    return f"((({expr}) + 2147483648 & 4294967295) - 2147483648)"


def _constant(term):
    if term[0] in ("num", "str"):
        return term[1]
    raise SdyError("a fact's arguments must be constants")


# -- code generation ---------------------------------------------------------

def _rules(items: list[tuple[Clause, int | None]], used: dict) -> list[_Gen]:
    """The code of the rules ``items`` (each a clause, reading the delta at body
    position ``delta`` if given), each adding its tuples to ``out[head]``, its
    lookups left open; the keys their scans look up are added to ``used``."""
    gens = []
    for clause, delta in items:
        gen = _Gen(clause, used)
        gen.depth = 2
        start = gen.once()
        literals = list(enumerate(clause.body))
        if delta is not None:   # the delta is small: join from it
            literals.insert(0, literals.pop(delta))
        gen.conjunction(literals, delta)
        head_args = ", ".join(gen.expr(a) for a in clause.head[2])
        gen.line(f"add(({head_args}{',' if len(clause.head[2]) == 1 else ''}))")
        gen.end_once(start)
        gens.append(gen)
    return gens


def _rules_lines(name: str, gens: list[_Gen], keys: dict[str, str], served: dict) -> list[str]:
    """The source of function ``name(rel, index, delta_index, out)`` running the
    rules' code ``gens`` (:func:`_rules`) one after the other, their lookups in
    the indexes ``served`` gives (:func:`_served_by_subsets`); the index keys it
    reads are added to ``keys`` (global -> its definition)."""
    fetched: dict[str, str] = {}   # relation variable -> its fetch, once per call
    blocks: list[str] = []
    for gen in gens:
        lines = gen.written(served)
        fetched.update(gen.sets)
        keys.update(gen.keys)
        # Run the rule when no relation the body joins is empty; fetch the indexes
        # the loops read then (each once per call, not per tuple).
        test = " and ".join(sorted(gen.required)) or "True"
        blocks.append(f"    if {test}:")
        blocks.append(f"        add = out[{gen.clause.head[1]!r}].add")
        blocks += [f"        {var} = {fetch}" for var, fetch in gen.indexes.items()]
        blocks += lines
    header = [f"def {name}(rel, index, delta_index, out):"]
    header += [f"    {var} = {fetch}" for var, fetch in fetched.items()]
    return header + blocks + [""]


class _Lookup:
    """An atom looked up by some of its columns, written out by :meth:`_Gen.written`
    once the indexes are known: a ``test`` (``negated`` or not) or a ``scan``
    binding ``targets`` (``compared``: its tests of repeated variables)."""

    __slots__ = ("kind", "depth", "name", "source", "keys", "key_exprs", "args", "negated",
                 "targets", "compared")

    def __init__(self, kind: str, depth: int, name: str, source: str, keys: list[int],
                 key_exprs: list[str], args: list, negated: bool = False,
                 targets: list[str] | None = None, compared: list[str] | None = None):
        self.kind, self.depth, self.name, self.source = kind, depth, name, source
        self.keys, self.key_exprs, self.args, self.negated = keys, key_exprs, args, negated
        self.targets, self.compared = targets, compared


def _continues(line, indent: str) -> bool:
    """Whether ``line`` (a line or a :class:`_Lookup`) is at ``indent`` and ends in
    ``continue`` (a lookup's test does)."""
    if isinstance(line, _Lookup):
        return line.kind == "test" and "    " * line.depth == indent
    return line.startswith(indent) and line[len(indent)] != " " and line.endswith(": continue")


def _target(targets: list[str]) -> str:
    """A loop's target unpacking a tuple into ``targets`` (``_``: a column not read)."""
    return f"({', '.join(targets)},)" if any(t != "_" for t in targets) else "_"


class _Gen:
    def __init__(self, clause: Clause, used: dict):
        self.clause = clause
        self.served: dict = {}   # (relation, key) -> the key of the index it is looked up in
        self.used = used         # relation -> the keys its scans use (collected)
        self.injected = injected_variables(clause)
        self.lines: list = []    # lines and _Lookups
        self.depth = 0
        self.bound: set[str] = set()
        self.counter = 0
        self.aggregates = 0   # how many aggregates the code being emitted is inside
        self.sets: dict[str, str] = {}      # local variable -> the relation it holds
        self.indexes: dict[str, str] = {}   # local variable -> the index it holds
        self.keys: dict[str, str] = {}      # global -> the index key it holds
        self.required: set[str] = set()     # relations the body joins (none empty, or no tuple)

    def error(self, message: str) -> SdyError:
        return SdyError(message, file="<program>", line=self.clause.line, col=self.clause.col)

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def once(self) -> int:
        """Open a loop run once, which a test before any scan leaves with
        ``continue``; where the loop's body starts (for :meth:`end_once`)."""
        self.line("for _once in (0,):")
        self.depth += 1
        return len(self.lines)

    def end_once(self, start: int) -> None:
        """Close the loop :meth:`once` opened, leaving it out (its body one level
        less deep) when nothing in its body leaves it (a test ends in ``continue``)."""
        opening = self.lines[start - 1]
        indent = opening[:len(opening) - len(opening.lstrip())] + "    "
        body = self.lines[start:]
        if any(_continues(line, indent) for line in body):
            return
        for line in body:
            if isinstance(line, _Lookup):
                line.depth -= 1
        self.lines[start - 1:] = [line if isinstance(line, _Lookup) else line[4:] for line in body]

    def written(self, served: dict) -> list[str]:
        """The code's lines, its lookups written out in the indexes ``served`` gives."""
        self.served = served
        out = []
        for line in self.lines:
            if not isinstance(line, _Lookup):
                out.append(line)
                continue
            indent = "    " * line.depth
            out += [indent + text for text in (self._test_lines(line) if line.kind == "test"
                                               else self._scan_lines(line))]
        return out

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def expr(self, term) -> str:
        kind = term[0]
        if kind == "var":
            if term[1] not in self.bound:
                raise self.error(f"variable {term[1]} is not bound")
            return f"v_{term[1]}"
        if kind in ("num", "str"):
            return repr(term[1])
        if kind == "bin":
            left, right = self.expr(term[2]), self.expr(term[3])
            if term[1] == "/":
                return f"_div({left}, {right}, {self.clause.line}, {self.clause.col})"
            if term[1] == "%":
                return f"_mod({left}, {right}, {self.clause.line}, {self.clause.col})"
            return _wrapped(f"{left} {_PY_OPS[term[1]]} {right}")
        raise self.error(f"unexpected {kind} in an expression")

    def ready(self, lit) -> str | None:
        """How ``lit`` can run with the variables bound now: 'scan', 'test',
        'assign', or None (not yet)."""
        if lit[0] == "atom":
            if not lit[3]:
                ok = all(a[0] in ("var", "anon") or variables(a) <= self.bound for a in lit[2])
                return "scan" if ok else None
            return "test" if variables(lit) <= self.bound else None
        left, right = lit[2], lit[3]
        need = set()
        for side in (left, right):
            # An aggregate needs its injected variables; the others are its own.
            need |= self.injected[side[4]] if side[0] == "agg" else variables(side)
        missing = need - self.bound
        if not missing:
            return "test"
        if lit[1] == "=":
            for var_side, other in ((left, right), (right, left)):
                if (var_side[0] == "var" and missing == {var_side[1]}
                        and var_side[1] not in variables(other)):
                    return "assign"
        return None

    def bound_args(self, atom) -> int:
        """How many arguments of ``atom`` are known before it is scanned."""
        return sum(1 for a in atom[2] if a[0] != "anon" and variables(a) <= self.bound)

    def conjunction(self, literals, delta: int | None) -> None:
        """Emit loops and tests for ``literals`` ((position, literal) pairs); the
        deferred ones (:func:`~sdy_dl.datalog.check.deferred`: divisions) last."""
        late = deferred([lit for _, lit in literals], set(self.bound))
        pending = [item for item, is_late in zip(literals, late) if not is_late]
        later = [item for item, is_late in zip(literals, late) if is_late]
        while pending or later:
            if not pending:
                pending, later = later, []
            choice = None
            for n, (pos, lit) in enumerate(pending):
                how = self.ready(lit)
                if how in ("test", "assign"):
                    choice = (n, how)
                    break
            if choice is None:   # the delta (the fewest tuples), else the scan with
                best = -1        # the most bound arguments (an index lookup)
                for n, (pos, lit) in enumerate(pending):
                    if self.ready(lit) == "scan":
                        if delta is not None and pos == delta:
                            choice = (n, "scan")
                            break
                        if self.bound_args(lit) > best:
                            choice, best = (n, "scan"), self.bound_args(lit)
            if choice is None:
                raise self.error("rule is not safe: a literal's variables are never bound")
            n, how = choice
            pos, lit = pending.pop(n)
            if lit[0] == "atom":
                self.atom(lit, delta is not None and pos == delta)
            else:
                self.comparison(lit, how)

    def atom(self, lit, from_delta: bool) -> None:
        name, args, negated = lit[1], lit[2], lit[3]
        keys, key_exprs, binds, checks = [], [], [], []
        seen: dict[str, int] = {}
        for p, a in enumerate(args):
            if a[0] == "anon":
                continue
            if a[0] == "var" and a[1] not in self.bound:
                if a[1] in seen:
                    checks.append((p, seen[a[1]]))
                else:
                    seen[a[1]] = p
                    binds.append((a[1], p))
                continue
            keys.append(p)
            key_exprs.append(self.expr(a))
        source = "delta_index" if from_delta else "index"
        relation = self._relation(name, from_delta)
        if not negated and not self.aggregates:
            self.required.add(relation)
        # A test is enough unless the atom binds something, or it is counted in an
        # aggregate (Soufflé counts each matching tuple, '_' positions included).
        if negated or (not binds and not checks
                       and (not self.aggregates or len(keys) == len(args))):
            if len(keys) == len(args):
                test = f"({', '.join(key_exprs)}{',' if len(keys) == 1 else ''}) in {relation}"
            elif keys:
                self.lines.append(_Lookup("test", self.depth, name, source, keys, key_exprs,
                                          args, negated))
                return
            else:
                test = relation
            self.line(f"if {'' if negated else 'not '}{test}: continue")
            return
        # The loop unpacks each tuple into the variables it binds ('_' for the
        # other columns; a repeated variable's later columns into fresh names,
        # compared after).
        targets = ["_"] * len(args)
        compared = []
        for var, p in binds:
            targets[p] = f"v_{var}"
        for p, q in checks:
            targets[p] = self.fresh("c")
            compared.append(f"if {targets[p]} != {targets[q]}: continue")
        if keys:
            self.used.setdefault(name, set()).add(tuple(keys))
            self.lines.append(_Lookup("scan", self.depth, name, source, keys, key_exprs, args,
                                      targets=targets, compared=compared))
        else:
            self.line(f"for {_target(targets)} in {relation}:")
            self.lines += ["    " * (self.depth + 1) + text for text in compared]
        self.depth += 1
        self.bound.update(var for var, _ in binds)

    def _test_lines(self, lookup: _Lookup) -> list[str]:
        """The lines of a test, left when no tuple has the key's values (or, negated,
        when one has)."""
        name, keys, key_exprs = lookup.name, lookup.keys, lookup.key_exprs
        if not lookup.negated and self._reuses(name, keys, lookup.args):
            # Some tuple of the served index's bucket has the key's other values.
            targets, compared, keys, key_exprs = self._served(name, len(lookup.args), keys,
                                                              key_exprs)
            return [f"for ({', '.join(targets)},) in "
                    f"{self._lookup(lookup.source, name, keys, key_exprs)}:",
                    f"    if {' and '.join(compared)}: break",
                    "else: continue"]
        return [f"if {'' if lookup.negated else 'not '}"
                f"{self._lookup(lookup.source, name, keys, key_exprs)}: continue"]

    def _scan_lines(self, lookup: _Lookup) -> list[str]:
        """The lines of a scan: the loop over the tuples with the key's values, and
        its tests."""
        name, keys, key_exprs = lookup.name, lookup.keys, lookup.key_exprs
        targets, compared = list(lookup.targets), []
        if self._reuses(name, keys, lookup.args):
            held, served, keys, key_exprs = self._served(name, len(targets), keys, key_exprs)
            targets = [t if h == "_" else h for t, h in zip(targets, held)]
            compared = [f"if not ({test}): continue" for test in served]
        found = self._lookup(lookup.source, name, keys, key_exprs)
        return [f"for {_target(targets)} in {found}:"] + [f"    {text}" for text in
                                                          compared + lookup.compared]

    def _reuses(self, name: str, keys: list[int], args: list) -> bool:
        """Whether the scan of ``name`` by ``keys`` (its arguments ``args``) looks its
        tuples up in the index :attr:`served` gives: only when every key position
        that index does not hold is a variable or a constant.  An expression there
        (a division, which may stop the run) is evaluated by the lookup, once, found
        tuples or not, as Soufflé evaluates it; compared in the loop it would be
        evaluated per tuple and never for an empty bucket."""
        held = self.served.get((name, tuple(keys)))
        return held is not None and all(args[p][0] in ("var", "num", "str")
                                        for p in keys if p not in held)

    def _served(self, name: str, arity: int, keys: list[int], key_exprs: list[str]):
        """A lookup of ``name`` by ``keys`` in the index :attr:`served` gives: the
        loop's targets (a fresh name at each position of ``keys`` the index does
        not hold), the tests of those names against their values, and the index's
        key positions and values."""
        held = self.served[(name, tuple(keys))]
        targets, tests = ["_"] * arity, []
        for p, e in zip(keys, key_exprs):
            if p not in held:
                targets[p] = self.fresh("k")
                tests.append(f"{targets[p]} == {e}")
        return targets, tests, list(held), [e for p, e in zip(keys, key_exprs) if p in held]

    def _relation(self, name: str, from_delta: bool) -> str:
        """The local variable holding relation ``name`` (or its delta)."""
        var = f"{'D' if from_delta else 'R'}_{name}"
        self.sets[var] = f"{'delta_index.rel' if from_delta else 'rel'}[{name!r}]"
        return var

    def _lookup(self, source: str, name: str, keys: list[int], key_exprs: list[str]) -> str:
        var = f"{'DX' if source == 'delta_index' else 'X'}_{name}_{'_'.join(map(str, keys))}"
        key = f"K_{name}_{'_'.join(map(str, keys))}"
        built = "DOF" if source == "delta_index" else "OF"
        self.sets[built] = f"{source}.of"
        self.indexes[var] = f"{built}[{key}] if {key} in {built} else {source}.build({key})"
        self.keys[key] = f"IndexKey({name!r}, {tuple(keys)!r})"
        if len(keys) == 1:
            return f"{var}.get({key_exprs[0]}, ())"
        return f"{var}.get(({', '.join(key_exprs)}), ())"

    def comparison(self, lit, how: str) -> None:
        op, left, right = lit[1], lit[2], lit[3]
        sides = []
        for side in (left, right):
            if side[0] == "agg":
                sides.append(("value", self.aggregate(side)))
            else:
                sides.append(("term", side))
        if how == "assign":
            target, other = (0, 1) if left[0] == "var" and left[1] not in self.bound else (1, 0)
            var = (left, right)[target][1]
            value = sides[other][1] if sides[other][0] == "value" else self.expr(sides[other][1])
            self.line(f"v_{var} = {value}")
            self.bound.add(var)
            return
        texts = [s[1] if s[0] == "value" else self.expr(s[1]) for s in sides]
        self.line(f"if not ({texts[0]} {_PY_OPS[op]} {texts[1]}): continue")

    def aggregate(self, agg) -> str:
        """Emit the aggregate's loops; the name of the variable holding its value."""
        func, expr, body = agg[1], agg[2], agg[3]
        result = self.fresh("agg")
        distinct = func in ("count", "sum") and materialized(agg)
        if distinct:   # the distinct bindings of the body's variables -> the expression
            self.line(f"{result} = {{}}")
        else:
            self.line(f"{result} = {'0' if func in ('count', 'sum') else 'None'}")
        saved_bound, saved_depth = set(self.bound), self.depth
        start = self.once()
        self.aggregates += 1
        self.conjunction(list(enumerate(body)), None)
        self.aggregates -= 1
        value = self.expr(expr) if expr is not None else None
        if distinct:
            local = sorted(self.bound - saved_bound)
            key = f"({''.join(f'v_{v}, ' for v in local)})"
            self.line(f"{result}[{key}] = {value if func == 'sum' else 1}")
        elif func == "count":
            self.line(f"{result} += 1")
        elif func == "sum":
            self.line(f"{result} += {value}")
        else:
            better = "<" if func == "min" else ">"
            e = self.fresh("e")
            self.line(f"{e} = {value}")
            self.line(f"if {result} is None or {e} {better} {result}: {result} = {e}")
        self.end_once(start)
        self.bound, self.depth = saved_bound, saved_depth
        if distinct:
            total = f"len({result})" if func == "count" else f"_w(sum({result}.values()))"
            self.line(f"{result} = {total}")
        elif func == "sum":
            self.line(f"{result} = _w({result})")
        if func in ("min", "max"):
            self.line(f"if {result} is None: continue")
        return result
