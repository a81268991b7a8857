"""``reshard-to-collectives`` (Shardy's ``sdy-reshard-to-collectives``, run per
function; semantics §9.3): every ``sdy.reshard`` becomes the sdy collectives
(``sdy.all_slice``, ``sdy.collective_permute``, ``sdy.all_to_all``,
``sdy.all_gather``) that move its input sharding to its own.

The Datalog stage ``reshard_to_collectives`` decides what happens to each
reshard (kept, erased, or converted to its target or to the replicated
sharding on the input's mesh) from facts about the two shardings and the
``keep-redundant-reshards`` option; the collectives of a converted reshard
come from :mod:`.collective_inserter`.  This module reads the shardings and
writes the ops.  The input sharding is the sharding of the reshard's operand
looked up through ``sdy.propagation_barrier`` ops (a missing one is the open,
replicated sharding on the target's mesh), and the collectives start from the
barrier chain's start, as Shardy's pattern does.  A reshard whose input is
another converted reshard is converted after it (reading the input as that
conversion left it).  The module is verified afterwards: for some
incompatible sub-axis splits Shardy's algorithm builds an invalid collective
and its pass fails, and so does this one.

Unlike newer Shardy, jaxlib 0.10.2's pass fails on a reshard to be converted
between a maximal (single-device) mesh and another mesh; so does this one.
"""

from __future__ import annotations

from sdy_dl.ir.meshes import mesh_of, module_meshes
from sdy_dl.ir.mlir_ops import funcs, op_error, tensor_info
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import ops_named
from sdy_dl.ir.sdy_attrs import axes_text, axis_ref_lists_attr, sharding_attr
from sdy_dl.ir.storage import parse_attr, read_own
from sdy_dl.ir.value_sharding import get_sharding
from sdy_dl.ir.walk import key
from sdy_dl.passes import PassOptions, Stage, register
from sdy_dl.passes.export.collective_inserter import Collective, CollectiveInserter, insert_all
from sdy_dl.passes.export.explicit_reshards_util import value_bypassing_barriers
from sdy_dl.passes.export.insert_func_call_reshards import fully_closed_like
from sdy_dl.passes.export.is_equivalent import (RELATIONS as EQUIVALENCE_RELATIONS,
                                                equivalence_facts)
from sdy_dl.passes.options import Option
from sdy_dl.sharding import Mesh, TensorSharding

#: The Datalog stages this pass runs: what becomes of each reshard
#: (``datalog/reshard_to_collectives/``), and the decisions of Shardy's
#: ``CollectiveInserter`` (``datalog/collective_inserter/``).
STAGE = Stage("reshard_to_collectives")
COLLECTIVE_INSERTER_STAGE = Stage("collective_inserter")

#: Pass options that reach the Datalog stage as ``in_flag`` facts.
KEEP_REDUNDANT_RESHARDS = Option(
    "keep-redundant-reshards", "bool", False,
    "Keep reshards whose input sharding is equivalent to their own (false: erase them).")

#: The boolean options the stage reads as ``in_flag`` facts (by option name).
FLAGS = (KEEP_REDUNDANT_RESHARDS,)


def input_sharding(reshard) -> TensorSharding | None:
    """The sharding of the reshard's operand, through propagation barriers."""
    return get_sharding(value_bypassing_barriers(reshard.operands[0]))


def reshard_facts(reshards: list, meshes: dict[str, Mesh], options: PassOptions,
                  module: Module) -> dict[str, set]:
    """The facts of stage ``reshard_to_collectives`` for ``reshards`` (numbered
    by position)."""
    facts: dict[str, set] = {name: set() for name in (
        "in_reshard", "in_mesh_axes", "in_maximal") + EQUIVALENCE_RELATIONS}
    facts["in_flag"] = {(flag.name,) for flag in FLAGS if options[flag]}
    for r, reshard in enumerate(reshards):
        facts["in_reshard"].add((r,))
        for side, sharding in (("in", input_sharding(reshard)), ("out", read_own(reshard))):
            if sharding is None:
                continue
            mesh = mesh_of(sharding, meshes)
            if mesh is None:
                raise op_error(module, reshard, f"reshard-to-collectives: unknown mesh "
                               f"{sharding.mesh_text()}")
            equivalence_facts(facts, r, side, sharding)
            facts["in_mesh_axes"].add((r, side, ", ".join(a.to_text() for a in mesh.axes)))
            if mesh.is_maximal:
                facts["in_maximal"].add((r, side))
    return facts


