"""Conflicts: the places where propagation could not agree.

Every op step of the propagation (changed anything or not) is evaluated once
more with the ``step`` program's factor records visible (``rec_axis``: what
each tensor's sharding says about each factor; ``fin_axis``: the records after
the strategy; ``ag_src``: the aggressive strategy's source tensor), and so is
the last visit of every data-flow edge (a loop's carry, a branch's result, a
call's argument or result, named after the op owning it: "the data-flow edge
of stablehlo.while"; what the output does there is what it does at that op).
At the last visit of each op (earlier visits saw older shardings) there is a
conflict

* *within-factor* on a factor: two tensors give it axes of which neither list
  is a prefix of the other;
* *across-factor* on an axis: two tensors put the axis on two different
  factors (a tensor cannot use an axis twice);
* *replicated* on a factor and axis: a tensor that maps the factor keeps the
  axis explicitly replicated while another tensor shards the factor with it.

Each conflict says, per competing tensor, the value (named as the output
prints it), its axes and, per competing axis, the input annotations that
axis came from, following that axis back through the steps that moved it
(not the value's whole ancestry); what the step kept, which competitors won
and what decided (user priority and op-priority band of the visit, the
strategy and its source tensor, the processing order); and what the output
does at the op (:mod:`sdy_dl.audit.communication_at`): the reshards and
collectives on its operands and results, or none.

Conflicts of one pattern (same op kind, rule, kind, factor roles, competing
annotations with layer numbers ignored, kept axes and output moves) form one
:class:`ConflictGroup`, so a model of many identical layers gives about as
many groups as one of two.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import defaultdict
from operator import attrgetter
from dataclasses import asdict, dataclass, field
from typing import NamedTuple

from sdy_dl.audit.tree_text import one_per_annotation
from sdy_dl.audit.steps import tensor_dim, tensor_name
from sdy_dl.rules.instance import factor_name


@dataclass
class Conflict:
    """One conflict at one op: on a factor (within-factor, replicated) or an axis
    (across-factor, replicated)."""

    op: str                        # the op's name
    place: str                     # its source place (input line, python line or foreign location)
    factors: list[str]
    axis: str                      # the contested axis ("" for within-factor)
    kind: str                      # within-factor, across-factor, replicated
    value: str = ""                # the op's first result (or operand), as the output names it
    rule: str = ""
    competitors: list[dict] = field(default_factory=list)
    # value, tensor, dim, factor, axes, replicated, won, origins: [{axis, from: [annotation]}]
    kept: dict = field(default_factory=dict)
    # factor -> the axes every tensor of the factor has after the step (the agreed prefix)
    decided: dict = field(default_factory=dict)       # user_priority_band, strategy, source, order
    output: list[dict] | None = field(default_factory=list)  # moves at the op: tensor, ops
    # (None: the output has no such op; ``absent`` says why)
    absent: str = field(default="", repr=False)
    predicted: bool = True         # output moves learnt from an explicit copy (not printed)
    tag: str | None = field(default=None, repr=False)
    tensors: list[int] = field(default_factory=list, repr=False)   # the competitors' step tensors
    edge_of: tuple | None = field(default=None, repr=False)   # an edge's: its owner's (tag, name)

    @property
    def factor(self) -> str:
        return ", ".join(self.factors)

    @property
    def decided_text(self) -> str:
        return "; ".join(v for v in self.decided.values() if v)

    @property
    def output_text(self) -> str:
        """What the output does at the op, as one sentence."""
        if self.output is None:
            return (f"not known here: {self.absent or 'the output has no such op'}; "
                    "a conflict at the same place may say it")
        if not self.output:
            return ("nothing: the output moves no data at this op (the kept shardings need "
                    "no communication here)")
        where = "; ".join(f"{m['tensor']}: {' -> '.join(m['ops'])}" for m in self.output)
        if self.predicted:
            return f"the partitioner communicates here (as --explicit-collectives prints it): {where}"
        return f"the output communicates here: {where}"

    def to_json(self) -> dict:
        out = asdict(self)
        out.pop("tag")
        out.pop("tensors")
        out.pop("edge_of")
        out.pop("absent")
        out["decided_text"] = self.decided_text
        out["output_text"] = self.output_text
        return out


@dataclass
class ConflictGroup:
    """Conflicts of one pattern (see the module docstring): one of them as the example,
    and every member's op and place."""

    example: Conflict
    members: list[dict] = field(default_factory=list)   # value, place, competitors' values

    @property
    def count(self) -> int:
        return len(self.members)

    def to_json(self) -> dict:
        return {"count": self.count, "example": self.example.to_json(), "members": self.members}


