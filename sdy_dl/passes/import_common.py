"""Shared helpers of the import passes (semantics §1.5, §8, §9.1).

The import passes rewrite the jaxlib MLIR module held by the model
(``Module.mlir``) and then re-index it with :func:`rebuild`.  This module
holds what several of them need:

* walks over raw MLIR operations in MLIR's pre- and post-order;
* Shardy's notion of "the sharding of a value" on raw MLIR values
  (``getSharding``/``setSharding`` including data-flow-edge shadowing and the
  manual-axis stripping of ``manual_computation`` block arguments);
* the sharding walker (``walkShardings``/``transformShardings``): every place
  a sharding is stored, in Shardy's visiting order;
* a symbol-table name uniquer that numbers clashes exactly as MLIR's
  ``SymbolTable::insert`` does;
* running a Datalog analysis stage with the engine chosen in the options.
"""

from __future__ import annotations

from collections.abc import Callable

from sdy_dl.errors import SdyError
from sdy_dl.ir.loader import build_model
from sdy_dl.ir.model import Module
from sdy_dl.ir.storage import (COMPUTATION_OPS, DATA_FLOW_OPS, OWN_SHARDING_OPS,  # noqa: F401
                               attr_text, func_arity, parse_attr, read_func_attr, read_own,
                               read_per_value, write_func_attr, write_own, write_per_value,
                               write_per_value_entry)
from sdy_dl.manual_axes import add_free_axes, erase_manual_axes  # noqa: F401  (re-exported)
from sdy_dl.sharding import AxisRef, Mesh, TensorSharding, merge_adjacent, parse_mesh

SHARDING_ATTR = "sdy.sharding"
SHARDING_RULE_ATTR = "sdy.sharding_rule"
ORIGINAL_FUNC_NAME_ATTR = "sdy.original_func_name"

# sdy collectives (CollectiveOpInterface): the result sharding is ``out_sharding``.
COLLECTIVE_OPS = frozenset({"sdy.all_gather", "sdy.all_slice", "sdy.all_to_all",
                            "sdy.collective_permute", "sdy.all_reduce", "sdy.reduce_scatter",
                            "sdy.sharded_to_unreduced", "sdy.replicated_to_unreduced"})
TERMINATOR_OPS = frozenset({"func.return", "stablehlo.return", "sdy.return", "mhlo.return"})


# -- module plumbing -----------------------------------------------------------

def rebuild(module: Module) -> Module:
    """Re-index ``module`` after its MLIR was mutated."""
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        return build_model(module.mlir, module.file)


def op_error(module: Module, mop, message: str) -> SdyError:
    """An :class:`SdyError` located at the MLIR operation ``mop``."""
    from sdy_dl.ir.model import op_position

    line, col = op_position(mop.operation)
    return SdyError(message, file=module.file, line=line, col=col)


# -- stable identities -------------------------------------------------------------------

def _capsule_pointer():
    import ctypes

    api = ctypes.pythonapi
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    return lambda cap: api.PyCapsule_GetPointer(cap, api.PyCapsule_GetName(cap))


_POINTER = None


def key(obj) -> int:
    """A stable identity for an MLIR operation, value or block.

    The bindings hash operations and values by content (the hash changes when
    an operand or attribute changes), so passes that mutate the IR key their
    dictionaries and sets by the underlying C++ pointer instead.
    """
    global _POINTER
    if _POINTER is None:
        _POINTER = _capsule_pointer()
    obj = getattr(obj, "operation", obj)
    return _POINTER(obj._CAPIPtr)


# -- walks over raw MLIR operations -----------------------------------------------

def nested_ops(op) -> list:
    """The ops directly nested in ``op``'s regions, in program order."""
    return [child.operation for region in op.operation.regions
            for block in region.blocks for child in block.operations]


def walk_pre(root) -> list:
    """Every operation nested in ``root`` (itself included) in pre-order
    (iterative: nesting depth is not bounded by the recursion limit)."""
    out: list = []
    stack = [root.operation]
    while stack:
        op = stack.pop()
        out.append(op)
        stack.extend(reversed(nested_ops(op)))
    return out


def walk_post(root) -> list:
    """Every operation nested in ``root`` (itself included) in post-order
    (MLIR's default ``walk``: regions first, then the op)."""
    out: list = []
    stack = [(root.operation, False)]
    while stack:
        op, expanded = stack.pop()
        if expanded:
            out.append(op)
            continue
        stack.append((op, True))
        stack.extend((child, False) for child in reversed(nested_ops(op)))
    return out


def module_ops(module: Module) -> list:
    """The top-level operations of ``module`` (meshes, functions, ...)."""
    return [op.operation for op in module.mlir.body.operations]


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

