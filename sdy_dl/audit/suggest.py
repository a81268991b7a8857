"""Suggested annotation edits, each verified by an exact what-if.

:func:`suggest` reads an :class:`~sdy_dl.audit.Audit` of a propagation with
explicit collectives and makes **candidate edits** (:class:`Candidate`, each a
list of :class:`~sdy_dl.audit.whatif.Edit` as ``sdy-dl whatif`` takes them):

* for the costliest groups of collectives of the ledger
  (:mod:`sdy_dl.audit.collectives`, at most :data:`MOST_GROUPS`):

  - **at the conflict site**: the value the collective's chain starts from
    (its *had* side) gets the sharding the consumers needed (the chain's
    end), on every member of the group at once (one per layer);
  - **on the constraints and annotations the shardings came from**: each
    input annotation the *had* side derives from (the chain's source and the
    operands of its op; at most :data:`MOST_ANNOTATIONS` a side, those naming
    the collective's axes first) gets the sharding the consumers needed (when
    its value has that sharding's rank), or is removed (a constraint
    dropped); each annotation the *needed* side derives from (the results of
    the ops using the chain's end) likewise gets the sharding the producer
    had, or is removed.  A sharding constraint the export passes erased is
    named ``input %N``, as ``explain`` names it;

* for the largest replicated or partly sharded values of the memory table
  (:mod:`sdy_dl.audit.memory`, at most :data:`MOST_UNSHARDED`): **an axis on
  a shardable dim**, one candidate per mesh axis and dim the table says it
  divides (at most :data:`MOST_DIMS` dims an axis).

Every candidate is evaluated by :func:`~sdy_dl.audit.whatif.whatif`: the
edited input is propagated again, exactly as ``sdy-dl propagate
--explicit-collectives`` would (reusing the first propagation's steps), so
the numbers below are those of the edited program, not an estimate of them.
A candidate whose edit is refused (a value with no input annotation to
edit, a sharding its value's rank or mesh does not allow) or whose
propagation fails is dropped; only verified candidates are suggested.

**Score** (bytes per device; larger is better)::

    score = communication saved + memory saved
    communication saved = bytes of every collective before - after (the ledger's totals)
    memory saved = sum over functions of (arguments + peak of live intermediates),
                   before - after (the memory table's estimate)

A suggestion is shown when its score is positive, best first; of equal
scores, the edit nearer the collective first (:data:`KINDS`' order: the
conflict site, a constraint, an argument's or result's annotation, a
memory candidate), then the candidates' order (per collective group,
largest first: the conflict site, the had side's annotations, the needed
side's; then the memory candidates in table order).  Both components are shown, either may be
negative (a constraint that removes an all-to-all by keeping a value
replicated costs memory).

Suggestions whose edited programs propagate to the same output text (compared
by its SHA-256) have the same effect: they are one entry, the best-ranked
edit first and the others as its ``equivalent`` (``same effect:`` lines), in
rank order; ``top`` counts entries.

Candidates are evaluated in ``jobs`` processes forked from this one (each
starts with the first propagation already made, at most one per candidate);
the output does not depend on ``jobs``.  A process that dies (killed, crashed)
is an error, not a wait for its candidate.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field

from sdy_dl.audit.whatif import Edit
from sdy_dl.errors import SdyError, UsageError
from sdy_dl.resources import sha256

#: The costliest groups of collectives that candidates are made for.
MOST_GROUPS = 6
#: The largest replicated or partly sharded values that candidates are made for.
MOST_UNSHARDED = 6
#: The input annotations of one side of a collective that candidates edit.
MOST_ANNOTATIONS = 3
#: The dims per mesh axis of one value that candidates shard.
MOST_DIMS = 2

#: Candidate kinds, in the order equal scores are shown.
KINDS = ("conflict site", "constraint", "annotation", "memory")


@dataclass(frozen=True)
class Candidate:
    """Edits to try together, what kind of candidate they are and why."""

    kind: str                     # one of KINDS
    edits: tuple[Edit, ...]
    why: str


@dataclass
class Suggestion:
    """A candidate verified by a what-if, with what it saves (bytes per device)."""

    candidate: Candidate
    communication: tuple[int, int]     # every collective's bytes, before and after
    memory: tuple[int, int]            # sum of arguments + peak intermediates, before and after
    applied: list[dict] = field(default_factory=list)   # whatif.Applied.to_json()
    removed: list[str] = field(default_factory=list)    # collectives removed, one line each
    added: list[str] = field(default_factory=list)      # collectives added
    changed: int = 0                   # values whose sharding changed
    result: str = ""                   # SHA-256 of the edited program's propagated output text
    equivalent: list["Suggestion"] = field(default_factory=list)   # same result, ranked lower

    @property
    def communication_saved(self) -> int:
        return self.communication[0] - self.communication[1]

    @property
    def memory_saved(self) -> int:
        return self.memory[0] - self.memory[1]

    @property
    def score(self) -> int:
        return self.communication_saved + self.memory_saved

    def edit_args(self) -> str:
        """The edits as ``sdy-dl whatif`` options, quoted for a POSIX shell."""
        return " ".join(_option(e) for e in self.candidate.edits)

    def command(self, file: str, run_args: str = "") -> str:
        """The ``sdy-dl whatif`` command that shows what the edits change (``MODULE``
        for a module read from standard input or given as text), with the
        propagation's own options ``run_args`` (:func:`run_args`)."""
        where = "MODULE" if file.startswith("<") else shlex.quote(file)
        return " ".join(filter(None, ("sdy-dl whatif", where, "--explicit-collectives",
                                      run_args, self.edit_args())))

    def to_json(self) -> dict:
        return {"kind": self.candidate.kind, "why": self.candidate.why,
                "edits": [e.to_text() for e in self.candidate.edits],
                "whatif_args": self.edit_args(), "score": self.score,
                "communication_saved": self.communication_saved,
                "communication_bytes": {"before": self.communication[0],
                                        "after": self.communication[1]},
                "memory_saved": self.memory_saved,
                "memory_bytes": {"before": self.memory[0], "after": self.memory[1]},
                "applied": self.applied, "collectives_removed": self.removed,
                "collectives_added": self.added, "values_changed": self.changed,
                "equivalent": [{"kind": e.candidate.kind, "why": e.candidate.why,
                                "edits": [x.to_text() for x in e.candidate.edits],
                                "whatif_args": e.edit_args(), "applied": e.applied}
                               for e in self.equivalent]}


