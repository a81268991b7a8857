"""Where a value's sharding lives in the module, and how to read and write it.

Semantics document §1.5.  This is raw storage: it knows attributes, not
propagation.  (Data-flow-edge shadowing and manual-axis stripping are
propagation semantics and live with the passes.)

| value                                   | attribute                                     |
|-----------------------------------------|-----------------------------------------------|
| func block argument                     | ``arg_attrs[i]["sdy.sharding"]`` of the func  |
| func result (not a value)               | ``res_attrs[i]["sdy.sharding"]``              |
| sharding_constraint / reshard / data_flow_edge result | the op's ``sharding``           |
| manual / named computation block arg    | ``in_shardings[i]``                           |
| manual / named computation result       | ``out_shardings[i]``                          |
| result of any other op                  | ``sdy.sharding`` (``#sdy.sharding_per_value``)|
| block arg of any other region op        | not shardable                                 |
"""

from __future__ import annotations

from sdy_dl.ir.context import mlir_context
from sdy_dl.ir.model import Module, Op, Value
from sdy_dl.sharding import (TensorSharding, parse_sharding_per_value,
                             parse_tensor_sharding)

#: Ops whose (single) result sharding is the op's own ``sharding`` attribute.
OWN_SHARDING_OPS = frozenset({"sdy.sharding_constraint", "sdy.reshard", "sdy.data_flow_edge"})
#: Ops whose block arguments and results keep shardings in in_/out_shardings.
COMPUTATION_OPS = frozenset({"sdy.manual_computation", "sdy.named_computation"})
#: Ops owning data-flow edges (Shardy's ShardableDataFlowOpInterface, §8.1).
DATA_FLOW_OPS = frozenset({"stablehlo.while", "stablehlo.case", "stablehlo.optimization_barrier",
                           "sdy.named_computation", "sdy.manual_computation"})
SHARDING_ATTR = "sdy.sharding"


def is_shardable(value: Value) -> bool:
    """Whether the value has a place to hold a sharding."""
    if not value.is_block_arg:
        return True
    owner = value.block.region.owner
    return owner.name == "func.func" or owner.name in COMPUTATION_OPS


def get_sharding(value: Value) -> TensorSharding | None:
    """The sharding stored for ``value`` (None if it has none or cannot hold one)."""
    if value.is_block_arg:
        owner = value.block.region.owner
        if owner.name == "func.func":
            return _dict_array_entry(owner, "arg_attrs", value.index)
        if owner.name in COMPUTATION_OPS:
            return _per_value_entry(owner, "in_shardings", value.index)
        return None
    op = value.defining_op
    if op.name in OWN_SHARDING_OPS:
        text = op.attr_text("sharding")
        return None if text is None else parse_tensor_sharding(text)
    if op.name in COMPUTATION_OPS:
        return _per_value_entry(op, "out_shardings", value.index)
    return _per_value_entry(op, SHARDING_ATTR, value.index)


def get_result_sharding(func: Op, index: int) -> TensorSharding | None:
    """The ``sdy.sharding`` result attribute of function ``func``."""
    return _dict_array_entry(func, "res_attrs", index)


def set_sharding(module: Module, value: Value, sharding: TensorSharding) -> None:
    """Store ``sharding`` for ``value`` (which must be shardable)."""
    if value.is_block_arg:
        owner = value.block.region.owner
        if owner.name == "func.func":
            _set_dict_array_entry(owner, "arg_attrs", value.index, len(value.block.args), sharding)
        elif owner.name in COMPUTATION_OPS:
            _set_per_value_entry(module, owner, "in_shardings", value.index,
                                 [a for a in value.block.args], sharding)
        else:
            raise ValueError(f"{value.name} cannot hold a sharding")
        return
    op = value.defining_op
    if op.name in OWN_SHARDING_OPS:
        _set_attr(op, "sharding", sharding.to_text())
    elif op.name in COMPUTATION_OPS:
        _set_per_value_entry(module, op, "out_shardings", value.index, op.results, sharding)
    else:
        _set_per_value_entry(module, op, SHARDING_ATTR, value.index, op.results, sharding)


def set_result_sharding(func: Op, index: int, sharding: TensorSharding) -> None:
    """Store the ``sdy.sharding`` result attribute of function ``func``."""
    n = len(func.mlir.attributes["function_type"].value.results)
    _set_dict_array_entry(func, "res_attrs", index, n, sharding)


# -- attribute plumbing -----------------------------------------------------

def _parse_attr(text: str):
    from jaxlib.mlir import ir

    return ir.Attribute.parse(text, context=mlir_context())


def _set_attr(op: Op, name: str, text: str) -> None:
    op.mlir.attributes[name] = _parse_attr(text)


def _dict_array_entry(op: Op, attr: str, index: int) -> TensorSharding | None:
    from jaxlib.mlir import ir

    arr = op.attr(attr)
    if arr is None:
        return None
    entry = ir.DictAttr(ir.ArrayAttr(arr)[index])
    return parse_tensor_sharding(str(entry[SHARDING_ATTR])) if SHARDING_ATTR in entry else None


def _set_dict_array_entry(op: Op, attr: str, index: int, count: int,
                          sharding: TensorSharding) -> None:
    from jaxlib.mlir import ir

    arr = op.attr(attr)
    entries = ([ir.DictAttr(a) for a in ir.ArrayAttr(arr)] if arr is not None
               else [ir.DictAttr.get({}, context=mlir_context()) for _ in range(count)])
    items = {named.name: named.attr for named in entries[index]}
    items[SHARDING_ATTR] = _parse_attr(sharding.to_text())
    entries[index] = ir.DictAttr.get(items, context=mlir_context())
    op.mlir.attributes[attr] = ir.ArrayAttr.get(entries, context=mlir_context())


def _per_value_entry(op: Op, attr: str, index: int) -> TensorSharding | None:
    text = op.attr_text(attr)
    if text is None:
        return None
    return parse_sharding_per_value(text)[index]


def _set_per_value_entry(module: Module, op: Op, attr: str, index: int,
                         values: list[Value], sharding: TensorSharding) -> None:
    """Write entry ``index``; a first write fills the others with open-empty shardings."""
    text = op.attr_text(attr)
    if text is None:
        current = [TensorSharding.open_empty(sharding.mesh, v.rank or 0) for v in values]
    else:
        current = list(parse_sharding_per_value(text))
    current[index] = sharding
    inner = ", ".join(s.to_inner_text() for s in current)
    _set_attr(op, attr, f"#sdy.sharding_per_value<[{inner}]>")