def _is_prefix(a: list, b: list) -> bool:
    return len(a) <= len(b) and b[:len(a)] == a


def last_visit_by_op(explainer, op_key=None, visits: dict | None = None) -> dict:
    """The last step of each op the propagation visited: the op's ``px:`` tag (a
    step of an untagged op: the step's ``id``) -> its last step, in first-visit
    order.  ``op_key``: the explainer's :class:`OpKeys` when made already;
    ``visits``: a dict given empty, filled with each op key's number of visits.

    The steps are grouped by their op's description first (``id``, at C speed:
    ``dict(zip(...))`` keeps each key's first place and last value), each
    description's tag found once (:meth:`OpKeys.tags_of`); when a step has no
    op, an op has no tag (each step its own key) or two descriptions give one
    key, step by step."""
    from collections import Counter

    op_key = op_key or OpKeys(explainer)
    steps = explainer.tracer.steps
    ops = list(map(attrgetter("op"), steps))
    ids = list(map(id, ops))
    by_description = dict(zip(ids, steps))
    if id(None) not in by_description:
        causes = list(by_description.values())
        keys = op_key.tags_of(list(by_description), causes)
        if "" not in keys:
            last = dict(zip(keys, causes))
            if len(last) == len(causes):
                if visits is not None:
                    counts = Counter(ids)
                    for k, cause in zip(last, causes):
                        visits[k] = counts[id(cause.op)]
                return last
    last = {}
    for cause in steps:
        k = op_key(cause)
        last[k] = cause
        if visits is not None:
            visits[k] = visits.get(k, 0) + 1
    return last


class OpKeys:
    """A step's op key (call it with the step): the ``px:`` tag of its op (``oN``),
    or the step's ``id`` when its op has none.  An op description's tag is the one
    it knows (:attr:`~sdy_dl.audit.steps.OpInfo.known_tag`), else read from its
    location as :class:`~sdy_dl.audit.naming.PropagationIndex` made it when it is
    that location (found by its pointer, without reading its text), else from its
    text; once per op description (they live as long as the steps).  ``tags``: a
    dict (id of an op description -> its tag, "" none) to read and fill: given
    filled, by the op keys of a propagation with the same ``tags_made`` whose
    descriptions are alive (a what-if's steps share the first's descriptions)."""

    def __init__(self, explainer, tags: dict | None = None):
        self._made = explainer.propagated.tags_made if explainer.propagated is not None else {}
        self.tags = {} if tags is None else tags

    def __call__(self, cause):
        op = cause.op
        if op is None:
            return id(cause)
        tag = self.tags.get(id(op))
        if tag is None:
            tag = self._tag(op)
        return tag or id(cause)

    def tags_of(self, ids: list, causes: list) -> list:
        """The tags ("" none) of the ops of steps ``causes`` (each with an op, whose
        description's id is in ``ids``)."""
        tags = self.tags
        found = list(map(tags.get, ids))
        if None in found:
            found = [tag if tag is not None else self._tag(cause.op)
                     for tag, cause in zip(found, causes)]
        return found

    def _tag(self, op) -> str:
        tag = getattr(op, "known_tag", None)
        if tag is None:
            from sdy_dl.ir.walk import key as pointer_of

            loc = getattr(op, "location", None)
            tag = self._made.get(pointer_of(loc)) if loc is not None else None
            if tag is None:
                tag = op.get("tag") or ""
        self.tags[id(op)] = tag
        return tag


