"""``canonicalize`` with ``enable-patterns={sdy-collective}``: MLIR's
canonicalizer as Shardy's export pipeline runs it after
insert-explicit-reshards (semantics §9.3).

Only patterns labelled ``sdy-collective`` are enabled, so no stablehlo fold or
pattern applies; what changes a module is the greedy driver's dead-code
erasure (the Datalog stage ``canonicalize`` decides which ops are erased:
unused ops without memory effects, with their regions).  Shardy's
collective patterns only match collectives, which the non-full
insert-explicit-reshards sdy-dl implements does not create.
The ``sdy.constant`` ops the pipeline has by then are not ``ConstantLike``,
so no constant is moved or merged.
"""

from __future__ import annotations

from sdy_dl.ir.model import Module
from sdy_dl.passes import PassOptions, register
from sdy_dl.ir.mlir_ops import key, module_ops, rebuild, walk_pre
from sdy_dl.ir.traits import (EFFECT_FREE_DIALECTS, EFFECTFUL_OPS, PURE_OPS,
                              RECURSIVE_EFFECT_OPS, TERMINATORS)
from sdy_dl.passes import run_analysis

SIDE_EFFECT_ATTR = "has_side_effect"


def dead_code_facts(module: Module) -> tuple[dict, list]:
    """The facts of stage ``canonicalize`` and the ops they number."""
    facts: dict[str, set] = {"in_op": set(), "in_parent": set(), "in_reads": set(),
                             "in_side_effect_attr": set(),
                             "in_effect_free_dialect": {(d,) for d in EFFECT_FREE_DIALECTS},
                             "in_pure_op": _split(PURE_OPS),
                             "in_effectful_op": _split(EFFECTFUL_OPS),
                             "in_recursive_op": _split(RECURSIVE_EFFECT_OPS),
                             "in_terminator_op": _split(TERMINATORS)}
    ops: list = []
    ids: dict[int, int] = {}
    for top in module_ops(module):
        # Ops directly in the module body other than functions (symbols such
        # as meshes are effectful in the trait table) are candidates too.
        for mop in walk_pre(top)[1:] if top.name == "func.func" else [top]:
            ids[key(mop)] = len(ops)
            ops.append(mop)
    for i, mop in enumerate(ops):
        dialect, _, name = mop.name.partition(".")
        facts["in_op"].add((i, dialect, name))
        parent = ids.get(key(mop.parent))
        if parent is not None:
            facts["in_parent"].add((i, parent))
        for operand in mop.operands:
            owner = getattr(operand.owner, "operation", None)
            if owner is not None and key(owner) in ids:
                facts["in_reads"].add((i, ids[key(owner)]))
        if SIDE_EFFECT_ATTR in mop.attributes and str(mop.attributes[SIDE_EFFECT_ATTR]) == "true":
            facts["in_side_effect_attr"].add((i,))
    return facts, ops


def _split(names) -> set[tuple[str, str]]:
    """``dialect.op`` names as (dialect, op) facts."""
    return {tuple(name.split(".", 1)) for name in names}


@register("canonicalize",
          "MLIR's canonicalizer with Shardy's sdy-collective patterns only "
          "(erases dead ops).")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        facts, ops = dead_code_facts(module)
        if not ops:
            return module
        erase = sorted(i for (i,) in run_analysis("canonicalize", facts, options)["erase"])
        for i in reversed(erase):
            ops[i].erase()
        return rebuild(module) if erase else module
