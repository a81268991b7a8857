"""``sink-data-flow-edges`` (Shardy's ``sdy-sink-data-flow-edges``, §8.1, §9.3).

Per function, ops in pre-order.  A data-flow op (while, case,
optimization_barrier, named/manual computation) takes the shardings of the
edges of its owners, first its block-argument owners then its result
owners: when at least one edge of the group has a sharding (on a mesh
symbol), the others get a fully open sharding on that mesh and the op's
setter stores all of them (for a manual computation the manual prefix of
the current ``in_shardings`` is kept); otherwise the owner attribute is left
alone.  Every ``sdy.data_flow_edge`` is then replaced by its input.
"""

from __future__ import annotations

from sdy_dl.ir.mlir_ops import funcs, tensor_rank
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import op_names, ops_named
from sdy_dl.ir.storage import read_own
from sdy_dl.ir.traits import DATA_FLOW_OPS
from sdy_dl.ir.value_sharding import (block_arg_owners, data_flow_edge_user, result_owners,
                                      set_block_arg_owner_shardings, set_result_owner_shardings)
from sdy_dl.passes import PassOptions, register
from sdy_dl.passes.options import Option
from sdy_dl.sharding import TensorSharding


def shardings_from_edges(owners: list) -> list[TensorSharding]:
    """Shardy's ``getShardingsFromDataFlowEdges``: [] when no edge has a sharding."""
    shardings, mesh = [], None
    for owner in owners:
        edge = data_flow_edge_user(owner)
        s = read_own(edge) if edge is not None else None
        if s is not None and mesh is None and s.mesh_name:
            mesh = s.mesh_name
        shardings.append(s)
    if mesh is None:
        return []
    return [s if s is not None else TensorSharding.open_empty(mesh, tensor_rank(o.type))
            for s, o in zip(shardings, owners)]


#: The ops sink reads: edges and their owners.
SINKS = DATA_FLOW_OPS | {"sdy.data_flow_edge"}


def sink(module: Module, func) -> None:
    for op in ops_named(module, SINKS, top=func):
        if op.name == "sdy.data_flow_edge":
            op.results[0].replace_all_uses_with(op.operands[0])
            op.erase()
            continue
        arg_shardings = shardings_from_edges(block_arg_owners(op))
        if arg_shardings:
            set_block_arg_owner_shardings(op, arg_shardings)
        res_shardings = shardings_from_edges(result_owners(op))
        if res_shardings:
            set_result_owner_shardings(op, res_shardings)


SINK_DEBUG_SHARDING_ORIGINS = Option("sink-debug-sharding-origins", "bool", False,
                                     "Sink the sharding origins onto the owners.",
                                     implemented=False)
SINK_DEBUG_PROPAGATION_EDGE_SHARDING = Option("sink-debug-propagation-edge-sharding", "bool",
                                              False, "Sink the propagation edges onto the owners.",
                                              implemented=False)


@register("sink-data-flow-edges",
          "Move data-flow-edge shardings onto their owners and remove the edges.",
          (SINK_DEBUG_SHARDING_ORIGINS, SINK_DEBUG_PROPAGATION_EDGE_SHARDING))
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    if not op_names(module) & SINKS:
        return module
    with mlir_context():
        for func in funcs(module):
            sink(module, func)
        return module.invalidate()