def find_conflicts(explainer, communication=None, at=None) -> list[Conflict]:
    """Every conflict of the propagation ``explainer`` describes, in program order;
    ``communication``: an :class:`~sdy_dl.audit.communication_at.OpCommunication`
    of the output, or a function making one (called only if there are conflicts);
    ``at``: a set of (op name, place): only the conflicts of the ops there (each
    as the whole list has it: a conflict's origins, order and output depend on
    the whole propagation, not on which other conflicts are found)."""
    records = explainer.step_records()
    visits: dict = {}   # op key -> its visits
    op_key = OpKeys(explainer)
    out = []
    for cause in last_visit_by_op(explainer, op_key, visits).values():
        if at is not None and (cause.op["name"], cause.op["place"]) not in at:
            continue
        out += [(c, cause) for c in step_conflicts(explainer, cause, records)]
    out += _edge_conflicts(explainer, visits, at)
    if not out:
        return out
    if callable(communication):
        communication = communication()
    origins = AxisOrigins(explainer, records)
    total = len(explainer.tracer.steps)
    steps, index = explainer.tracer.steps, attrgetter("index")    # (in index order)
    position = {id(cause): n for n, cause in enumerate(steps)}
    for c, cause in out:
        keys = [k for k, _ in cause.inputs]
        for comp, t in zip(c.competitors, c.tensors):
            key = keys[t] if t < len(keys) else None
            axes = [c.axis] if c.axis else comp["axes"]
            comp["origins"] = [{"axis": a, "from": origins.of(key, comp["dim"], a, cause.at,
                                                            replicated=a in comp["replicated"])}
                               for a in axes] if key is not None else []
        tag = (cause.op or {}).get("tag")
        n = visits[op_key(cause) if cause.kind == "step" else ("edge", tag)]
        step = (f"step {position[id(cause)] + 1} of {total}" if cause.kind == "step"
                else f"after {bisect_left(steps, cause.index, key=index)} of the {total} op steps")
        c.decided["order"] = (f"processing order: the last of {n} visit{'s' * (n != 1)} of the "
                              f"{'op' if cause.kind == 'step' else 'edge'} ({step}); "
                              "it saw the shardings earlier steps had written")
        if communication is not None:
            c.output = (communication.at(*c.edge_of, returns=True) if c.edge_of
                        else communication.at(tag, cause.op["name"]))
            c.predicted = communication.predicted
            if c.output is None:
                c.absent = (communication.absent(*c.edge_of) if c.edge_of
                            else communication.absent(tag, cause.op["name"]))
    return [c for c, _ in out]


def _edge_conflicts(explainer, visits: dict, at=None) -> list:
    """(conflict, cause) of the last visit of every data-flow edge (see
    :func:`last_edge_visits`); ``visits`` gets each edge's visits under
    ``("edge", its tag)``."""
    from sdy_dl.audit.steps import StepRecords

    edges = [e for e in last_edge_visits(explainer, visits)
             if at is None or (e.name, e.place) in at]
    if not edges:
        return []
    records = StepRecords([e.cause.step for e in edges], explainer.propagated.meshes)
    out = []
    for e in edges:
        for c in step_conflicts(explainer, e.cause, records):
            c.op, c.place, c.edge_of = e.name, e.place, e.owner
            out.append((c, e.cause))
    return out


class EdgeVisit(NamedTuple):
    """The last visit of a data-flow edge, named after the op owning it."""

    cause: object
    name: str       # "the data-flow edge of stablehlo.while"
    place: str      # the owner's place
    owner: tuple    # the owner's (tag, op name)


