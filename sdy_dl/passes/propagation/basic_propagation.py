"""``basic-propagate`` (Shardy's ``sdy-basic-propagate``, semantics §5.5, §6) and the
runner every propagation pass shares.

Each propagation pass syncs sharding groups, runs its schedule of fixpoints,
writes the shardings back, erases dead ops and attaches or drops the rules.
As in Shardy, where each propagation pass extends the previous one, the
other passes (:mod:`.aggressive_propagation`, :mod:`.op_priority_propagation`,
:mod:`.user_priority_propagation`) call :func:`run_strategy` with their
strategy and schedule.  The ``propagation-strategy`` pass option (basic,
aggressive, basic-then-aggressive) chooses the step strategy of the
aggressive, op- and user-priority passes.  The options of this pass are
those every propagation pass reads (:data:`BASIC_PROPAGATION_OPTIONS`).
"""

from __future__ import annotations

import functools

from sdy_dl.errors import SdyError
from sdy_dl.ir import Module
from sdy_dl.ir.op_index import OpIndex
from sdy_dl.passes import PassOptions, register, run_analysis
from sdy_dl.passes.import_.apply_sharding_constraints import (DEBUG_PROPAGATION_EDGE_SHARDING,
                                                              DEBUG_SHARDING_ORIGINS)
from sdy_dl.passes.options import Option
from sdy_dl.progress import propagation_progress
from sdy_dl.propagation.driver import Propagator
from sdy_dl.propagation.groups import sync_sharding_groups
from sdy_dl.propagation.priorities import run_op_priority, run_user_priority
from sdy_dl.propagation.trace import StepReplay

RULE_ATTR = "sdy.sharding_rule"

CONSERVATIVE_PROPAGATION = Option(
    "conservative-propagation", "bool", False,
    "Disallow split axes and non-divisible sharding axes (same as --conservative).")
KEEP_SHARDING_RULES = Option(
    "keep-sharding-rules", "bool", False,
    "Keep existing and created sdy.sharding_rule attributes (same as --keep-sharding-rules).")
MODULE_DUMP_DIRECTORY = Option("module-dump-directory", "string", "",
                               "Where Shardy dumps rewritten modules.", implemented=False)

#: The options of basic propagation, which every propagation pass extends.
BASIC_PROPAGATION_OPTIONS = (KEEP_SHARDING_RULES, MODULE_DUMP_DIRECTORY, CONSERVATIVE_PROPAGATION,
                             DEBUG_SHARDING_ORIGINS, DEBUG_PROPAGATION_EDGE_SHARDING)


def make_propagator(module: Module, options: PassOptions, strategy: str,
                    checked: bool = False) -> Propagator:
    """A propagator over ``module`` with the rule DB and engine ``options`` name
    (``checked``: ``module``'s shapes and meshes are known to pass
    :func:`check_static_shapes`)."""
    from sdy_dl.propagation.step_eval import evaluate_steps
    from sdy_dl.rules.db import load_rule_db

    if not checked:
        check_static_shapes(module)
    run = options.context
    conservative = options[CONSERVATIVE_PROPAGATION]
    rules = load_rule_db(run.rule_files, conservative=conservative)
    engine = run.make_engine() if run.replay_dir is None else None

    def build(module: Module, rule_memo: dict | None = None) -> Propagator:
        if run.replay_dir is not None:
            evaluate = StepReplay(run.replay_dir, module.meshes)
        else:
            def evaluate(steps):
                return evaluate_steps(engine, steps, module.meshes)
        if run.recorder is not None:
            evaluate = run.recorder.wrap(evaluate)
        def rule_for(op):
            return rules.rule_for(op, module)
        if rule_memo is not None:
            rule_for = _memoised(rule_for, rule_memo)
        propagator = Propagator(
            module,
            rule_for=rule_for,
            evaluate=evaluate,
            strategy=strategy,
            conservative=conservative,
        )
        propagator.state.tracer = run.tracer
        if run.step_memo is not None:
            propagator.share_memo(run.step_memo.setdefault(mesh_key(module), {}))
        return propagator

    # (``run.rule_memo`` holds the rules of the module as the pass receives it; a
    # module the group sync rewrote has other ops, and looks its rules up afresh)
    propagator = build(module, run.rule_memo)
    rewritten, copies = sync_sharding_groups(module, propagator.state,
                                             functools.partial(run_analysis, options=options))
    if rewritten:
        propagator = build(module)
    propagator.use_group_copies(copies(module))
    return propagator


def _memoised(rule_for, memo: dict):
    """``rule_for`` looked up in ``memo`` by op number first (and kept there)."""
    def lookup(op):
        try:
            return memo[op.oid]
        except KeyError:
            rule = memo[op.oid] = rule_for(op)
            return rule
    return lookup


def mesh_key(module: Module) -> tuple:
    """The meshes of ``module`` as text: step outputs are shared between modules with
    equal meshes (``RunContext.step_memo``)."""
    return tuple(sorted((name, mesh.to_text()) for name, mesh in module.meshes.items()))


