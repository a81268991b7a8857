"""Shardy's sharding walker (``walkShardings``/``transformShardings``,
``transforms/common/sharding_walker.cc``): every place a sharding is stored,
in Shardy's visiting order."""

from __future__ import annotations

from collections.abc import Callable

from sdy_dl.ir.mlir_ops import walk_pre
from sdy_dl.ir.model import Module
from sdy_dl.ir.storage import (SHARDING_ATTR, read_own, read_per_value, update_func_shardings,
                               write_own, write_per_value)
from sdy_dl.ir.traits import COLLECTIVE_OPS, COMPUTATION_OPS, DATA_FLOW_OPS, OWN_SHARDING_OPS
from sdy_dl.sharding import TensorSharding

ShardingFn = Callable[[TensorSharding], TensorSharding]


def transform_shardings(module: Module, fn: ShardingFn) -> None:
    """Apply ``fn`` to every stored sharding, visiting ops in pre-order
    exactly where Shardy's sharding walker looks, and store changed results."""
    for mop in walk_pre(module.mlir.operation)[1:]:
        _transform_op_shardings(mop, fn)


def _map_per_value(mop, name: str, fn: ShardingFn) -> None:
    current = read_per_value(mop, name)
    if not current:
        return
    new = [fn(s) for s in current]
    if new != current:
        write_per_value(mop, name, new)


def _transform_op_shardings(mop, fn: ShardingFn) -> None:
    name = mop.name
    if name == "func.func":
        for kind in ("arg_attrs", "res_attrs"):
            update_func_shardings(mop, kind, lambda _, s: fn(s))
        return
    if name in COMPUTATION_OPS:
        _map_per_value(mop, "in_shardings", fn)
        _map_per_value(mop, "out_shardings", fn)
        return
    if name in DATA_FLOW_OPS:
        _map_per_value(mop, SHARDING_ATTR, fn)
        return
    if len(mop.results) == 1:
        attr = ("sharding" if name in OWN_SHARDING_OPS
                else "out_sharding" if name in COLLECTIVE_OPS else None)
        if attr is not None:
            s = read_own(mop, attr)
            if s is not None:
                new = fn(s)
                if new != s:
                    write_own(mop, new, attr)
            return
    _map_per_value(mop, SHARDING_ATTR, fn)