@dataclass
class Suggestions:
    """The verified suggestions, best first, and what was tried."""

    file: str
    suggestions: list[Suggestion]
    tried: int                          # candidates evaluated
    refused: list[tuple[Candidate, str]] = field(default_factory=list)   # and why
    no_gain: int = 0                    # verified, but saving nothing (score <= 0)
    run_args: str = ""                  # the propagation's options, as sdy-dl takes them

    def __iter__(self):
        return iter(self.suggestions)

    def __len__(self) -> int:
        return len(self.suggestions)

    def __getitem__(self, i):
        return self.suggestions[i]

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_json(self) -> dict:
        return {"file": self.file, "score": "communication saved + memory saved, bytes per device",
                "run_args": self.run_args, "candidates": self.tried, "refused": len(self.refused), "no_gain": self.no_gain,
                "suggestions": [s.to_json() for s in self.suggestions]}

    def lines(self) -> list[str]:
        """The suggestions as ``sdy-dl suggest`` prints them."""
        from sdy_dl.audit.cost_model import human_bytes

        same = sum(len(s.equivalent) for s in self.suggestions)
        also = (f"(and {same} more edit{'s' * (same != 1)} with the same effect as one of "
                "them) ") if same else ""
        head = (f"{self.file}: {len(self.suggestions)} suggestion"
                f"{'s' * (len(self.suggestions) != 1)} verified by re-propagation {also}"
                f"({self.tried} candidates: {len(self.refused)} refused, {self.no_gain} saving "
                "nothing); score = communication saved + memory saved, bytes per device")
        out = [head]
        for i, s in enumerate(self.suggestions, 1):
            c, m = s.communication, s.memory
            out.append("")
            out.append(f"[{i}] score {_signed(s.score)} B: communication {_signed(s.communication_saved)} B "
                       f"saved ({human_bytes(c[0])} -> {human_bytes(c[1])}), memory "
                       f"{_signed(s.memory_saved)} B saved ({human_bytes(m[0])} -> {human_bytes(m[1])})")
            out.append(f"    {s.candidate.kind}: {s.candidate.why}")
            out.append(f"    whatif: {s.command(self.file, self.run_args)}")
            for a in s.applied:
                if a.get("jax"):
                    out.append(f"    jax: {a['jax']}")
            for word, found in (("removes", s.removed), ("adds", s.added)):
                for line in found:
                    out.append(f"    {word} {line}")
            for e in s.equivalent:
                out.append(f"    same effect: {e.edit_args()}  ({e.candidate.kind}: {e.candidate.why})")
        if not self.suggestions:
            out.append("no candidate edit saves communication or memory")
        return out