def last_edge_visits(explainer, visits: dict | None = None) -> list[EdgeVisit]:
    """The last visit of every data-flow edge (a loop's carry, a branch's result, a
    call's argument or result: where the values it ties meet), in first-visit order;
    ``visits``: a dict filled with each edge's visits under ``("edge", its tag)``."""
    from sdy_dl.audit.naming import place_in
    from sdy_dl.ir.context import mlir_context

    last = {}
    for cause in explainer.tracer.edge_steps:
        tag = (cause.op or {}).get("tag")
        if cause.kind == "edge" and cause.step is not None and tag is not None:
            last[tag] = cause
            if visits is not None:
                visits[("edge", tag)] = visits.get(("edge", tag), 0) + 1
    links = {link.tag: link for link in explainer.propagated.links if link.owner}
    out = []
    with mlir_context():
        for tag, cause in last.items():
            link = links.get(tag)
            if link is not None:
                out.append(EdgeVisit(cause, edge_name(link.owner, link.edge),
                                     place_in(link.owner_loc),
                                     (link.owner_tag, link.owner)))
    return out


def edge_name(owner: str, edge: str = "") -> str:
    """A data-flow edge named after the op owning it, as the output prints that op (a
    call propagates as an ``sdy.named_computation``, printed as the ``func.call``);
    ``edge``: which edge of it (a function data-flow edge: ``@f argument 0``)."""
    from sdy_dl.audit.naming import EXPORT_RENAMES

    return f"the data-flow edge of {dict(EXPORT_RENAMES).get(owner, owner)}{' ' * bool(edge)}{edge}"


def step_conflicts(explainer, cause, records, named: bool = True) -> list[Conflict]:
    """The conflicts of ``cause``'s step (found once per cause and records; their
    origins, order and output are filled in by :func:`find_conflicts`);
    ``named``: False leaves the values' names empty (a what-if compares conflicts
    without them, by :attr:`~sdy_dl.audit.whatif.ConflictKey.same`, and naming
    them indexes the output)."""
    memo = explainer.__dict__.setdefault("_step_conflicts", {})
    marker = (cause.index, id(records), named)
    if marker not in memo:
        i = records.index.get(cause.step)
        memo[marker] = ([] if i is None or i not in records.mesh
                        else _step_conflicts(explainer, cause, i, records, named))
    return memo[marker]


