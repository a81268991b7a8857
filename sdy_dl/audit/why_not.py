"""Why is an axis NOT on a value: ``explain MODULE VALUE --why-not AXIS [--dim D]``.

The data flow propagation follows (:mod:`~sdy_dl.audit.dataflow`: ops, and
the data-flow edges of loops, branches, calls and manual computations)
connects tracer keys.  From VALUE, a breadth-first walk over it (never through
a value without dims: it holds no axis) stops at the first keys whose final
sharding holds more of AXIS than VALUE: each is where an annotation's AXIS got
to (its input annotations are named), and the step between it and the key one
hop nearer VALUE (the last visit of that op or edge) is *the first step that
did not carry the axis on* (a key that held no AXIS at that step got it there
or later, from VALUE's side: no place where AXIS stopped).  Stage
``why_not`` (``datalog/why_not/``) says first whether propagation steps
across that link with the axis at all (``carries(L, AXIS)``: an op without
a sharding rule is never stepped, a manual axis never crosses a manual
computation's edge); when it does not, the literal that failed names the
cause.  Otherwise the step is evaluated once
more, alone, with every relation of the ``step`` program kept
(:class:`~sdy_dl.audit.negation.Model`), and the program says why the
nearer tensor's record for the axis's factor has no AXIS
(``fin_axis(0, T, F, _, AXIS, _, _)``): the rule that would derive it and the
body literal that did not hold, down to where the derivation stopped.
:func:`cause_of` names the cause from that chain and the step's facts.
"""

from __future__ import annotations

import bisect
import re
from collections import deque
from dataclasses import dataclass, field

from sdy_dl.audit.steps import tensor_dim, tensor_dims, tensor_name
from sdy_dl.errors import SdyError
from sdy_dl.ir.meshes import mesh_of
from sdy_dl.rules.instance import factor_name
from sdy_dl.sharding import quote_string


@dataclass
class Blocked:
    """One place where AXIS stopped on its way to the value."""

    source: str                    # the value holding AXIS (named)
    source_sharding: str
    annotations: list[str]         # the input annotations its sharding came from
    op: str                        # the op of the step that did not carry AXIS on
    place: str
    rule: str                      # the op's sharding rule
    factor: str                    # the factor AXIS is on in the source
    to: str                        # the value one step nearer VALUE
    to_sharding: str
    cause: str                     # the cause, phrased
    why: object = None             # negation.Absence, or None when no Datalog question applies
    strategy: str = ""
    phase: str = ""
    via: list[str] = field(default_factory=list)   # the steps from ``to`` on to the value

    def to_json(self) -> dict:
        out = {k: v for k, v in self.__dict__.items() if k != "why"}
        if self.why is not None:
            out["datalog"] = self.why.to_json()
        return out


@dataclass
class WhyNot:
    """The answer for one value and axis."""

    value: str
    axis: str
    dim: int | None
    sharding: str
    has_axis: bool = False
    blocked: list[Blocked] = field(default_factory=list)
    note: str = ""
    unexamined: int = 0    # values holding the axis next to the way, farther than those examined
    why: object = None     # negation.Absence behind the note (an export pass's stage), or None

    def to_json(self) -> dict:
        out = {"value": self.value, "axis": self.axis, "dim": self.dim, "sharding": self.sharding,
               "has_axis": self.has_axis, "note": self.note, "unexamined": self.unexamined,
               "blocked": [b.to_json() for b in self.blocked]}
        if self.why is not None:
            out["datalog"] = self.why.to_json()
        return out

    def headline(self) -> str:
        """The answer in one line: the first place the axis stopped and its cause
        (with how many other places), or why there is none."""
        if self.has_axis:
            return f"has \"{self.axis}\""
        if not self.blocked:
            return self.note
        b = self.blocked[0]
        more = len(self.blocked) - 1
        return (f"stopped at {b.op} ({b.place}) from {b.source} into {b.to}: {b.cause}"
                + (f" (and {more} more place{'s' if more > 1 else ''})" if more else "")
                + (f" ({self.unexamined} farther values holding \"{self.axis}\" not examined)"
                   if self.unexamined else ""))

    def lines(self, proof: bool = False) -> list[str]:
        dim = "" if self.dim is None else f" dim {self.dim}"
        head = f"{self.value}{dim}: {self.sharding}"
        if self.has_axis:
            return [f"{head}", f"  has \"{self.axis}\"{dim}" + (f" ({self.note})" if self.note else "")]
        out = [head, f"  no \"{self.axis}\"{dim}" + (f": {self.note}" if self.note else "")]
        if self.why is not None:
            out += _why_lines(self.why, proof, "    ")
        if self.unexamined:
            out.append(f"  ({len(self.blocked)} nearest places shown; {self.unexamined} farther "
                       f"values holding \"{self.axis}\" not examined)")
        for b in self.blocked:
            came = f" <- {'; '.join(b.annotations)}" if b.annotations else ""
            out.append(f"  from {b.source} = {b.source_sharding}{came}")
            how = ", ".join(x for x in (b.strategy, b.phase) if x)
            out.append(f"    stopped at {b.op} ({b.place}" + (f"; {how}" if how else "") + ")"
                       + (f", factor {b.factor}" if b.factor != "(none)" else "")
                       + f", into {b.to} = {b.to_sharding}")
            if b.via:
                out.append(f"    (which reaches {self.value} through {' -> '.join(b.via)})")
            out.append(f"    because: {b.cause}")
            if b.why is not None:
                out += _why_lines(b.why, proof, "    ")
        return out