def run_args(options) -> str:
    """The command-line options that propagate as ``options`` do (its rule files and
    Shardy's options other than explicit collectives, which the command gives), quoted."""
    from sdy_dl.passes.options import given_items
    from sdy_dl.pipeline import ENABLE_INSERT_EXPLICIT_COLLECTIVES

    values = {k: v for k, v in options.values.items()
              if k != ENABLE_INSERT_EXPLICIT_COLLECTIVES.name}
    args = [f"--rules {shlex.quote(str(f))}" for f in options.context.rule_files or ()]
    args += [f"--pass-option {shlex.quote(item)}" for item in given_items(values)]
    return " ".join(args)


def _signed(n: int) -> str:
    return f"{n:+d}" if n else "0"


def _option(edit: Edit) -> str:
    from sdy_dl.audit.whatif import KINDS as OPTIONS

    if edit.kind == "set":
        return f"{OPTIONS['set']} {shlex.quote(f'{edit.value}={edit.sharding}')}"
    return f"{OPTIONS[edit.kind]} {shlex.quote(edit.value)}"


# -- candidates ------------------------------------------------------------------

def candidates(audit, ledger, table) -> list[Candidate]:
    """The candidate edits for ``audit``'s ledger and memory table (see the module
    docstring), each edit resolvable in the input, without repeats, in tie order."""
    from sdy_dl.audit.cost_model import human_bytes

    made: list[Candidate] = []
    # (a collective the program wrote is there whatever the shardings: no edit of them)
    for g in [g for g in ledger.groups() if not g.first.written][:MOST_GROUPS]:
        if not g.bytes:
            continue
        c = g.first
        what = (f"{c.kind}{f' x{len(g.members)}' if len(g.members) > 1 else ''} {c.name} over "
                f"[{', '.join(c.axes)}] in {c.function}, {human_bytes(g.bytes)} per device")
        if not c.reduction:
            edits = [Edit("set", m.had.values[0]["value"], m.needed.sharding)
                     for m in g.members if m.needed.sharding != "(none)"]
            made.append(Candidate("conflict site", tuple(edits),
                                  f"{what}: the value it starts from gets the sharding its "
                                  f"users need ({_short(c.needed.sharding)})"))
        sides = ((c.had, c.needed.sharding, "had"), (c.needed, c.had.sharding, "needed"))
        for side, other, word in sides:
            for name in _annotation_values(audit, side, c, word == "had"):
                for edit in _annotation_edits(audit, name, other):
                    target = ("the producer's sharding" if word == "needed"
                              else "the sharding its users need")
                    how = (f"gets {target} ({_short(other)})" if edit.kind == "set"
                           else "removed")
                    constraint = edit.kind == "drop" or _is_constraint(audit, edit)
                    made.append(Candidate(
                        "constraint" if constraint else "annotation", (edit,),
                        f"{what}: the {'sharding constraint' if constraint else 'annotation'} "
                        f"{edit.value}, which the {word} sharding derives from, {how}"))
    for u in table.top[:MOST_UNSHARDED]:
        v = u.value
        for axis, dims in u.shardable.items():
            for d in dims[:MOST_DIMS]:
                sharding = _with_axis(audit, v, axis, d)
                if sharding is None:
                    continue
                made.append(Candidate(
                    "memory", (Edit("set", v.name, sharding),),
                    f"{v.name} ({human_bytes(v.bytes_per_device)} per device, "
                    f"{'replicated' if v.replicated else 'partly sharded'}) gets {axis!r} on "
                    f"dim {d}"))
    return _resolvable(audit, made)


