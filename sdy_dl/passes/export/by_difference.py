"""The export by difference: a what-if's output made from the first run's output,
with only the ops whose shardings changed exported again.

The passes after propagation cost the same for one changed sharding as for all
of them, since each reads the whole module.  A what-if that starts from the
first run's imported module (``Audit(imported=...)``) propagates a module of the
same structure; when its propagated module differs from the first run's only in
the shardings of some of main's top-level ops (and of main's arguments and
results), and no pass after propagation reads those shardings anywhere but where
it rewrites them (:mod:`sdy_dl.passes.export.export_reads`, each pass's
statement per op), the edited output is the first run's output with those
shardings rewritten as the passes rewrite them, and the merger's groups the
changed scalar broadcasts leave and join decided again by its own stage
(:mod:`sdy_dl.passes.export.merge_groups`).  Anything else (another changed
attribute, an op nested in a region, a changed value read by an op a pass reads
operands at, unreduced axes, another set of meshes, an op the first output
does not hold, dead code that would differ) runs the passes in full: the
answer is the same either way.

:class:`ExportRecord` is what the first run keeps: its propagated module's op
names, identities (:func:`~sdy_dl.ir.walk.key`) and a copy (its attributes,
read when a what-if first asks), and a copy of its output with the position
there of each op that is still the same op (same identity and name, a name no
pass creates).  :func:`export_by_difference` makes the edited output or says
it cannot (None).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sdy_dl.ir.model import Module
from sdy_dl.ir.opaque import attribute_dict_key
from sdy_dl.ir.storage import SHARDING_ATTR
from sdy_dl.passes import PassOptions
from sdy_dl.passes.export.export_reads import NotLocal, Reads, created_names, stage_reads


class ExportRecord:
    """The first run's propagated module and output, for later what-ifs."""

    def __init__(self, module: Module):
        """Record ``module``, the first run's propagated module, before the passes
        after propagation edit it."""
        from sdy_dl.ir.context import mlir_context
        from sdy_dl.ir.walk import key

        with mlir_context():
            ops, self.names = _walked(module)
            self.keys = [key(op) for op in ops]
            self._input = module.mlir.operation.clone()
        #: the ops propagation erased (the model's numbers; None: not known)
        self.erased = module.propagation_erased
        self._input_ops: list | None = None
        self._input_attributes: list | None = None
        #: the model numbers of the top-level ops, in order, of the ops list
        #: ``_tops_of`` (the last module :meth:`input_op` read)
        self._tops: list[int] | None = None
        self._tops_of: list | None = None
        self.output = None            # a copy of the output (raw builtin.module)
        self.at_output: dict[int, int] = {}   # op number -> its number in ``output``

    def finish(self, out: Module, stages: list[str]) -> None:
        """Record ``out``, the first run's output, made by ``stages`` (the stages after
        propagation, :func:`sdy_dl.pipeline.stages_after_propagation`)."""
        from sdy_dl.ir.context import mlir_context
        from sdy_dl.ir.walk import key, walk_pre

        reads = stage_reads(stages)
        if reads is None:
            return
        created = created_names(reads)
        with mlir_context():
            ops = walk_pre(out.mlir.operation)
            where = {key(op): j for j, op in enumerate(ops)}
            names = [op.name for op in ops]
            for i, (k, name) in enumerate(zip(self.keys, self.names)):
                j = where.get(k)
                if j is not None and names[j] == name and name not in created:
                    self.at_output[i] = j
            self.output = out.mlir.operation.clone()

    def input_ops(self) -> list:
        """The ops of the copy of the first propagated module, in pre-order (walked once)."""
        if self._input_ops is None:
            from sdy_dl.ir.context import mlir_context
            from sdy_dl.ir.walk import walk_pre

            with mlir_context():
                self._input_ops = walk_pre(self._input)
        return self._input_ops

    def input_op(self, i: int, like: Module):
        """Op ``i`` of :meth:`input_ops` (``i`` > 0), found without walking the copy
        when ``like`` (a module of the same structure: the same op names in
        pre-order) holds its model: along the places (region, block, position
        in the block) of the model op's ancestors, each found in the copy (a
        block's ops, and the top-level ops, are numbered in order: a place is
        found by bisection).  Each op found has its model op's name, else
        :class:`NotLocal` (``like`` is nested otherwise than the copy)."""
        if self._input_ops is not None or not like.is_indexed():
            return self.input_ops()[i]
        from bisect import bisect_left
        from operator import attrgetter

        from sdy_dl.ir.context import mlir_context

        op, places = like.ops[i - 1], []
        while op.parent is not None:
            block, parent = op.block, op.parent
            region = block.region
            places.append((parent.regions.index(region), region.blocks.index(block),
                           bisect_left(block.ops, op.oid, key=attrgetter("oid")), op))
            op = parent
        if self._tops_of is not like.ops:
            self._tops = [other.oid for other in like.ops if other.parent is None]
            self._tops_of = like.ops
        places.append((0, 0, bisect_left(self._tops, op.oid), op))
        found = self._input
        with mlir_context():
            for r, b, k, model in reversed(places):
                try:
                    found = found.regions[r].blocks[b].operations[k].operation
                except IndexError:
                    raise NotLocal from None
                if found.name != model.name:
                    raise NotLocal
        return found

    def input_attributes(self) -> list:
        """Each op's attributes in the first propagated module (read once)."""
        if self._input_attributes is None:
            from sdy_dl.ir.context import mlir_context

            with mlir_context():
                self._input_attributes = [attribute_dict_key(op) for op in self.input_ops()]
        return self._input_attributes


