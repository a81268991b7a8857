"""``add-data-flow-edges`` (Shardy's ``sdy-add-data-flow-edges``, semantics §8.1).

For every data-flow op (visited in post-order), first its block-argument edge
owners (``named_computation``/``manual_computation`` body arguments), then
its result owners (``while``, ``case``, ``optimization_barrier``, named and
manual computations): each static-shaped owner gets
``%e = sdy.data_flow_edge %owner [sharding=<owner's sharding>]`` right after
it (at the start of the body for a block argument), and every other use of
the owner is redirected to ``%e``.  Owners are handled last to first, so the
edges appear in owner order.  The sharding copied is Shardy's "sharding of
the owner": the op's ``sdy.sharding`` entry, the computation's
``out_shardings`` entry, or its ``in_shardings`` entry (manual axes stripped
for a ``manual_computation``).
"""

from __future__ import annotations

from sdy_dl.ir.mlir_ops import is_static_tensor
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import op_names, ops_named
from sdy_dl.ir.sdy_attrs import sharding_attr
from sdy_dl.ir.traits import COMPUTATION_OPS, DATA_FLOW_OPS
from sdy_dl.ir.value_sharding import block_arg_owners, get_edge_owner_sharding, result_owners
from sdy_dl.passes import PassOptions, register


def insert_edge(mop, owner, after_op=None, block=None):
    """Create the edge of ``owner`` (after ``after_op``, or at the start of
    ``block``) and redirect the owner's other uses to it."""
    from jaxlib.mlir import ir

    sharding = get_edge_owner_sharding(mop, owner)
    attrs = {} if sharding is None else {"sharding": sharding_attr(sharding)}
    with ir.Location.unknown():
        edge = ir.Operation.create("sdy.data_flow_edge", results=[owner.type], operands=[owner],
                                   attributes=attrs)
    if after_op is not None:
        ir.InsertionPoint.after(after_op).insert(edge)
    else:
        first = next(iter(block.operations), None)
        (ir.InsertionPoint(first.operation) if first is not None
         else ir.InsertionPoint(block)).insert(edge)
    owner.replace_all_uses_except(edge.results[0], edge)
    return edge


def add_edges(mop) -> None:
    block = mop.regions[0].blocks[0] if mop.name in COMPUTATION_OPS else None
    for owner in reversed(block_arg_owners(mop)):
        if is_static_tensor(owner.type):
            insert_edge(mop, owner, block=block)
    for owner in reversed(result_owners(mop)):
        if is_static_tensor(owner.type):
            insert_edge(mop, owner, after_op=mop)


@register("add-data-flow-edges", "Insert sdy.data_flow_edge after every data-flow edge owner.")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    if not op_names(module) & DATA_FLOW_OPS:
        return module
    with mlir_context():
        for mop in ops_named(module, DATA_FLOW_OPS, post=True):
            add_edges(mop)
        return module.invalidate()
