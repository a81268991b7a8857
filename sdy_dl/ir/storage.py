"""Where a value's sharding is stored in the module, and how to read and write it.

Semantics document §1.5.  This is the one table of storage places; it knows
attributes, not propagation.  :func:`read_stored`/:func:`write_stored` read
and write the place of result or block argument ``index`` of a raw MLIR op;
:func:`stored_sharding`/:func:`store_shardings` do the same for values of the
model.  Shardy's ``getSharding``/``setSharding`` (which look through
data-flow edges and show a manual computation's body its local view) are
:mod:`sdy_dl.ir.value_sharding`, built on this table.

| value                                   | attribute                                     |
|-----------------------------------------|-----------------------------------------------|
| func block argument                     | ``arg_attrs[i]["sdy.sharding"]`` of the func  |
| func result (not a value)               | ``res_attrs[i]["sdy.sharding"]``              |
| sharding_constraint / reshard / data_flow_edge result | the op's ``sharding``           |
| collective (all_gather, ...) result     | the op's ``out_sharding``                     |
| manual / named computation block arg    | ``in_shardings[i]``                           |
| manual / named computation result       | ``out_shardings[i]``                          |
| result of any other op                  | ``sdy.sharding`` (``#sdy.sharding_per_value``)|
| block arg of any other region op        | not shardable                                 |
"""

from __future__ import annotations

import functools

from jaxlib.mlir import ir

from sdy_dl.ir.context import mlir_context
from sdy_dl.ir.model import Module, Op, Value
from sdy_dl.ir.traits import COLLECTIVE_OPS, COMPUTATION_OPS, OWN_SHARDING_OPS
from sdy_dl.ir.sdy_attrs import (per_value_attr, per_value_of_attr, sharding_attr,
                                 sharding_of_attr)
from sdy_dl.sharding import TensorSharding

SHARDING_ATTR = "sdy.sharding"
#: The ops whose results are not stored in a ``sdy.sharding`` per-value attribute.
_NOT_PER_VALUE = frozenset(OWN_SHARDING_OPS | COLLECTIVE_OPS | COMPUTATION_OPS)


def results_attr(name: str) -> str:
    """The attribute holding the results' shardings of an op named ``name``
    (not a collective): ``sharding`` of an op with its own sharding (a single
    ``#sdy.sharding``), ``out_shardings`` of a computation, else ``sdy.sharding``."""
    return ("sharding" if name in OWN_SHARDING_OPS else
            "out_shardings" if name in COMPUTATION_OPS else SHARDING_ATTR)


def read_stored(mop, index: int, block_arg: bool) -> TensorSharding | None:
    """The sharding stored for result (or, ``block_arg``, body argument) ``index``
    of the raw MLIR op ``mop`` (None when there is none or no place for one)."""
    name = mop.name
    if block_arg:
        if name == "func.func":
            return read_func_attr(mop, "arg_attrs", index)
        if name in COMPUTATION_OPS:
            return _entry(read_per_value(mop, "in_shardings"), index)
        return None
    if name in OWN_SHARDING_OPS:
        return read_own(mop)
    if name in COLLECTIVE_OPS:
        return read_own(mop, "out_sharding")
    return _entry(read_per_value(mop, results_attr(name)), index)


def write_stored(mop, index: int, block_arg: bool, ranks, sharding: TensorSharding) -> None:
    """Store ``sharding`` for result (``block_arg``: body argument) ``index`` of ``mop``;
    ``ranks`` (of all results, or of all body arguments; any iterable) give the other
    entries of a first per-value write their open-empty shardings."""
    write_stored_entries(mop, block_arg, ranks, {index: sharding})


def write_stored_entries(mop, block_arg: bool, ranks, shardings: dict[int, TensorSharding]) -> None:
    """:func:`write_stored` for several results (or body arguments) of ``mop`` at
    once, ``{index: sharding}``: a per-value attribute is written once for all."""
    name = mop.name
    if block_arg:
        if name == "func.func":
            write_func_attrs(mop, "arg_attrs", shardings)
        elif name in COMPUTATION_OPS:
            write_per_value_entries(mop, "in_shardings", ranks, shardings)
        else:
            raise ValueError(f"a block argument of {name} cannot hold a sharding")
    elif name in OWN_SHARDING_OPS or name in COLLECTIVE_OPS:
        attr = "sharding" if name in OWN_SHARDING_OPS else "out_sharding"
        for sharding in shardings.values():
            write_own(mop, sharding, attr)
    else:
        write_per_value_entries(mop, results_attr(name), ranks, shardings)