class OutputCopy:
    """The copy of the first output a what-if's output is made of: its ops in
    pre-order (``ops``), main's entry block (``block``, a key) and main's place
    (``main_index``); :meth:`op` finds an op of the propagated module there."""

    def __init__(self, record: "ExportRecord", copy, main_name: str):
        from sdy_dl.ir.mlir_ops import main_of, symbol_name
        from sdy_dl.ir.walk import key, walk_pre

        self.ops = walk_pre(copy)
        self.at = record.at_output
        # main is no op the passes create: it is the output's function of its name
        top = key(copy)
        funcs = [(j, op) for j, op in enumerate(self.ops) if op.name == "func.func"
                 and op.parent is not None and key(op.parent) == top]
        main = main_of([op for _, op in funcs])
        if main is None or symbol_name(main) != main_name or len(main.regions[0].blocks) != 1:
            raise NotLocal
        self.main = main
        self.main_index = next(j for j, op in funcs if op is main)
        self.block = key(main.regions[0].blocks[0])

    def index(self, i: int) -> int:
        """The output's number of op ``i`` of the propagated module, a top-level op of
        main (else :class:`NotLocal`)."""
        from sdy_dl.ir.walk import key

        j = self.at.get(i)
        if j is None or self.ops[j].block is None or key(self.ops[j].block) != self.block:
            raise NotLocal
        return j

    def op(self, i: int):
        """The output's op for op ``i`` of the propagated module (see :meth:`index`)."""
        return self.ops[self.index(i)]


def export_by_difference(record: ExportRecord | None, module: Module, options: PassOptions,
                         stages: list[str], changes=None) -> Module | None:
    """The output ``stages`` (the stages after propagation) make of ``module`` (a
    what-if's propagated module), made from ``record``'s output; None when not
    provably the same (then the stages run).  ``changes``: what the what-if's
    replaying propagation left different from the first's
    (:class:`~sdy_dl.propagation.replay.ReplayedPassChanges`; None: every op's
    attributes are compared)."""
    from sdy_dl.ir.context import mlir_context

    if record is None or record.output is None or record.erased is None:
        return None
    if module.propagation_erased != record.erased:
        return None
    reads = stage_reads(stages)
    if reads is None:
        return None
    with mlir_context():
        try:
            return _export(record, module, options, reads, changes)
        except NotLocal:
            return None


