"""``insert-explicit-reshards`` (Shardy's ``sdy-insert-explicit-reshards`` with its
default ``enable-full-version=false``, as the export pipeline runs it), **the
function-call part only** (semantics §9.3 step 7).

Per function, ops in post-order.  The non-full version reshards only the
operands of ``func.call`` ops (plus ``mhlo.ragged_dot``, concatenates whose
operands are sharded unlike the result, and unreduced-axes collectives, which
sdy-dl does not implement: modules containing them are rejected): the
target of each operand is the callee's argument sharding
(``getFuncArgShardings``; when the callee has none, fully closed shardings
on the first non-maximal mesh of the operands, and nothing when they have
none either).  An operand whose sharding is not equivalent to its target
gets ``sdy.reshard`` to the target (fully closed like the operand when the
target is missing), inserted right after the operand's definition (at the
start of the block for a block argument), and the call reads it.
"""

from __future__ import annotations

from sdy_dl.ir.meshes import mesh_of, module_meshes
from sdy_dl.ir.mlir_ops import (funcs, insert_sharding_op_after, op_error, rebuild, tensor_rank,
                                walk_post)
from sdy_dl.ir.model import Module
from sdy_dl.ir.value_sharding import get_sharding
from sdy_dl.passes import PassOptions, register
from sdy_dl.passes.call_graph import callee_name, func_table
from sdy_dl.passes.export.insert_func_call_reshards import fully_closed_like, is_equivalent
from sdy_dl.passes.import_.import_func_calls import func_arg_shardings
from sdy_dl.sharding import DimSharding, TensorSharding

UNSUPPORTED = frozenset({"mhlo.ragged_dot"})


def call_targets(call, func, meshes) -> list[TensorSharding] | None:
    targets = func_arg_shardings(func, meshes)
    if targets is not None:
        return targets
    for operand in call.operands:
        s = get_sharding(operand)
        mesh = None if s is None else mesh_of(s, meshes)
        if mesh is not None and not mesh.is_maximal:
            return [TensorSharding(s.mesh, tuple(DimSharding((), True)
                                                 for _ in range(tensor_rank(o.type))))
                    for o in call.operands]
    return None


def reshard_operands(call, func, meshes) -> bool:
    targets = call_targets(call, func, meshes)
    if targets is None:
        return False
    changed = False
    for i, target in enumerate(targets):
        operand = call.operands[i]
        have = get_sharding(operand)
        if have is None and target is None or is_equivalent(target, have):
            continue
        sharding = target if target is not None else fully_closed_like(have)
        reshard = insert_sharding_op_after("sdy.reshard", operand, sharding, call.location)
        call.operands[i] = reshard.results[0]
        changed = True
    return changed


@register("insert-explicit-reshards",
          "Reshard call operands to the callee's argument shardings (non-full version, calls only).")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        meshes = module_meshes(module)
        table = func_table(module)
        changed = False
        for func in funcs(module):
            for mop in walk_post(func)[:-1]:
                if mop.name in UNSUPPORTED:
                    raise op_error(module, mop, f"insert-explicit-reshards: {mop.name} "
                                   "is not supported")
                if mop.name == "func.call":
                    changed |= reshard_operands(mop, table[callee_name(mop)], meshes)
        return rebuild(module) if changed else module