def is_shardable(value: Value) -> bool:
    """Whether the value has a place to hold a sharding."""
    if not value.is_block_arg:
        return True
    owner = value.block.region.owner
    return owner.name == "func.func" or owner.name in COMPUTATION_OPS


def stored_sharding(value: Value) -> TensorSharding | None:
    """The sharding stored for ``value`` (None if it has none or cannot hold one)."""
    if value.is_block_arg:
        return read_stored(value.block.region.owner.mlir, value.index, True)
    return read_stored(value.defining_op.mlir, value.index, False)


def stored_result_sharding(func: Op, index: int) -> TensorSharding | None:
    """The ``sdy.sharding`` result attribute of function ``func``."""
    return read_func_attr(func.mlir, "res_attrs", index)


def store_shardings(module: Module, updates) -> None:
    """Store the shardings of ``updates`` (``(value, sharding)``, each value shardable
    and at most once), with one attribute write per op whose results or body
    arguments change (a func's arguments count as one op's)."""
    # (owner oid, whether block arguments) -> (owner, its results or block arguments, changes)
    by_owner: dict[tuple[int, bool], tuple[Op, list[Value], dict]] = {}
    # (the only result of an op whose per-value attribute holds it: the whole
    # attribute is written, as ``write_per_value_entries`` writes it)
    single = []
    for value, sharding in updates:
        definer = value.defining_op
        if definer is not None and len(definer.results) == 1 and definer.name not in _NOT_PER_VALUE:
            single.append((definer.mlir, sharding))
            continue
        block_arg = definer is None
        owner = value.block.region.owner if block_arg else definer
        entry = by_owner.get((owner.oid, block_arg))
        if entry is None:
            entry = by_owner[(owner.oid, block_arg)] = (
                owner, value.block.args if block_arg else owner.results, {})
        entry[2][value.index] = sharding
    for (_, block_arg), (owner, values, shardings) in by_owner.items():
        write_stored_entries(owner.mlir, block_arg, [v.rank or 0 for v in values], shardings)
    for mop, sharding in single:
        write_per_value(mop, SHARDING_ATTR, (sharding,))


# -- attribute plumbing on raw MLIR operations (also used by the import passes) --

@functools.lru_cache(maxsize=1 << 16)
def parse_attr(text: str):
    """An MLIR attribute parsed in sdy-dl's (process-wide) context; attributes are
    uniqued and immortal in their context, so equal texts share one parse."""
    return ir.Attribute.parse(text, context=mlir_context())


def attr_text(mop, name: str) -> str | None:
    """The printed attribute ``name`` of a raw MLIR op, or None."""
    attr = mop.operation.attributes.get(name)
    return None if attr is None else str(attr)


def _entry(shardings, index: int) -> TensorSharding | None:
    return None if not shardings else shardings[index]


#: A ``#sdy.sharding_per_value`` attribute as a tuple of shardings (once per
#: distinct attribute: attributes are uniqued in their context).
per_value_of = per_value_of_attr

#: A ``#sdy.sharding`` attribute as a sharding (once per distinct attribute).
sharding_of = sharding_of_attr


def read_per_value(mop, name: str) -> list[TensorSharding] | None:
    """A ``#sdy.sharding_per_value`` attribute as a list (None when absent)."""
    attr = mop.operation.attributes.get(name)
    return None if attr is None else list(per_value_of(attr))


def write_per_value(mop, name: str, shardings) -> None:
    """Store a list of shardings as a ``#sdy.sharding_per_value`` attribute."""
    mop.operation.attributes[name] = per_value_attr(tuple(shardings))


