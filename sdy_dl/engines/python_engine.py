"""An embedded engine in pure Python: the program's rules compiled to Python loops.

Each rule of the Soufflé program becomes a block of nested loops over hash
indexes, the rules of one component one Python function (and, in a recursive
component, the delta variants reading one relation another), generated once
per program text by :mod:`sdy_dl.engines.python_codegen` and kept in the
cache; a call evaluates the relations component by component in
dependency order (stratified: a component never negates or aggregates over
itself), recursive components semi-naively.  Nothing is ground ahead: a rule
whose first relation is empty costs one test, so a call on a few hundred facts takes
milliseconds where clingo pays ~30 ms to ground the step program's 400
rules.  It evaluates the subset :mod:`sdy_dl.datalog.check` accepts, with
Soufflé's semantics (docs/design.md, "The engines"): 32-bit arithmetic that
wraps, ``/`` and ``%`` truncating as in C, an error on division by zero;
``count``/``sum`` over the tuples of a single-atom body, or over the distinct
bindings of the body's named variables otherwise; ``min``/``max`` of an
empty group derive nothing.
"""

from __future__ import annotations

from collections import defaultdict
from operator import itemgetter

from sdy_dl.datalog.facts import Facts, checked_relations
from sdy_dl.datalog.program import Program
from sdy_dl.engines.arithmetic import c_div, c_mod, wrap
from sdy_dl.engines.base import Relations


#: What the generated code calls.
_RUNTIME = {"_w": wrap, "_div": c_div, "_mod": c_mod}


class PythonEngine:
    """Evaluates programs with rules compiled to Python (see the module docstring)."""

    name = "python"

    def grounds(self, program: Program) -> bool:
        return False

    def compiles(self) -> bool:
        return False

    def run(self, program: Program, facts: Facts) -> Relations:
        plan = _plan(program)
        rel: dict[str, set] = {name: set() for name in program.decls}
        for decl, rows in checked_relations(program, facts):
            rel[decl.name].update(map(tuple, rows))
        return plan.evaluate(rel, [d.name for d in program.outputs])


_PLANS: dict[str, "_Plan"] = {}


def _plan(program: Program) -> "_Plan":
    plan = _PLANS.get(program.text)
    if plan is None:
        plan = _PLANS[program.text] = _Plan(program)
    return plan


class _Index:
    """Hash indexes of the relations ``rel``: ``of[key]``, the tuples of relation
    ``key.name`` by their values at the bound column positions ``key.positions``,
    built on first use by :meth:`build` (the generated code fetches an index as
    ``of[K] if K in of else build(K)`` with constant keys, :class:`IndexKey`: a
    plain dict, which Python reads faster than a dict subclass with ``__missing__``)."""

    __slots__ = ("rel", "of", "keys")

    def __init__(self, rel: dict[str, set]):
        self.rel = rel
        self.of: dict[IndexKey, dict] = {}
        self.keys: dict[str, list[IndexKey]] = {}   # relation -> its built indexes' keys

    def build(self, key: IndexKey) -> dict:
        """The index ``key``, built now unless it is already."""
        index = self.of.get(key)
        if index is not None:
            return index
        index = self.of[key] = {}
        keys = self.keys.get(key.name)
        if keys is None:
            self.keys[key.name] = [key]
        else:
            keys.append(key)
        # (_add, written out: most indexes are built over a few tuples)
        p = key.column
        if p is not None:
            for t in self.rel[key.name]:
                index.setdefault(t[p], []).append(t)
        else:
            getter = key.getter
            for t in self.rel[key.name]:
                index.setdefault(getter(t), []).append(t)
        return index

    def extend(self, new: dict[str, set]) -> None:
        """Add the tuples of ``new`` (new to their relations) to the built indexes."""
        for name, rows in new.items():
            if rows and name in self.keys:
                for key in self.keys[name]:
                    _add(self.of[key], key, rows)