SHARDING_ATTRS = frozenset({"sdy.sharding", "sharding", "in_shardings", "out_shardings",
                            "arg_attrs", "res_attrs"})


def check_static_shapes(module: Module) -> None:
    """Propagation supports only ranked tensors with a static shape (§5.5 step 1),
    and shardings that name their mesh by symbol (§8.5)."""
    inlined: dict = {}   # attribute -> whether it inlines a mesh (attributes are uniqued)
    for op in module.ops:
        attrs = op.mlir.attributes
        for name in attrs.keys():   # (cheaper than iterating the map)
            if name not in SHARDING_ATTRS:
                continue
            attr = attrs.get(name)
            found = inlined.get(attr)
            if found is None:
                found = inlined[attr] = "mesh<[" in str(attr)
            if found:
                raise SdyError(f"a sharding on this {op.name} has an inlined mesh; propagation needs "
                               "mesh symbols (run the lift-inlined-meshes pass or sdy-dl propagate)",
                               file=module.file, line=op.line, col=op.col)
        for value in op.results:
            if value.shape is None and value.type_text.startswith(("tuple<", "tensor<*")):
                raise SdyError("propagation only supports ranked tensors with a static shape",
                               file=module.file, line=op.line, col=op.col)
            if value.shape is not None and not value.static:
                raise SdyError("propagation only supports ranked tensors with a static shape",
                               file=module.file, line=op.line, col=op.col)


def finish_rules(module: Module, propagator: Propagator, keep: bool) -> None:
    """Attach created rules (kept) or drop every non-custom rule (§2.3)."""
    from sdy_dl.rules.rule_attr import is_custom_rule, rule_attr

    for op in module.ops:
        if op.oid in propagator.erased:
            continue
        existing = op.attr(RULE_ATTR)
        if existing is not None:
            if not keep and not is_custom_rule(existing):
                del op.mlir.attributes[RULE_ATTR]
        elif keep and op.oid in propagator.visited_rules:
            op.mlir.attributes[RULE_ATTR] = rule_attr(propagator.visited_rules[op.oid])


def run_strategy(module: Module, options: PassOptions, strategy: str,
                 schedule: str = "plain", op_priority: bool = True) -> Module:
    """One propagation pass: ``strategy`` per step, ``schedule`` of fixpoints
    ("plain": one; "op-priority": five bands; "user-priority": per priority, the
    bands when ``op_priority``, else one fixpoint)."""
    name = {"plain": f"{strategy}-propagate", "op-priority": "op-priority-propagate",
            "user-priority": "user-priority-propagate"}[schedule]
    fixpoints = options.context.fixpoints
    replaying = False
    if fixpoints is not None:
        from sdy_dl.propagation.replay import PassTrace, Replay

        replaying = (not isinstance(fixpoints, PassTrace) and fixpoints.replay is None
                     and fixpoints.trace.name == name)
    # (a replayed pass's module is the recorded pass's with other shardings on main
    # arguments, on the same mesh symbols, ``ReplayOf``: the recorded run checked it)
    propagator = make_propagator(module, options, strategy, checked=replaying)
    if fixpoints is not None:
        if isinstance(fixpoints, PassTrace):
            if not fixpoints.name:
                fixpoints.start(propagator, name)
        elif replaying:
            propagator.replay = fixpoints.replay = Replay(fixpoints.trace, propagator)
    with propagation_progress(len(propagator.module.ops), options.context.quiet, name,
                              lambda: propagator.phase) as report:
        if schedule == "plain":
            propagator.propagate(progress=report)
        elif schedule == "op-priority":
            run_op_priority(propagator, functools.partial(run_analysis, options=options), report)
        else:
            run_user_priority(propagator, functools.partial(run_analysis, options=options), report,
                              op_priority)
    if isinstance(propagator.evaluate, StepReplay):
        propagator.evaluate.check_complete()
    if propagator.recorder is not None or getattr(fixpoints, "name", None) == name:
        fixpoints.end(propagator)
    if propagator.replay is not None:
        propagator.replay.finish()
    propagator.finish()
    finish_rules(propagator.module, propagator, options[KEEP_SHARDING_RULES])
    from sdy_dl.rules.db import save_rule_instances
    save_rule_instances()   # (the rules this pass instantiated, for later processes)
    model = propagator.module
    # Only attributes changed (the model stays), or dead ops were erased: the
    # model gives the op walks either way.
    walks = OpIndex.from_model(model, propagator.erased)
    # (the export by difference compares two propagations' erasures)
    model.propagation_erased = frozenset(propagator.erased)
    if propagator.erased:
        return model.invalidate(walks=walks)
    model.walks = walks
    return model


@register("basic-propagate", "Shardy's basic propagation (sdy-basic-propagate)",
          BASIC_PROPAGATION_OPTIONS)
def basic_propagate(module: Module, options: PassOptions) -> Module:
    return run_strategy(module, options, "basic")