def _step_conflicts(explainer, cause, i, records, named: bool = True) -> list[Conflict]:
    """The conflicts of step ``i`` (``cause``'s step)."""
    key_name = explainer.key_name if named else (lambda key: "")
    recs, replicated = records.rec, records.replicated
    step = cause.step
    rule = step.rule
    n = len(step.operands)
    keys = [k for k, _ in cause.inputs]
    tensors = range(n + len(step.results))
    found: list[tuple[str, list[int], str]] = []    # kind, factors, axis
    for f in range(len(rule.factors)):
        lists = {t: recs[i, t, f] for t in tensors if recs.get((i, t, f))}
        items = list(lists.items())
        if any(not _is_prefix(a, b) and not _is_prefix(b, a)
               for x, (_, a) in enumerate(items) for _, b in items[x + 1:]):
            found.append(("within-factor", [f], ""))
            continue
        names = {r[0] for refs in lists.values() for r in refs}
        shared = set()
        for (j, t), axes in replicated.items():
            if j == i and tensor_dim(rule, t, f) is not None:
                shared |= names & axes
        for a in sorted(shared):
            found.append(("replicated", [f], a))
    by_axis = defaultdict(set)
    for t in tensors:
        for f in range(len(rule.factors)):
            for a, p, size in recs.get((i, t, f), ()):
                by_axis[a].add((t, f, p, size))
    for a, uses in sorted(by_axis.items()):
        # two tensors put overlapping parts of the axis on two factors (the disjoint
        # sub-axes a reshape splits an axis into are no conflict)
        contested = {f for t, f, p, size in uses for t2, f2, p2, size2 in uses
                     if t != t2 and f != f2 and p < p2 * size2 and p2 < p * size}
        if contested:
            found.append(("across-factor", sorted(contested), a))

    def axes_of(t: int, f: int) -> list[str]:
        return [records.ref_text(i, r) for r in recs.get((i, t, f), [])]

    if not found:
        return []
    conflicts = []
    first_value = op_value(key_name, cause)
    for kind, factors, axis in found:
        kept = {factor_name(f): [records.ref_text(i, r) for r in _common_prefix(
                    [records.fin.get((i, t, f), []) for t in tensors
                     if tensor_dim(rule, t, f) is not None])]
                for f in factors}
        competitors, tensor_of = [], []
        for f in factors:
            for t in tensors:
                refs = recs.get((i, t, f), [])
                rep = sorted(replicated.get((i, t), ())) if kind == "replicated" else []
                if axis and kind != "within-factor":
                    if kind == "across-factor" and axis not in (r[0] for r in refs):
                        continue
                    if kind == "replicated":
                        rep = [axis] if axis in rep else []
                        if not rep and axis not in (r[0] for r in refs):
                            continue
                if not refs and not (rep and tensor_dim(rule, t, f) is not None):
                    continue
                axes = axes_of(t, f)
                name = factor_name(f)
                won = (axis in {_axis_name(x) for x in kept[name]} if axis and not rep
                       else bool(axes) and axes == kept[name])
                tensor_of.append(t)
                competitors.append({
                    "value": key_name(keys[t]) if t < len(keys) else "?",
                    "tensor": tensor_name(t, n), "dim": tensor_dim(rule, t, f), "factor": name,
                    "axes": axes, "replicated": rep, "won": won})
        if len(competitors) < 2:
            continue
        decided = {}
        if cause.phase:
            decided["priority"] = cause.phase
        decided["strategy"] = f"{cause.strategy} strategy"
        sources = [(f, records.source[(i, f)]) for f in factors if (i, f) in records.source]
        if sources:
            decided["source"] = "; ".join(
                f"factor {factor_name(f)} takes the axes of its source tensor {tensor_name(s, n)} (the "
                "largest sharded tensor of the factor)" for f, s in sources)
        conflicts.append(Conflict(cause.op["name"], cause.op["place"],
                                  [factor_name(f) for f in factors], axis, kind, first_value,
                                  rule.to_text(), competitors, kept, decided,
                                  tag=cause.op.get("tag"), tensors=tensor_of))
    return conflicts


def op_value(key_name, cause) -> str:
    """The value a conflict at ``cause``'s step is named by: the step's first result
    (else operand), as ``key_name`` names a tracer key ("" none)."""
    keys = [k for k, _ in cause.inputs]
    n = len(cause.step.operands)
    return next((key_name(k) for k in keys[n:] + keys[:n]), "")


def _common_prefix(lists: list[list]) -> list:
    """The longest list every one of ``lists`` starts with."""
    if not lists:
        return []
    out = []
    for items in zip(*lists):
        if any(x != items[0] for x in items):
            break
        out.append(items[0])
    return out


