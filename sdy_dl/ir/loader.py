"""Parse module text with jaxlib and build the plain model (``sdy_dl.ir.model``)."""

from __future__ import annotations

import re
import sys

from sdy_dl.errors import SdyError, UsageError
from sdy_dl.ir.context import mlir_context
from sdy_dl.ir.model import AsmNames, Block, Module, Op, Region, Value, op_position

_DIAG_LOC_RE = re.compile(r'loc\("[^"]*":(\d+):(\d+)\)')


def read_text(path: str) -> str:
    """The text of ``path`` (``-`` reads standard input)."""
    name = "<stdin>" if path == "-" else path
    if not path:
        raise UsageError("the module file name is empty ('')")
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
    except OSError as e:
        raise SdyError(f"cannot read module: {e.strerror}", file=name) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise SdyError("not UTF-8 text", file=name, line=line, col=col) from None


def load_module(path: str) -> Module:
    """Parse the module file ``path`` (``-`` for stdin) into the model."""
    name = "<stdin>" if path == "-" else path
    return parse_module_text(read_text(path), name)


def parse_module_text(text: str, file: str = "<string>") -> Module:
    """Parse module text; errors become :class:`SdyError` located in ``file``."""
    from jaxlib.mlir import ir

    from sdy_dl.ir.strings import check_string_literals

    if not text.strip():
        raise SdyError("empty module file", file=file)
    check_string_literals(text, file)
    ctx = mlir_context()
    with ctx:
        try:
            mlir_module = ir.Module.parse(text)
        except ir.MLIRError as e:
            raise mlir_error(e, file) from None
        check_top_level(mlir_module, file)
    return index_on_demand(mlir_module, file)


def check_top_level(mlir_module, file: str) -> None:
    """What the model cannot hold, found before any pass reads the module: symbol
    names that are not UTF-8 and meshes that do not parse."""
    from jaxlib.mlir import ir

    from sdy_dl.ir.sdy_attrs import mesh_of_attr

    for mop in mlir_module.body.operations:
        mop = mop.operation
        if "sym_name" not in mop.attributes:
            continue
        raw = ir.StringAttr(mop.attributes["sym_name"]).value_bytes
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            line, col = op_position(mop)
            raise SdyError(f"symbol name {raw!r} is not UTF-8", file, line, col) from None
        if mop.name == "sdy.mesh":
            try:
                mesh_of_attr(mop.attributes["mesh"])
            except SdyError as e:
                raise e.located(file, *op_position(mop)) from None


def verify_module(module: Module) -> None:
    """Verify the whole module, as Shardy's pass manager does after a pass: an
    invalid result (a group sync that put a sharding of another rank on a
    member, an invalid collective) is the located error of its first
    diagnostic, never printed."""
    from jaxlib.mlir import ir

    with mlir_context():
        try:
            module.mlir.operation.verify()
        except ir.MLIRError as e:
            raise mlir_error(e, module.file) from None


def mlir_error(e, file: str) -> SdyError:
    """The first diagnostic of an MLIR parse/verify failure, with its place."""
    diags = list(getattr(e, "error_diagnostics", []) or [])
    if not diags:
        return SdyError(str(e).splitlines()[-1], file=file)
    d = diags[0]
    m = _DIAG_LOC_RE.search(str(d.location))
    line, col = (int(m.group(1)), int(m.group(2))) if m else (None, None)
    return SdyError(d.message.splitlines()[0], file=file, line=line, col=col)


#: The events of :func:`walk_numbered`.
OP, BLOCK, END = 0, 1, 2


def walk_numbered(tops):
    """The ops ``tops`` and every op nested in them, in pre-order, as events in the
    one order that numbers a module's ops and values (the model's ``oid`` and
    ``vid``, and the audit's value keys, :class:`~sdy_dl.audit.naming.ValueTable`):

    * ``(OP, mop)``: the next op (its number: the count of ``OP`` events before
      it); its results are the next values;
    * ``(BLOCK, r, mblock)``: the next block of the op whose regions are open
      (``r``: its region's number); its arguments are the next values, its ops
      follow;
    * ``(END, mop)``: the regions of ``mop`` (an op with regions) are done.

    Iterative: nesting depth is not bounded by Python's recursion limit."""
    stack = [(iter(tops), None)]
    while stack:
        items, owner = stack[-1]
        item = next(items, None)
        if item is None:
            stack.pop()
            if owner is not None:
                yield END, owner
            continue
        if type(item) is tuple:   # a block of owner, as (region number, block)
            yield BLOCK, item[0], item[1]
            continue
        mop = item.operation
        yield OP, mop
        if len(mop.regions):
            stack.append((_blocks_and_ops(mop), mop))