def write_per_value_entries(mop, name: str, ranks, shardings: dict[int, TensorSharding]) -> None:
    """Set the entries ``{index: sharding}``; a first write gives the other entries
    open-empty shardings of the given ranks on the same mesh (Shardy's setter).
    The attribute is read only when some entry keeps its sharding."""
    ranks = list(ranks)
    if len(shardings) == len(ranks):
        write_per_value(mop, name, [shardings[index] for index in range(len(ranks))])
        return
    current = read_per_value(mop, name)
    if not current:
        mesh = next(iter(shardings.values())).mesh
        current = [TensorSharding.open_empty(mesh, rank) for rank in ranks]
    for index, sharding in shardings.items():
        current[index] = sharding
    write_per_value(mop, name, current)


def read_own(mop, name: str = "sharding") -> TensorSharding | None:
    """An op's own ``#sdy.sharding`` attribute (constraints, reshards, edges)."""
    attr = mop.operation.attributes.get(name)
    return None if attr is None else sharding_of(attr)


def write_own(mop, sharding: TensorSharding, name: str = "sharding") -> None:
    mop.operation.attributes[name] = sharding_attr(sharding)


def function_type(func):
    """The ``FunctionType`` of a raw ``func.func``."""
    return ir.FunctionType(ir.TypeAttr(func.operation.attributes["function_type"]).value)


def func_arity(func) -> tuple[int, int]:
    """(number of arguments, number of results) of a raw ``func.func``."""
    ft = function_type(func)
    return len(ft.inputs), len(ft.results)


def func_attr_entries(func, kind: str) -> list:
    """Each argument's (``kind`` arg_attrs) or result's (res_attrs) attribute
    dictionary of a raw ``func.func`` ([] when it has none)."""
    return attr_entries(func.operation.attributes, kind)


def attr_entries(attrs, kind: str) -> list:
    """:func:`func_attr_entries` of a function whose attributes are ``attrs`` (its
    op's, or a dict of them)."""
    return list(ir.ArrayAttr(attrs[kind])) if kind in attrs else []


def attr_items(entry) -> dict:
    """An attribute dictionary's entries, name -> attribute."""
    return {named.name: named.attr for named in ir.DictAttr(entry)}


def read_func_attr(func, kind: str, index: int) -> TensorSharding | None:
    """The ``sdy.sharding`` of argument/result ``index`` (``kind``: arg_attrs or res_attrs)."""
    attrs = func.operation.attributes
    if kind not in attrs:
        return None
    entry = ir.DictAttr(ir.ArrayAttr(attrs[kind])[index])
    return sharding_of(entry[SHARDING_ATTR]) if SHARDING_ATTR in entry else None


def update_func_shardings(func, kind: str, update) -> None:
    """Replace the ``sdy.sharding`` of every argument (``kind`` arg_attrs) or result
    (res_attrs) that has one by ``update(index, sharding)``, with one write for all
    changes (a write rebuilds the whole attribute array)."""
    changes = {}
    for index, entry in enumerate(func_attr_entries(func, kind)):
        entry = ir.DictAttr(entry)
        if SHARDING_ATTR in entry:
            sharding = sharding_of(entry[SHARDING_ATTR])
            new = update(index, sharding)
            if new != sharding:
                changes[index] = new
    if changes:
        write_func_attrs(func, kind, changes)


def write_func_attr(func, kind: str, index: int, sharding: TensorSharding | None) -> None:
    """Set (or with None remove) the ``sdy.sharding`` entry of an argument/result."""
    write_func_attrs(func, kind, {index: sharding})


def write_func_attrs(func, kind: str, shardings: dict[int, TensorSharding | None]) -> None:
    """Set (None: remove) the ``sdy.sharding`` entries of several arguments/results
    at once (``kind``: arg_attrs or res_attrs)."""
    ctx = mlir_context()
    entries = func_attr_entries(func, kind)
    if not entries:
        nargs, nres = func_arity(func)
        entries = [ir.DictAttr.get({}, context=ctx)
                   for _ in range(nargs if kind == "arg_attrs" else nres)]
    for index, sharding in shardings.items():
        items = attr_items(entries[index])
        if sharding is None:
            items.pop(SHARDING_ATTR, None)
        else:
            items[SHARDING_ATTR] = sharding_attr(sharding)
        entries[index] = ir.DictAttr.get(items, context=ctx)
    func.operation.attributes[kind] = ir.ArrayAttr.get(entries, context=ctx)