def _why_lines(why, proof: bool, indent: str) -> list[str]:
    """A negation answer as lines: the whole chain (``proof``), else the first rule
    with the literal that did not hold and where the chain stopped."""
    if proof or why.input_relation:
        return why.lines(indent)
    chain = why.failures[0].chain() if why.failures else []
    if not chain:
        return []
    first, last = chain[0], chain[-1]
    out = [f"{indent}no {why.atom}: rule {first.rule}: {first.text}",
           f"{indent}  did not hold: {first.failed}"
           + (f" (blocked by {first.blocking})" if first.blocking else "")]
    if last is not first:
        out.append(f"{indent}  ... stopped at rule {last.rule}: {last.failed}"
                   + (f" (blocked by {last.blocking})" if last.blocking else "")
                   + " (--proof: the whole chain)")
    return out


def _axis_dims(sharding, axis: str) -> list[int]:
    """The dims of ``sharding`` that hold ``axis`` (or a sub-axis of it)."""
    if sharding is None:
        return []
    return [d for d, dim in enumerate(sharding.dims) if any(a.name == axis for a in dim.axes)]


def _amount(sharding, axis: str, dims=None) -> float:
    """How much of ``axis`` ``sharding`` holds on ``dims`` (None: every dim): the
    product of its sub-axes' sizes, infinite for the full axis, 0 for none."""
    if sharding is None:
        return 0
    got = 0
    for d, dim in enumerate(sharding.dims):
        if dims is not None and d not in dims:
            continue
        for a in dim.axes:
            if a.name == axis:
                if a.size is None:
                    return float("inf")
                got = max(got, 1) * a.size
    return got


#: How many places where the axis stopped an answer examines, nearest first.
MAX_PLACES = 8


def why_not(audit, value: str, axis: str, dim: int | None = None,
            limit: int = MAX_PLACES) -> WhyNot:
    """Why ``value`` (named as the output prints it) has no ``axis`` (on ``dim``):
    the ``limit`` places nearest to it where the axis stopped (each one step
    evaluation; ``WhyNot.unexamined`` counts the values holding the axis
    beyond them)."""
    out = audit.value(value)
    meshes = audit.propagated.meshes
    axes = sorted({a for m in meshes.values() for a in m.axis_names})
    if axis not in axes:
        raise SdyError(f"no axis {quote_string(axis)} in the module's meshes; axes: "
                       f"{', '.join(map(quote_string, axes)) or 'none'}", file=audit.file)
    sharding = out.sharding
    if dim is not None:
        rank = sharding.rank if sharding is not None else _rank(out)
        if rank == 0:
            raise SdyError(f"{value} has no dims (rank 0): --dim does not apply", file=audit.file)
        if rank is not None and not 0 <= dim < rank:
            raise SdyError(f"{value} has rank {rank}: --dim is 0..{rank - 1}", file=audit.file)
    answer = WhyNot(out.name, axis, dim, "(none)" if sharding is None else sharding.to_text())
    dims = None if dim is None else {dim}
    # (the axis's size in the value's own mesh: another mesh may size an axis of that name
    # otherwise)
    mesh = mesh_of(sharding, meshes) if sharding is not None else None
    if mesh is not None and axis in mesh.axis_names \
            and _amount(sharding, axis, dims) >= mesh.axis_size(axis):
        answer.has_axis = True
        answer.note = f"see 'sdy-dl explain {value}'"
        return answer
    rank = sharding.rank if sharding is not None else _rank(out)
    if rank == 0:
        answer.note = f"it has no dims (rank 0): no dim can hold \"{axis}\""
        return answer
    held = _axis_dims(sharding, axis)
    if held:
        refs = [a.to_text() for d in held for a in sharding.dims[d].axes if a.name == axis]
        answer.note = f"it holds {', '.join(refs)} on dim {', '.join(map(str, held))}"
    key = out.key if out.result_of is None or out.key is None else out.key
    if out.result_of is not None and out.result_of.key is not None:
        key = out.result_of.key
    if key is None:
        answer.note = "the export passes made this value; propagation never saw it"
        return answer
    walk = audit.step_walk
    tracer = walk.tracer
    given = tracer.final(key)
    have = _amount(given, axis, dims)
    if have > _amount(sharding, axis, dims):
        answer.note, answer.why = _made_even(audit, out, given, sharding, axis, dims)
        return answer
    engine = audit.options.context.make_engine()
    follows = walk.follows(axis, engine)
    parent, found, scalars, barrier = _reach(walk, key, axis, dim, have, follows)
    if not found and dim is not None:
        # (no value holding the axis reaches it on any dim: the answer without --dim)
        _, anywhere, scalars_anywhere, _ = _reach(walk, key, axis, None, have, follows)
        if not anywhere:
            answer.note += ("; " if answer.note else "") + _unreached(
                axis, out.name, scalars_anywhere)
            return answer
        answer.note += ("; " if answer.note else "") + (
            f"no value holding \"{axis}\" reaches dim {dim} of {out.name} through the data "
            f"flow propagation follows (the factors of the ops on the way map no dim holding "
            f"\"{axis}\" onto it" + (", and values without dims (rank 0) hold no axis"
                                      if scalars else "") + ")")
        return answer
    if not found:
        answer.note = _unreached(axis, out.name, scalars)
        return answer
    links = walk.links
    examined = 0
    elsewhere: set = set()   # with ``dim``: the other dims of the value the neighbours' factors map
    late: list = []   # the neighbours that got the axis when or after their link last stepped
    stops: set = set()   # the links not followed named so far, by (visit nearer, link)
    for visit in found:
        if len(answer.blocked) >= limit or examined >= 4 * limit:
            break
        examined += 1
        nearer, n = barrier.get(visit) or parent[visit]
        if visit in barrier:   # (the link not followed is where it stopped: named once)
            if (nearer, n) in stops:
                continue
            stops.add((nearer, n))
        k2, (k, onto) = visit[0], nearer
        if k == key:
            b = _blocked(audit, engine, walk, links[n], k2, k, axis, dim, elsewhere, late)
        else:
            b = _blocked(audit, engine, walk, links[n], k2, k, axis, onto, None, late)
        if b is not None:
            at = parent[nearer]
            while at is not None:
                b.via.append(_link_name(links[at[1]]))
                at = parent[at[0]]
            answer.blocked.append(b)
    answer.unexamined = len(found) - examined
    if not answer.blocked:
        other = sorted(d for d in elsewhere if d is not None and d != dim)
        carried = examined - len(late)   # (those that carry the axis onto another dim)
        answer.note += ("; " if answer.note else "") + (
            f"no value holding \"{axis}\" next to it would put it on dim {dim}: the factors "
            f"holding it map dim {', '.join(map(str, other))} of {out.name} (--dim {other[0]} "
            "says what happened there)" if dim is not None and other else
            f"every value holding \"{axis}\" on the way to it carries it onto another dim"
            if carried else
            f"no value next to it held \"{axis}\" when propagation last stepped between them "
            f"({', '.join(late)} got it then or later)")
    return answer