def differences(record: ExportRecord, ops: list, changes=None, options=None,
                module: Module | None = None) -> tuple:
    """(the numbers of the ops whose attributes differ, each op's attributes in the
    first propagated module, in the what-if's) for ``ops``, the what-if's
    propagated module in pre-order (``module``, when given: the module they are
    the ops of, whose model finds the first's ops, :meth:`ExportRecord.input_op`).
    With ``changes`` (the replay's hand-over, without rules kept: propagation
    writes shardings only) only the ops it names are compared; else every op."""
    from bisect import bisect_left

    from sdy_dl.passes.propagation.basic_propagation import KEEP_SHARDING_RULES

    if changes is None or changes.erased or options is None or options[KEEP_SHARDING_RULES]:
        before = record.input_attributes()
        after = [attribute_dict_key(op) for op in ops]
        return [i for i, attrs in enumerate(after) if attrs != before[i]], before, after
    # the model's numbers count the ops propagation erased; the walk does not
    erased = sorted(record.erased)
    maybe = sorted(1 + oid - bisect_left(erased, oid) for oid in changes.ops
                   if oid not in record.erased)
    after = _Read(lambda i: attribute_dict_key(ops[i]))
    wanted = set(maybe)
    # (a few ops are found by their places, each a scan of its block; more, by a walk)
    input_op = (record.input_ops().__getitem__ if module is None or len(wanted) > _FEW
                else lambda i: record.input_op(i, module))
    before = _Read(lambda i: attribute_dict_key(input_op(i)) if i in wanted else after[i])
    return [i for i in maybe if after[i] != before[i]], before, after


#: How many changed ops :func:`differences` finds in the first propagated module's
#: copy by their places (:meth:`ExportRecord.input_op`) rather than by walking it.
_FEW = 16


class _Read(dict):
    """Values read when first asked for (``read(index)``)."""

    def __init__(self, read):
        super().__init__()
        self.read = read

    def __missing__(self, i):
        found = self[i] = self.read(i)
        return found


def _walked(module: Module) -> tuple[list, list[str]]:
    """(``module``'s ops in pre-order, itself first, as raw operations; their names):
    its model's when it holds one (a propagation that erased no op keeps its
    model: only attributes changed), else walked."""
    from sdy_dl.ir.walk import walk_pre

    top = module.mlir.operation
    if module.is_indexed():
        return ([top] + [getattr(op.mlir, "operation", op.mlir) for op in module.ops],
                [top.name] + [op.name for op in module.ops])
    ops = walk_pre(top)
    return ops, [op.name for op in ops]