def _is_constraint(audit, edit: Edit) -> bool:
    from sdy_dl.audit.whatif import resolve

    return resolve(audit, edit).op_name == "sdy.sharding_constraint"


def _short(sharding: str) -> str:
    from sdy_dl.audit.collectives import dims_text

    return dims_text(sharding)


def _annotation_values(audit, side, collective, had: bool) -> list[str]:
    """Output names of the values whose input annotations ``side`` derives from (at
    most MOST_ANNOTATIONS: those naming the collective's axes first).  The had side
    is the chain's source and the operands of the op producing it (the losing
    sharding may have come through any of them); the needed side is the results of
    the ops using the chain's end (a function's result: its annotation)."""
    tracer, outputs = audit.tracer, audit.outputs
    bits = 0
    for out in _side_outputs(audit, side, had):
        if out.key is not None:
            bits |= tracer.root_bits(out.key)
    if not bits:
        return []
    names = []
    axes = set(collective.axis_names)
    keys = tracer.root_keys(bits)
    keys.sort(key=lambda k: not any(a.name in axes for a in tracer.initial[k].axes_used()))
    for key in keys:
        name = audit.explainer.key_name(key)
        if name not in names:
            names.append(name)
        if len(names) == MOST_ANNOTATIONS:
            break
    return names


def _side_outputs(audit, side, had: bool) -> list:
    """The output values of ``side`` (see :func:`_annotation_values`)."""
    from sdy_dl.ir.context import mlir_context

    outputs = audit.outputs
    found = []
    for v in side.values:
        out = outputs.named(v["value"])
        if out is not None:
            found.append(out)
    more = []
    with mlir_context():
        for out in found:
            if out.value is None:
                continue
            if had:
                owner = getattr(out.value.owner, "operation", None)
                more += list(owner.operands) if owner is not None else []
            else:
                for use in out.value.uses:
                    user = use.owner
                    if user.name == "func.return":
                        label = outputs.by_value.get(user.operands[use.operand_number])
                        prefix = "" if label is None or label.func == "main" else f"{label.func}:"
                        result = outputs.named(f"{prefix}result:{use.operand_number}")
                        if result is not None:
                            found.append(result)
                    else:
                        more += list(user.results)
    return found + [o for v in more if (o := outputs.by_value.get(v)) is not None]


def _annotation_edits(audit, name: str, sharding: str) -> list[Edit]:
    """Edits of the input annotation of value ``name``: set to ``sharding`` (when the
    value has its rank: the two sides of an all-reduce of a reduction differ), and
    removed."""
    from sdy_dl.audit.whatif import resolve
    from sdy_dl.sharding import parse_tensor_sharding

    from sdy_dl.audit.explain import ANOTHER_CALL

    # (another call's copy of a function: the same input value as the printed one's)
    name = name.removesuffix(" (erased by the pipeline)").removesuffix(ANOTHER_CALL)
    try:
        target = resolve(audit, Edit("unset", name))
    except SdyError:
        return []
    edits = []
    if sharding != "(none)" and target.rank == parse_tensor_sharding(sharding).rank:
        current = target.current.to_text() if target.current is not None else None
        if current != sharding:
            edits.append(Edit("set", name, sharding))
    if target.op_name == "sdy.sharding_constraint":
        edits.append(Edit("drop", name))
    elif target.current is not None:
        edits.append(Edit("unset", name))
    return edits


