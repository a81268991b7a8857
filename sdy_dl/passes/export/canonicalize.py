"""``canonicalize`` with ``enable-patterns={sdy-collective}``: MLIR's
canonicalizer as Shardy's export pipeline runs it after
insert-explicit-reshards (semantics §9.3).

Only patterns labelled ``sdy-collective`` are enabled, so no stablehlo fold or
pattern applies; what changes a module is the greedy driver's dead-code
erasure and Shardy's collective patterns on the all-reduces the non-full
insert-explicit-reshards creates.  The Datalog stage ``canonicalize``
decides both: which ops are erased (unused ops without memory effects, with
their regions) and which all-reduces fold (to their input, to the input of a
``replicated_to_unreduced`` on the same axes, or into an ``all_gather`` of
the input of a ``sharded_to_unreduced`` over them); this module rewrites.
An all-gather, all-slice or reduce-scatter naming no axis is its input as
well, and so is a collective-permute to a sharding equivalent to its
operand's (their no-op patterns); the other patterns of those collectives
and of all-to-all are not implemented.
The ``sdy.constant`` ops the pipeline has by then are not ``ConstantLike``,
so no constant is moved or merged.
"""

from __future__ import annotations

from sdy_dl.ir.meshes import mesh_of, module_meshes, sort_and_merge_axes
from sdy_dl.ir.mlir_ops import module_ops
from sdy_dl.ir.model import Module
from sdy_dl.ir.sdy_attrs import axes_of_list, axis_lists_of
from sdy_dl.ir.storage import read_own
from sdy_dl.ir.traits import (EFFECTFUL_OPS, EFFECT_FREE_DIALECTS, PURE_OPS, RECURSIVE_EFFECT_OPS,
                              TERMINATORS)
from sdy_dl.ir.op_index import op_index
from sdy_dl.ir.walk import key
from sdy_dl.passes import PassOptions, Stage, register
from sdy_dl.passes.options import Option
from sdy_dl.sharding import AxisRef

ENABLE_PATTERNS = Option(
    "enable-patterns", ("sdy-collective",), "sdy-collective",
    "The pattern labels the canonicalizer runs (sdy-dl has the set the pipeline runs).")

#: The Datalog stage this pass runs (``datalog/canonicalize/``).
STAGE = Stage("canonicalize")

SIDE_EFFECT_ATTR = "has_side_effect"


def numbered_ops(module: Module) -> tuple[list, list, list]:
    """The ops the stage numbers: those inside functions in pre-order, and those
    directly in the module body other than functions (symbols such as meshes
    are effectful in the trait table, so candidates too); with their names and
    the number of each op's parent op (None directly in a function or the
    module).  The ops and names come from the op index's pre-order walks; an
    op's parent is the closest op with regions before it that holds it, asked
    through the bindings only inside such an op (cheaper than a numbered
    walk's Python generator)."""
    ops: list = []
    names: list = []
    parents: list = []
    index = op_index(module)
    for top in module_ops(module):
        walk, walk_names = index.walk(top)
        if walk_names[0] != "func.func":   # (a function's ops are numbered, not it)
            ops.append(top)
            names.append(walk_names[0])
            parents.append(None)
            continue
        holding: list = []   # (op, number) of the ops with regions around the op at hand
        for mop, name in zip(walk[1:], walk_names[1:]):
            if holding:
                parent = mop.parent
                while holding and not holding[-1][0] == parent:
                    holding.pop()
            parents.append(holding[-1][1] if holding else None)
            ops.append(mop)
            names.append(name)
            if len(mop.regions):
                holding.append((mop, len(ops) - 1))
    return ops, names, parents


def dead_code_facts(module: Module) -> tuple[dict, list]:
    """The facts of stage ``canonicalize`` and the ops they number."""
    facts: dict[str, set] = {"in_op": set(), "in_parent": set(), "in_reads": set(),
                             "in_side_effect_attr": set(), "in_tensor_def": set(),
                             "in_all_reduce": set(), "in_axes_collective": set(),
                             "in_collective_axis": set(), "in_permute": set(),
                             "in_has_sharding": set(), "in_mesh_ref": set(), "in_rank": set(),
                             "in_dim_axis": set(), "in_unreduced": set(),
                             "in_ignore_unreduced": set(),
                             "in_replicated_to_unreduced": set(),
                             "in_sharded_to_unreduced": set(),
                             "in_effect_free_dialect": {(d,) for d in EFFECT_FREE_DIALECTS},
                             "in_pure_op": _split(PURE_OPS),
                             "in_effectful_op": _split(EFFECTFUL_OPS),
                             "in_recursive_op": _split(RECURSIVE_EFFECT_OPS),
                             "in_terminator_op": _split(TERMINATORS)}
    ops, names, parents = numbered_ops(module)
    # the number of the op defining each value (a value's hash and equality are
    # its MLIR value's; block arguments have none)
    defs = {result: i for i, mop in enumerate(ops) for result in mop.results}
    get_def = defs.get
    in_op, in_parent, in_reads = facts["in_op"], facts["in_parent"], facts["in_reads"]
    for i, (mop, name, parent) in enumerate(zip(ops, names, parents)):
        dialect, _, short = name.partition(".")
        in_op.add((i, dialect, short))
        if parent is not None:
            in_parent.add((i, parent))
        for operand in mop.operands:
            d = get_def(operand)
            if d is not None:
                in_reads.add((i, d))
        side_effect = mop.attributes.get(SIDE_EFFECT_ATTR)
        if side_effect is not None and str(side_effect) == "true":
            facts["in_side_effect_attr"].add((i,))
        if name in _COLLECTIVES:
            _collective_facts(facts, i, mop, name, module, defs)
    return facts, ops


