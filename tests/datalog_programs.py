"""Random Soufflé programs in the subset the embedded engines accept, with their facts.

``random_program(seed)`` draws a small stratified program: input relations of
numbers and symbols, derived relations defined by rules with joins, ``_``,
constants, negation, comparisons, arithmetic (at the 32-bit edges too:
wrap-around, truncating ``/`` and ``%``, division by zero), aggregates
(``count``/``sum`` over one atom or several, ``min``/``max`` bound either way
round or compared, nested ones), recursion, several heads and the ``.output``
forms.  A relation's rules read inputs and earlier relations (negation and
aggregates only earlier ones) and, positively, itself: every program is
stratified unless ``unstratified`` asks for a cycle through negation.
Some relations are nullary (``flag()``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

EDGE_NUMBERS = (0, 1, -1, 2, 3, 7, 2147483647, -2147483648, 65536, -7)
SYMBOLS = ("a", "b", "c d", 'q"t', "x\\y", "")


@dataclass
class Generated:
    """A program's text and its input facts."""

    text: str
    facts: dict[str, list[tuple]]


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _Gen:
    def __init__(self, rng: random.Random, extra: random.Random):
        self.rng = rng
        self.extra = extra   # draws of later additions (the programs of earlier seeds stay)
        self.decls: list[str] = []
        self.rules: list[str] = []
        self.types: dict[str, tuple[str, ...]] = {}

    def declare(self, name: str, types: tuple[str, ...], io: str | None) -> None:
        cols = ", ".join(f"c{i}: {t}" for i, t in enumerate(types))
        self.decls.append(f"// {name}: a generated relation\n.decl {name}({cols})")
        if io:
            self.decls.append(f".{io} {name}")
        self.types[name] = types

    def number(self) -> str:
        n = self.rng.choice(EDGE_NUMBERS) if self.rng.random() < 0.3 else self.rng.randint(0, 4)
        return str(n)

    def constant(self, typ: str) -> str:
        return self.number() if typ == "number" else _quote(self.rng.choice(SYMBOLS))

    def atom(self, name: str, var_types: dict[str, str], bound: set[str], pool: list[str],
             anon: bool = True, must_bind: bool = False) -> str:
        args = []
        for typ in self.types[name]:
            r = self.rng.random()
            if anon and r < 0.2:
                args.append("_")
            elif r < 0.3 and not must_bind:
                args.append(self.constant(typ))
            else:
                same = [v for v in pool if var_types.get(v, typ) == typ]
                var = self.rng.choice(same) if same else None
                if var is None:
                    args.append("_" if anon else self.constant(typ))
                    continue
                var_types[var] = typ
                args.append(var)
        return f"{name}({', '.join(args)})"

    def expression(self, numbers: list[str]) -> str:
        a = self.rng.choice(numbers)
        if self.extra.random() < 0.15:
            a = f"-{a}" if self.extra.random() < 0.5 else f"-({a} - 1)"
        if self.rng.random() < 0.3:
            return a
        op = self.rng.choice(["+", "-", "*", "/", "%"])
        b = self.rng.choice(numbers + [self.number(), self.number()])
        if op in ("/", "%") and self.rng.random() < 0.7:
            b = self.rng.choice(["2", "3", "-3", "7"])
        return f"({a} {op} {b})"


def _bound_in(atom_text: str) -> set[str]:
    inner = atom_text[atom_text.index("(") + 1:-1]
    return {a.strip() for a in inner.split(",") if a.strip()[:1].isupper()}


def random_program(seed: int, unstratified: bool = False) -> Generated:
    """A random program and facts (see the module docstring)."""
    rng = random.Random(seed)
    g = _Gen(rng, random.Random(f"{seed}-extra"))
    inputs = {"in_e": ("number", "number"), "in_n": ("number",), "in_s": ("number", "symbol")}
    facts: dict[str, list[tuple]] = {}
    for name, types in inputs.items():
        g.declare(name, types, "input")
        rows = set()
        for _ in range(rng.randint(0, 7)):
            rows.add(tuple(rng.choice([0, 1, 2, 3, 4, rng.choice(EDGE_NUMBERS)]) if t == "number"
                           else rng.choice(SYMBOLS) for t in types))
        facts[name] = sorted(rows, key=repr)
    derived = []
    for i in range(rng.randint(2, 5)):
        name = f"r{i}"
        types = tuple(rng.choice(["number", "number", "number", "symbol"])
                      for _ in range(rng.randint(1, 3)))
        if g.extra.random() < 0.1:
            types = ()
        derived.append(name)
        style = rng.random()
        io = "output" if style < 0.8 else None
        g.declare(name, types, io)
    outputs = [n for n in derived if f".output {n}" in "\n".join(g.decls)]
    if len(outputs) >= 2 and rng.random() < 0.2:   # `.output a, b` and parameters
        g.decls = [d for d in g.decls if d not in (f".output {outputs[0]}", f".output {outputs[1]}")]
        g.decls.append(f".output {outputs[0]}, {outputs[1]}(IO=file)")
    for i, name in enumerate(derived):
        lower = list(inputs) + derived[:i]
        for _ in range(rng.randint(1, 3)):
            g.rules.append(_rule(g, name, lower, recursive=rng.random() < 0.3))
        if rng.random() < 0.1 and i + 1 < len(derived) and g.types[derived[i + 1]] == g.types[name]:
            # several heads: the next relation gets this relation's body too
            body = g.rules[-1].split(" :- ", 1)
            if len(body) == 2:
                head = body[0]
                other = derived[i + 1] + head[len(name):]
                g.rules[-1] = f"{head}, {other} :- {body[1]}"
    if unstratified:   # r0 negates r1, which reads r0: a cycle through negation
        a, b = derived[0], derived[1]
        row_a = ", ".join(g.constant(t) for t in g.types[a])
        row_b = ", ".join(g.constant(t) for t in g.types[b])
        g.rules.append(f"{a}({row_a}) :- in_n(_), !{b}({row_b}).")
        g.rules.append(f"{b}({row_b}) :- {a}({row_a}).")
    text = "\n".join(g.decls) + "\n" + "\n".join(g.rules) + "\n"
    return Generated(text, facts)