def _with_axis(audit, v, axis: str, dim: int) -> str | None:
    """``v``'s printed sharding with ``axis`` appended to dim ``dim`` (a value without
    one: the only mesh's, every other dim closed and empty)."""
    from sdy_dl.sharding import DimSharding, TensorSharding, parse_tensor_sharding

    if v.sharding != "(none)":
        s = parse_tensor_sharding(v.sharding)
    else:
        meshes = [n for n, m in audit.propagated.meshes.items() if m.axes]
        if len(meshes) != 1:
            return None
        s = TensorSharding(meshes[0], (DimSharding(is_closed=True),) * len(v.shape))
    refs = [a for a in _mesh_axes(audit, s) if a.name == axis]
    if not refs or dim >= len(s.dims):
        return None
    dims = list(s.dims)
    old = dims[dim]
    dims[dim] = DimSharding(old.axes + (refs[0],), old.is_closed, old.priority)
    return TensorSharding(s.mesh, tuple(dims), s.replicated, s.unreduced).to_text()


def _mesh_axes(audit, sharding):
    from sdy_dl.ir.meshes import mesh_of
    from sdy_dl.sharding import AxisRef

    mesh = mesh_of(sharding, audit.propagated.meshes)
    return [AxisRef(a.name) for a in mesh.axes] if mesh is not None else []


def _resolvable(audit, made: list[Candidate]) -> list[Candidate]:
    """``made`` without repeats, each edit kept only if its value resolves to an input
    value (edits of one candidate on one input value: the first kept)."""
    from sdy_dl.audit.whatif import resolve

    out, seen = [], set()
    for c in made:
        edits, targets = [], set()
        for e in c.edits:
            try:
                t = resolve(audit, e)
            except SdyError:
                continue
            if (t.place, t.op, t.index) in targets:
                continue
            targets.add((t.place, t.op, t.index))
            edits.append(e)
        key = tuple(edits)
        if edits and key not in seen:
            seen.add(key)
            out.append(Candidate(c.kind, key, c.why))
    return out


# -- evaluating ------------------------------------------------------------------

def evaluate(audit, candidate: Candidate):
    """A :class:`Suggestion` for ``candidate`` (by a what-if), or the error's message.
    Only what the score and the lines need is asked of the what-if (its conflicts,
    for one, are never made)."""
    from sdy_dl.audit.whatif import whatif

    try:
        edited, w = whatif(audit, list(candidate.edits))
    except SdyError as e:
        return e.message
    before = sum(b.arguments + b.peak_intermediates for _, b, _ in w.memory if b is not None)
    after = sum(a.arguments + a.peak_intermediates for _, _, a in w.memory if a is not None)
    return Suggestion(candidate, tuple(w.collective_bytes), (before, after),
                      [a.to_json() for a in w.applied],
                      [_collective_line(c) for c in w.collectives_removed],
                      [_collective_line(c) for c in w.collectives_added], len(w.changed),
                      sha256(edited.text.encode()).hexdigest())


def _collective_line(c) -> str:
    return (f"{c.kind} {c.name} in {c.function} over [{', '.join(c.axes)}], {c.bytes or 0} "
            f"bytes per device ({_short(c.in_sharding)} -> {_short(c.out_sharding)}; "
            f"for {c.input_place})")


#: The audit and candidates a forked worker evaluates (set in the parent before forking).
_WORK: tuple | None = None


def _evaluate_at(i: int):
    audit, cands = _WORK
    return evaluate(audit, cands[i])