def is_block_arg(value) -> bool:
    from jaxlib.mlir import ir

    return isinstance(value.maybe_downcast(), ir.BlockArgument)


def owning_op(value):
    """The defining op of a result, or the op owning a block argument's block."""
    if is_block_arg(value):
        return value.owner.owner.operation
    return value.owner.operation


def value_index(value) -> int:
    """Result number or argument number."""
    v = value.maybe_downcast()
    return v.arg_number if is_block_arg(value) else v.result_number


def uses(value) -> list:
    """(user op, operand number) in MLIR use-list order (latest use first)."""
    return [(u.owner.operation, u.operand_number) for u in value.uses]


def users(value) -> list:
    return [op for op, _ in uses(value)]


def tensor_info(type_) -> tuple[bool, tuple[int, ...] | None]:
    """(is shaped, static shape or None) of an MLIR type."""
    from jaxlib.mlir import ir

    t = type_.maybe_downcast()
    if not isinstance(t, ir.ShapedType):
        return False, None
    if not t.has_rank or not t.has_static_shape:
        return True, None
    return True, tuple(t.shape)


def is_static_tensor(type_) -> bool:
    shaped, shape = tensor_info(type_)
    return shaped and shape is not None


def tensor_rank(type_) -> int:
    """The rank of a ranked tensor type, 0 for anything else (Shardy's getTensorRank)."""
    from jaxlib.mlir import ir

    t = type_.maybe_downcast()
    if isinstance(t, ir.ShapedType) and t.has_rank:
        return t.rank
    return 0


def is_scalar(value) -> bool:
    """A rank-0 ranked tensor (Shardy's ``isScalar``)."""
    from jaxlib.mlir import ir

    t = value.type.maybe_downcast()
    return isinstance(t, ir.RankedTensorType) and t.rank == 0


# -- sharding attributes on raw ops ---------------------------------------------------

func_num_args_results = func_arity


def func_result_types(func) -> list:
    from jaxlib.mlir import ir

    return list(ir.FunctionType(ir.TypeAttr(func.operation.attributes["function_type"]).value).results)


def manual_axes(mop) -> list[str]:
    """The ``manual_axes`` of a manual computation, in their stored order."""
    from sdy_dl.sharding import parse_axis_ref

    text = str(mop.operation.attributes["manual_axes"])   # #sdy<manual_axes{"a", "b"}>
    inner = text[text.index("{") + 1: text.rindex("}")]
    return [parse_axis_ref(part.strip()).name for part in split_top_level(inner) if part.strip()]


def set_manual_axes(mop, names: list[str]) -> None:
    from sdy_dl.sharding import quote_string

    mop.operation.attributes["manual_axes"] = parse_attr(
        "#sdy<manual_axes{" + ", ".join(quote_string(n) for n in names) + "}>")


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


def move_region_body(src_op, dst_op, src_terminator: str, dst_terminator: str) -> None:
    """Move the single-block body of ``src_op`` into the empty region of ``dst_op``,
    replacing its ``src_terminator`` by a ``dst_terminator`` with the same operands
    (Shardy's ``inlineRegionAndConvertTerminatorOp``)."""
    from jaxlib.mlir import ir

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
    from jaxlib.mlir import ir

    op = ir.Operation.create(name, results=[value.type], operands=[value],
                             attributes={"sharding": parse_attr(sharding.to_text())},
                             loc=loc if loc is not None else ir.Location.unknown())
    insert_after_value(value, op)
    return op


def insert_after_value(value, op) -> None:
    """Insert the detached MLIR ``op`` right after ``value`` is defined."""
    from jaxlib.mlir import ir

    if is_block_arg(value):
        block = value.owner
        first = next(iter(block.operations), None)
        (ir.InsertionPoint(first.operation) if first is not None
         else ir.InsertionPoint(block)).insert(op)
    else:
        ir.InsertionPoint.after(owning_op(value)).insert(op)


# -- Shardy's getSharding / setSharding on raw values ----------------------------------

def edge_owner_from_target(op, value):
    """``ShardableDataFlowOpInterface::getEdgeOwnerFromTarget``."""
    if op.name == "stablehlo.while" and is_block_arg(value):
        return op.results[value_index(value)]
    return value


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
    op = owning_op(value)
    if op.name in DATA_FLOW_OPS:
        return data_flow_edge_user(edge_owner_from_target(op, value))
    return None


def shardable_value(value):
    """Shardy's ``getShardableValue``: where the sharding of ``value`` lives,
    as a value (None when it cannot hold one)."""
    edge = lookup_data_flow_edge(value)
    if edge is not None:
        return edge.results[0]
    if not is_block_arg(value):
        return value
    op = owning_op(value)
    if op.name == "func.func":
        return value
    if op.name in DATA_FLOW_OPS:
        return edge_owner_from_target(op, value)
    return None