class StepWalk:
    """What every why-not of one audit walks: the links by key, and the last
    step of each op and data-flow edge (by the op's tag)."""

    def __init__(self, audit):
        self.tracer = audit.explainer.tracer
        self.audit = audit
        self._crossings: dict = {}   # (link tag, axis) -> the why_not stage's answer
        self._follows: dict = {}   # axis -> the tags of the links a walk follows with it
        self.links = audit.propagated.links
        self.by_key: dict = {}
        for n, link in enumerate(self.links):
            for k in dict.fromkeys(link.keys):
                self.by_key.setdefault(k, []).append(n)
        self.last = {}
        self.visits: dict[str, list] = {}   # every visit, in order
        self.models: dict = {}   # (step, nearer tensor) -> its negation Model (steps repeat)
        self._factors: dict = {}   # (op tag, key, other) -> _dim_factors' answer
        for cause in sorted(self.tracer.steps + self.tracer.edge_steps, key=lambda c: c.index):
            tag = (cause.op or {}).get("tag")
            if tag is not None:
                self.last[tag] = cause
                self.visits.setdefault(tag, []).append(cause)

    def dims_onto(self, link, key, dims: set | None, other) -> set | None:
        """The dims of ``other`` that ``link`` maps ``dims`` of ``key`` onto: an edge the
        same dims, an op the dims of the factors of ``dims`` in its sharding rule
        (whether or not a step of it ran).  None: any dim (``dims`` None, or the op
        has no rule)."""
        if dims is None or link.owner:
            return dims
        found = self._dim_factors(link, key, other)
        if found is None:
            return None
        mine, others = found
        factors = {f for d, fs in mine if d in dims for f in fs}
        return {d for d, fs in others if factors.intersection(fs)}

    def dims_off(self, link, key, other) -> set:
        """The dims of ``other`` with a factor that ``link`` (an op, by its sharding
        rule) maps onto no dim of ``key`` (an edge, or an op without a rule: none)."""
        found = None if link.owner else self._dim_factors(link, key, other)
        if found is None:
            return set()
        mine, others = found
        factors = {f for _, fs in mine for f in fs}
        return {d for d, fs in others if not factors.issuperset(fs)}

    def _dim_factors(self, link, key, other) -> tuple | None:
        """(dim, its factors) of every dim of ``key`` and of ``other`` in op ``link``'s
        sharding rule (the instance propagation found for it; each tensor the key
        is), or None: it has none (found once per link and pair: the walk and
        ``dims_off`` ask again)."""
        at = (link.tag, key, other)
        if at in self._factors:
            return self._factors[at]
        rule = self.tracer.rule_of(link.tag)
        if rule is None:
            found = None
        else:
            keys = link.keys

            def dims_of(k):
                return [(d, fs) for t, kk in enumerate(keys) if kk == k
                        for d, fs in enumerate(tensor_dims(rule, t))]
            found = dims_of(key), dims_of(other)
        self._factors[at] = found
        return found

    def follows(self, axis: str, engine) -> frozenset:
        """The tags of the links a walk follows with ``axis`` (stage ``why_not``'s
        ``follows``, asked of every link at once; found once per axis)."""
        from sdy_dl.datalog.compiler import compile_stage

        found = self._follows.get(axis)
        if found is None:
            rows = engine.run(compile_stage("why_not"), self._link_facts(self.links, axis))
            found = self._follows[axis] = frozenset(
                tag for tag, a in rows.get("follows", ()) if a == axis)
        return found

    def _link_facts(self, links, axis: str) -> dict[str, list[tuple]]:
        """The facts of stage ``why_not`` about ``links`` and ``axis``: what
        propagation knew of each link (its kind, rule, steps and manual axes)."""
        no_rule, last = self.tracer.no_rule, self.last
        return {"in_link": [(link.tag, "edge" if link.owner else "op") for link in links],
                "in_rule": [(link.tag,) for link in links
                            if link.owner or link.tag not in no_rule],
                "in_stepped": [(link.tag,) for link in links if link.tag in last],
                "in_manual_axis": [(link.tag, a) for link in links for a in link.manual],
                "in_axis": [(axis,)]}

    def crossing(self, link, axis: str, engine) -> tuple | None:
        """Why propagation does not step across ``link`` with ``axis`` at all, as
        (the cause phrased, the negation answer of stage ``why_not``); None when
        it does (the step program is asked what the step did)."""
        from sdy_dl.audit.naming import place_in
        from sdy_dl.audit.negation import Model
        from sdy_dl.datalog.compiler import compile_stage

        found = self._crossings.get((link.tag, axis), False)
        if found is not False:
            return found
        model = Model(compile_stage("why_not"), self._link_facts([link], axis), engine.run)
        found = None
        if not model.has("carries", (link.tag, axis)):
            why = model.why_not("carries", (link.tag, axis))
            place = (place_in(link.owner_loc) if link.owner else "")
            found = (_crossing_cause(link, axis, place, why), why)
        self._crossings[(link.tag, axis)] = found
        return found


