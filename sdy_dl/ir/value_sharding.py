"""A value's sharding as Shardy sees it: ``getSharding``/``setSharding`` (semantics §1.5, §8.1, §8.6).

On raw jaxlib MLIR values.  While a data-flow edge exists, the sharding of
any of its targets is the edge op's own (``DataFlowEdgeOp::lookup``); the
block arguments of a manual computation are shown in their local view
(manual axes erased, added back on write); a collective's result sharding
is its ``out_sharding``.  Where each sharding is stored is
:mod:`sdy_dl.ir.storage`.  Also the edge owners of a data-flow op
(``ShardableDataFlowOpInterface``) and the shardings of a function's
arguments or results as Shardy's ``getFuncArgShardings`` reads them.
"""

from __future__ import annotations

from sdy_dl.ir.manual_axes import add_free_axes, erase_manual_axes, manual_axes
from sdy_dl.ir.meshes import mesh_of
from sdy_dl.ir.mlir_ops import (is_block_arg, owning_op, tensor_rank, users, value_index,
                                value_place)
from sdy_dl.ir.storage import (SHARDING_ATTR, read_func_attr, read_per_value, read_stored,
                               write_per_value, write_stored)
from sdy_dl.ir.traits import COMPUTATION_OPS, DATA_FLOW_OPS
from sdy_dl.sharding import TensorSharding


def data_flow_edge_user(owner):
    """The ``sdy.data_flow_edge`` that is the single user of ``owner``, if any."""
    if owner is None:
        return None
    us = users(owner)
    if len(us) == 1 and us[0].name == "sdy.data_flow_edge":
        return us[0]
    return None


def lookup_data_flow_edge(value):
    """``DataFlowEdgeOp::lookup(target)``."""
    op, index, block_arg = value_place(value)
    if op.name in DATA_FLOW_OPS:
        return data_flow_edge_user(_edge_owner(op, index, block_arg, value))
    return None


def _edge_owner(op, index: int, block_arg: bool, value):
    """``ShardableDataFlowOpInterface::getEdgeOwnerFromTarget`` for the target
    ``value`` at its place."""
    return op.results[index] if block_arg and op.name == "stablehlo.while" else value


def _shardable_place(value) -> tuple | None:
    """(op, index, whether a block argument) of :func:`shardable_value`'s value."""
    op, index, block_arg = value_place(value)
    if op.name in DATA_FLOW_OPS:
        edge = data_flow_edge_user(_edge_owner(op, index, block_arg, value))
        if edge is not None:
            return edge, 0, False
        return op, index, block_arg and op.name != "stablehlo.while"
    if not block_arg or op.name == "func.func":
        return op, index, block_arg
    return None


def shardable_value(value):
    """Shardy's ``getShardableValue``: where the sharding of ``value`` lives,
    as a value (None when it cannot hold one)."""
    place = _shardable_place(value)
    if place is None:
        return None
    op, index, block_arg = place
    return value if block_arg else op.results[index]


def get_sharding(value) -> TensorSharding | None:
    """Shardy's ``getSharding(value)``."""
    place = _shardable_place(value)
    return None if place is None else local_sharding(*place)


def get_edge_owner_sharding(op, owner) -> TensorSharding | None:
    """The sharding stored for ``owner`` (a result or body argument of ``op``), a
    manual computation's body argument in its local view."""
    return local_sharding(op, value_index(owner), is_block_arg(owner))


def local_sharding(op, index: int, block_arg: bool) -> TensorSharding | None:
    """The sharding stored for result (``block_arg``: body argument) ``index`` of the
    raw op ``op``, a manual computation's body argument in its local view (the
    body's values hold no manual axis)."""
    sharding = read_stored(op, index, block_arg)
    if block_arg and sharding is not None and op.name == "sdy.manual_computation":
        return erase_manual_axes(sharding, manual_axes(op))
    return sharding