def usable_cpus() -> int:
    """The CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:   # not Linux
        return os.cpu_count() or 1


def default_jobs() -> int:
    """Processes to evaluate candidates in: the CPUs this process may use, at most 4."""
    return min(4, usable_cpus())


def _default_signals() -> None:
    """A child's SIGTERM and SIGHUP end it at once (the parent's handlers, which
    the ``sdy-dl`` process sets, would leave it running and print a traceback
    when the pool ends it); one the parent ignores (``nohup``) stays ignored."""
    import signal

    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)


def _evaluate_all(audit, cands: list[Candidate], jobs: int) -> list:
    """Each candidate's :func:`evaluate`, in order; in ``jobs`` forked processes, never
    more than the candidates or the usable CPUs (more would only copy the parent's
    memory: ``--jobs 1000`` forked a process per candidate)."""
    global _WORK
    jobs = min(jobs, len(cands), usable_cpus())
    if jobs <= 1:
        return [evaluate(audit, c) for c in cands]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from sdy_dl.ir.context import mlir_context

    # A forked child has none of the parent's threads: MLIR's thread pool must have
    # none while forking (a child would wait for them).  Each child starts with the
    # first propagation and its step memo.  A child that dies (killed, crashed)
    # breaks the pool, an error (a multiprocessing.Pool would wait for its task
    # for ever).  A signal or Ctrl-C that reaches the parent alone kills the
    # children: the candidates they evaluate are not waited for.
    mlir_context().enable_multithreading(False)
    _WORK = (audit, cands)
    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork"),
                               initializer=_default_signals)
    try:
        try:
            futures = [pool.submit(_evaluate_at, i) for i in range(len(cands))]
        except OSError as e:   # (no process could be forked: a process or memory limit)
            raise SdyError("cannot start the processes evaluating the candidate edits: "
                           f"{e.strerror or e}") from None
        return [f.result() for f in futures]
    except BrokenProcessPool:
        raise SdyError("a process evaluating the candidate edits ended abruptly (killed or "
                       "crashed)") from None
    except BaseException:
        for process in list((pool._processes or {}).values()):
            process.kill()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _WORK = None
        mlir_context().enable_multithreading(True)


def suggest(audit, top: int = 5, jobs: int | None = None) -> Suggestions:
    """The ``top`` best verified suggestions for ``audit`` (a propagation with explicit
    collectives), the candidates evaluated in ``jobs`` processes (None:
    :func:`default_jobs`)."""
    from sdy_dl.pipeline import ENABLE_INSERT_EXPLICIT_COLLECTIVES

    if not isinstance(top, int) or isinstance(top, bool) or top < 1:
        raise UsageError(f"top must be a positive integer, not {top!r}")
    if jobs is None:
        jobs = default_jobs()
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise UsageError(f"jobs must be a positive integer, not {jobs!r}")
    if not audit.options[ENABLE_INSERT_EXPLICIT_COLLECTIVES]:
        raise SdyError("suggestions need a propagation with explicit collectives (sdy-dl "
                       "suggest runs one; in Python, sdy_dl.propagate(..., "
                       "explicit_collectives=True))")
    ledger = audit.collectives()
    table = audit.memory(MOST_UNSHARDED)
    cands = candidates(audit, ledger, table)
    results = _evaluate_all(audit, cands, jobs)
    good, refused, no_gain = [], [], 0
    for i, (c, r) in enumerate(zip(cands, results)):
        if isinstance(r, str):
            refused.append((c, r))
        elif r.score > 0:
            good.append((-r.score, KINDS.index(c.kind), i, r))
        else:
            no_gain += 1
    good.sort(key=lambda t: t[:3])
    return Suggestions(audit.file, _same_effect([t[-1] for t in good])[:top], len(cands),
                       refused, no_gain, run_args(audit.options))


def _same_effect(ranked: list[Suggestion]) -> list[Suggestion]:
    """``ranked`` with the suggestions whose edited program propagates to the same
    output text folded into the best-ranked of them (its ``equivalent``, in rank order)."""
    first: dict[str, Suggestion] = {}
    out = []
    for s in ranked:
        if s.result in first:
            first[s.result].equivalent.append(s)
        else:
            first[s.result] = s
            out.append(s)
    return out