def _axes(attr) -> list[AxisRef]:
    """The axes of an ``axis_ref_list`` attribute."""
    return list(axes_of_list(attr))


def _axes_text(axes) -> str:
    return ", ".join(a.to_text() for a in axes)


#: The collectives whose axes the no-op patterns look at, and the attribute naming them.
AXES_ATTR = {"sdy.all_reduce": "reduction_axes", "sdy.all_gather": "gathering_axes",
             "sdy.all_slice": "slicing_axes", "sdy.reduce_scatter": "reduce_scatter_axes"}


PERMUTE, REPLICATED_TO_UNREDUCED, SHARDED_TO_UNREDUCED = (
    "sdy.collective_permute", "sdy.replicated_to_unreduced", "sdy.sharded_to_unreduced")

#: The ops :func:`_collective_facts` gives facts of (its branches test these names).
_COLLECTIVES = frozenset((*AXES_ATTR, PERMUTE, REPLICATED_TO_UNREDUCED, SHARDED_TO_UNREDUCED))


def _collective_facts(facts: dict, i: int, mop, name: str, module: Module, defs: dict) -> None:
    """The facts of the collectives the all-reduce patterns look at (``name``: the
    op's name, ``defs``: value -> number of its defining op)."""
    if name in AXES_ATTR:
        attr = mop.attributes[AXES_ATTR[name]]
        facts["in_axes_collective"].add((i, name.partition(".")[2]))
        axes = (_axes(attr) if name == "sdy.all_reduce" else
                [a for axes in axis_lists_of(attr) for a in axes])
        facts["in_collective_axis"].update((i, a.to_text()) for a in axes)
    if name == PERMUTE:
        from sdy_dl.ir.value_sharding import get_sharding
        from sdy_dl.passes.export.is_equivalent import equivalence_facts

        facts["in_permute"].add((i,))
        for side, sharding in (("in", get_sharding(mop.operands[0])),
                               ("out", read_own(mop, "out_sharding"))):
            if sharding is not None:
                equivalence_facts(facts, i, side, sharding)
    if name == "sdy.all_reduce":
        d = defs.get(mop.operands[0])
        if d is not None:
            facts["in_tensor_def"].add((i, d))
        facts["in_all_reduce"].add((i, _axes_text(axes)))
    elif name == REPLICATED_TO_UNREDUCED:
        facts["in_replicated_to_unreduced"].add((i, _axes_text(_axes(mop.attributes["axes"]))))
    elif name == SHARDED_TO_UNREDUCED:
        axes = [a for axes in axis_lists_of(mop.attributes["axes"]) for a in axes]
        mesh = mesh_of(read_own(mop, "out_sharding"), module_meshes(module))
        facts["in_sharded_to_unreduced"].add((i, _axes_text(sort_and_merge_axes(axes, mesh))))


def _split(names) -> set[tuple[str, str]]:
    """``dialect.op`` names as (dialect, op) facts."""
    return {tuple(name.split(".", 1)) for name in names}


@register("canonicalize",
          "MLIR's canonicalizer with Shardy's sdy-collective patterns only "
          "(erases dead ops, folds all-reduces and no-op collectives).", (ENABLE_PATTERNS,))
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        facts, ops = dead_code_facts(module)
        if not ops:
            return module
        derived = STAGE.run(facts, options)
        folded = fold_collectives(ops, derived)
        erase = sorted(i for (i,) in derived["erase"])
        for i in reversed(erase):
            ops[i].erase()
        return module.invalidate() if erase or folded else module


def fold_collectives(ops: list, derived: dict) -> bool:
    """Carry out the folds the stage decided (each folded collective's uses
    go to its replacement and it is erased)."""
    from jaxlib.mlir import ir

    replacements = [(a, ops[a].operands[0]) for (a,) in derived["fold_to_operand"]]
    replacements += [(a, ops[r].operands[0]) for a, r in derived["fold_to_input_of"]]
    for a, s in derived["fold_to_gather"]:
        all_reduce, s2u = ops[a], ops[s]
        gather = ir.Operation.create(
            "sdy.all_gather", results=[all_reduce.results[0].type], operands=[s2u.operands[0]],
            attributes={"gathering_axes": s2u.attributes["axes"],
                        "out_sharding": all_reduce.attributes["out_sharding"]},
            loc=all_reduce.location)
        ir.InsertionPoint(all_reduce).insert(gather)
        replacements.append((a, gather.results[0]))
    by_op = {key(ops[a]): value for a, value in replacements}

    def resolve(value):
        # a replacement that is itself a folded all-reduce goes on to its own
        while (owner := getattr(value.owner, "operation", None)) is not None \
                and key(owner) in by_op:
            value = by_op[key(owner)]
        return value

    for a, value in sorted(replacements, key=lambda r: r[0]):
        ops[a].results[0].replace_all_uses_with(resolve(value))
    for a, _ in sorted(replacements, key=lambda r: -r[0]):
        ops[a].erase()
    return bool(replacements)