def set_sharding(value, sharding: TensorSharding) -> None:
    """Shardy's ``setSharding(value, sharding)``."""
    value = shardable_value(value)
    if value is None:
        return
    op = owning_op(value)
    idx = value_index(value)
    if is_block_arg(value):
        if op.name == "sdy.manual_computation":
            current = read_per_value(op, "in_shardings")
            if current:
                sharding = add_free_axes(current[idx], sharding, manual_axes(op))
        write_stored(op, idx, True, (tensor_rank(a.type) for a in value.owner.arguments), sharding)
    else:
        write_stored(op, idx, False, (tensor_rank(r.type) for r in op.results), sharding)


def func_shardings(func, kind: str, types: list, meshes) -> list[TensorSharding] | None:
    """Shardy's ``getFuncArgShardings``/``getFuncResultShardings`` (``kind``: arg_attrs or
    res_attrs): None unless some entry is on a non-maximal mesh; missing entries
    become fully open shardings on the first such mesh."""
    shardings = [read_func_attr(func, kind, i) for i in range(len(types))]
    mesh_ref = None
    for s in shardings:
        mesh = None if s is None else mesh_of(s, meshes)
        if mesh is not None and not mesh.is_maximal:
            mesh_ref = s.mesh
            break
    if mesh_ref is None:
        return None
    return [s if s is not None else TensorSharding.open_empty(mesh_ref, tensor_rank(t))
            for s, t in zip(shardings, types)]


# -- edge owners of data-flow ops (ShardableDataFlowOpInterface) -------------------------

def block_arg_owners(op) -> list:
    """``getBlockArgumentEdgeOwners``: the body arguments of a computation op."""
    if op.name in COMPUTATION_OPS:
        return list(op.regions[0].blocks[0].arguments)
    return []


def result_owners(op) -> list:
    """``getOpResultEdgeOwners``: every result of a data-flow op."""
    return list(op.results)


def edge_sources(op, owner) -> list[tuple]:
    """``getEdgeSources``: the (op, operand index) uses feeding edge ``owner`` of
    data-flow op ``op``: for a while result the operand and the body's returned
    value, for a case result each branch's returned value, for an optimization
    barrier result the operand, for a computation result the body's returned
    value and for a computation block argument the operand."""
    if is_block_arg(owner):
        return [(op, value_index(owner))]
    index = value_index(owner)
    if op.name == "stablehlo.while":
        return [(op, index), (_terminator(op.regions[1]), index)]
    if op.name == "stablehlo.optimization_barrier":
        return [(op, index)]
    return [(_terminator(region), index) for region in op.regions]


def _terminator(region):
    block = region.blocks[0]
    return block.operations[len(block.operations) - 1].operation


def get_block_arg_owner_shardings(op) -> list[TensorSharding]:
    """``getBlockArgumentEdgeOwnerShardings`` (manual axes erased for a manual computation)."""
    if op.name not in COMPUTATION_OPS:
        return []
    per = read_per_value(op, "in_shardings") or []
    if op.name == "sdy.manual_computation":
        axes = manual_axes(op)
        return [erase_manual_axes(s, axes) for s in per]
    return per


def set_block_arg_owner_shardings(op, shardings: list[TensorSharding]) -> None:
    """``setBlockArgumentEdgeOwnerShardings`` (a manual computation keeps the
    manual prefix of its current ``in_shardings``)."""
    if op.name == "sdy.manual_computation":
        axes = manual_axes(op)
        outer = read_per_value(op, "in_shardings") or []
        shardings = [add_free_axes(o, s, axes) for o, s in zip(outer, shardings)]
    write_per_value(op, "in_shardings", shardings)


def get_result_owner_shardings(op) -> list[TensorSharding]:
    """``getOpResultEdgeOwnerShardings``."""
    name = "out_shardings" if op.name in COMPUTATION_OPS else SHARDING_ATTR
    return read_per_value(op, name) or []


def set_result_owner_shardings(op, shardings: list[TensorSharding]) -> None:
    """``setOpResultEdgeOwnerShardings``."""
    name = "out_shardings" if op.name in COMPUTATION_OPS else SHARDING_ATTR
    write_per_value(op, name, shardings)
