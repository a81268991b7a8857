"""Why a value of the output has no sharding, or dims without axes.

For each op whose last visit read the value while another of its tensors
had axes on a factor that maps to one of the value's empty dims, the reason
the axes stopped there is read off the step's rule and its factor records:
a reduction or need-replication factor, a blocked factor or a direction that
excludes the value (propagation barriers, op-priority bands), a closed dim,
a conflict on the factor, a size the axes do not divide, or a manual axis.
Without any such op, no annotation reaches the value.
"""

from __future__ import annotations

from math import prod

from sdy_dl.sharding import quote_string


def last_steps(explainer, key) -> dict:
    """The last step of each op that read tracer key ``key`` (by op tag)."""
    last = {}
    for cause in explainer.steps_reading(key):
        last[(cause.op or {}).get("tag") or id(cause)] = cause
    return last


def unsharded_reasons(explainer, out, records=None) -> list[str]:
    """One line per reason the propagation left ``out`` (partly) without axes
    (``records``: factor records covering its :func:`last_steps`, evaluated
    together for several values; None: evaluated here)."""
    key = out.key
    if key is None:
        return [f"{out.op} was created by the export passes"]
    empty = _empty_dims(out)
    last = last_steps(explainer, key)
    reasons = []
    if last:
        if records is None:
            records = explainer.records_for([c.step for c in last.values()])
        for cause in last.values():
            reasons += _blocked(records, cause, key, empty,
                                _conflicting_factors(explainer, cause, records))
    if not reasons and last:
        elsewhere = sorted({f"{c.op['name']} at {c.op['place']}" for c in last.values()
                            if any(s is not None and any(d.axes for d in s.dims)
                                   for k, s in c.inputs if k != key)})
        if elsewhere:
            reasons.append(f"the axes of the other tensors of {', '.join(elsewhere)} are on factors "
                           "that none of its empty dims maps to (e.g. reduction or contracting "
                           "dims it does not have)")
    if not reasons:
        manual = sorted(explainer.manual_axes_around(out))
        reasons.append("no annotation reaches it: no op with a sharding rule connects it to a "
                       "value that has axes on the same factor" + (
                           f" (it is in a manual computation's body, manual over "
                           f"{', '.join(map(quote_string, manual))}: the body computes on its "
                           "local view, and an annotation's manual axes are on no dim of it)"
                           if manual else ""))
    return list(dict.fromkeys(reasons))


def _conflicting_factors(explainer, cause, records) -> set:
    """(place, op, factor) of the conflicting factors of ``cause``'s step."""
    from sdy_dl.audit.conflicts import step_conflicts

    return {(c.place, c.op, f) for c in step_conflicts(explainer, cause, records)
            for f in c.factors}


def _empty_dims(out) -> set[int] | None:
    """The dims of ``out`` without axes (None: every dim)."""
    s = out.sharding
    if s is None:
        return None
    return {d for d, dim in enumerate(s.dims) if not dim.axes}


def _blocked(records, cause, key, empty, conflicts) -> list[str]:
    from sdy_dl.audit.steps import tensor_dim
    from sdy_dl.rules.instance import factor_name

    i = records.index.get(cause.step)
    if i is None or i not in records.mesh:
        return []
    step = cause.step
    rule = step.rule
    n_tensors = len(step.operands) + len(step.results)
    mine = [t for t, (k, _) in enumerate(cause.inputs) if k == key]
    where = f"{cause.op['name']} at {cause.op['place']}"
    out = []
    for t in mine:
        shardings = list(step.operands) + list(step.results)
        current = shardings[t] if t < len(shardings) else None
        for f in range(len(rule.factors)):
            d = tensor_dim(rule, t, f)
            if d is None or (empty is not None and d not in empty):
                continue
            others = [records.rec[i, u, f] for u in range(n_tensors) if u != t and records.rec.get((i, u, f))]
            if not others or records.fin.get((i, t, f)):
                continue
            axes = sorted({records.ref_text(i, r) for refs in others for r in refs})
            name = factor_name(f)
            factor = rule.factors[f]
            what = f"{where}: factor {name} (dim {d}) has {', '.join(axes)} elsewhere, but"
            if factor.kind in ("reduction", "need_replication"):
                out.append(f"{what} it is a {factor.kind.replace('_', '-')} factor of the rule")
            elif factor.blocked or records.direction.get((i, f)) == "NONE":
                out.append(f"{what} propagation along it is blocked (a propagation barrier, a "
                           "blocked factor or the op-priority band)")
            elif records.direction.get((i, f)) in ("FORWARD", "BACKWARD"):
                out.append(f"{what} the step only propagates {records.direction[(i, f)].lower()} "
                           "along it (op-priority band or propagation barrier)")
            elif current is not None and d < len(current.dims) and current.dims[d].is_closed:
                out.append(f"{what} the dim is closed")
            elif (cause.op["place"], cause.op["name"], name) in conflicts:
                out.append(f"{what} the factor is in conflict (see sdy-dl conflicts)")
            elif _size(records, i, others) and factor.size % _size(records, i, others) != 0:
                out.append(f"{what} its size {factor.size} is not divisible by the axes")
            elif cause.op["name"] == "sdy.manual_computation" or "manual" in cause.label:
                out.append(f"{what} the axes are manual there")
            else:
                out.append(f"{what} the {cause.strategy} strategy did not move them to it")
    return out


def _size(records, i, others) -> int:
    first = others[0]
    return prod(s for _, _, s in first) if first else 0
