"""Factor-level detail of propagation steps: the op, its rule and where the rule
came from, and per changed tensor which factor carried which axes from which
operand or result dim.

The detail is read from the ``step`` program's own relations, not recomputed:
the steps shown are evaluated once more in one engine call with every
relation of the program visible (``rec_axis``: the factor records the step
projected from its tensors; ``fin_axis``: the records after the strategy;
``ag_src``: the aggressive strategy's source tensor of a factor).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sdy_dl.audit.naming import first_tag, located, place_of
from sdy_dl.ir.walk import key as pointer_of
from sdy_dl.rules.instance import factor_name
from sdy_dl.sharding import make_sub_axis

#: Relations of stage ``step`` the audit reads back besides its outputs.
DETAIL_RELATIONS = ("rec_axis", "fin_axis", "ag_src", "step_updated", "step_mesh", "fdir")


class OpInfo(Mapping):
    """An op a step ran on, as the audit names it: ``name``, ``place`` (its
    source), ``origin`` (of its rule) and ``tag`` (its ``px:`` tag, which links it
    to the output module), plus its ``line``.  The place, tag and line are read
    from the op's location when first asked for: a location outlives its op, so
    this is safe after the op is erased, and most ops are never asked about.  The
    tag is known without reading the location when the op was described as one
    the propagation index tagged (:attr:`known_tag`)."""

    __slots__ = ("name", "origin", "_loc", "_read", "_places", "known_tag")
    _KEYS = ("name", "place", "origin", "tag")

    def __init__(self, name: str, origin: str, loc, places: dict | None = None,
                 tag: str | None = None):
        """``places``: what :meth:`_from_location` read of other ops' locations in
        the module, by location (see :class:`OpDescriber`); ``tag``: the op's ``px:``
        tag, when known (None: read from the location when asked for)."""
        self.name, self.origin, self._loc = name, origin, loc
        self._read = None
        self._places = places
        #: the op's ``px:`` tag as known when it was described (None: not known)
        self.known_tag = tag

    def _from_location(self) -> tuple:
        """(place, tag, line), read once from the location (or taken from ``places``,
        when another op had this location: locations are uniqued, so an equal one is
        the same object, found by its pointer)."""
        if self._read is None:
            places, loc = self._places, self._loc
            if places is not None:
                at = pointer_of(loc)
                found = places.get(at)
                if found is not None and found[0] == loc:
                    self._read = found[1]
                    return self._read
            text = str(loc)
            tag = self.known_tag
            where = located(text)   # (the line of the module read is its position's)
            self._read = (place_of(*where), tag if tag is not None else first_tag(text, "px"),
                          where[0])
            if places is not None:
                places[at] = (loc, self._read)
        return self._read

    @property
    def line(self) -> int | None:
        """The op's line in the module text (None when unknown)."""
        return self._from_location()[2]

    @property
    def location(self):
        """The op's location when it was described (a raw MLIR location)."""
        return self._loc

    def __getitem__(self, key: str):
        if key == "name":
            return self.name
        if key == "origin":
            return self.origin
        if key == "place":
            return self._from_location()[0]
        if key == "tag":
            return self.known_tag if self.known_tag is not None else self._from_location()[1]
        raise KeyError(key)

    def __iter__(self):
        return iter(self._KEYS)

    def __len__(self) -> int:
        return len(self._KEYS)