def _blocks_and_ops(mop):
    """Each block of ``mop``'s regions, as (region number, block), followed by its ops
    (a list: the bindings' op iterator starts again in each for loop)."""
    for r, region in enumerate(mop.regions):
        for block in region.blocks:
            yield r, block
            yield from list(block.operations)


def build_model(mlir_module, file: str) -> Module:
    """Index an MLIR module: ops in pre-order, values with ids and uses, meshes
    (numbered in :func:`walk_numbered`'s order)."""
    module = Module(file=file, mlir=mlir_module)
    state = AsmNames(mlir_module.operation)
    by_mlir = {}
    ops, values, value_of = module.ops, module.values, module._by_mlir

    shapes: dict = {}  # type -> (shape, static): types are uniqued, values share a few
    shape_and_static, value_at = _shape_and_static, value_of.__getitem__
    add_op, add_value = ops.append, values.append

    def new_values(mvalues, defining_op: Op | None, block: Block | None) -> list[Value]:
        out = []
        index = 0
        for mv in mvalues:
            t = mv.type
            known = shapes.get(t)
            if known is None:
                known = shapes[t] = shape_and_static(t)
            v = Value(len(values), state, known[0], known[1], defining_op, block, index, mv, [], t)
            add_value(v)
            value_of[mv] = v
            out.append(v)
            index += 1
        return out

    check_top_level(mlir_module, file)
    # The op whose regions are open and the block being filled (None at the top
    # level), saved while a nested op's regions are open.
    parent, block = None, None
    saved = []
    for event in walk_numbered(mlir_module.body.operations):
        kind = event[0]
        if kind == OP:
            mop = event[1]
            operands = list(map(value_at, mop.operands))
            op = Op(len(ops), mop.name, operands, [], [], parent, block, mop)
            add_op(op)
            k = 0
            for value in operands:
                value.uses.append((op, k))
                k += 1
            by_mlir[mop] = op
            op.results = new_values(mop.results, op, None)
            if block is not None:
                block.ops.append(op)
            if len(mop.regions):
                op.regions = [Region(blocks=[], owner=op) for _ in mop.regions]
                saved.append((parent, block))
                parent, block = op, None
            elif parent is None:
                _top_level(module, op)
        elif kind == BLOCK:
            region = parent.regions[event[1]]
            block = Block(args=[], ops=[], region=region)
            region.blocks.append(block)
            block.args = new_values(event[2].arguments, None, block)
        else:   # END
            done = parent
            parent, block = saved.pop()
            if parent is None:
                _top_level(module, done)
    # Uses in MLIR's use-list order (most recently created first): Shardy's
    # notifications follow it.  The operands gave every value its uses in program
    # order, which is that order when there is at most one.
    for v in module.values:
        if len(v.uses) > 1:
            v.uses = [(by_mlir[u.owner.operation], u.operand_number) for u in v.mlir.uses]
    return module


def _top_level(module: Module, op: Op) -> None:
    """Record a top-level op that is a mesh or a function in ``module``."""
    from jaxlib.mlir import ir

    from sdy_dl.ir.sdy_attrs import mesh_of_attr

    if op.name == "sdy.mesh":
        name = ir.StringAttr(op.attr("sym_name")).value
        module.meshes[name] = mesh_of_attr(op.attr("mesh"))
        module.mesh_ops.append(op)
    elif op.name == "func.func":
        module.funcs[ir.StringAttr(op.attr("sym_name")).value] = op


def _shape_and_static(t) -> tuple[tuple[int, ...] | None, bool]:
    """(shape or None, whether static) of a value of MLIR type ``t`` (see :class:`Value`)."""
    from jaxlib.mlir import ir

    shape = tuple(t.shape) if isinstance(t, ir.RankedTensorType) else None
    return shape, shape is not None and all(d >= 0 for d in shape)


#: The fields of :class:`Module` that ``build_model`` derives from the MLIR.
INDEX_FIELDS = ("meshes", "mesh_ops", "funcs", "ops", "values", "_by_mlir")


class _IndexedOnDemand(Module):
    """A module whose index (ops, values, uses, meshes, functions) is built from
    its MLIR on first use: passes that edit the MLIR directly hand it on without
    re-indexing, and only a pass that reads the index pays for building it."""

    def __init__(self, mlir_module, file: str):
        self.__dict__.update(file=file, mlir=mlir_module)

    def __getattr__(self, name: str):
        if name not in INDEX_FIELDS:
            raise AttributeError(name)
        with mlir_context():
            built = build_model(self.mlir, self.file)
        self.__dict__.update({f: getattr(built, f) for f in INDEX_FIELDS})
        return self.__dict__[name]


def index_on_demand(mlir_module, file: str) -> Module:
    """``mlir_module`` as a :class:`Module` indexed on first use (after an edit of its MLIR)."""
    return _IndexedOnDemand(mlir_module, file)