def _crossing_cause(link, axis: str, place: str, why) -> str:
    """The cause stage ``why_not`` gives for ``link`` not carrying ``axis``: the
    relation of the literal of ``carries`` that did not hold, phrased."""
    chain = why.failures[0].chain() if why.failures else []
    last = chain[-1] if chain else None
    if last is not None and last.relation == "in_manual_axis":
        return (f"\"{axis}\" is manual in the {link.owner} at {place}: it cannot propagate "
                "across (the edge holds its body's local view, without the manual axes)")
    if last is not None and last.relation == "in_rule":
        return (f"{link.name} has no sharding rule: propagation does not cross it "
                "(no step of it was evaluated)")
    if last is not None and last.relation == "in_stepped":
        return (f"propagation never evaluated a step of {_link_name(link)}, so it does not cross "
                "it (no tensor of it was sharded when it was visited, or it was erased)")
    return f"stage why_not derives no {why.atom}"


def _link_name(link) -> str:
    """A link as the output names its op (an edge: :func:`~sdy_dl.audit.conflicts.edge_name`)."""
    from sdy_dl.audit.conflicts import edge_name

    return edge_name(link.owner, link.edge) if link.owner else link.name


def _made_even(audit, out, given, printed, axis: str, dims) -> tuple[str, object]:
    """Why the printed ``printed`` holds less of ``axis`` than propagation ``given``
    gave it, as (the cause phrased, the negation answer or None): the export
    passes that rewrite function boundaries, each asked through its Datalog
    stage in pipeline order from ``given`` (update-non-divisible-input-output-
    shardings; on main's arguments and results remove-sub-axes-in-input-output-
    shardings).  The first that takes some of the axis off the dim is the cause,
    when the stages end where the output does; else another export pass
    narrowed it (named without a Datalog question).  A call result whose callee
    returns a value without that much of the axis: insert-func-call-reshards
    printed the callee's result sharding on the call (before those stages)."""
    from sdy_dl.audit.negation import Model
    from sdy_dl.datalog.compiler import compile_stage
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.mlir_ops import tensor_info
    from sdy_dl.passes.export import remove_sub_axes_in_input_output_shardings as sub
    from sdy_dl.passes.export import update_non_divisible_input_output_shardings as even

    d = next((d for d in range(len(given.dims)) if (dims is None or d in dims)
              and _amount(given, axis, {d}) > _amount(printed, axis, {d})), None)
    if d is None:
        return ("propagation gave it more of the axis than the output prints (export passes, "
                "§9.3)", None)
    had = ", ".join(a.to_text() for a in given.dims[d].axes)
    kept = ", ".join(a.to_text() for a in printed.dims[d].axes) if printed is not None else ""
    if out.op == "func.call":
        callee = audit.explainer.callee_returned(out)
        if callee is not None and (_amount(audit.explainer.tracer.final(callee), axis, {d})
                                   < _amount(given, axis, {d})):
            from sdy_dl.audit.explain import CALL_RESULT_EXPORT

            return f"propagation gave dim {d} {{{had}}}, which the callee's result has not: " + \
                CALL_RESULT_EXPORT, None
    value = out.value if out.value is not None else getattr(out.result_of, "value", None)
    with mlir_context():
        shape = tensor_info(value.type)[1] if value is not None else None
    mesh = audit.propagated.meshes.get(given.mesh) if isinstance(given.mesh, str) else None
    passes = []   # (the pass, its stage's model, its sharding before, after)
    if shape is not None and mesh is not None and printed is not None:
        run = audit.options.context.make_engine().run
        stages = [(even, lambda s: even.even_facts([(s, tuple(shape), mesh)]),
                   lambda s, rel: even.evenly_sharded_from(s, mesh, 0, rel))]
        if out.func == "main" and out.op == "func.func":
            stages.append((sub, lambda s: sub.sub_axes_facts([s]),
                           lambda s, rel: sub.without_sub_axes_from(s, 0, rel)))
        now = given
        for module, facts, rebuild in stages:
            model = Model(compile_stage(module.STAGE.name), facts(now), run)
            passes.append((module, model, now, rebuild(now, model.rel)))
            now = passes[-1][3]
    if not passes or passes[-1][3].dims[d].axes != printed.dims[d].axes:
        return (f"propagation gave dim {d} {{{had}}}; the export passes left {{{kept}}} (§9.3)",
                None)
    module, model, before, after = next(p for p in passes
                                        if _amount(p[3], axis, {d}) < _amount(p[2], axis, {d}))
    q, ref = next((q, a) for q, a in enumerate(before.dims[d].axes) if a.name == axis)
    left = ", ".join(a.to_text() for a in after.dims[d].axes)
    then = (f" (then remove-sub-axes-in-input-output-shardings drops an open dim's sub-axes: "
            f"{{{kept}}})" if left != kept else "")
    if module is even:
        part = any(a.name == axis for a in after.dims[d].axes[q:q + 1])
        why = model.why_not("out_axis", (0, d, q, axis) + ((ref.pre, ref.ref_size(mesh)) if part
                                                           else (None, None)))
        size, count = next((r[2], r[3]) for r in model.rows("in_dim") if r[1] == d)
        sharded = next(r[3] for r in model.rows("sharded") if r[1] == d and r[2] == count)
        return (f"a sub-axis that does not fit: propagation gave dim {d} {{{had}}}, but dim {d} "
                f"has size {size}, which {sharded} devices do not divide: the export pass "
                "update-non-divisible-input-output-shardings (§9.3) keeps the longest prefix "
                f"that divides it evenly, {{{left}}}" + then, why)
    why = model.why_not("out_axis", (0, d, q, axis, None, None))
    return (f"a sub-axis on an open dim of the main function's boundary: propagation gave dim {d} "
            f"{{{had}}}, and the export pass remove-sub-axes-in-input-output-shardings (§9.3) "
            f"keeps an open dim's axes before its first sub-axis, {{{left}}}", why)


