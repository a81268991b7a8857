"""``insert-explicit-reshards`` (Shardy's ``sdy-insert-explicit-reshards``;
semantics §9.3): in its default non-full version (as the export pipeline runs
it) and with ``enable-full-version=true``.

Per function, ops in post-order (terminators skipped); an op is treated "in
full" when the option is on, and always for ``func.call``,
``mhlo.ragged_dot`` and concatenates whose operands are sharded unlike the
result (``isOnFullVersion``, decided for every op before the walk by the
Datalog stage of :mod:`.is_on_full_version`):

* data-flow ops (while, case, optimization barrier, manual and named
  computations): the sources of each edge owner (results first, then block
  arguments) are all-reduced over the unreduced axes the owner's sharding
  does not keep and, in full, resharded to it (right after the source);
* ``func.call``: the same for each operand and the callee's argument sharding
  (when the callee has none: fully closed shardings on the operands' mesh);
* ``sdy.reshard`` to more unreduced axes: ``sdy.replicated_to_unreduced`` /
  ``sdy.sharded_to_unreduced`` (``insertUnreducedCollectives``, whose split
  among the dims is stage ``insert_unreduced_collectives``:
  :mod:`.insert_unreduced_collectives`);
* every other op with a (non-custom) rule and a mesh: operands with unreduced
  axes the first result does not keep are all-reduced before it; then, in
  full, every tensor is projected onto the rule's factors, the common axes
  of the factors are chosen (:mod:`.explicit_reshards_common_axes`) and the
  tensors whose factor shardings change (or whose mesh has another device
  order) are resharded: operands before the op, results after it (the result
  takes the common sharding, a reshard restores the old one).  Not in full,
  dots whose result conflicts with an operand only along the contracting axes
  are resharded (``processDot``);
* ops whose reduction factors are sharded (in full: on the common axes; not in
  full: only when the results are unreduced) get an ``sdy.all_reduce`` after
  them over the axes the results do not keep unreduced;
* ``func.return``: returned values are all-reduced over the unreduced axes the
  function result does not keep, made unreduced on the axes it adds and, in
  full, resharded to the function's result sharding.

The targets part is :mod:`.explicit_reshards_targets`; ops with rules are
collected during the walk and treated together afterwards
(:mod:`.explicit_reshards_process_op`): their meshes chosen in one engine
call (Shardy's ``getMesh``, :mod:`.get_mesh`), their projections computed in
two engine calls (:mod:`.explicit_reshards_projection`; two more when
reshapes have overflow axes), their common axes where the heuristic chooses
them in one more and the move to batching factors in another
(:mod:`.explicit_reshards_common_axes`).  Every op sees the shardings it would see in Shardy's
walk, since a rewritten op's users read a reshard that restores its old
sharding.

Not supported (a located error): ops with a rule and a mesh whose tensors
have no static shape.

A reshape whose projection has overflow axes takes as common axes those of
its axes redistributed over its factors (:mod:`.explicit_reshards_reshape`).
"""

from __future__ import annotations

from sdy_dl.ir.meshes import module_meshes
from sdy_dl.ir.mlir_ops import funcs, op_error, tensor_info
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import op_index
from sdy_dl.ir.op_view import OpViews
from sdy_dl.ir.sharding_walker import any_sharding
from sdy_dl.ir.traits import DATA_FLOW_OPS, TERMINATORS
from sdy_dl.ir.value_sharding import get_sharding
from sdy_dl.passes import PassOptions, register
from sdy_dl.passes.call_graph import callee_name, func_table
from sdy_dl.passes.export.explicit_reshards_process_op import (Pending,
                                                               all_reduce_reduction_factors,
                                                               apply_dot, apply_full, decide,
                                                               on_meshes, pending_op)
from sdy_dl.passes.export.explicit_reshards_targets import (all_reduce_unreduced_operands,
                                                            reshard_call_operands,
                                                            reshard_edge_sources, reshard_returned,
                                                            reshard_to_unreduced)
from sdy_dl.passes.export.explicit_reshards_util import DOT_OPS
from sdy_dl.passes.export.is_equivalent import IsEquivalent
from sdy_dl.passes.export.is_on_full_version import is_on_full_version
from sdy_dl.passes.options import Option

ENABLE_FULL_VERSION = Option(
    "enable-full-version", "bool", False,
    "Reshard every op whose operand and result shardings conflict (not only calls).")

#: The Datalog stage of this pass, ``datalog/insert_explicit_reshards/``, is run
#: (and declared) by ``explicit_reshards_projection``, its facts in and relations out.