class OpDescriber:
    """``op -> OpInfo``: the op's name, source place, rule origin (for the tracer)."""

    def __init__(self, file: str, rule_files=(), conservative: bool = False,
                 places: dict | None = None):
        """``places``: what the ops' locations say (place, tag, line), by location,
        shared with the describers of other propagations of ``file`` (a what-if's
        with its first propagation's: most of its ops have the first's locations)."""
        from sdy_dl.rules.db import load_rule_db

        self.file = file
        self.places = places if places is not None else {}
        self.rule_files = frozenset(str(Path(f).resolve()) for f in rule_files)
        self.db = load_rule_db(tuple(rule_files), conservative=conservative)
        self._described: dict[int, tuple] = {}   # id(op) -> (op, description)
        self._file_labels: dict[str, str] = {}   # rule file -> its label
        #: the ops of the model index the propagation index tagged, by number (set
        #: by the audit when it is made): op N of it is tagged ``oN``
        self.tagged_ops: list | None = None

    def __call__(self, op) -> OpInfo:
        """The op's :class:`OpInfo` (made once per op; its rule origin read now, as the
        op's attributes may be gone later)."""
        cached = self._described.get(id(op))
        if cached is not None and cached[0] is op:
            return cached[1]
        tagged = self.tagged_ops
        tag = f"o{op.oid}" if tagged is not None and op.oid < len(tagged) \
            and tagged[op.oid] is op else None
        described = OpInfo(op.name, self.rule_origin(op), op.mlir.location, self.places, tag)
        self._described[id(op)] = (op, described)
        return described

    def describes_as(self, other: "OpDescriber") -> bool:
        """Whether this describer describes an op as ``other`` describes the op it is
        a copy of (same name, location and attributes): the same file and rules."""
        return (self.file == other.file and self.rule_files == other.rule_files
                and self.db is other.db)

    def rule_origin(self, op) -> str:
        """Where ``op``'s rule comes from: the op's own attribute or a rule file and line."""
        if op.name == "sdy.data_flow_edge":
            return "identity rule of a data-flow edge"
        if op.name == "sdy.propagation_barrier":
            return "identity rule of a propagation barrier"
        if op.attr_text("sdy.sharding_rule") is not None:
            return "the op's own sdy.sharding_rule attribute"
        entry = self.db.entry_for(op)
        if entry is None:
            return "no rule"
        return self.file_label(entry.loc.file, entry.loc.line)

    def file_label(self, path: str, line: int | None) -> str:
        """``rules/FILE:LINE`` (or ``--rules FILE:LINE``, ...): the rule file named once
        per file (naming it resolves the path on disk)."""
        label = self._file_labels.get(path)
        if label is None:
            label = self._file_labels[path] = _file_label(path, self.rule_files)
        return label + (f":{line}" if line else "")


@dataclass
class AxisChange:
    """Axes a step gave one factor of one tensor, and the tensors they came from."""

    tensor: int                       # step tensor index (operands first)
    dim: int | None                   # the tensor dim the factor maps to
    factor: str                       # i, j, k, ...
    kind: str                         # pass_through, reduction, need_replication, permutation
    axes: list[str]
    sources: list[tuple[int, int | None]] = field(default_factory=list)   # (tensor, dim)
    source_of_factor: int | None = None   # aggressive: the factor's source tensor


def tensor_name(tensor: int, operands: int) -> str:
    """Step tensor ``tensor`` as the audit names it, ``operand K`` or ``result K``
    (``operands``: the step's number of operands)."""
    return f"operand {tensor}" if tensor < operands else f"result {tensor - operands}"


def tensor_dims(rule, tensor: int) -> list:
    """The factors of each dim of step tensor ``tensor`` under ``rule``."""
    n = len(rule.operands)
    return rule.operands[tensor] if tensor < n else rule.results[tensor - n]


def tensor_dim(rule, tensor: int, factor: int) -> int | None:
    """The dim of step tensor ``tensor`` that ``factor`` maps to (None: it has none)."""
    for d, factors in enumerate(tensor_dims(rule, tensor)):
        if factor in factors:
            return d
    return None


def step_details(steps: list, meshes) -> list[list[AxisChange]]:
    """The axis changes of each step of ``steps`` (one engine call for all)."""
    if not steps:
        return []
    records = StepRecords(steps, meshes)
    return [records.changes(records.index[s]) for s in steps]


#: Steps per engine call when many steps are evaluated for detail (bounded memory).
DETAIL_BATCH = 256


def evaluate_with_details(steps: list, meshes) -> dict[str, set[tuple]]:
    """Run the ``step`` program on ``steps`` with the embedded Python engine, reading ``DETAIL_RELATIONS`` too
    (in batches of ``DETAIL_BATCH``; instance ids are positions in ``steps``)."""
    if len(steps) <= DETAIL_BATCH:
        return _evaluate_batch(steps, meshes)
    out: dict[str, set[tuple]] = defaultdict(set)
    for first in range(0, len(steps), DETAIL_BATCH):
        for name, rows in _evaluate_batch(steps[first:first + DETAIL_BATCH], meshes).items():
            out[name].update((row[0] + first,) + row[1:] for row in rows)
    return out