def _reach(walk, key, axis: str, dim: int | None, have: float,
           follows: frozenset) -> tuple[dict, list, int, dict]:
    """The walk from ``key`` to the keys holding more of ``axis`` (on ``dim``)
    than ``have``: (each visit's parent, the visits found, how many values
    without dims it met, the visits found beyond a link not in ``follows``,
    each with the farthest such link on its path from the value as (the visit
    nearer the value, the link))."""
    # Breadth first from the value's key over the data flow; keys holding more of
    # the axis than the value end a path.  A value without dims holds no axis: no
    # axis passes through it.  With ``dim``, a key beyond the value's neighbours
    # is walked with its dims that map onto ``dim`` (a visit is a key and those
    # dims: a key reached again by a path mapping more of its dims onto ``dim`` is
    # walked again with them; an op's dims map by the factors of its sharding
    # rule, stepped or not), and ends a path when it holds more of the axis
    # there.  A key holding it only on a dim the link maps onto no dim of the key
    # it came from is a place where the axis stopped on another dim's way (its
    # step says why), named when it is the first such on its path and after the
    # places on the dims walked; the walk goes on past it with its dims (not
    # back through that link).  A key whose dims map none of them is not walked
    # on.  A neighbour holding the axis ends a path whatever dims it maps
    # (the answer names them).  Dims None: any dim.  No propagation of the axis
    # crosses a link it does not follow (no rule, a manual axis): the walk goes
    # beyond such links only once every key it reaches without crossing one is
    # walked, and a key found beyond some stopped at the first of them on its way.
    start = (key, None if dim is None else frozenset({dim}))
    parent = {start: None}   # visit -> (the visit it was reached from, the link)
    walked = {key: start[1]}   # key -> the dims of it walked so far (None: any)
    ended: set = set()   # keys found or without dims: never walked on
    queue = deque([start])
    behind: deque = deque()   # visits beyond a link not followed
    crossings: list = []   # (visit, link, key) of the links not followed, met before them
    barrier: dict = {}   # a visit beyond a link not followed -> (visit nearer, the link)
    found = []
    off: set = set()   # visits holding the axis only on dims their link maps onto no dim walked
    past: set = set()   # visits walked on past one of those (or it)
    scalars = 0
    links, by_key, tracer = walk.links, walk.by_key, walk.tracer

    def walk_on(visit, reached, across):
        k2, dims2 = reached
        walked[k2] = None if dims2 is None else walked.get(k2, frozenset()) | dims2
        if visit in past or reached in off:
            past.add(reached)
        if across is None:
            queue.append(reached)
        else:
            barrier[reached] = across
            behind.append(reached)

    def reach(visit, n, k2, across):
        nonlocal scalars
        k, onto = visit
        link = links[n]
        dims2 = walk.dims_onto(link, k, onto, k2)
        if k2 in walked and (walked[k2] is None or dims2 is not None and dims2 <= walked[k2]):
            return
        mapped = k == key or dims2 is None or bool(dims2)
        where = None if k == key or dims2 is None else dims2 | walk.dims_off(link, k, k2)
        reached = (k2, None if dims2 is None else frozenset(dims2))
        if k2 in link.dimless:
            parent[reached] = (visit, n)
            ended.add(k2)
            scalars += 1
        elif _amount(tracer.final(k2), axis, where) > have:
            # (held only on dims the link maps onto no dim walked: the axis stopped there
            # on another dim's way, named when nearest on its path; walked on past it)
            aside = where is not None and not _amount(tracer.final(k2), axis, dims2) > have
            parent[reached] = (visit, n)
            if not (aside and visit in past):
                found.append(reached)
                if across is not None:
                    barrier[reached] = across
            if aside:
                off.add(reached)
            if aside and dims2 and (across is not None or link.tag in follows):
                walk_on(visit, reached, across)
            else:
                ended.add(k2)
        elif mapped and (across is not None or link.tag in follows):
            parent[reached] = (visit, n)
            walk_on(visit, reached, across)
        elif mapped:
            crossings.append((visit, n, k2))

    while queue or crossings or behind:
        if not queue and crossings:
            for visit, n, k2 in crossings:
                if k2 not in ended and k2 != key:
                    reach(visit, n, k2, (visit, n))
            crossings.clear()
            continue
        visit = queue.popleft() if queue else behind.popleft()
        across = barrier.get(visit)
        for n in by_key.get(visit[0], ()):
            if visit in off and n == parent[visit][1]:
                continue
            # (beyond a link not followed, the next one on the path is where it stopped first)
            here = across if across is None or links[n].tag in follows else (visit, n)
            for k2 in links[n].keys:
                if k2 not in ended and k2 != key:
                    reach(visit, n, k2, here)
    # (a place on the dims walked first: an axis held off them never goes onto them)
    found = [v for v in found if v not in off] + [v for v in found if v in off]
    return parent, found, scalars, barrier