class AxisOrigins:
    """Where one axis of one dim of a value came from: the input annotations (or other
    starting points) reached by following the writes that moved that axis."""

    def __init__(self, explainer, records):
        self.explainer = explainer
        self.tracer = explainer.tracer
        self.records = records
        self._memo: dict = {}
        self._changes: dict = {}

    def of(self, key, dim, axis: str, before: int, replicated: bool = False) -> list[str]:
        """The annotations axis ``axis`` of ``key``'s dim ``dim`` (or its replicated
        axes) came from, as of write number ``before``.  A write is followed back to
        the tensors its step moved the axis from (the step's factor records), else to
        the key's own earlier sharding when that held the axis already, else, for a
        cause that maps dims one to one (a data-flow edge, barrier, group copy or
        result sync), to the tensors it read that held the axis on that dim; where
        none of these holds, or the key's sharding then did not hold the axis, the
        answer says so in words (not traced).  ``axis``: an axis name or
        an axis ref's text (``"data":(1)2``)."""
        axis = _axis_name(axis)
        out: list[tuple] = []   # (the leaf or None, its text)
        stack = [(key, dim, before)]
        seen = set()
        while stack:
            k, d, b = stack.pop()
            w = self.tracer.last_write(k, b)
            if (k, d, w) in seen:
                continue
            seen.add((k, d, w))
            if w is None:
                if _holds(self.tracer.initial.get(k), d, axis, replicated):
                    out.append(self._leaf(k))
                else:
                    out.append((None, self._not_held(k, d, axis, replicated,
                                                     "when propagation began")))
                continue
            write = self.tracer.writes[w]
            cause = write.cause
            if not _holds(write.sharding, d, axis, replicated):
                out.append((None, self._not_held(k, d, axis, replicated,
                                                 f"after {cause.label} wrote it")))
                continue
            step = cause.step
            i = self.records.index.get(step) if step is not None else None
            inputs = [kk for kk, _ in cause.inputs]
            if i is not None and not replicated:
                moved = [ch for ch in self._changes_of(i)
                         if ch.tensor < len(inputs) and inputs[ch.tensor] == k and ch.dim == d
                         and any(_axis_name(x) == axis for x in ch.axes)]
                if moved:
                    for u, du in moved[0].sources:
                        if u < len(inputs):
                            stack.append((inputs[u], du, cause.first))
                    continue
            if _holds(self._before(k, cause.first), d, axis, replicated):
                stack.append((k, d, cause.first))   # it held the axis already
                continue
            followed = False
            if cause.kind in _SAME_DIMS:
                for kk, s in cause.inputs:
                    if kk != k and _holds(s, d, axis, replicated):
                        stack.append((kk, d, cause.first))
                        followed = True
            if not followed:
                out.append((None, f"not traced: {cause.label} wrote it, moved from none of "
                            "the tensors it read"))
        return sorted(one_per_annotation(out))

    def _not_held(self, key, dim, axis: str, replicated: bool, when: str) -> str:
        """Where a trace stops: ``key`` did not hold ``axis`` on ``dim`` (or replicated)
        ``when``."""
        where = "replicated" if replicated else f"on dim {dim}"
        return f"not traced: {self.explainer.key_name(key)} had no \"{axis}\" {where} {when}"

    def _before(self, key, at: int):
        """``key``'s sharding before write number ``at`` (its first one: none written)."""
        w = self.tracer.last_write(key, at)
        return self.tracer.initial.get(key) if w is None else self.tracer.writes[w].sharding

    def _changes_of(self, i: int) -> list:
        if i not in self._changes:
            self._changes[i] = self.records.changes(i)
        return self._changes[i]

    def _leaf(self, key) -> tuple:
        """(the leaf, its text): the annotation of the input a key's first sharding is."""
        from sdy_dl.audit.provenance import Derivation

        initial = self.tracer.initial.get(key)
        if initial is None:
            return None, "(no sharding)"
        leaf = self.explainer.leaf(Derivation(key, initial, None), self.explainer.key_name(key))
        if leaf.kind == "annotation":
            # (the input's own name and place, when the output names the value otherwise or
            # the import passes moved the annotation onto it)
            own = f"{leaf.what} = {leaf.sharding}"
            cited = leaf.because.removeprefix("annotation in the input: ")
            return leaf, own if cited.startswith(f"{leaf.what} = ") else f"{own} ({leaf.because})"
        return leaf, f"{leaf.what}: {leaf.because}"


#: Causes whose tensors all have the same shape, dims mapped one to one.
_SAME_DIMS = frozenset({"edge", "barrier", "group", "result", "sync"})