class IndexKey:
    """The key of an index: relation ``name`` by the column ``positions``; one
    object per index of a program, hashed and compared by identity (a tuple
    key would be hashed again on every lookup)."""

    __slots__ = ("name", "positions", "column", "getter")

    def __init__(self, name: str, positions: tuple[int, ...]):
        self.name = name
        self.positions = positions
        #: The one key column, or None and the getter of the key's columns.
        self.column = positions[0] if len(positions) == 1 else None
        self.getter = None if len(positions) == 1 else itemgetter(*positions)


def _add(index: dict, key: IndexKey, rows) -> None:
    """Add ``rows`` to ``index``, keyed by their values at ``key.positions``."""
    p = key.column
    if p is not None:
        for t in rows:
            index.setdefault(t[p], []).append(t)
    else:
        getter = key.getter
        for t in rows:
            index.setdefault(getter(t), []).append(t)


#: The modules that turn a program into the Python module of its plan.
_GENERATOR_MODULES = ("sdy_dl.engines.python_codegen", "sdy_dl.datalog.check",
                      "sdy_dl.datalog.clauses", "sdy_dl.datalog.lexer", "sdy_dl.datalog.program",
                      "sdy_dl.datalog.stratify")


def _compiled(program: Program):
    """The code of the Python module evaluating ``program``
    (:func:`~sdy_dl.engines.python_codegen.program_source`)."""
    from sdy_dl.engines.python_codegen import program_source

    return compile(program_source(program), "<sdy-dl rules>", "exec")


class _Plan:
    """The compiled rules of one program, grouped by component in evaluation order
    (the generated module, compiled once per program and kept in the cache)."""

    def __init__(self, program: Program):
        import marshal
        import sys

        from sdy_dl.resources import cached_value, code_digest

        # The plan is built from the checked clauses (program_source), so a plan in the
        # cache, keyed by the checker's code too, belongs to a program that passed the
        # check.  (The generator and the checker are imported only to make a plan.)
        key = (program.cache_key + "-" + code_digest(sys.modules[__name__], *_GENERATOR_MODULES)
               + "-" + sys.implementation.cache_tag)
        code = cached_value("python", key, lambda: _compiled(program), marshal.dumps, marshal.loads)
        namespace: dict = dict(_RUNTIME, _recursive=_evaluate_component, IndexKey=IndexKey)
        exec(code, namespace)
        self.facts = namespace["FACTS"]
        self.components = namespace["COMPONENTS"]
        self.run = namespace["EVALUATE"]
        self.memo = _ComponentMemo(len(self.components))

    def evaluate(self, rel: dict[str, set], outputs: list[str]) -> Relations:
        for name, rows in self.facts:
            rel[name].update(rows)
        index = _Index(rel)
        memo = self.memo
        components = self.components
        tokens: dict[str, int] = {}   # relation -> its memoised value's token (this call)

        def memoised(cid: int) -> None:
            """Evaluate component ``cid``, or take its relations from the memo."""
            members, rules, variants, inputs = components[cid]
            key = memo.key(cid, inputs, members, rel, tokens)
            if key is not None and memo.reuse(cid, key, rel, index, tokens):
                return
            _evaluate_component(rel, index, members, rules, variants)
            if key is not None:
                memo.keep(cid, key, members, rel, tokens)

        self.run(rel, index, memoised, memo.off)
        memo.keep_indexes(index, tokens)
        # (a relation the memo holds is a frozenset: the caller gets its own set)
        return {name: set(rel[name]) if name in tokens else rel[name] for name in outputs}


def _evaluate_component(rel, index, members, rules, variants) -> None:
    """Derive the relations ``members`` of one component (semi-naively if recursive)."""
    if not variants:
        rules(rel, index, None, rel)
        return
    delta = defaultdict(set)   # (a set for each relation a rule adds to)
    rules(rel, index, None, delta)
    while True:
        # Only the relations that gained tuples have a delta, and only the
        # rule variants reading one of those deltas run.
        new = {}
        for name, rows in delta.items():
            rows -= rel[name]
            if rows:
                new[name] = rows
        if not new:
            return
        for name, rows in new.items():
            rel[name] |= rows
        index.extend(new)
        delta_index = _Index(new)
        delta = defaultdict(set)
        for source in new:
            if source in variants:
                variants[source](rel, index, delta_index, delta)