def _unreached(axis: str, name: str, scalars: int) -> str:
    """Why no value holding ``axis`` reaches ``name`` at all (``scalars``: how many
    values without dims the walk met)."""
    return (f"no value holding \"{axis}\" reaches {name} through values with dims: the "
            "data flow to it passes through values without dims (rank 0), which hold no axis"
            if scalars else
            f"no op with a rule connects {name} to a value holding \"{axis}\" (no annotation "
            f"holding \"{axis}\" reaches it through the data flow propagation follows)")


def _rank(out):
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.mlir_ops import tensor_rank

    value = out.value if out.value is not None else getattr(out.result_of, "value", None)
    if value is None:
        return None
    with mlir_context():
        return tensor_rank(value.type)


def _blocked(audit, engine, walk, link, src_key, near_key, axis, dim,
             elsewhere: set | None = None, late: list | None = None) -> Blocked | None:
    """The step of ``link`` not carrying ``axis`` from ``src_key`` into ``near_key``
    (onto ``dim`` of it, a dim or a set of dims, when given; None: it would carry it
    onto another dim,
    added to ``elsewhere``, or ``src_key`` did not hold the axis when the link last
    stepped, so it is no place where the axis stopped: named in ``late``)."""
    from sdy_dl.audit.naming import place_in
    from sdy_dl.audit.negation import Model
    from sdy_dl.propagation.step_eval import step_program
    from sdy_dl.propagation.step_facts import step_facts

    explainer, tracer = audit.explainer, walk.tracer
    cause = walk.last.get(link.tag)
    src_sharding = tracer.final(src_key)
    near_sharding = tracer.final(near_key)
    if link.owner:
        place = place_in(link.owner_loc)
    elif cause is not None:
        place = cause.op["place"]
    else:   # (the op was never stepped: its first result's record has its place)
        record = audit.propagated.by_tag.get((link.tag, 0))
        place = record.place if record is not None else "no place"
    op = _link_name(link)
    blocked = Blocked(explainer.key_name(src_key), src_sharding.to_text(),
                      explainer.annotations(src_key, len(tracer.writes)), op, place, "",
                      "(none)", explainer.key_name(near_key),
                      "(none)" if near_sharding is None else near_sharding.to_text(), "")
    crossing = walk.crossing(link, axis, engine)
    if crossing is not None:
        blocked.cause, blocked.why = crossing
        return blocked
    step = cause.step
    keys = [k for k, _ in cause.inputs]
    t_src, t_near = keys.index(src_key), keys.index(near_key)
    if not _amount(cause.inputs[t_src][1], axis):
        if late is not None:
            late.append(blocked.source)
        return None
    blocked.rule, blocked.strategy, blocked.phase = _rule_text(step.rule), cause.strategy, cause.phase
    model = walk.models.get((step, t_near))
    if model is None:
        # A chain through the nearer tensor's own record says only that it did not
        # hold the axis already: ranked after the chains through the step's decisions.
        model = walk.models[(step, t_near)] = Model(
            step_program([step]), step_facts([step], audit.propagated.meshes), engine.run,
            aside=lambda chain: any(f.kind == "missing" and f.relation in ("rec_axis", "in_dim_axis")
                                    and f.args[:2] == (0, t_near) for f in chain))
    found = cause_of(model, step, t_src, t_near, axis, blocked, dim, elsewhere=elsewhere,
                     won=lambda others, factor: _earlier(walk, explainer, link, cause, keys, t_src,
                                                         axis, others, factor))
    if found is None:
        return None
    blocked.cause, blocked.why, factor = found
    if factor is not None:
        blocked.factor = factor_name(factor)
    return blocked


def _phase_rank(cause) -> tuple[int, int] | None:
    """(user priority, op-priority band) of the phase ``cause`` ran in (band -1: the
    rewrite re-opening a priority's dims before its round; None: not in a round)."""
    m = _PRIORITY.search(cause.phase or cause.title if cause.kind == "priority" else cause.phase)
    if m is None:
        return None
    band = _BAND.search(cause.phase)
    return int(m.group(1)), int(band.group(1)) if band else -1


_PRIORITY = re.compile(r"user priority (\d+)")
_BAND = re.compile(r"op-priority band (\d+)")


def _arrival(tracer, key, axis: str, before: int):
    """When ``key`` got the ``axis`` it holds before write ``before`` (the start of
    its last unbroken stretch holding it): a :func:`_phase_rank`, (-1, -1) when
    the module gave it, None when unknown."""
    at = tracer._by_key.get(key, [])
    start = None
    for w in reversed(at[:bisect.bisect_left(at, before)]):
        if not _amount(tracer.writes[w].sharding, axis):
            break
        start = w
    else:
        if _amount(tracer.initial.get(key), axis):
            return (-1, -1)
    return None if start is None else _phase_rank(tracer.writes[start].cause)


def _phase_text(rank) -> str:
    if rank == (-1, -1):
        return "as the module gave it"
    if rank[1] < 0:
        return f"when user priority {rank[0]} re-opened its dims"
    return f"in user priority {rank[0]}, op-priority band {rank[1]}"


