"""Datalog proofs: the derivation of a step's output tuples, down to the input facts.

The ``step`` program is *instrumented*: every rule ``h(..) :- body.`` gets a
twin ``prov_k(V1, .., Vn) :- body.`` whose head lists the rule's variables,
so the engine itself reports every rule instance that fired (the same
program text on either engine gives the same instances).  From the
instances, the height of every derived tuple (input facts 0; a tuple one
more than the highest positive body atom of its lowest instance) is a
fixpoint, and a minimal-height proof picks, for each tuple, an instance that
achieves its height.  Each rule carries its template file and line in
``datalog/`` (found by matching the rendered rule against the templates).
Negations, comparisons and aggregates of a rule hold in the model; a proof
lists them as the rule's side conditions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from sdy_dl.datalog.lexer import is_directive, split_statements, tokenize
from sdy_dl.datalog.program import Program, parse_declarations


@dataclass
class Rule:
    """One rule of the program: head and positive body atoms as token lists per argument."""

    index: int
    text: str
    head: tuple[str, list[list[str]]]
    atoms: list[tuple[str, list[list[str]]]]
    variables: list[str]
    origin: str = ""


@dataclass
class Proof:
    """A derived tuple with the rule instance that derives it at minimal height."""

    relation: str
    args: tuple
    rule: str = ""            # template file:line ("" for an input fact)
    height: int = 0
    children: list["Proof"] = field(default_factory=list)

    def atom(self) -> str:
        return f"{self.relation}({', '.join(_show(a) for a in self.args)})"

    def to_json(self) -> dict:
        return {"tuple": self.atom(), "rule": self.rule or "input fact", "height": self.height,
                "from": [c.to_json() for c in self.children]}

    def lines(self, indent: str = "", seen: set | None = None) -> list[str]:
        """Indented lines; a tuple proved earlier in the listing is not proved again."""
        seen = set() if seen is None else seen
        atom = self.atom()
        if atom in seen and self.children:
            return [f"{indent}{atom}  (proved above)"]
        seen.add(atom)
        out = [f"{indent}{atom}  [{self.rule or 'input fact'}]"]
        for c in self.children:
            out += c.lines(indent + "  ", seen)
        return out


def _show(v) -> str:
    return str(v) if isinstance(v, int) else '"' + str(v) + '"'


def _split_args(tokens: list[str]) -> list[list[str]]:
    args, cur, depth = [], [], 0
    for t in tokens:
        if t == "," and depth == 0:
            args.append(cur)
            cur = []
            continue
        depth += t in "({"
        depth -= t in ")}"
        cur.append(t)
    if cur:
        args.append(cur)
    return args


def _literals(tokens: list[str]) -> list[list[str]]:
    return _split_args(tokens)


def parse_rules(program: Program) -> list[Rule]:
    """The rules of ``program`` (facts of the program count as rules with no body)."""
    rules = []
    for stmt in split_statements(tokenize(program.text)):
        if is_directive(stmt):
            continue
        toks = [t[1] for t in stmt[:-1]]   # without the final '.'
        if ":-" in toks:
            cut = toks.index(":-")
            head, body = toks[:cut], toks[cut + 1:]
        else:
            head, body = toks, []
        atoms = []
        variables: list[str] = []
        depth, in_aggregate = 0, False
        for t in head + body:
            if t in ("count", "sum", "min", "max"):
                in_aggregate = True   # its target term and body are local to the aggregate
            depth += t == "{"
            depth -= t == "}"
            if t == "}" and depth == 0:
                in_aggregate = False
            if depth == 0 and not in_aggregate and re.fullmatch(r"[A-Z][A-Za-z0-9_]*", t) \
                    and t not in variables:
                variables.append(t)
        for lit in _literals(body):
            if len(lit) >= 3 and re.fullmatch(r"[a-z][a-z0-9_]*", lit[0]) and lit[1] == "(" \
                    and lit[-1] == ")" and lit[0] in program.decls:
                atoms.append((lit[0], _split_args(lit[2:-1])))
        rules.append(Rule(len(rules), _render(stmt), (head[0], _split_args(head[2:-1])), atoms,
                          variables))
    return rules


def _render(stmt) -> str:
    text = " ".join(t[1] for t in stmt)
    return re.sub(r"\s+([,.)])", r"\1", re.sub(r"\(\s+", "(", text))


def instrument(program: Program, rules: list[Rule]) -> Program:
    """``program`` plus one output relation ``prov_k`` per rule with a body."""
    types = _variable_types(program, rules)
    extra = []
    for r in rules:
        if not r.atoms and ":-" not in r.text:
            continue
        cols = ", ".join(f"v{j}: {types[r.index].get(v, 'number')}" for j, v in enumerate(r.variables)) \
            or "unit: number"
        head = ", ".join(r.variables) or "0"
        body = r.text.split(":-", 1)[1].rstrip(".").strip()
        extra += [f"// prov_{r.index}(...): an instance of rule {r.index} fired with these variables",
                  f".decl prov_{r.index}({cols})", f".output prov_{r.index}",
                  f"prov_{r.index}({head}) :- {body}."]
    text = program.text + "\n" + "\n".join(extra) + "\n"
    return Program(text, parse_declarations(text, source="<instrumented step program>"))


def _variable_types(program: Program, rules: list[Rule]) -> dict[int, dict[str, str]]:
    out = {}
    for r in rules:
        types = {}
        for name, args in [r.head] + r.atoms:
            decl = program.decls.get(name)
            if decl is None:
                continue
            for typ, arg in zip(decl.type_names or decl.types, args):   # (declared types kept)
                if len(arg) == 1 and arg[0] in r.variables:
                    types.setdefault(arg[0], typ)
        out[r.index] = types
    return out


def _evaluate(arg: list[str], binding: dict):
    if len(arg) == 1:
        t = arg[0]
        if t.startswith('"'):
            return t[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        if t in binding:
            return binding[t]
        if t.isdigit():
            return int(t)
    expr = " ".join(str(binding[t]) if t in binding else ("//" if t == "/" else t) for t in arg)
    if not re.fullmatch(r"[0-9+\-*/%() ]*", expr):
        raise ValueError(f"cannot evaluate {expr!r}")
    return eval(expr, {"__builtins__": {}})  # digits and arithmetic only (checked above)


class ProofSearch:
    """Minimal-height proofs over one evaluation of the instrumented program."""

    def __init__(self, program: Program, facts: dict, run):
        self.rules = parse_rules(program)
        instrumented = instrument(program, self.rules)
        relations = run(instrumented, facts)
        self.height: dict[tuple, int] = {}
        self.best: dict[tuple, tuple] = {}
        for name, rows in facts.items():
            for row in rows:
                self.height[(name, tuple(row))] = 0
        instances = []
        for r in self.rules:
            for row in sorted(relations.get(f"prov_{r.index}", ())):   # deterministic ties
                binding = dict(zip(r.variables, row))
                try:
                    head = (r.head[0], tuple(_evaluate(a, binding) for a in r.head[1]))
                    body = [(n, tuple(None if a == ["_"] else _evaluate(a, binding) for a in args))
                            for n, args in r.atoms]
                except (ValueError, KeyError, ZeroDivisionError):
                    continue
                instances.append((r, head, body))
        self.by_relation: dict[str, list[tuple]] = {}
        for key in list(self.height) + [h for _, h, _ in instances]:
            self.by_relation.setdefault(key[0], []).append(key[1])
        changed = True
        while changed:
            changed = False
            for r, head, body in instances:
                hs = [self._height(b) for b in body]
                if any(h is None for h in hs):
                    continue
                h = 1 + max(hs, default=0)
                if h < self.height.get(head, 1 << 30):
                    self.height[head] = h
                    self.best[head] = (r, body)
                    changed = True

    def _match(self, atom, below: int | None = None) -> tuple | None:
        """The lowest known tuple matching ``atom`` (None args are wildcards); with ``below``,
        the first matching tuple in tuple order whose height is under ``below`` (the choice
        Soufflé's provenance makes for a body atom of a tuple of height ``below``)."""
        name, args = atom
        if None not in args:
            return atom if atom in self.height else None
        best = None
        for row in sorted(set(self.by_relation.get(name, ()))) if below is not None \
                else self.by_relation.get(name, ()):
            if len(row) == len(args) and all(a is None or a == v for a, v in zip(args, row)):
                h = self.height.get((name, row))
                if h is None:
                    continue
                if below is not None:
                    if h < below:
                        return (name, row)
                elif best is None or h < self.height[best]:
                    best = (name, row)
        return best

    def _height(self, atom) -> int | None:
        found = self._match(atom)
        return None if found is None else self.height[found]

    def rows(self, relation: str) -> list[tuple]:
        """The tuples of ``relation`` in the model, sorted."""
        return sorted(row for name, row in self.height if name == relation)

    def proof(self, relation: str, args: tuple) -> Proof | None:
        key = (relation, tuple(args))
        if key not in self.height:
            return None
        if not hasattr(self, "_proofs"):
            self._proofs = {}
        if key in self._proofs:
            return self._proofs[key]
        h = self.height[key]
        if key not in self.best:
            return Proof(relation, tuple(args), "", 0)
        r, body = self.best[key]
        node = Proof(relation, tuple(args), rule_origin(r), h)
        self._proofs[key] = node
        for atom in body:
            found = self._match(atom, below=h)
            child = self.proof(*found) if found is not None else None
            if child is not None:
                node.children.append(child)
        return node


def rule_origin(rule: Rule) -> str:
    """``datalog/<template>:line`` of ``rule`` (or its text when no template line matches)."""
    if not rule.origin:
        rule.origin = rule_origins().get(_normal(rule.text), "") or macro_origin(rule.head[0]) \
            or f"rule {rule.index}: {rule.text}"
    return rule.origin


def macro_origin(relation: str) -> str:
    """``datalog/<template>:line (macro)`` of the macro call that names ``relation``'s prefix."""
    for prefix, where in _macro_calls():
        if relation.startswith(prefix):
            return f"{where} (macro call)"
    return ""


@lru_cache(maxsize=None)
def _macro_calls() -> list[tuple[str, str]]:
    from sdy_dl.resources import datalog_dir

    root = datalog_dir()
    calls = []
    for path in sorted(root.rglob("*.dl.j2")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = re.match(r'\s*\{\{\s*m\.\w+\(\s*"([a-z0-9_]+)"', line)
            if m:
                calls.append((m.group(1), f"datalog/{path.relative_to(root)}:{n}"))
    return sorted(calls, key=lambda c: -len(c[0]))


def _normal(text: str) -> str:
    return re.sub(r"\s+", "", text)


@lru_cache(maxsize=None)
def rule_origins() -> dict[str, str]:
    """Normalised rendered rule text -> ``datalog/<template>:line``, for the rules whose
    template text has no Jinja inside (loops and macros resolve by pattern below)."""
    from sdy_dl.resources import datalog_dir

    exact, patterns = {}, []
    root = datalog_dir()
    for path in sorted(root.rglob("*.dl.j2")):
        rel = f"datalog/{path.relative_to(root)}"
        lines = path.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            line = lines[i].strip()
            if not line or line.startswith(("//", ".", "{%", "{#")) or \
                    (line.startswith("{{") and line.endswith("}}")):   # a macro call
                i += 1
                continue
            start, chunk = i, [line]
            while not chunk[-1].endswith(".") and i + 1 < len(lines):
                nxt = lines[i + 1].strip()
                if nxt.startswith(("//", ".decl", "{%")):
                    break
                i += 1
                chunk.append(nxt)
            i += 1
            text = _normal(" ".join(chunk))
            where = f"{rel}:{start + 1}"
            if "{{" in text or "{%" in text:
                regex = re.escape(text)
                regex = re.sub(r"\\\{\\\{.*?\\\}\\\}", r"[^,()]*?", regex)
                regex = re.sub(r"\\\{%.*?%\\\}", "", regex)
                patterns.append((re.compile(regex + "$"), where))
            else:
                exact.setdefault(text, where)
    return _Origins(exact, patterns)


class _Origins(dict):
    def __init__(self, exact, patterns):
        super().__init__(exact)
        self.patterns = patterns

    def get(self, key, default=""):
        if key in self:
            return self[key]
        for regex, where in self.patterns:
            if regex.match(key):
                self[key] = where
                return where
        return default


def proof_program(audit, trees):
    """The step nodes of ``trees``, the tracer's causes, their steps (the i-th is step ``i``
    of the program) and the ``step`` program with its facts that their proofs come from."""
    from sdy_dl.propagation.step_eval import step_program
    from sdy_dl.propagation.step_facts import step_facts

    causes = {c.index: c for c in audit.tracer.steps}
    for w in audit.tracer.writes:
        causes.setdefault(w.cause.index, w.cause)
    nodes = [n for t in trees for n in t.walk() if n.cause is not None and n.kind == "step"
             and causes.get(n.cause) is not None and causes[n.cause].step is not None]
    steps = list({causes[n.cause].step: None for n in nodes})
    if not steps:
        return nodes, causes, steps, None, None
    return nodes, causes, steps, step_program(steps), step_facts(steps, audit.propagated.meshes)


def _attach(nodes, causes, steps, meshes, search) -> None:
    index = {s: i for i, s in enumerate(steps)}
    dim_axes = search.rows("step_dim_axis")
    step_mesh = dict(search.rows("step_mesh"))
    for n in nodes:
        c = causes[n.cause]
        i = index[c.step]
        tensors = [t for t, (k, _) in enumerate(c.inputs) if k == n.key]
        proofs = []
        for t in tensors[:1]:
            wanted = {a for f in n.factors for a in f["axes"]}
            for row in (r for r in dim_axes if r[0] == i and r[1] == t):
                if not wanted or _axis_text(row, meshes, step_mesh.get(i)) in wanted:
                    p = search.proof("step_dim_axis", row)
                    if p is not None:
                        proofs.append(p)
        n.proof = proofs


class _LazySearch:
    """A ``ProofSearch`` evaluated on first use (the provenance's fallback)."""

    def __init__(self, program, facts, run):
        self.args, self.search = (program, facts, run), None

    def proof(self, relation, args):
        if self.search is None:
            self.search = ProofSearch(*self.args)
        return self.search.proof(relation, args)


def _axis_text(row, meshes, mesh_name) -> str:
    from sdy_dl.sharding import make_sub_axis

    if mesh_name is None or mesh_name not in meshes:
        return ""
    _, _, _, _, a, p, s = row
    return make_sub_axis(a, p, s, meshes[mesh_name]).to_text()


def _engine(audit):
    """The engine the audit's options name (clingo embedded; souffle when chosen)."""
    return audit.options.context.make_engine()
