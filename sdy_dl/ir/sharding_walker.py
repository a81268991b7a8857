"""Shardy's sharding walker (``walkShardings``/``transformShardings``,
``transforms/common/sharding_walker.cc``): every place a sharding is stored,
in Shardy's visiting order."""

from __future__ import annotations

from collections.abc import Callable

from sdy_dl.ir.mlir_ops import module_ops
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import op_index
from sdy_dl.ir.sdy_attrs import per_value_attr, sharding_attr
from sdy_dl.ir.storage import SHARDING_ATTR, per_value_of, sharding_of, update_func_shardings
from sdy_dl.ir.traits import COLLECTIVE_OPS, COMPUTATION_OPS, OWN_SHARDING_OPS
from sdy_dl.sharding import TensorSharding

ShardingFn = Callable[[TensorSharding], TensorSharding]


def transform_shardings(module: Module, fn: ShardingFn, any_order: bool = False) -> None:
    """Apply ``fn`` (the same answer for equal shardings) to every stored sharding,
    visiting ops in pre-order exactly where Shardy's sharding walker looks, and
    store changed results.  Attributes are uniqued, so ``fn`` runs once per
    distinct attribute.  ``any_order``: ``fn`` is a plain function of the
    sharding (it keeps no state), so ops are visited in whichever order the
    op index has read already."""
    per_value = _Memo(lambda attr: _new_per_value(attr, fn))
    own = _Memo(lambda attr: _new_own(attr, fn))
    index = op_index(module)
    visits = _VISITS
    for top in module_ops(module):
        ops, names = index.walk_read(top) if any_order else index.walk(top)
        for mop, name in zip(ops, names):
            if name in visits:
                visits[name](mop, fn, per_value, own)
            else:   # (most ops: their ``sdy.sharding`` only)
                _rewrite(mop, SHARDING_ATTR, per_value)


def any_sharding(module: Module, test: Callable[[TensorSharding], bool]) -> bool:
    """Whether ``test`` holds for some stored sharding (the walker's places, read
    only, in whichever order the op index has)."""
    found: list = []

    def visit(sharding: TensorSharding) -> TensorSharding:
        if test(sharding):
            found.append(sharding)
        return sharding
    transform_shardings(module, visit, any_order=True)
    return bool(found)


class _Memo(dict):
    """``convert(attr)`` (the new attribute, None when unchanged) per attribute."""

    def __init__(self, convert: Callable):
        super().__init__()
        self.convert = convert

    def __missing__(self, attr):
        new = self[attr] = self.convert(attr)
        return new


def _new_per_value(attr, fn: ShardingFn):
    current = per_value_of(attr)
    if not current:
        return None
    new = [fn(s) for s in current]
    return None if new == list(current) else per_value_attr(tuple(new))


def _new_own(attr, fn: ShardingFn):
    s = sharding_of(attr)
    new = fn(s)
    return None if new == s else sharding_attr(new)


def _rewrite(mop, name: str, memo: _Memo) -> None:
    """Store ``memo``'s new attribute for attribute ``name`` of ``mop`` (if any)."""
    attrs = mop.attributes   # (an Operation's, or an OpView's)
    attr = attrs.get(name)
    if attr is not None:
        new = memo[attr]
        if new is not None:
            attrs[name] = new


def _function(mop, fn: ShardingFn, per_value: _Memo, own: _Memo) -> None:
    """A function's shardings: its arguments' and results' ``sdy.sharding``."""
    for kind in ("arg_attrs", "res_attrs"):
        update_func_shardings(mop, kind, lambda _, s: fn(s))


def _computation(mop, fn: ShardingFn, per_value: _Memo, own: _Memo) -> None:
    """A manual or named computation's: its ``in_shardings`` and ``out_shardings``."""
    _rewrite(mop, "in_shardings", per_value)
    _rewrite(mop, "out_shardings", per_value)


def _own(attr: str):
    """The visit of an op whose single result's sharding is its attribute ``attr``
    (an op with more results keeps them in its ``sdy.sharding``)."""
    def visit(mop, fn: ShardingFn, per_value: _Memo, own: _Memo) -> None:
        if len(mop.results) == 1:
            _rewrite(mop, attr, own)
        else:
            _rewrite(mop, SHARDING_ATTR, per_value)
    return visit


#: How the walk visits, by name, an op whose shardings are not only its
#: ``sdy.sharding`` (the walk's ops are Operations: asked by name once).
_VISITS = {"func.func": _function, **dict.fromkeys(COMPUTATION_OPS, _computation),
           **dict.fromkeys(OWN_SHARDING_OPS, _own("sharding")),
           **dict.fromkeys(COLLECTIVE_OPS, _own("out_sharding"))}