def _rule(g: _Gen, head: str, lower: list[str], recursive: bool) -> str:
    rng = g.rng
    pool = ["X", "Y", "Z", "W"]
    var_types: dict[str, str] = {}
    body: list[str] = []
    sources = lower + ([head] if recursive else [])
    for k in range(rng.randint(1, 3)):
        rel = rng.choice(sources if k else lower) if lower else head
        body.append(g.atom(rel, var_types, set(), pool))
    if recursive:
        body.append(g.atom(head, var_types, set(), pool))
    bound = set()
    for b in body:
        bound |= _bound_in(b)
    numbers = sorted(v for v in bound if var_types.get(v) == "number")
    symbols = sorted(v for v in bound if var_types.get(v) == "symbol")
    extra: dict[str, str] = {}
    if rng.random() < 0.35 and lower:   # a negated atom over bound variables
        rel = rng.choice(lower)
        args = []
        for typ in g.types[rel]:
            same = numbers if typ == "number" else symbols
            r = rng.random()
            args.append(rng.choice(same) if same and r < 0.6 else "_" if r < 0.8 else g.constant(typ))
        body.append(f"!{rel}({', '.join(args)})")
    if numbers and rng.random() < 0.4:
        op = rng.choice(["<", "<=", ">", ">=", "!=", "="])
        body.append(f"{rng.choice(numbers)} {op} {rng.choice(numbers + [g.number()])}")
    if symbols and rng.random() < 0.15:
        body.append(f"{rng.choice(symbols)} {rng.choice(['=', '!='])} {g.constant('symbol')}")
    if numbers and rng.random() < 0.4 and not recursive:   # arithmetic
        body.append(f"A = {g.expression(numbers)}")
        extra["A"] = "number"
    if rng.random() < 0.45 and lower and not recursive:    # an aggregate
        body.append(_aggregate(g, lower, numbers, extra))
    available = {**{v: var_types[v] for v in bound}, **extra}
    args = []
    for typ in g.types[head]:
        same = [v for v, t in available.items() if t == typ]
        if same and rng.random() < 0.85:
            var = rng.choice(same)
            if typ == "number" and not recursive and rng.random() < 0.15:
                args.append(f"{var} + {g.number()}")
            else:
                args.append(var)
        else:
            args.append(g.constant(typ))
    return f"{head}({', '.join(args)}) :- {', '.join(body)}."


def _aggregate(g: _Gen, lower: list[str], numbers: list[str], extra: dict[str, str]) -> str:
    rng = g.rng
    func = rng.choice(["count", "count", "sum", "min", "max"])
    local = ["P", "Q", "R"]
    var_types: dict[str, str] = {v: "number" for v in numbers}
    inner = []
    for _ in range(rng.choice([1, 1, 2])):
        rel = rng.choice(lower)
        pool = local + numbers if numbers and rng.random() < 0.5 else local
        inner.append(g.atom(rel, var_types, set(), pool))
    inner_numbers = sorted(v for v in set().union(*map(_bound_in, inner))
                           if var_types.get(v) == "number" and v in local)
    if func != "count" and not inner_numbers:
        func = "count"
    if inner_numbers and rng.random() < 0.3:
        inner.append(f"{rng.choice(inner_numbers)} {rng.choice(['<', '>=', '!='])} "
                     f"{rng.choice(inner_numbers + numbers + [g.number()])}")
    if rng.random() < 0.12:   # a nested aggregate over a local variable
        rel = rng.choice(lower)
        nested_vars: dict[str, str] = {v: "number" for v in inner_numbers}
        nested = g.atom(rel, nested_vars, set(), ["S"] + inner_numbers)
        if any(v in inner_numbers for v in _bound_in(nested)):
            inner.append(f"C = count : {{ {nested} }}")
            inner.append(f"C {rng.choice(['>', '<=', '!='])} {rng.randint(0, 2)}")
    target = "" if func == "count" else rng.choice(inner_numbers) + (
        f" * {g.number()}" if rng.random() < 0.2 else "") + " "
    agg = f"{func} {target}: {{ {', '.join(inner)} }}"
    r = rng.random()
    if numbers and r < 0.25:
        return f"{rng.choice(numbers)} {rng.choice(['<', '>=', '='])} {agg}"
    extra["N"] = "number"
    return f"{agg} = N" if r < 0.4 else f"N = {agg}"