def op_rules(module: Module, options: PassOptions):
    """``rule(mop)``: the sharding rule of an op of ``module`` as the IR is when it is asked
    (the rule files are read at the first call; the op is read through a view,
    so the module is not re-indexed)."""
    state: dict = {}

    def rule(mop):
        if not state:
            from sdy_dl.rules.db import load_rule_db

            state["db"] = load_rule_db(options.context.rule_files, conservative=False)
        return state["db"].rule_for(OpViews().op(mop), module)
    return rule


@register("insert-explicit-reshards",
          "Make every sharding conflict explicit with sdy.reshard and unreduced collectives "
          "(non-full version by default; enable-full-version=true for every op).",
          (ENABLE_FULL_VERSION,))
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    full = options[ENABLE_FULL_VERSION]
    with mlir_context():
        meshes = module_meshes(module)
        table = func_table(module)
        rules = op_rules(module, options)
        equivalent = IsEquivalent(options)
        changed = False
        pendings: list[Pending] = []
        # Without unreduced axes anywhere, no operand is all-reduced and the
        # non-full version rewrites dots only (``rewritten_off_full``): other ops
        # not treated in full need no reading.  (The walk creates unreduced axes
        # only from unreduced axes there.)
        unreduced = any_sharding(module, lambda s: bool(s.unreduced))
        # The walk inserts ops and rewires the operands of the op at hand, but
        # stores no sharding: a value's sharding is read once.  (Its one erasure,
        # a reshard's, empties the table: an erased value's place may be reused.)
        known: dict = {}

        def sharding(value):
            try:
                return known[value]
            except KeyError:
                found = known[value] = get_sharding(value)
                return found

        # (the ops with their names from the op index: the walk erases only the
        # reshard at hand)
        walk = []
        for func in funcs(module):
            ops, names = op_index(module).walk(func, post=True)
            walk.append((func, [(mop, name) for mop, name in zip(ops[:-1], names)
                                if name not in TERMINATORS]))
        visited = [mop for _, ops in walk for mop, _ in ops]
        visited_names = [name for _, ops in walk for _, name in ops]
        # Which ops are treated in full, asked before the walk: the walk changes
        # no sharding an op it has not reached reads, but for its conversion of
        # a reshard to unreduced collectives, whose users read the collectives'
        # sharding (then the ops still to visit are asked again).
        on_full_version = is_on_full_version(visited, full, options, visited_names)
        position = -1
        for func, ops in walk:
            for mop, name in ops:
                position += 1
                on_full = on_full_version[position]
                if name in DATA_FLOW_OPS:
                    changed |= reshard_edge_sources(mop, meshes, on_full, equivalent, options)
                    continue
                if name == "func.call":
                    changed |= reshard_call_operands(mop, table[callee_name(mop)], meshes,
                                                     equivalent, options)
                    continue
                if name == "sdy.reshard" and reshard_to_unreduced(mop, meshes, options):
                    known.clear()
                    on_full_version[position + 1:] = is_on_full_version(
                        visited[position + 1:], full, options, visited_names[position + 1:])
                    changed = True
                    continue
                if not (unreduced or on_full or name in DOT_OPS):
                    continue
                first = sharding(mop.results[0]) if len(mop.results) else None
                changed |= all_reduce_unreduced_operands(mop, first, meshes, sharding)
                pending = pending_op(mop, first, rules, on_full)
                if pending is not None:
                    pendings.append(pending)
            changed |= reshard_returned(func, meshes, full, equivalent, options)
        pendings = on_meshes(pendings, meshes, options)
        for p in pendings:
            if any(tensor_info(v.type) == (True, None)
                   for v in list(p.mop.operands) + list(p.mop.results)):
                raise op_error(module, p.mop, "insert-explicit-reshards: tensors without "
                               "a static shape are not supported")
        for p, (update, reduce_axes) in zip(pendings, decide(pendings, meshes, options,
                                                             equivalent)):
            first = p.originals[len(p.op.rule.operands)] if p.mop.results else None
            if reduce_axes is None and not p.on_full and first is not None and first.unreduced:
                # (Shardy's getReductionAxes checks this and aborts the process)
                raise op_error(module, p.mop, "insert-explicit-reshards: the result has unreduced "
                               "axes while the operands shard a reduction factor differently "
                               "(no all-reduce can make them agree)")
            if update is not None:
                changed |= apply_full(p, update, meshes) if p.on_full else apply_dot(p, update)
            if reduce_axes:
                changed |= all_reduce_reduction_factors(p, reduce_axes, meshes)
        return module.invalidate() if changed else module