def collective_op(step: Collective, operand, loc):
    """The detached MLIR op of ``step`` applied to ``operand``."""
    from jaxlib.mlir import ir

    attributes = {"out_sharding": sharding_attr(step.out_sharding)}
    if step.kind in ("all_gather", "all_slice"):
        name = "gathering_axes" if step.kind == "all_gather" else "slicing_axes"
        attributes[name] = axis_ref_lists_attr(step.axes_per_dim)
    elif step.kind == "all_to_all":
        attributes["params"] = parse_attr(
            f"#sdy<all_to_all_param_list[{axes_text(step.axes)}: "
            f"{step.src_dim}->{step.tgt_dim}]>")
    return ir.Operation.create(f"sdy.{step.kind}", results=[operand.type], operands=[operand],
                               attributes=attributes, loc=loc)


def verify(module: Module) -> None:
    """Fail as Shardy's pass does when its algorithm built an invalid collective
    (axes of a mesh axis split two incompatible ways, e.g. a size-6 axis as
    2x3 in one sharding and 3x2 in the other); the error is at the reshard.
    The collectives' checks run with the module's symbol uses, so the whole
    module is verified."""
    from sdy_dl.ir.loader import verify_module

    verify_module(module)


def prepare(reshard, to_input_mesh: bool, meshes: dict[str, Mesh],
            module: Module) -> CollectiveInserter:
    """The collective inserter of ``reshard``: from its input sharding to its
    target (``to_input_mesh``: the fully closed replicated sharding on the
    input's mesh)."""
    target = read_own(reshard)
    value = value_bypassing_barriers(reshard.operands[0])
    have = get_sharding(value)
    if have is None:
        have = TensorSharding.open_empty(target.mesh, target.rank)
    if to_input_mesh:
        target = fully_closed_like(have)
    if tuple(have.unreduced) != tuple(target.unreduced):
        raise op_error(module, reshard, "reshard-to-collectives: the input sharding's "
                       "unreduced axes differ from the reshard's (insert-explicit-reshards "
                       "makes them equal)")
    _, shape = tensor_info(value.type)
    if shape is None:
        raise op_error(module, reshard, "reshard-to-collectives: the operand is not a "
                       "statically shaped tensor")
    return CollectiveInserter(have, target, mesh_of(have, meshes), tuple(shape))


def replace(reshard, steps: list[Collective]) -> None:
    """Replace ``reshard`` by ``steps``, starting from the value its barriers start from."""
    from jaxlib.mlir import ir

    value = value_bypassing_barriers(reshard.operands[0])
    for step in steps:
        op = collective_op(step, value, reshard.location)
        ir.InsertionPoint(reshard).insert(op)
        value = op.results[0]
    reshard.results[0].replace_all_uses_with(value)
    reshard.erase()


def in_waves(converted: list):
    """``converted`` ((reshard, to_input_mesh) pairs) in waves: a reshard whose input
    comes from a reshard still to convert waits for the wave after it (Shardy's
    pattern reads the input as the earlier conversion left it).  The caller
    rewrites each wave before asking for the next."""
    pending = list(converted)
    while pending:
        waiting = {key(reshard) for reshard, _ in pending}
        wave = [item for item in pending if _source_key(item[0]) not in waiting]
        pending = [item for item in pending if _source_key(item[0]) in waiting]
        yield wave


def _source_key(reshard):
    """The identity of the op defining the value ``reshard``'s barriers start from."""
    owner = getattr(value_bypassing_barriers(reshard.operands[0]).owner, "operation", None)
    return None if owner is None else key(owner)


@register("reshard-to-collectives",
          "Replace every sdy.reshard by the collectives (all-slice, collective-permute, "
          "all-to-all, all-gather) that move its input sharding to its own.", FLAGS)
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        meshes = module_meshes(module)
        reshards = [mop for func in funcs(module)
                    for mop in ops_named(module, ("sdy.reshard",), top=func)]
        if not reshards:
            return module
        decided = STAGE.run(reshard_facts(reshards, meshes, options, module), options)
        for (r,) in sorted(decided["reject"])[:1]:
            raise op_error(module, reshards[r], "reshard-to-collectives: cannot reshard between "
                           "shardings of different ranks (a single-device mesh's sharding "
                           "has no dims)")
        to_input_mesh = {r for (r,) in decided["to_closed_input_mesh"]}
        converted = [(reshards[r], r in to_input_mesh) for r in sorted(
            to_input_mesh | {r for (r,) in decided["to_target"]})]
        for (r,) in sorted(decided["erase"]):
            reshards[r].results[0].replace_all_uses_with(reshards[r].operands[0])
            reshards[r].erase()

        def analyse(facts):
            return COLLECTIVE_INSERTER_STAGE.run(facts, options)

        for wave in in_waves(converted):
            inserters = [prepare(reshard, to_mesh, meshes, module) for reshard, to_mesh in wave]
            for (reshard, _), steps in zip(wave, insert_all(inserters, analyse)):
                replace(reshard, steps)
        verify(module)
        return module.invalidate()