class _ComponentMemo:
    """A component's relations from an earlier call with the same inputs.

    A component's relations are a function of the relations its rules read
    (and of any facts given for its own relations).  When those are small
    (keyed by their contents) or were themselves taken from or kept in this
    memo (keyed by a token), the component is keyed by them, and a call that
    meets a key again takes the relations, and the hash indexes built over
    them, from the memo instead of deriving them: the step program's tables
    of axis refs depend only on the meshes, and cost the same on every call
    (quadratic in the divisors of an axis size; ~50 tuples a call on a 2x4
    mesh, kept too: keying them costs less).  A component stops being keyed
    when its key keeps changing (it reads the call's own facts)."""

    #: Inputs up to this many tuples are keyed by their contents.
    SMALL = 32
    #: A component that missed this many times more than twice its hits stops being keyed.
    GIVE_UP = 3
    #: Values kept per component (the oldest is dropped).
    KEEP = 4

    def __init__(self, components: int):
        self.entries: list[dict] = [{} for _ in range(components)]
        self.misses = [0] * components
        self.hits = [0] * components
        self.off = [False] * components   # no longer keyed
        self.next_token = 0
        self.owner: dict[int, tuple] = {}   # token -> the entry holding its relation

    def key(self, cid: int, inputs, members, rel, tokens) -> tuple | None:
        """The key of component ``cid`` in this call (None: not keyed)."""
        if self.off[cid]:
            return None
        parts = []
        for name in inputs:
            rows = rel[name]
            if len(rows) <= self.SMALL:
                parts.append(rows if isinstance(rows, frozenset) else frozenset(rows))
            elif name in tokens:
                parts.append(tokens[name])
            else:
                return self._unkeyed(cid)
        for name in members:
            rows = rel[name]
            if rows:
                if len(rows) > self.SMALL:
                    return self._unkeyed(cid)
                parts.append((name, frozenset(rows)))
        return tuple(parts)

    def _unkeyed(self, cid: int) -> None:
        """Count a miss of component ``cid`` (no value for its key, or no key)."""
        self.misses[cid] += 1
        if self.misses[cid] >= self.GIVE_UP + 2 * self.hits[cid]:
            self.off[cid] = True

    def reuse(self, cid: int, key: tuple, rel, index, tokens) -> bool:
        """Take component ``cid``'s relations (and their indexes) for ``key``, if kept."""
        entry = self.entries[cid].get(key)
        if entry is None:
            self._unkeyed(cid)
            return False
        self.hits[cid] += 1
        values, entry_tokens, indexes = entry
        rel.update(values)
        tokens.update(entry_tokens)
        for index_key, value in indexes.items():
            if index_key not in index.of:
                index.of[index_key] = value
                index.keys.setdefault(index_key.name, []).append(index_key)
        return True

    def keep(self, cid: int, key: tuple, members, rel, tokens) -> None:
        """Keep component ``cid``'s relations, just derived, under ``key``."""
        entries = self.entries[cid]
        if len(entries) >= self.KEEP:
            for token in entries.pop(next(iter(entries)))[1].values():
                del self.owner[token]
        values, entry_tokens = {}, {}
        for name in members:
            values[name] = rel[name] = frozenset(rel[name])
            entry_tokens[name] = tokens[name] = self.next_token
            self.next_token += 1
        entry = entries[key] = (values, entry_tokens, {})
        for token in entry_tokens.values():
            self.owner[token] = entry

    def keep_indexes(self, index, tokens) -> None:
        """Keep the indexes this call built over relations taken from or kept in the memo."""
        for name, token in tokens.items():
            entry = self.owner.get(token)
            if entry is None:
                continue
            for index_key in index.keys.get(name, ()):
                entry[2].setdefault(index_key, index.of[index_key])