def _evaluate_batch(steps: list, meshes) -> dict[str, set[tuple]]:
    from sdy_dl.datalog.program import Program
    from sdy_dl.engines.python_engine import PythonEngine
    from sdy_dl.propagation.step_eval import step_program
    from sdy_dl.propagation.step_facts import step_facts

    program = step_program(steps)
    decls = {n: (d.replace(is_output=True) if n in DETAIL_RELATIONS or d.is_output else d)
             for n, d in program.decls.items()}
    # (the same text, so the same plan: kept in the cache under the program's key)
    shown = Program(program.text, decls, program.key)
    out = PythonEngine().run(shown, step_facts(steps, meshes))
    return {d.name: set(out.get(d.name, ())) for d in shown.outputs}


class StepRecords:
    """The factor records of a set of steps, from one evaluation (see module docstring)."""

    def __init__(self, steps: list, meshes):
        from sdy_dl.propagation.step_facts import step_facts

        self.steps = list({s: None for s in steps})
        self.index = {s: i for i, s in enumerate(self.steps)}
        rel = evaluate_with_details(self.steps, meshes) if self.steps else defaultdict(set)
        self.rec = defaultdict(list)        # (i, t, f) -> [(a, p, s)] major to minor
        for i, t, f, q, a, p, s in sorted(rel["rec_axis"]):
            self.rec[i, t, f].append((a, p, s))
        self.fin = defaultdict(list)        # (i, t, f) -> [(a, p, s)] (expanded tensors)
        for i, t, f, q, a, p, s in sorted(rel["fin_axis"]):
            self.fin[i, t, f].append((a, p, s))
        self.source = {(i, f): t for i, f, t in rel["ag_src"]}
        self.direction = {(i, f): d for i, f, d in rel["fdir"]}
        self.updated = {(i, t) for i, t in rel["step_updated"]}
        self.mesh = {i: meshes[m] for i, m in rel["step_mesh"] if m in meshes}
        self.replicated = defaultdict(set)  # (i, t) -> axis names
        if self.steps:
            for i, t, q, a, p, s in step_facts(self.steps, meshes).get("in_replicated", ()):
                self.replicated[i, t].add(a)

    def ref_text(self, i: int, ref) -> str:
        return make_sub_axis(*ref, self.mesh[i]).to_text()

    def changes(self, i: int) -> list[AxisChange]:
        """The axis changes of step ``i``: per updated tensor and factor, the refs of
        ``fin_axis`` its ``rec_axis`` lacked, and the tensors whose records held them."""
        if not hasattr(self, "_by_step"):
            self._by_step = defaultdict(list)
            for (j, t, f) in self.fin:
                self._by_step[j].append((t, f))
        step = self.steps[i]
        out = []
        for t, f in sorted(self._by_step.get(i, ())):
            if (i, t) not in self.updated:
                continue
            have = set(self.rec.get((i, t, f), ()))
            new = [r for r in self.fin[i, t, f] if r not in have]
            if not new:
                continue
            sources = sorted({(u, tensor_dim(step.rule, u, f))
                              for u in range(len(step.operands) + len(step.results))
                              if u != t and any(r in self.rec.get((i, u, f), ()) for r in new)})
            out.append(AxisChange(t, tensor_dim(step.rule, t, f), factor_name(f),
                                  step.rule.kind_of(f), [self.ref_text(i, r) for r in new],
                                  sources, self.source.get((i, f))))
        return out


@functools.lru_cache(maxsize=None)
def _file_label(path: str, rule_files: frozenset) -> str:
    """How a rule file is named in explanations (``rule_files``: the ``--rules`` files, resolved)."""
    from sdy_dl.resources import rules_dir

    p = Path(path).resolve()
    try:
        return f"rules/{p.relative_to(rules_dir().resolve())}"
    except ValueError:
        pass
    if str(p) in rule_files:
        return f"--rules {path}"
    return f"$SDY_DL_RULES {path}"