def get_sharding(value) -> TensorSharding | None:
    """Shardy's ``getSharding(value)``."""
    value = shardable_value(value)
    if value is None:
        return None
    op = owning_op(value)
    if op.name == "func.func":
        return read_func_attr(op, "arg_attrs", value_index(value))
    if op.name in OWN_SHARDING_OPS:
        return read_own(op)
    if op.name in COLLECTIVE_OPS:
        return read_own(op, "out_sharding")
    if op.name in DATA_FLOW_OPS:
        return get_edge_owner_sharding(op, value)
    per = read_per_value(op, SHARDING_ATTR)
    return None if per is None else per[value_index(value)]


def get_edge_owner_sharding(op, owner) -> TensorSharding | None:
    if is_block_arg(owner):
        if op.name == "sdy.manual_computation":
            per = read_per_value(op, "in_shardings")
            return None if not per else erase_manual_axes(per[value_index(owner)], manual_axes(op))
        if op.name == "sdy.named_computation":
            per = read_per_value(op, "in_shardings")
            return None if not per else per[value_index(owner)]
        return None
    name = "out_shardings" if op.name in COMPUTATION_OPS else SHARDING_ATTR
    per = read_per_value(op, name)
    return None if not per else per[value_index(owner)]


def set_sharding(value, sharding: TensorSharding) -> None:
    """Shardy's ``setSharding(value, sharding)``."""
    value = shardable_value(value)
    if value is None:
        return
    op = owning_op(value)
    idx = value_index(value)
    if op.name == "func.func":
        write_func_attr(op, "arg_attrs", idx, sharding)
    elif op.name in OWN_SHARDING_OPS:
        write_own(op, sharding)
    elif op.name in COLLECTIVE_OPS:
        write_own(op, sharding, "out_sharding")
    elif is_block_arg(value):   # a block-argument edge owner of a data-flow op
        current = read_per_value(op, "in_shardings")
        if current and op.name == "sdy.manual_computation":
            sharding = add_free_axes(current[idx], sharding, manual_axes(op))
        write_per_value_entry(op, "in_shardings", idx,
                              [tensor_rank(a.type) for a in value.owner.arguments], sharding)
    else:
        name = "out_shardings" if op.name in COMPUTATION_OPS else SHARDING_ATTR
        write_per_value_entry(op, name, idx, [tensor_rank(r.type) for r in op.results], sharding)


# -- the sharding walker (Shardy's walkShardings / transformShardings) ----------------

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
        nargs, nres = func_num_args_results(mop)
        for kind, count in (("arg_attrs", nargs), ("res_attrs", nres)):
            for i in range(count):
                s = read_func_attr(mop, kind, i)
                if s is not None:
                    new = fn(s)
                    if new != s:
                        write_func_attr(mop, kind, i, new)
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


# -- meshes ---------------------------------------------------------------------------

def module_meshes(module: Module) -> dict[str, Mesh]:
    """Symbol name -> mesh of every ``sdy.mesh`` in the module (current MLIR state)."""
    from jaxlib.mlir import ir

    out = {}
    for op in module_ops(module):
        if op.name == "sdy.mesh":
            out[ir.StringAttr(op.attributes["sym_name"]).value] = parse_mesh(str(op.attributes["mesh"]))
    return out


def mesh_of(sharding: TensorSharding, meshes: dict[str, Mesh]) -> Mesh | None:
    if isinstance(sharding.mesh, Mesh):
        return sharding.mesh
    return meshes.get(sharding.mesh)


def sort_and_merge_axes(axes: list[AxisRef], mesh: Mesh) -> list[AxisRef]:
    """Shardy's ``sortAndMergeAxes``: mesh order, adjacent sub-axes merged."""
    return merge_adjacent(sorted(axes, key=lambda a: a.sort_key_in(mesh)), mesh)


# -- symbols ----------------------------------------------------------------------------

def symbol_name(mop) -> str | None:
    from jaxlib.mlir import ir

    attrs = mop.operation.attributes
    return ir.StringAttr(attrs["sym_name"]).value if "sym_name" in attrs else None


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


# -- Datalog analyses ----------------------------------------------------------------------

def run_analysis(stage: str, facts: dict, options, **params) -> dict[str, set[tuple]]:
    """Run the Datalog stage ``stage`` (rendered with ``params``) on ``facts``
    with the options' engine."""
    from sdy_dl.datalog.compiler import compile_stage
    from sdy_dl.engines import get_engine

    program = compile_stage(stage, **params)
    engine = get_engine(getattr(options, "engine", "auto"), getattr(options, "compiled", False))
    return engine.run(program, {k: list(v) for k, v in facts.items()})