def _export(record: ExportRecord, module: Module, options: PassOptions,
            reads: list[Reads], changes=None) -> Module:
    from sdy_dl.ir.loader import module_of_op
    from sdy_dl.ir.mlir_ops import is_scalar, main_func, symbol_name
    from sdy_dl.ir.walk import key
    from sdy_dl.passes.export.merge_groups import Numbers, move_members, regroup

    ops, names = _walked(module)
    if names != record.names:
        raise NotLocal
    changed, before, after = differences(record, ops, changes, options, module)
    main = main_func(module)
    if main is None:
        raise NotLocal
    main_key = key(main)
    main_number = next(i for i, op in enumerate(ops)
                       if record.names[i] == "func.func" and key(op) == main_key)
    block_key = key(main.regions[0].blocks[0]) if len(main.regions[0].blocks) == 1 else None
    if block_key is None:
        raise NotLocal
    check = _Checks(reads, block_key)
    merges = frozenset().union(*(r.merges for r in reads))
    op_changes, main_changes, regrouped = [], {}, []
    for i in changed:
        op = ops[i]
        if i == main_number:
            calls = [op for op, name in zip(ops, record.names) if name == "func.call"]
            main_changes = _main_changes(before[i], after[i], op, check, calls)
            continue
        if op.block is None or key(op.block) != block_key:
            raise NotLocal
        old, new = _op_shardings(before[i], after[i])
        check.op(op, old, new)
        if op.name in merges and is_scalar(op.operands[0]):
            regrouped.append(i)
        op_changes.append((i, new))
    copy = record.output.clone()
    out = OutputCopy(record, copy, symbol_name(main))
    numbers = Numbers(ops)
    groups = regroup(ops, record.names, before, after, regrouped, block_key, out, options, numbers)
    moved = move_members(groups, ops, block_key, out, numbers)
    made = moved.ops
    written = {}   # the output's ops written, by pre-order number below the module
    for i, new in op_changes:
        if i in groups and groups[i][1] != i:
            continue   # merged into another op in the edited output
        if i in made:
            _write_op(made[i], reads, new)
        else:
            j = out.index(i)
            _write_op(out.ops[j], reads, new)
            written[j - 1] = out.ops[j]
    if main_changes:
        _write_main(out.main, main, reads, main_changes, module, options)
        written[out.main_index - 1] = out.main
    result = module_of_op(copy, module.file)
    #: what was done to the copy of the first output (what the audit reads instead
    #: of the whole output)
    members = sorted(made, key=lambda m: (moved.places[m][0], m))   # (module order)
    index = {m: k for k, m in enumerate(members)}
    result.output_edits = OutputEdits(
        written, [(moved.places[m][0] - 1, moved.places[m][1] - 1, made[m]) for m in members],
        [j - 1 for j in moved.erased],
        [(j - 1, operand, old - 1, ("made", index[now[1]]) if now[0] == "made"
          else ("op", now[1] - 1)) for j, operand, old, now in moved.redirected],
        out.ops[1:])
    return result


@dataclass
class OutputEdits:
    """What the export by difference did to its copy of the first output, by the
    first output's pre-order numbers below the module (its
    :class:`~sdy_dl.audit.naming.ValueTable`'s): every op not named here is the
    first output's, copied (same attributes, operands and place)."""

    written: dict          # number -> the copy's op whose attributes were written
    #: the ops made, in module order: (the number of the op each is placed right
    #: before, of the op whose attributes and operand it took, the op)
    made: list
    erased: list           # the numbers of the ops erased
    #: each use redirected: (user's number, operand number, number of the op whose
    #: result it read, what it reads now: ("op", number) or ("made", index in made))
    redirected: list
    ops: list = field(repr=False)   # the copy's ops in pre-order, as copied (by number)

    @property
    def restructured(self) -> bool:
        """Whether ops were made or erased or uses redirected (else only attributes
        were written)."""
        return bool(self.made or self.erased or self.redirected)


def _op_shardings(old_attrs, new_attrs) -> tuple:
    """(the shardings before, after) of an op whose attributes other than
    ``sdy.sharding`` are the same (each a list, or None without the attribute)."""
    from sdy_dl.ir.storage import per_value_of

    if isinstance(old_attrs, str) or isinstance(new_attrs, str):
        raise NotLocal
    old, new = dict(old_attrs), dict(new_attrs)
    a, b = old.pop(SHARDING_ATTR, None), new.pop(SHARDING_ATTR, None)
    if old != new:
        raise NotLocal
    return (None if a is None else list(per_value_of(a)),
            None if b is None else list(per_value_of(b)))


class _Checks:
    """The statements' conditions on a changed op (raise :class:`NotLocal`)."""

    def __init__(self, reads: list[Reads], block_key: int):
        self.own = frozenset().union(*(r.reads_own for r in reads))
        self.operands = frozenset().union(*(r.reads_operands for r in reads))
        self.unreduced = any(r.unreduced for r in reads)
        self.meshes = any(r.meshes for r in reads)
        self.block_key = block_key

    def shardings(self, old: list, new: list) -> None:
        """Old and new shardings of one place (None entries: none)."""
        old = [s for s in old if s is not None]
        new = [s for s in new if s is not None]
        if self.unreduced and any(s.unreduced for s in old + new):
            raise NotLocal
        if self.meshes and ({_mesh_ref(s) for s in old} != {_mesh_ref(s) for s in new}):
            raise NotLocal

    def users(self, values) -> None:
        """The ops using ``values``: main's top-level ops that read no operand's sharding."""
        from sdy_dl.ir.walk import key

        for value in values:
            for use in value.uses:
                owner = use.owner
                owner = getattr(owner, "operation", owner)
                if owner.name in self.operands or owner.block is None \
                        or key(owner.block) != self.block_key:
                    raise NotLocal

    def op(self, op, old, new) -> None:
        if op.name in self.own:
            raise NotLocal
        self.shardings(old or [], new or [])
        self.users(op.results)