def _earlier(walk, explainer, link, cause, keys, t_src, axis, others, factor) -> str | None:
    """The win of another tensor's axis on ``factor`` by an earlier round or band
    (see :func:`cause_of`), phrased; None when it was not earlier."""
    tracer = walk.tracer
    # The first visit of the step's op at which the source held the axis and the
    # step's direction along the factor (the op_priorities stage's decision, a
    # fact of the step) let it take part.
    wanted = ("BOTH", "FORWARD" if t_src < len(cause.step.operands) else "BACKWARD")
    seen = next((c for c in walk.visits.get(link.tag, ())
                 if _amount(c.inputs[t_src][1], axis) and c.step.directions[factor] in wanted),
                None)
    reached = _phase_rank(seen) if seen is not None else None
    if reached is None:
        return None
    for t, other in others:
        got = _arrival(tracer, keys[t], other, cause.at)
        # (what the module gave is there from user priority 0, op-priority band 0 on)
        if got is None or max(got, (0, 0)) >= reached:
            continue
        who = explainer.key_name(keys[t])
        came = "; ".join(explainer.annotations(keys[t], cause.at))
        src = explainer.key_name(keys[t_src])
        what = ("a higher user priority won" if got[0] < reached[0]
                else "an earlier op-priority band won (op priorities, §7.1)")
        return (f"{what}: {who} held \"{other}\" {_phase_text(got)}"
                + (f" (from {came})" if came else "")
                + f", and \"{axis}\" of {src} reached this step only {_phase_text(reached)}"
                + (" (the priority of its dim)" if got[0] < reached[0] else ""))
    return None


def _rule_text(rule) -> str:
    try:
        return rule.to_text()
    except AttributeError:
        return str(rule)


def _factor_kind(rule, factor: int) -> str:
    """How the rule declares ``factor``: its kind, and whether propagation is blocked."""
    f = rule.factors[factor]
    kind = "a " + f.kind.replace("_", "-") + " factor"
    return kind + (" with blocked propagation" if f.blocked else "")


