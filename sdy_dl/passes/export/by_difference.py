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
shardings rewritten as the passes rewrite them.  Anything else (another changed
attribute, an op nested in a region, a changed value read by an op a pass reads
operands at, unreduced axes, another set of meshes, an op the first output
does not hold) runs the passes in full: the answer is the same either way.

:class:`ExportRecord` is what the first run keeps: its propagated module's op
names, identities (:func:`~sdy_dl.ir.walk.key`) and a copy (its attributes,
read when a what-if first asks), and a copy of its output with the position
there of each op that is still the same op (same identity and name, a name no
pass creates).  :func:`export_by_difference` makes the edited output or says
it cannot (None).
"""

from __future__ import annotations

from sdy_dl.ir.model import Module
from sdy_dl.ir.storage import SHARDING_ATTR
from sdy_dl.passes import PassOptions
from sdy_dl.passes.export.export_reads import Reads, created_names, stage_reads


def _attributes(mop):
    """``mop``'s attributes as a key equal exactly when they are
    (:func:`~sdy_dl.ir.opaque.attribute_dict_key`)."""
    from sdy_dl.ir.opaque import attribute_dict_key

    return attribute_dict_key(mop)


class ExportRecord:
    """The first run's propagated module and output, for later what-ifs."""

    def __init__(self, module: Module):
        """Record ``module``, the first run's propagated module, before the passes
        after propagation edit it."""
        from sdy_dl.ir.context import mlir_context
        from sdy_dl.ir.walk import key, walk_pre

        with mlir_context():
            ops = walk_pre(module.mlir.operation)
            self.keys = [key(op) for op in ops]
            self.names = [op.name for op in ops]
            self._input = module.mlir.operation.clone()
        #: the ops propagation erased (the model's numbers; None: not known)
        self.erased = getattr(module, "propagation_erased", None)
        self._input_attributes: list | None = None
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

    def input_attributes(self) -> list:
        """Each op's attributes in the first propagated module (read once)."""
        if self._input_attributes is None:
            from sdy_dl.ir.context import mlir_context
            from sdy_dl.ir.walk import walk_pre

            with mlir_context():
                self._input_attributes = [_attributes(op) for op in walk_pre(self._input)]
        return self._input_attributes


class _NotLocal(Exception):
    """The change is not provably local: the passes run in full."""


def export_by_difference(record: ExportRecord | None, module: Module, options: PassOptions,
                         stages: list[str]) -> Module | None:
    """The output ``stages`` (the stages after propagation) make of ``module`` (a
    what-if's propagated module), made from ``record``'s output; None when not
    provably the same (then the stages run)."""
    from sdy_dl.ir.context import mlir_context

    if record is None or record.output is None or record.erased is None:
        return None
    if getattr(module, "propagation_erased", None) != record.erased:
        return None
    reads = stage_reads(stages)
    if reads is None:
        return None
    with mlir_context():
        try:
            return _export(record, module, options, reads)
        except _NotLocal:
            return None


def _export(record: ExportRecord, module: Module, options: PassOptions,
            reads: list[Reads]) -> Module:
    from sdy_dl.ir.loader import module_of_op
    from sdy_dl.ir.mlir_ops import main_of, symbol_name
    from sdy_dl.ir.walk import key, walk_pre

    ops = walk_pre(module.mlir.operation)
    if [op.name for op in ops] != record.names:
        raise _NotLocal
    before = record.input_attributes()
    changed = [i for i, op in enumerate(ops) if _attributes(op) != before[i]]
    main = main_of([op.operation for op in module.mlir.body.operations
                    if op.operation.name == "func.func"])
    if main is None:
        raise _NotLocal
    main_key = key(main)
    main_number = next(i for i, op in enumerate(ops)
                       if record.names[i] == "func.func" and key(op) == main_key)
    block_key = key(main.regions[0].blocks[0]) if len(main.regions[0].blocks) == 1 else None
    if block_key is None:
        raise _NotLocal
    check = _Checks(reads, block_key)
    op_changes, main_changes = [], {}
    for i in changed:
        op = ops[i]
        if i == main_number:
            calls = [op for op, name in zip(ops, record.names) if name == "func.call"]
            main_changes = _main_changes(record, i, op, check, calls)
            continue
        if op.block is None or key(op.block) != block_key:
            raise _NotLocal
        old, new = _op_shardings(before[i], _attributes(op))
        check.op(op, old, new)
        op_changes.append((i, new))
    copy = record.output.clone()
    out_ops = walk_pre(copy)
    # main is no op the passes create: it is the output's function of its name
    out_main = main_of([op for op in out_ops[1:] if op.name == "func.func"
                        and op.parent is not None and key(op.parent) == key(copy)])
    if out_main is None or symbol_name(out_main) != symbol_name(main):
        raise _NotLocal
    out_block = key(out_main.regions[0].blocks[0])
    for i, new in op_changes:
        j = record.at_output.get(i)
        if j is None or out_ops[j].block is None or key(out_ops[j].block) != out_block:
            raise _NotLocal
        _write_op(out_ops[j], reads, new)
    if main_changes:
        _write_main(out_main, main, reads, main_changes, module, options)
    return module_of_op(copy, module.file)


