"""Provenance: every sharding write of a propagation with its cause.

A :class:`ProvenanceTracer` attached to a propagation (``PassOptions.tracer``)
records every sharding write together with its cause: the step that derived
it (the op, its rule, the strategy and band, the shardings of the op's
tensors the step read, the ``StepInput``/``StepOutput`` pair), a
sharding-group copy, a user-priority rewrite, or a function-result sync.
:meth:`ProvenanceTracer.tree` turns the writes behind a key into a tree of
:class:`Derivation` nodes whose leaves are the shardings the propagation
started from.  Keys are the tracer's (``value_key`` of a sharding slot, or
``("result", i)`` for a main function result); naming them is
:mod:`sdy_dl.audit.naming`'s job.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sdy_dl.propagation.decisions import Decision
from sdy_dl.sharding import TensorSharding


class _Pairs(Sequence):
    """``(key, sharding)`` pairs of two parallel tuples, zipped when read (a step
    visit records its tensors' keys and shardings without building pairs)."""

    __slots__ = ("keys", "shardings")

    def __init__(self, keys: tuple, shardings: tuple):
        self.keys, self.shardings = keys, shardings

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return list(zip(self.keys[i], self.shardings[i]))
        return self.keys[i], self.shardings[i]

    def __iter__(self):
        return zip(self.keys, self.shardings)


@dataclass(slots=True)
class Cause:
    """What made shardings change: one step or one rewrite."""

    index: int
    kind: str                      # "step", "edge", "barrier", "result", "group", "priority", "sync"
    title: str                     # e.g. "stablehlo.add" (see ``label``)
    detail: str = ""               # rule text, strategy, band
    inputs: Sequence[tuple[object, TensorSharding | None]] = field(default_factory=list)
    op: Mapping | None = None      # the op, for steps: name, place, origin, tag (steps.OpInfo)
    step: object | None = None     # the StepInput evaluated (steps, edges, barriers)
    output: object | None = None   # its StepOutput
    strategy: str = ""
    phase: str = ""
    first: int = -1                # index of the cause's first write
    at: int = 0                    # how many writes came before the cause began
    decision: Decision | None = None   # the Datalog decision behind a rewrite

    @property
    def label(self) -> str:
        """The title, with the line of the op for an op's step: ``stablehlo.add (line 4)``."""
        line = getattr(self.op, "line", None)
        return self.title if line is None else f"{self.title} (line {line})"


@dataclass(slots=True)
class Write:
    """One sharding write: ``key`` got ``sharding`` because of ``cause``."""

    key: object
    sharding: TensorSharding
    cause: Cause


@dataclass
class Derivation:
    """A node of a derivation tree over tracer keys (``write`` None: a leaf)."""

    key: object
    sharding: TensorSharding
    write: Write | None
    children: list["Derivation"] = field(default_factory=list)
    truncated: str = ""            # "depth" or "seen" when the children were cut


class ProvenanceTracer:
    """Collects sharding writes with their causes during a propagation."""

    def __init__(self, describe_op=None):
        self.writes: list[Write] = []
        self.initial: dict[object, TensorSharding | None] = {}
        self.describe_op = describe_op   # op -> audit.steps.OpInfo, optional
        self._cause: Cause | None = None
        self._count = 0
        self._by_key: dict[object, list[int]] = {}
        self.steps: list[Cause] = []   # every op step applied, changed anything or not
        self.edge_steps: list[Cause] = []   # ... and every data-flow edge and barrier step
        self.no_rule: set[str] = set()   # the tags of ops propagation found no sharding rule for
        #: (op, its rule) of each op propagation found a sharding rule for (its factors
        #: map the op's dims, whether or not a step of it ever ran); by tag: rule_of
        self.ruled: list[tuple] = []
        self._rules: dict[str, object] = {}
        self._ruled_read = 0   # how many of ``ruled`` are in ``_rules``

    # -- recording (called by the driver and the sharding state) ----------

    def begin(self, kind: str, title: str, detail: str = "", inputs=(), op=None, step=None,
              output=None, strategy: str = "", phase: str = "", keys=None, shardings=None,
              decision: Decision | None = None) -> None:
        """A cause begins: ``inputs`` are the ``(key, sharding)`` pairs it read, or
        ``keys`` and ``shardings`` give them as two parallel tuples; ``op``, the op
        of a step, is described by ``describe_op`` (its line joins the label);
        ``decision``: what a Datalog stage decided for a rewrite."""
        self._count += 1
        inputs = _Pairs(keys, shardings) if keys is not None else list(inputs)
        info = None
        if op is not None:
            info = self.describe_op(op) if self.describe_op is not None else {"name": op.name}
        self._cause = Cause(self._count, kind, title, detail, inputs, info, step, output,
                            strategy, phase, at=len(self.writes), decision=decision)
        if kind == "step" and step is not None:
            self.steps.append(self._cause)
        elif step is not None:
            self.edge_steps.append(self._cause)

    def begin_like(self, cause: Cause, keys: tuple, op, same_ops: bool = False) -> None:
        """A cause begins that is a visit's ``cause`` as another propagation of the
        same module recorded it (a replayed visit, :mod:`sdy_dl.propagation.replay`):
        what :meth:`begin` records for it here, ``keys`` the tensors' keys here.
        ``same_ops``: this tracer describes an op as the other's describes the op it
        is a copy of (:meth:`~sdy_dl.audit.steps.OpDescriber.describes_as`), so the
        cause's description is taken.  When the cause would be recorded here with
        the same number, after as many writes and with the same keys, it *is* the
        other's: recorded, not made again (its writes will be the same)."""
        self._count += 1
        info = cause.op if same_ops else (
            self.describe_op(op) if self.describe_op is not None else {"name": op.name})
        if (self._count == cause.index and len(self.writes) == cause.at
                and info is cause.op and keys == cause.inputs.keys):
            self._cause = cause
        else:
            self._cause = Cause(self._count, cause.kind, cause.title, cause.detail,
                                _Pairs(keys, cause.inputs.shardings), info, cause.step,
                                cause.output, cause.strategy, cause.phase, at=len(self.writes))
        if cause.kind == "step":
            self.steps.append(self._cause)
        else:
            self.edge_steps.append(self._cause)

    def take_in_step(self, causes: list, writes: list) -> bool:
        """Record ``causes`` with their ``writes``, as another tracer of the same module
        recorded them for a run of replayed visits (each cause as :meth:`begin_like`
        records it in step, with the same keys and op descriptions: the cause
        itself), when this tracer is in step with it (its first cause would be
        recorded with the same number after as many writes); False: not in step,
        nothing recorded."""
        if causes:
            first = causes[0]
            if (first.index != self._count + 1 or first.at != len(self.writes)
                    or causes[-1].index != self._count + len(causes)):
                return False
            self._count += len(causes)
            steps, edges = self.steps.append, self.edge_steps.append
            for cause in causes:
                if cause.kind == "step":
                    steps(cause)
                else:
                    edges(cause)
        elif writes:
            return False
        self._add_writes(writes)
        return True

    def _add_writes(self, writes: list) -> None:
        """Append ``writes`` to the writes made, each indexed under its key."""
        by_key, n = self._by_key, len(self.writes)
        for write in writes:
            found = by_key.get(write.key)
            if found is None:
                by_key[write.key] = [n]
            else:
                found.append(n)
            n += 1
        self.writes.extend(writes)

    @property
    def begun(self) -> int:
        """How many causes began so far."""
        return self._count

    def take_causes_in_step(self, begun: int, at: int, after: int, writes: list) -> bool:
        """Record that causes ``begun + 1`` to ``after`` began and wrote ``writes``, as
        another tracer of the same module recorded them for work replayed that is
        not a visit (a function-result sync, whose causes are no steps), when this
        tracer is in step with it (``begun`` causes began here and ``at`` writes
        were made, as there before them: the causes are the other's, with the same
        keys); False: not in step, nothing recorded."""
        if self._count != begun or len(self.writes) != at or self._cause is not None:
            return False
        self._count = after
        self._add_writes(writes)
        return True

    def end(self) -> None:
        self._cause = None

    def on_rule(self, op, rule) -> None:
        """Propagation found sharding rule ``rule`` for ``op`` (an instance of it)."""
        self.ruled.append((op, rule))

    def rule_of(self, tag: str):
        """The sharding rule propagation found for the op tagged ``tag`` (None: none),
        the ops named by tag when first asked for."""
        if self._ruled_read < len(self.ruled) and self.describe_op is not None:
            for op, rule in self.ruled[self._ruled_read:]:
                self._rules[self.describe_op(op)["tag"]] = rule
            self._ruled_read = len(self.ruled)
        return self._rules.get(tag)

    def on_no_rule(self, op) -> None:
        """Propagation found no sharding rule for ``op``: it never steps it (§3.7)."""
        tag = self.describe_op(op)["tag"] if self.describe_op is not None else None
        if tag is not None:
            self.no_rule.add(tag)

    @property
    def current(self) -> Cause | None:
        """The cause being recorded (None: between causes)."""
        return self._cause

    def resume(self, cause: Cause | None) -> None:
        """Go on recording ``cause`` (a :attr:`current` saved before a nested cause)."""
        self._cause = cause

    def on_read(self, key, sharding: TensorSharding | None) -> None:
        """The first read of ``key`` is its sharding in the module as given."""
        self.initial.setdefault(key, sharding)

    def on_write(self, key, sharding: TensorSharding) -> None:
        cause = self._cause or Cause(self._count, "sync", "pass start")
        if cause.first < 0:
            cause.first = len(self.writes)
        self._by_key.setdefault(key, []).append(len(self.writes))
        self.writes.append(Write(key, sharding, cause))

    # -- queries ---------------------------------------------------------------

    def final(self, key) -> TensorSharding | None:
        """The sharding ``key`` ended with (None: never had one)."""
        at = self._by_key.get(key)
        return self.writes[at[-1]].sharding if at else self.initial.get(key)

    def causes(self) -> list[Cause]:
        """Every distinct cause that wrote something, in order."""
        seen, out = set(), []
        for w in self.writes:
            if id(w.cause) not in seen:
                seen.add(id(w.cause))
                out.append(w.cause)
        return out

    def keys(self) -> set:
        return set(self.initial) | set(self._by_key)

    # -- derivation trees -----------------------------------------------------

    def tree(self, key, max_depth: int = 8, before: int | None = None) -> Derivation | None:
        """The derivation tree of ``key``'s final sharding, or of its sharding before
        write number ``before`` (None: it has none)."""
        return self._node(key, len(self.writes) if before is None else before, max_depth, set())

    def last_write(self, key, before: int) -> int | None:
        """The number of the last write of ``key`` before write ``before`` (None: none)."""
        at = self._by_key.get(key, ())
        k = bisect.bisect_left(at, before)
        return at[k - 1] if k else None

    def _read_keys(self, write: Write) -> list:
        """The keys whose earlier shardings ``write`` descends from: what its cause
        read (with a sharding); a rewrite without inputs (user priorities, group
        syncs) continues with the key's own earlier sharding."""
        keys = list(dict.fromkeys(k for k, s in write.cause.inputs if s is not None))
        return keys or [write.key]

    def roots(self, key, before: int | None = None) -> list:
        """The leaves of ``key``'s derivation tree (:meth:`tree` without a depth limit):
        the keys whose shardings as the propagation found them it descends from, in
        the order first met."""
        return self.root_keys(self.root_bits(key, before))

    def root_keys(self, bits: int, limit: int | None = None) -> list:
        """The leaf keys of a bit set of :meth:`root_bits` (at most ``limit``, lowest first)."""
        keys, out = self._root_keys, []
        while bits and (limit is None or len(out) < limit):
            low = bits & -bits
            out.append(keys[low.bit_length() - 1])
            bits ^= low
        return out

    def root_bits(self, key, before: int | None = None) -> int:
        """:meth:`roots` as a bit set over the leaf keys (bit i: the i-th leaf key met,
        ``root_keys`` names them).  Each write's leaves are computed once and kept,
        so asking for many keys costs one walk of the writes behind them."""
        if not hasattr(self, "_root_memo"):
            self._root_memo: dict[int, int] = {}
            self._root_keys: list = []
            self._root_bit: dict = {}
        memo, leaf_bit = self._root_memo, self._leaf_bit
        start = self.last_write(key, len(self.writes) if before is None else before)
        if start is None:
            bits = leaf_bit(key)
        else:
            stack = [(start, False)]
            while stack:
                w, expanded = stack.pop()
                if w in memo:
                    continue
                write = self.writes[w]
                first = write.cause.first
                children = [(k, self.last_write(k, first)) for k in self._read_keys(write)]
                if not expanded:
                    stack.append((w, True))
                    stack.extend((c, False) for _, c in children
                                 if c is not None and c not in memo)
                    continue
                bits = 0
                for k, c in children:
                    # (a child write comes before its cause began: the walk ends)
                    bits |= leaf_bit(k) if c is None else memo[c]
                memo[w] = bits
            bits = memo[start]
        return bits

    def _leaf_bit(self, key) -> int:
        """The bit of leaf ``key`` (0: it had no sharding when the propagation began)."""
        if self.initial.get(key) is None:
            return 0
        bit = self._root_bit.get(key)
        if bit is None:
            bit = self._root_bit[key] = len(self._root_keys)
            self._root_keys.append(key)
        return 1 << bit

    def _node(self, key, before: int, depth: int, seen: set) -> Derivation | None:
        write_at = self.last_write(key, before)
        if write_at is None:
            initial = self.initial.get(key)
            return None if initial is None else Derivation(key, initial, None)
        write = self.writes[write_at]
        node = Derivation(key, write.sharding, write)
        marker = (key, write_at)
        if marker in seen:
            node.truncated = "seen"
            return node
        if depth <= 0:
            node.truncated = "depth"
            return node
        seen.add(marker)
        for input_key in self._read_keys(write):
            child = self._node(input_key, write.cause.first, depth - 1, seen)
            if child is not None:
                node.children.append(child)
        return node