def cause_of(model, step, t_src, t_near, axis, blocked, dim=None, won=None, elsewhere=None):
    """(the cause phrased, the Datalog answer behind it, the factor) of the step
    ``model`` evaluates not carrying ``axis`` from tensor ``t_src`` into ``t_near``.

    The cause is the first of these questions to the step program that has no
    tuple, each answered by :meth:`Model.why_not` (the rule and the body literal
    that did not hold): the source's record for a factor holds the axis
    (``rec_axis``; else it overflowed: ``rec_ovf``), the factor's direction lets
    the source take part (``c0_key``), its compatible major axes hold it
    (``cand0``), the nearer tensor's within-factor checks keep it (``ag_within``),
    its across-factor checks keep it (``ag_across_J``), its record expands
    (``ag_exp_r_J``/``ag_exp_o_J``), and the final record holds it (``fin_axis``).
    With ``dim`` (a dim or a set of dims), only a factor of those dims of the nearer
    tensor counts (None: the source's axis goes onto another dim, added to the set
    ``elsewhere``).  ``won(others)``: when another tensor's
    axis on the factor (``others``: (tensor, axis) pairs) got there in an earlier
    user-priority round or op-priority band than the source's axis reached the
    step, that win phrased (None: it did not)."""
    rule, rows = step.rule, model.rows
    near_is_result = any(r[1] == t_near and r[2] == 1 for r in rows("in_tensor"))
    conservative = model.has("conservative", (0,))
    held = [r for r in rows("rec_axis") if r[1] == t_src and r[4] == axis]
    if not held:
        why = model.why_not("rec_axis", (0, t_src, None, None, axis, None, None))
        ovf = [r for r in rows("rec_ovf") if r[1] == t_src and r[4] == axis]
        if ovf:
            f = ovf[0][2]
            size = _factor_size(model, f)
            return (f"\"{axis}\" does not divide factor {factor_name(f)} (size {size}) of "
                    f"{blocked.source}: it overflows the factor and goes no further", why, f)
        return (f"\"{axis}\" of {blocked.source} is a sub-axis that does not fit the factors of its "
                "dim: no factor's record holds it", why, None)
    if dim is not None:
        dims = {dim} if isinstance(dim, int) else dim
        on_dim = [r for r in held if tensor_dim(rule, t_near, r[2]) in dims | {None}]
        if not on_dim:
            if elsewhere is not None:
                elsewhere.update(tensor_dim(rule, t_near, r[2]) for r in held)
            return None
        held = on_dim
    factor = held[0][2]
    f = factor_name(factor)
    if not model.has("in_dim_factor", (0, t_near, None, None, factor)):
        return (f"factor {f} of \"{axis}\" maps no dim of {blocked.to} "
                f"({_factor_kind(rule, factor)}): no dim of {blocked.to} can take the axis from it",
                model.why_not("in_dim_factor", (0, t_near, None, None, factor)), factor)
    ref = held[0][4:7]
    if conservative and not model.has("keep_ref", (0, *ref)):
        return (f"conservative mode: \"{axis}\" is on {blocked.source} as the sub-axis "
                f"{_ref_text(ref)}, and conservative propagation keeps full axes only",
                model.why_not("keep_ref", (0, *ref)), factor)
    full = next((r[2] for r in rows("in_mesh_axis") if r[1] == axis), None)
    if ((ref[1], ref[2]) != (1, full) and model.has("fin_axis", (0, t_near, factor, None, *ref))
            and model.has("in_dim_axis", (0, t_src, None, None, axis, 1, full))):
        parts = sorted((r[2], r[5]) for r in rows("rec_axis") if r[1] == t_src and r[4] == axis)
        split = ", ".join(f"{_ref_text((axis, p, sz))} (factor {factor_name(g)})"
                          for g, p, sz in ((g, *next(r[5:7] for r in rows("rec_axis") if r[1] == t_src
                                                    and r[2] == g and r[4] == axis))
                                           for g, _ in parts))
        return (f"a sub-axis that does not fit: only {_ref_text(ref)} of \"{axis}\" (size {full}) "
                f"fits factor {f} (size {_factor_size(model, factor)}) of {blocked.source}; its dim "
                f"splits \"{axis}\" into {split}, and dim {tensor_dim(rule, t_near, factor)} of "
                f"{blocked.to} maps factor {f} only",
                model.why_not("proj_take", (0, t_src, None, None, None, axis, 1, full)), factor)
    if not model.has("c0_key", (0, factor, t_src, None)):
        why = model.why_not("c0_key", (0, factor, t_src, None))
        blocked_flag = any(r[1] == factor and r[3] == 1 for r in rows("in_factor"))
        if blocked_flag:
            return (f"factor {f} is blocked ({_factor_kind(rule, factor)}): the step does not "
                    "propagate along it", why, factor)
        direction = next((r[4] for r in rows("in_factor") if r[1] == factor), "?")
        return (f"the step's direction along factor {f} is {direction} (op priorities or a "
                f"barrier): {blocked.source} does not take part", why, factor)
    if not model.has("cand0", (0, factor, None, axis, None, None)):
        why = model.why_not("cand0", (0, factor, None, axis, None, None))
        others = sorted({(r[1], r[4]) for r in rows("rec_axis") if r[2] == factor and r[4] != axis})
        who = ", ".join(f"{_tensor(model, t)} has \"{a}\"" for t, a in others) or "none"
        src = [r[2] for r in rows("ag_src") if r[1] == factor]
        decided = (f"aggressive strategy; source tensor {_tensor(model, src[0])}" if src
                   else f"{blocked.strategy} strategy")
        won_text = won(others, factor) if won is not None else None
        if won_text:
            return (f"{won_text}: the compatible major axes of factor {f} exclude \"{axis}\" "
                    f"({who})", why, factor)
        return (f"factor {f} already holds another axis from another tensor ({who}): the "
                f"compatible major axes of {f} exclude \"{axis}\" ({decided}; the tensors are "
                "folded operands first)", why, factor)
    within = [r for r in rows("ag_within") if r[1] == t_near and r[2] == factor and r[4] == axis]
    if model.has("strategy", (0, "aggressive")) and not within:
        why = model.why_not("ag_within", (0, t_near, factor, None, axis, None, None))
        closed = [r for r in rows("rec") if r[1] == t_near and r[2] == factor and r[3] == 1]
        d = tensor_dim(rule, t_near, factor)
        prio = [r for r in rows("in_dim") if r[1] == t_near and r[2] == d and r[4] == 1]
        if closed:
            return (f"dim {d} of {blocked.to} is closed" + (" (with a priority)" if prio else "")
                    + ": its record for factor " f"{f} may not grow", why, factor)
        if any(r[1] == t_near and r[4] == axis for r in rows("in_replicated")):
            return f"{blocked.to} keeps \"{axis}\" explicitly replicated", why, factor
        return (f"{blocked.to}'s own record for factor {f} conflicts with \"{axis}\" "
                "(within-factor conflict)", why, factor)
    pos = next((r[2] for r in rows("ag_pos") if r[1] == factor), None)
    if pos is not None:
        across = [r for r in rows(f"ag_across_{pos}") if r[1] == t_near and r[3] == axis]
        if not across:
            why = model.why_not(f"ag_across_{pos}", (0, t_near, None, axis, None, None))
            used = [r for r in rows("rec_axis") if r[1] == t_near and r[4] == axis and r[2] != factor]
            where = (f" (factor {factor_name(used[0][2])}, dim {tensor_dim(rule, t_near, used[0][2])})"
                     if used else "")
            earlier = won([(t_near, axis)], factor) if won is not None else None
            return (f"\"{axis}\" is already used by another dim of {blocked.to}{where}: a tensor "
                    "cannot use an axis twice (across-factor conflict)"
                    + (f"; {earlier}" if earlier else ""), why, factor)
        exp = f"ag_exp_{'r' if near_is_result else 'o'}_{pos}"
        if not model.has(exp, (0, t_near)):
            return (f"{blocked.to}'s record for factor {f} is not a strict prefix of its new axes: "
                    "its dim already holds other axes", model.why_not(exp, (0, t_near)), factor)
    why = model.why_not("fin_axis", (0, t_near, factor, None, axis, None, None))
    if not why.failures and model.has("fin_axis", (0, t_near, factor, None, axis, None, None)):
        return ("the step derives the axis for the factor; the value was written later by "
                "another cause (a priority, a group or a later rewrite)", None, factor)
    chain = why.failures[0].chain() if why.failures else []
    last = chain[-1].failed if chain else "?"
    return f"the step program derives no \"{axis}\" for factor {f} (stopped at {last})", why, factor


def _factor_size(model, factor: int):
    return next((r[2] for r in model.rows("in_factor") if r[1] == factor), "?")


def _tensor(model, t: int) -> str:
    return tensor_name(t, next((r[4] for r in model.rows("in_step")), 0))


def _ref_text(ref) -> str:
    a, p, s = ref
    return f"\"{a}\":({p}){s}"
