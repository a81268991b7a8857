"""Operations, values, walks and symbols on the jaxlib MLIR module (semantics §1.5, §8).

Passes rewrite the jaxlib MLIR module held by the module view
(``Module.mlir``) and then say so (``Module.invalidate``).  This module
holds what they share on raw MLIR objects:

* regions, parents, the module's top-level ops;
* values: owner, index, uses, types;
* functions: the module's functions, Shardy's "main" function, result types;
* IR edits: moving a region body, inserting a constraint or reshard;
* symbols: names and a symbol-table name uniquer that numbers clashes exactly
  as MLIR's ``SymbolTable::insert`` does.

Stable identities (``key``) and every walk are :mod:`sdy_dl.ir.walk`; a
value's sharding is :mod:`sdy_dl.ir.value_sharding`; where it is stored,
:mod:`sdy_dl.ir.storage`.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from sdy_dl.errors import SdyError
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import module_ops
from sdy_dl.ir.sdy_attrs import sharding_attr
from sdy_dl.ir.storage import function_type
from sdy_dl.sharding import TensorSharding

SHARDING_RULE_ATTR = "sdy.sharding_rule"
ORIGINAL_FUNC_NAME_ATTR = "sdy.original_func_name"


# -- module plumbing -----------------------------------------------------------

def op_error(module: Module, mop, message: str) -> SdyError:
    """An :class:`SdyError` located at the MLIR operation ``mop``."""
    from sdy_dl.ir.model import op_position

    line, col = op_position(mop.operation)
    return SdyError(message, file=module.file, line=line, col=col)


def region_key(mop):
    """A key of the region holding ``mop``: equal for two ops exactly when they lie
    in the same region (its first block; the bindings' regions hash by object)."""
    return mop.operation.block.region.blocks[0]


def funcs(module: Module) -> list:
    """The top-level ``func.func`` ops, in module order."""
    return [op for op in module_ops(module) if op.name == "func.func"]


def main_func(module: Module):
    """Shardy's ``getMainFuncOrDie(useSingleFunc=true)``: the only function,
    else the one named ``main`` (None when there is neither)."""
    return main_of(funcs(module))


def main_of(functions: list):
    """:func:`main_func` among ``functions`` (a module's top-level ``func.func`` ops)."""
    if len(functions) == 1:
        return functions[0]
    return next((f for f in functions if symbol_name(f) == "main"), None)


def parent_op(mop):
    """The op whose region holds ``mop`` (None at module level)."""
    parent = mop.operation.parent
    if parent is None or parent.name == "builtin.module":
        return None
    return parent


def enclosing(mop, name: str):
    """The closest ancestor op of ``mop`` called ``name``."""
    p = parent_op(mop)
    while p is not None and p.name != name:
        p = parent_op(p)
    return p


# -- values -------------------------------------------------------------------

def _downcast_value(value):
    """``value`` as an ``OpResult`` or ``BlockArgument`` (values the bindings hand
    out usually are already)."""
    if isinstance(value, (ir.OpResult, ir.BlockArgument)):
        return value
    return value.maybe_downcast()


def is_block_arg(value) -> bool:
    return isinstance(_downcast_value(value), ir.BlockArgument)


def value_place(value) -> tuple:
    """(owning op, result or argument number, whether a block argument) of
    ``value``: the defining op of a result, the op owning a block argument's block."""
    v = _downcast_value(value)
    if isinstance(v, ir.BlockArgument):
        return v.owner.owner.operation, v.arg_number, True
    return v.owner.operation, v.result_number, False


def owning_op(value):
    """The defining op of a result, or the op owning a block argument's block."""
    return value_place(value)[0]


def value_index(value) -> int:
    """Result number or argument number."""
    return value_place(value)[1]


def uses(value) -> list:
    """(user op, operand number) in MLIR use-list order (latest use first)."""
    return [(u.owner.operation, u.operand_number) for u in value.uses]


def users(value) -> list:
    return [op for op, _ in uses(value)]


def _downcast(type_):
    """``type_`` as its most specific class (types the bindings hand out usually are)."""
    return type_ if isinstance(type_, ir.ShapedType) else type_.maybe_downcast()


#: tensor_info of each type met (types are uniqued in their context, and a key
#: keeps its context alive, so equal keys are the same type).
_TENSOR_INFO: dict = {}


def tensor_info(type_) -> tuple[bool, tuple[int, ...] | None]:
    """(is shaped, static shape or None) of an MLIR type."""
    try:
        return _TENSOR_INFO[type_]
    except KeyError:
        pass
    t = _downcast(type_)
    if not isinstance(t, ir.ShapedType):
        info = False, None
    elif not t.has_rank or not t.has_static_shape:
        info = True, None
    else:
        info = True, tuple(t.shape)
    _TENSOR_INFO[type_] = info
    return info


def is_static_tensor(type_) -> bool:
    """A shaped type with a rank and a static shape (``tensor_info`` gives its shape).
    A ranked tensor type (as the bindings hand out most types) is asked directly:
    cheaper than hashing it into ``tensor_info``'s table."""
    if isinstance(type_, ir.RankedTensorType):
        return type_.has_static_shape
    return tensor_info(type_)[1] is not None


def tensor_rank(type_) -> int:
    """The rank of a ranked tensor type, 0 for anything else (Shardy's getTensorRank)."""
    t = type_.maybe_downcast()
    if isinstance(t, ir.ShapedType) and t.has_rank:
        return t.rank
    return 0


def is_scalar(value) -> bool:
    """A rank-0 ranked tensor (Shardy's ``isScalar``)."""
    t = value.type   # (as the bindings hand it out: most specific, usually)
    if not isinstance(t, ir.RankedTensorType):
        t = t.maybe_downcast()
    return isinstance(t, ir.RankedTensorType) and t.rank == 0


# -- functions, text, edits -------------------------------------------------------------

def func_result_types(func) -> list:
    return list(function_type(func).results)


def func_arg_types(func) -> list:
    return list(function_type(func).inputs)


def split_top_level(text: str, maxsplit: int = -1) -> list[str]:
    """Split ``text`` at the commas outside quotes and brackets (at most ``maxsplit``)."""
    parts, start, depth, quoted, esc = [], 0, 0, False, False
    for i, c in enumerate(text):
        if quoted:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c in "<[{(":
            depth += 1
        elif c in ">]})":
            depth -= 1
        elif c == "," and depth == 0 and maxsplit != len(parts):
            parts.append(text[start:i])
            start = i
            start += 1
    parts.append(text[start:])
    return parts


def move_region_body(src_op, dst_op, src_terminator: str, dst_terminator: str) -> None:
    """Move the single-block body of ``src_op`` into the empty region of ``dst_op``,
    replacing its ``src_terminator`` by a ``dst_terminator`` with the same operands
    (Shardy's ``inlineRegionAndConvertTerminatorOp``)."""
    src = src_op.regions[0].blocks[0]
    block = dst_op.regions[0].blocks.append(*[a.type for a in src.arguments],
                                            arg_locs=[a.location for a in src.arguments])
    for old, new in zip(src.arguments, block.arguments):
        old.replace_all_uses_with(new)
    for op in list(src.operations):
        op.detach_from_parent()
        if op.name == src_terminator:
            ir.InsertionPoint(block).insert(ir.Operation.create(
                dst_terminator, operands=list(op.operands), loc=op.location))
            op.erase()
        else:
            ir.InsertionPoint(block).insert(op)


def insert_sharding_op_after(name: str, value, sharding: TensorSharding, loc=None):
    """Create ``name`` (``sdy.sharding_constraint`` or ``sdy.reshard``) on ``value`` with
    ``sharding``, insert it right after ``value`` is defined, and return it."""
    op = ir.Operation.create(name, results=[value.type], operands=[value],
                             attributes={"sharding": sharding_attr(sharding)},
                             loc=loc if loc is not None else ir.Location.unknown())
    insert_after_value(value, op)
    return op


def insert_after_value(value, op) -> None:
    """Insert the detached MLIR ``op`` right after ``value`` is defined."""
    if is_block_arg(value):
        block = value.owner
        first = next(iter(block.operations), None)
        (ir.InsertionPoint(first.operation) if first is not None
         else ir.InsertionPoint(block)).insert(op)
    else:
        ir.InsertionPoint.after(owning_op(value)).insert(op)


def sharding_group_id(mop) -> int:
    """The ``group_id`` of an ``sdy.sharding_group`` op."""
    return ir.IntegerAttr(mop.operation.attributes["group_id"]).value


# -- symbols ----------------------------------------------------------------------------

def symbol_name(mop) -> str | None:
    attr = mop.operation.attributes.get("sym_name")
    return None if attr is None else ir.StringAttr(attr).value


class SymbolNamer:
    """The names of a module's symbol table, uniqued like ``SymbolTable::insert``:
    a clash becomes ``name_<n>`` with one counter shared by all names."""

    def __init__(self, module: Module):
        self.names = {symbol_name(op) for op in module_ops(module)} - {None}
        self.counter = 0

    def insert(self, name: str) -> str:
        if name not in self.names:
            self.names.add(name)
            return name
        while True:
            candidate = f"{name}_{self.counter}"
            self.counter += 1
            if candidate not in self.names:
                self.names.add(candidate)
                return candidate

    def erase(self, name: str) -> None:
        self.names.discard(name)