def _op_shardings(old_attrs, new_attrs) -> tuple:
    """(the shardings before, after) of an op whose attributes other than
    ``sdy.sharding`` are the same (each a list, or None without the attribute)."""
    from sdy_dl.ir.storage import per_value_of

    if isinstance(old_attrs, str) or isinstance(new_attrs, str):
        raise _NotLocal
    old, new = dict(old_attrs), dict(new_attrs)
    a, b = old.pop(SHARDING_ATTR, None), new.pop(SHARDING_ATTR, None)
    if old != new:
        raise _NotLocal
    return (None if a is None else list(per_value_of(a)),
            None if b is None else list(per_value_of(b)))


class _Checks:
    """The statements' conditions on a changed op (raise :class:`_NotLocal`)."""

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
            raise _NotLocal
        if self.meshes and ({_mesh_ref(s) for s in old} != {_mesh_ref(s) for s in new}):
            raise _NotLocal

    def users(self, values) -> None:
        """The ops using ``values``: main's top-level ops that read no operand's sharding."""
        from sdy_dl.ir.walk import key

        for value in values:
            for use in value.uses:
                owner = use.owner
                owner = getattr(owner, "operation", owner)
                if owner.name in self.operands or owner.block is None \
                        or key(owner.block) != self.block_key:
                    raise _NotLocal

    def op(self, op, old, new) -> None:
        if op.name in self.own:
            raise _NotLocal
        self.shardings(old or [], new or [])
        self.users(op.results)


def _mesh_ref(s):
    """What a sharding names of the module's symbols: its mesh's name (an inlined mesh
    names none)."""
    return s.mesh_name


def _entries(func, kind: str) -> list[dict]:
    """Each argument's (``arg_attrs``) or result's (``res_attrs``) attributes."""
    from jaxlib.mlir import ir

    attrs = func.attributes
    if kind not in attrs:
        return []
    out = []
    for entry in ir.ArrayAttr(attrs[kind]):
        entry = ir.DictAttr(entry)
        out.append({(na := entry[i]).name: na.attr for i in range(len(entry))})
    return out


def _main_changes(record: ExportRecord, number: int, main, check: _Checks,
                  calls: list) -> dict:
    """kind -> {index: new sharding or None} of main's changed argument and result
    shardings (checked)."""
    from sdy_dl.ir.mlir_ops import symbol_name
    from sdy_dl.ir.storage import sharding_of
    from sdy_dl.passes.call_graph import callee_name
    from sdy_dl.ir.walk import walk_pre

    old_main = walk_pre(record._input)[number]
    old, new = _attributes(old_main), _attributes(main)
    if isinstance(old, str) or isinstance(new, str):
        raise _NotLocal
    old, new = dict(old), dict(new)
    for kind in ("arg_attrs", "res_attrs"):
        old.pop(kind, None)
        new.pop(kind, None)
    if old != new:
        raise _NotLocal
    # main's shardings are read at its call sites too
    name = symbol_name(main)
    if any(callee_name(call) == name for call in calls):
        raise _NotLocal
    changes = {}
    args = list(main.regions[0].blocks[0].arguments)
    for kind in ("arg_attrs", "res_attrs"):
        a, b = _entries(old_main, kind), _entries(main, kind)
        if len(a) != len(b):
            raise _NotLocal
        for index, (x, y) in enumerate(zip(a, b)):
            if x == y:
                continue
            sx, sy = x.pop(SHARDING_ATTR, None), y.pop(SHARDING_ATTR, None)
            if x != y:
                raise _NotLocal
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
