"""Shared helpers of the export passes (semantics §9.2, §9.3).

The export passes rewrite the jaxlib MLIR module held by the model, like the
import passes (and with their helpers from :mod:`import_common`); this module
adds what only the export side needs: the module's functions, Shardy's
"main" function and the data-flow-op edge-owner accessors
(``ShardableDataFlowOpInterface``) used when edges are sunk or owner
shardings are made divisible.
"""

from __future__ import annotations

from sdy_dl.ir.model import Module
from sdy_dl.passes.import_common import (COMPUTATION_OPS, SHARDING_ATTR, add_free_axes,
                                         erase_manual_axes, manual_axes, module_ops,
                                         read_per_value, symbol_name, write_per_value)
from sdy_dl.sharding import TensorSharding


def funcs(module: Module) -> list:
    """The top-level ``func.func`` ops, in module order."""
    return [op for op in module_ops(module) if op.name == "func.func"]


def main_func(module: Module):
    """Shardy's ``getMainFuncOrDie(useSingleFunc=true)``: the only function,
    else the one named ``main`` (None when there is neither)."""
    fs = funcs(module)
    if len(fs) == 1:
        return fs[0]
    return next((f for f in fs if symbol_name(f) == "main"), None)


def block_arg_owners(op) -> list:
    """``getBlockArgumentEdgeOwners``: the body arguments of a computation op."""
    if op.name in COMPUTATION_OPS:
        return list(op.regions[0].blocks[0].arguments)
    return []


def result_owners(op) -> list:
    """``getOpResultEdgeOwners``: every result of a data-flow op."""
    return list(op.results)


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