def _mesh_ref(s):
    """What a sharding names of the module's symbols: its mesh's name (an inlined mesh
    names none)."""
    return s.mesh_name


def _main_changes(old_attrs, new_attrs, main, check: _Checks, calls: list) -> dict:
    """kind -> {index: new sharding or None} of main's changed argument and result
    shardings (checked); ``main``: the what-if's main, whose attributes
    (:func:`~sdy_dl.ir.opaque.attribute_dict_key`) are ``new_attrs``, ``old_attrs``
    in the first propagated module."""
    from sdy_dl.ir.mlir_ops import symbol_name
    from sdy_dl.ir.storage import attr_entries, attr_items, sharding_of
    from sdy_dl.passes.call_graph import callee_name

    if isinstance(old_attrs, str) or isinstance(new_attrs, str):
        raise NotLocal
    old, new = dict(old_attrs), dict(new_attrs)
    entries = {kind: (attr_entries(old, kind), attr_entries(new, kind))
               for kind in ("arg_attrs", "res_attrs")}
    for kind in entries:
        old.pop(kind, None)
        new.pop(kind, None)
    if old != new:
        raise NotLocal
    # main's shardings are read at its call sites too
    name = symbol_name(main)
    if any(callee_name(call) == name for call in calls):
        raise NotLocal
    changes = {}
    args = list(main.regions[0].blocks[0].arguments)
    for kind, (a, b) in entries.items():
        if len(a) != len(b):
            raise NotLocal
        for index, (x, y) in enumerate(zip(a, b)):
            if x == y:
                continue
            x, y = attr_items(x), attr_items(y)
            sx, sy = x.pop(SHARDING_ATTR, None), y.pop(SHARDING_ATTR, None)
            if x != y:
                raise NotLocal
            sx = None if sx is None else sharding_of(sx)
            sy = None if sy is None else sharding_of(sy)
            check.shardings([sx], [sy])
            if kind == "arg_attrs":
                check.users([args[index]])
            changes.setdefault(kind, {})[index] = sy
    return changes


def _write_op(out_op, reads: list[Reads], new: list | None) -> None:
    """Store ``new`` (the propagated shardings) on ``out_op`` as the passes rewrite them."""
    from sdy_dl.ir.storage import write_per_value

    if new is None:
        if SHARDING_ATTR in out_op.attributes:
            del out_op.attributes[SHARDING_ATTR]
        return
    for r in reads:
        if r.rewrite_op is not None:
            new = r.rewrite_op(new)
    write_per_value(out_op, SHARDING_ATTR, new)


def _write_main(out_main, main, reads: list[Reads], changes: dict, module: Module,
                options: PassOptions) -> None:
    """Store main's changed argument and result shardings on ``out_main`` as the passes
    rewrite them."""
    from sdy_dl.ir.mlir_ops import func_arg_types, func_result_types
    from sdy_dl.ir.storage import write_func_attrs

    types = {"arg_attrs": func_arg_types(main), "res_attrs": func_result_types(main)}
    for kind, entries in changes.items():
        indexes = sorted(entries)
        shardings = [entries[i] for i in indexes]
        for r in reads:
            if r.rewrite_main is not None:
                shardings = r.rewrite_main(
                    [(s, types[kind][i]) for s, i in zip(shardings, indexes)], module, options)
        write_func_attrs(out_main, kind, dict(zip(indexes, shardings)))