def _axis_name(ref: str) -> str:
    """The axis name of an axis ref text (``"data":(1)2`` -> ``data``)."""
    return ref.split('"')[1] if ref.startswith('"') else ref


def _holds(sharding, dim, axis: str, replicated: bool) -> bool:
    """Whether ``sharding`` has ``axis`` on ``dim`` (or among its replicated axes)."""
    if sharding is None:
        return False
    if replicated:
        return any(r.name == axis for r in sharding.replicated)
    if dim is None or dim >= len(sharding.dims):
        return False
    return any(r.name == axis for r in sharding.dims[dim].axes)


_NUMBER = re.compile(r"\d+")


def _unnumbered(text: str) -> str:
    """``text`` with every number replaced by ``#`` (layer indices, SSA numbers)."""
    return _NUMBER.sub("#", text)


def pattern(c: Conflict) -> tuple:
    """The pattern of a conflict (see the module docstring)."""
    return (c.op, c.rule, c.kind, tuple(c.factors), c.axis,
            tuple((x["tensor"], x["dim"], x["factor"], tuple(x["axes"]), tuple(x["replicated"]),
                   x["won"], tuple(_unnumbered(a) for o in x.get("origins", ()) for a in o["from"]))
                  for x in c.competitors),
            tuple(sorted((k, tuple(v)) for k, v in c.kept.items())),
            None if c.output is None else tuple((m["tensor"], tuple(m["ops"])) for m in c.output))


def group_conflicts(conflicts: list[Conflict]) -> list[ConflictGroup]:
    """Conflicts grouped by :func:`pattern`, groups in order of their first member."""
    groups: dict[tuple, ConflictGroup] = {}
    for c in conflicts:
        g = groups.get(pattern(c))
        if g is None:
            g = groups[pattern(c)] = ConflictGroup(c)
        g.members.append({"value": c.value, "place": c.place,
                          "competitors": [x["value"] for x in c.competitors]})
    return list(groups.values())


#: Members listed per group in text (``--format json`` lists all).
SHOWN_MEMBERS = 8


def group_lines(g: ConflictGroup) -> list[str]:
    """One group of conflicts as text lines."""
    c = g.example
    on = f"axis {c.axis} on factors {c.factor}" if c.kind == "across-factor" else (
        f"factor {c.factor}" + (f", axis {c.axis}" if c.axis else ""))
    times = f" x{g.count}" if g.count > 1 else ""
    lines = [f"{c.op} ({c.rule}): {on} ({c.kind} conflict){times}"]
    for comp in c.competitors:
        rep = f", replicated {', '.join(comp['replicated'])}" if comp["replicated"] else ""
        won = " [kept]" if comp["won"] else ""
        lines.append(f"  {comp['value']} ({comp['tensor']} dim {comp['dim']}, factor "
                     f"{comp['factor']}): [{', '.join(comp['axes'])}]{rep}{won}")
        for o in comp["origins"]:
            lines.append(f"      {o['axis']} <- {'; '.join(o['from'])}")
    kept = "; ".join(f"{f}: [{', '.join(a)}]" for f, a in c.kept.items())
    lines.append(f"  kept: {kept}")
    lines.append(f"  decided by: {c.decided_text}")
    lines.append(f"  output: {c.output_text}")
    shown = g.members[:SHOWN_MEMBERS]
    more = f", ... ({g.count - len(shown)} more; --format json lists all)" if g.count > len(shown) else ""
    at = ", ".join(f"{m['value']} ({m['place']})" for m in shown)
    lines.append(f"  at: {at}{more}")
    return lines


def groups_text(groups: list[ConflictGroup]) -> str:
    """The groups as ``sdy-dl conflicts`` prints them (and ``print(result.conflicts())``)."""
    if not groups:
        return "no conflicts"
    total = sum(g.count for g in groups)
    return "\n".join([f"{total} conflicts in {len(groups)} patterns"]
                     + [line for g in groups for line in group_lines(g)])
