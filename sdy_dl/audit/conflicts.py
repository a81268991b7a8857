"""Conflicts: the places where propagation could not agree.

Every op step of the propagation (changed anything or not) is evaluated once
more with the ``step`` program's factor records visible (``rec_axis``: what
each tensor's sharding says about each factor; ``fin_axis``: the records after
the strategy; ``ag_src``: the aggressive strategy's source tensor).  A factor
is in conflict when

* *within-factor*: two tensors give it axes of which neither list is a prefix
  of the other;
* *across-factor*: one axis is on two different factors in two tensors (a
  tensor cannot use an axis twice);
* *replicated*: a tensor that maps the factor keeps the axis explicitly
  replicated while another tensor shards the factor with it.

The last visit of each op is reported (earlier visits saw older shardings),
with the competing values, the annotations they came from, what the step
kept and what decided it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field

from sdy_dl.audit.steps import tensor_dim
from sdy_dl.rules.instance import factor_name


@dataclass
class Conflict:
    """One conflicting factor of one op."""

    op: str
    place: str
    factor: str
    kind: str                      # within-factor, across-factor, replicated
    competitors: list[dict] = field(default_factory=list)   # value, tensor, dim, axes, annotations
    kept: list[str] = field(default_factory=list)            # axes the factor got ([]: none)
    decided: str = ""
    reshard: bool = False          # the output has a sdy.reshard on the op's operands/results

    def to_json(self) -> dict:
        return asdict(self)


def _is_prefix(a: list, b: list) -> bool:
    return len(a) <= len(b) and b[:len(a)] == a


def find_conflicts(explainer) -> list[Conflict]:
    """Every conflict of the propagation ``explainer`` describes, in program order."""
    last = {}
    for cause in explainer.tracer.steps:
        last[(cause.op or {}).get("tag") or id(cause)] = cause
    records = explainer.step_records()
    out = []
    for cause in last.values():
        i = records.index[cause.step]
        if i in records.mesh:
            out += _step_conflicts(explainer, cause, i, records)
    return out


def _step_conflicts(explainer, cause, i, records) -> list[Conflict]:
    recs, replicated = records.rec, records.replicated
    step = cause.step
    rule = step.rule
    n = len(step.operands)
    keys = [k for k, _ in cause.inputs]
    tensors = range(n + len(step.results))
    found: dict[int, str] = {}
    for f in range(len(rule.factors)):
        lists = {t: recs[i, t, f] for t in tensors if recs.get((i, t, f))}
        items = list(lists.items())
        if any(not _is_prefix(a, b) and not _is_prefix(b, a)
               for x, (_, a) in enumerate(items) for _, b in items[x + 1:]):
            found.setdefault(f, "within-factor")
            continue
        names = {r[0] for refs in lists.values() for r in refs}
        for t, axes in replicated.items():
            if t[0] == i and tensor_dim(rule, t[1], f) is not None and names & axes:
                found.setdefault(f, "replicated")
    by_axis = defaultdict(set)
    for (j, t, f), refs in recs.items():
        if j == i:
            for a, _, _ in refs:
                by_axis[a].add((t, f))
    for a, uses in by_axis.items():
        if len({f for _, f in uses}) > 1 and len({t for t, _ in uses}) > 1:
            for _, f in uses:
                found.setdefault(f, "across-factor")

    def tensor(t: int) -> str:
        return f"operand {t}" if t < n else f"result {t - n}"

    conflicts = []
    for f, kind in sorted(found.items()):
        competitors = []
        for t in tensors:
            refs = recs.get((i, t, f), [])
            rep = sorted(replicated.get((i, t), ())) if kind == "replicated" else []
            if not refs and not (rep and tensor_dim(rule, t, f) is not None):
                continue
            competitors.append({
                "value": explainer.key_name(keys[t]) if t < len(keys) else "?",
                "tensor": tensor(t), "dim": tensor_dim(rule, t, f),
                "axes": [records.ref_text(i, r) for r in refs],
                "replicated": rep,
                "annotations": explainer.annotations(keys[t], cause.at) if t < len(keys) else []})
        if len(competitors) < 2 and kind != "across-factor":
            continue
        kept = sorted({records.ref_text(i, r) for t in tensors for r in records.fin.get((i, t, f), [])})
        src = records.source.get((i, f))
        decided = [f"{cause.strategy} strategy"]
        if cause.phase:
            decided.append(cause.phase)
        if src is not None:
            decided.append(f"source tensor {tensor(src)} (the largest sharded tensor of factor "
                           f"{factor_name(f)})")
        decided.append("the worklist order decided which shardings this visit saw")
        conflicts.append(Conflict(cause.op["name"], cause.op["place"], factor_name(f), kind,
                                  competitors, kept, "; ".join(decided),
                                  explainer.outputs.has_reshard(cause.op.get("tag"))))
    return conflicts
