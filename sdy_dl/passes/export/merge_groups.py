"""The merger's groups a what-if changes, decided again by the merger's own stage,
for the export by difference (:mod:`sdy_dl.passes.export.by_difference`).

constant-or-scalar-merger (:mod:`.constant_or_scalar_merger`) keeps the first,
in post-order, of each group of scalar broadcasts with equal attribute
dictionary, region, result type and operand (the operand as it is once the
constants are merged), and of each group of equal constants in a region.  A
scalar broadcast of main's top-level block whose attributes changed (its
sharding) leaves one group and joins another; every other group has the same
members in both propagations.  Where the first run put each member of the
groups a change touches is read from its output (a member it kept is there;
the users of one it merged read the one it was merged into, whose operand is
the merged constant); where the what-if puts them is decided by the stage, on
the facts of those members only, with the what-if's attributes and the merged
operands (the stage decides a group from its members alone).  Constants are not
regrouped (their statement says the merger reads them: a changed constant runs
the passes in full), so their merges are the first run's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

BROADCAST = "stablehlo.broadcast_in_dim"


def regroup(ops: list, names: list, before: list, after: list, changed: list[int],
            block_key: int, out, options, numbers: Numbers) -> dict[int, tuple[int, int]]:
    """``ops``: the what-if's propagated module in pre-order (``names`` their names,
    ``before``/``after`` each op's attributes in the first and in the what-if's
    propagated module, as :func:`~sdy_dl.ir.opaque.attribute_dict_key` gives
    them); ``changed``: op numbers of scalar broadcasts of main's top-level
    block (``block_key``) whose attributes changed; ``out``: the copy of the
    first output (:class:`~sdy_dl.passes.export.by_difference.OutputCopy`);
    ``numbers``: :class:`Numbers` of ``ops``, which :func:`move_members` then takes.
    Returns, for every member of the groups they leave and join, (the op it is
    merged into or itself: in the first propagation, in the what-if)."""
    from sdy_dl.ir.mlir_ops import is_scalar
    from sdy_dl.ir.walk import key
    from sdy_dl.passes.export.constant_or_scalar_merger import STAGE, MergerFacts

    if not changed:
        return {}
    keys = {before[i] for i in changed} | {after[i] for i in changed}
    types = {ops[i].results[0].type for i in changed}
    members = []
    for j, name in enumerate(names):   # (the type is read before the attributes: cheaper)
        if name == BROADCAST and ops[j].results[0].type in types \
                and (before[j] in keys or after[j] in keys):
            op = ops[j]
            if op.block is not None and key(op.block) == block_key \
                    and is_scalar(op.operands[0]):
                members.append(j)
    first = _first_run_kept(members, ops, out, numbers)
    facts = MergerFacts()
    for j in members:
        facts.add(j, ops[j], names[j], after[j], out.op(first[j]).operands[0])
    merged = dict(STAGE.run(facts.facts, options)["merged_broadcast"])
    return {j: (first[j], merged.get(j, j)) for j in members}


def _first_run_kept(members: list[int], ops: list, out, numbers: Numbers) -> dict[int, int]:
    """Member -> the member the first run kept for it (itself, when the first output
    holds it; else the one its first user there reads)."""
    from sdy_dl.ir.walk import key
    from sdy_dl.passes.export.export_reads import NotLocal

    kept = {j for j in members if j in out.at}
    by_key = {key(out.op(j)): j for j in kept}
    found = {}
    for j in members:
        if j in kept:
            found[j] = j
            continue
        use = next(iter(ops[j].results[0].uses), None)
        if use is None:
            raise NotLocal
        user = out.op(numbers.of(use.owner.operation, j + 1, 1))
        owner = _owner(user.operands[use.operand_number])
        if owner is None or key(owner) not in by_key:
            raise NotLocal
        found[j] = by_key[key(owner)]
    return found


class Numbers:
    """The numbers of ops of ``ops`` (a pre-order walk) found by looking from a
    number on in one direction, each op's identity read once (one per export:
    :func:`regroup` and :func:`move_members` share it)."""

    def __init__(self, ops: list):
        self.ops = ops
        self.known: dict[int, int] = {}   # identity -> number
        self.read: set[int] = set()

    def of(self, op, start: int, step: int) -> int:
        from sdy_dl.ir.walk import key

        k = key(op)
        found = self.known.get(k)
        j = start
        while found is None and 0 <= j < len(self.ops):
            if j not in self.read:
                self.read.add(j)
                self.known[key(self.ops[j])] = j
            found = self.known.get(k)
            j += step
        if found is None:
            from sdy_dl.passes.export.export_reads import NotLocal

            raise NotLocal
        return found


def _owner(value):
    """The op defining ``value`` (None for a block argument)."""
    from jaxlib.mlir import ir

    owner = value.owner
    return owner.operation if isinstance(owner, (ir.Operation, ir.OpView)) else None


@dataclass
class Moved:
    """What :func:`move_members` did to the copy of the first output, by the copy's
    numbers (its pre-order, :class:`~sdy_dl.passes.export.by_difference.OutputCopy`)."""

    ops: dict = field(default_factory=dict)      # member -> the op made for it
    #: member -> (the number of the op it was placed before, of the op it was merged into)
    places: dict = field(default_factory=dict)
    erased: list = field(default_factory=list)   # the numbers of the ops erased
    #: (user's number, operand number, the number of the op it read, what it reads
    #: now: ``("op", number)`` or ``("made", member)``) for each use redirected
    redirected: list = field(default_factory=list)


def move_members(groups: dict, ops: list, block_key: int, out, numbers: Numbers) -> Moved:
    """Carry the groups' decisions over to ``out`` (the copy of the first output,
    :class:`~sdy_dl.passes.export.by_difference.OutputCopy`; ``numbers``: those
    :func:`regroup` took): a member kept in the
    what-if but merged in the first run is made again (a copy of its op with the
    output attributes of the op it was merged into, where the pass leaves it), the
    uses of every member that merges elsewhere now read its new kept op, and a
    member kept in the first run only is erased.  Returns what it did
    (:class:`Moved`).  Raises :class:`~sdy_dl.passes.export.export_reads.NotLocal` where the
    output does not read as expected or dead code would differ (an op left
    without uses: canonicalize erases it)."""
    from jaxlib.mlir import ir

    from sdy_dl.passes.export.export_reads import NotLocal

    moved = {m: kept for m, kept in groups.items() if kept[0] != kept[1]}
    if not moved:
        return Moved()
    places = {m: _place(m, ops, block_key, out) for m, (_, now) in moved.items() if now == m}
    made_places = {m: (out.index(places[m][1]), out.index(moved[m][0])) for m in places}
    places = {m: place for m, (place, _) in places.items()}
    made = {}
    for m in sorted(places):
        like = out.op(moved[m][0])
        op = ops[m].clone(ip=ir.InsertionPoint(places[m])).operation
        for name in list(op.attributes):
            if name not in like.attributes:
                del op.attributes[name]
        for name in list(like.attributes):
            op.attributes[name] = like.attributes[name]
        op.operands[0] = like.operands[0]
        made[m] = op

    def kept(r):
        return made[r] if r in made else out.op(r)

    redirected = []
    for m, (first, now) in sorted(moved.items()):
        old, new = out.op(first).results[0], kept(now).results[0]
        reads = ("made", now) if now in made else ("op", out.index(now))
        for use in ops[m].results[0].uses:   # (a user comes after the value it reads)
            j = out.index(numbers.of(use.owner.operation, m + 1, 1))
            user = out.ops[j]
            if user.operands[use.operand_number] != old:
                raise NotLocal
            user.operands[use.operand_number] = new
            redirected.append((j, use.operand_number, out.index(first), reads))
    # the ops that lost uses: the first run's kept ops, and the operands of those erased
    gone = {m for m, (first, _) in moved.items() if first == m}
    lost = [out.op(first) for first in {first for first, _ in moved.values()} - gone]
    erased = [out.index(m) for m in sorted(gone)]
    for m in sorted(gone):   # kept in the first output only
        op = out.op(m)
        if _used(op):
            raise NotLocal
        owner = _owner(op.operands[0])
        if owner is not None:
            lost.append(owner)
        op.erase()
    if not all(_used(op) for op in lost + list(made.values())):
        raise NotLocal
    return Moved(made, made_places, erased, redirected)


def _used(op) -> bool:
    return any(True for r in op.results for _ in r.uses)


def _place(m: int, ops: list, block_key: int, out):
    """(The output op before which member ``m`` goes, the number of its propagated
    op): that of the next op of main's
    block the first output holds, when the one before it there is that of the op
    before ``m`` the output holds (no op the passes made lies between)."""
    from sdy_dl.ir.walk import key
    from sdy_dl.passes.export.export_reads import NotLocal

    def top(j):
        op = ops[j]
        return j in out.at and op.block is not None and key(op.block) == block_key

    after = next((j for j in range(m + 1, len(ops)) if top(j)), None)
    before = next((j for j in range(m - 1, 0, -1) if top(j)), None)
    if after is None:
        raise NotLocal
    hi = out.index(after)
    lo = out.index(before) if before is not None else out.main_index
    if any(out.ops[k].block is not None and key(out.ops[k].block) == out.block
           for k in range(lo + 1, hi)):
        raise NotLocal
    return out.ops[hi], after
