"""The plain Python model of a module: values, ops, blocks, regions, meshes.

The model is a read-only index over the jaxlib MLIR module it was built from
(``Module.mlir``).  Ops are listed in pre-order (parents before children, then
program order), the order Shardy's worklist starts from.  Every value (block
argument or op result) has a dense integer id; every op has one too.  Writing
shardings goes through :mod:`sdy_dl.ir.storage`, printing through
``Module.print``.
"""

from __future__ import annotations

from itertools import islice
from operator import attrgetter
from typing import Any

from sdy_dl.errors import SdyError
from sdy_dl.ir.context import mlir_context
from sdy_dl.ir.locations import text_position
from sdy_dl.ir.op_index import OpIndex
from sdy_dl.ir.traits import TERMINATORS
from sdy_dl.ir.walk import BLOCK, OP, walk_numbered, walk_pre

_NAME = attrgetter("name")


class AsmNames:
    """The ``AsmState`` that names the values of a module as jaxlib prints them,
    made when a value is first named (making one walks the whole module, and
    most passes name no value)."""

    __slots__ = ("_top", "_state")

    def __init__(self, top):
        self._top, self._state = top, None

    def get(self):
        if self._state is None:
            from jaxlib.mlir import ir
            self._state = ir.AsmState(self._top)
        return self._state


# The model's classes are plain classes, not dataclasses: a dataclass's methods are
# compiled from generated source each time a process defines it (~2M instructions a
# class at every start).  They compare by identity.

class Value:
    """An SSA value: a block argument or an op result."""

    __slots__ = ("vid", "asm_state", "shape", "static", "defining_op", "block", "index", "_mlir",
                 "uses", "mlir_type", "pointer")

    def __init__(self, vid: int, asm_state: AsmNames, shape: tuple[int, ...] | None,
                 static: bool, defining_op: Op | None, block: Block | None, index: int,
                 mlir: Any, uses: list[tuple[Op, int]] | None = None, mlir_type: Any = None,
                 pointer: int | None = None):
        self.vid = vid
        self.asm_state = asm_state     # names values as jaxlib prints them
        self.shape = shape             # None: not a ranked tensor (token, tuple, unranked)
        self.static = static           # a ranked tensor with a static shape
        self.defining_op = defining_op   # None for block arguments
        self.block = block             # the owning block, for block arguments
        self.index = index             # result number, or argument number
        self._mlir = mlir              # None: read from its owner when first asked for
        self.uses = [] if uses is None else uses   # (op, operand number), MLIR use-list order
        self.mlir_type = mlir_type     # the MLIR type (uniqued: compares as an object)
        #: its key (value_key): its C++ pointer once read, or the same value's key in the
        #: propagation a what-if's module was copied from (audit.naming.PropagationIndex)
        self.pointer = pointer

    def __repr__(self) -> str:
        return (f"Value(vid={self.vid!r}, shape={self.shape!r}, static={self.static!r}, "
                f"index={self.index!r})")

    @property
    def mlir(self):
        """The MLIR value (an index copied from another module's, :func:`index_like`,
        reads it from its op or block when first asked for: a what-if's propagation
        asks for few)."""
        m = self._mlir
        if m is None:
            if self.defining_op is not None:
                m = self.defining_op.mlir.results[self.index]
            else:
                block = self.block
                region = block.region
                owner = region.owner
                m = owner.mlir.regions[owner.regions.index(region)] \
                    .blocks[region.blocks.index(block)].arguments[self.index]
            self._mlir = m
        return m

    @property
    def type_text(self) -> str:
        """The value's type as printed."""
        return str(self.mlir.type)

    @property
    def name(self) -> str:
        """The SSA name as printed (``%arg0``, ``%3``, ``%5#1``), computed on demand."""
        return self.mlir.get_name(self.asm_state.get())

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_block_arg(self) -> bool:
        return self.defining_op is None

    def __hash__(self) -> int:
        return self.vid


class Block:
    """A block: its arguments and its ops in program order."""

    def __init__(self, args: list[Value], ops: list[Op], region: Region):
        self.args = args
        self.ops = ops
        self.region = region

    def __repr__(self) -> str:
        return f"Block(args={len(self.args)}, ops={len(self.ops)})"


class Region:
    """A region of an op: its blocks."""

    def __init__(self, blocks: list[Block], owner: Op):
        self.blocks = blocks
        self.owner = owner

    def __repr__(self) -> str:
        return f"Region(blocks={len(self.blocks)}, owner={self.owner.name!r})"


class Op:
    """An operation with its operands, results, regions and place."""

    __slots__ = ("oid", "name", "operands", "results", "regions", "parent", "block", "mlir",
                 "_position", "_location")

    def __init__(self, oid: int, name: str, operands: list[Value], results: list[Value],
                 regions: list[Region], parent: Op | None, block: Block | None, mlir: Any,
                 _position: tuple[int | None, int | None] | None = None,
                 _location: str | None = None):
        self.oid = oid
        self.name = name
        self.operands = operands
        self.results = results
        self.regions = regions
        self.parent = parent       # the op whose region holds this op (None at module level)
        self.block = block
        self.mlir = mlir
        self._position = _position
        self._location = _location   # see location_text

    def __repr__(self) -> str:
        return f"Op(oid={self.oid!r}, name={self.name!r})"

    @property
    def line(self) -> int | None:
        """The line of the op in the module text (None when unknown)."""
        return self._place()[0]

    @property
    def col(self) -> int | None:
        """The column of the op in the module text (None when unknown)."""
        return self._place()[1]

    def _place(self) -> tuple[int | None, int | None]:
        if self._position is None:
            self._position = position_in(self.location_text())
        return self._position

    def location_text(self) -> str:
        """The op's location as printed (printed once: whoever changes the location
        of a model op calls :meth:`location_changed`)."""
        if self._location is None:
            self._location = str(self.mlir.location)
        return self._location

    def location_changed(self) -> None:
        """Forget the printed location (its line and column stay: a new location
        keeps the old one inside it)."""
        self._location = None

    def attr(self, name: str):
        """The MLIR attribute ``name`` or None."""
        return self.mlir.attributes.get(name)

    def attr_text(self, name: str) -> str | None:
        """The printed form of attribute ``name`` or None."""
        a = self.attr(name)
        return None if a is None else str(a)

    @property
    def dialect(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def is_terminator(self) -> bool:
        return self.name in TERMINATORS and self.block is not None \
            and bool(self.block.ops) and self.block.ops[-1] is self

    def enclosing(self, name: str) -> "Op | None":
        """The closest ancestor op named ``name``."""
        p = self.parent
        while p is not None and p.name != name:
            p = p.parent
        return p

    def __hash__(self) -> int:
        return self.oid


class Module:
    """The one view of a parsed module: its MLIR (``mlir``), what is read from it
    on first use (``meshes``, ``mesh_ops``, ``funcs``, ``ops`` in pre-order,
    ``values``), and the walks of its ops with their names (``walks``, an
    :class:`~sdy_dl.ir.op_index.OpIndex`).

    A pass that edits the MLIR says so with :meth:`invalidate`: what was read
    is read again when next asked for (model ops and values taken before are
    stale).  Passes, the loader and the audit number ops and values alike
    (:func:`~sdy_dl.ir.walk.walk_numbered`)."""

    #: The fields read from the MLIR on first use (:func:`index_module`).
    INDEX = ("meshes", "mesh_ops", "funcs", "ops", "values")

    meshes: dict            # symbol name -> sharding.Mesh
    mesh_ops: list[Op]
    funcs: dict[str, Op]
    ops: list[Op]
    values: list[Value]
    #: The ops user-priority propagation erased (model numbers), set by it: what the
    #: export by difference compares between two propagations (None: not run).
    propagation_erased: frozenset | None = None
    #: Whether the module's MLIR is known to be a clone (``Operation.clone``) made
    #: before any pass ran on it: its use lists are in reverse program order and
    #: :func:`index_like` does not read them.  Dropped by :meth:`invalidate` (any
    #: edit may reorder uses: writing an operand, even of the same value, puts its
    #: use first in the value's list).
    cloned: bool = False
    #: The index fields (:meth:`index_fields`) of the module whose MLIR this module's
    #: is a clone of (its attributes aside), known where the clone is made: the same
    #: ops, operands and types by construction (:func:`index_like`).  Dropped by
    #: :meth:`invalidate`.
    clone_of: dict | None = None
    #: The module passed :func:`~sdy_dl.ir.loader.verify_module` (which sets it) and
    #: was not invalidated since: only then is it printed without verifying it (:meth:`print`).
    verified: bool = False

    def __init__(self, mlir, file: str):
        self.mlir, self.file = mlir, file

    def __getattr__(self, name: str):
        # (only fields not read yet get here: reading fills them in __dict__)
        if name == "walks":
            self.walks = OpIndex()
            return self.walks
        if name not in Module.INDEX:
            raise AttributeError(name)
        with mlir_context():
            index_module(self)
        return self.__dict__[name]

    def invalidate(self, ops_kept: bool = False, names: frozenset[str] | None = None,
                   walks=None) -> "Module":
        """The MLIR was edited: forget the ops, values, meshes and functions read
        from it (read again when next asked for).  ``ops_kept``: the edit
        inserted, erased or moved no op under a top-level op whose walk
        ``walks`` holds, or it told ``walks`` (see :mod:`~sdy_dl.ir.op_index`):
        the walks and op names stay.  Else they go, and the pass may give the
        ``names`` its ops may have (names of ops it erased may stay among them)
        or the new ``walks`` (an ``OpIndex``).  The module is no longer
        :attr:`cloned`.  Returns the module (a pass returns it)."""
        for name in Module.INDEX:
            self.__dict__.pop(name, None)
        self.__dict__.pop("verified", None)
        self.__dict__.pop("cloned", None)
        self.__dict__.pop("clone_of", None)
        if walks is None and not ops_kept and names is not None:
            walks = OpIndex(names)
        if walks is not None:
            self.walks = walks
        elif not ops_kept:
            self.__dict__.pop("walks", None)
        return self

    def index_fields(self) -> dict:
        """The index's pure fields as read now (indexing the module if it is not),
        from which :func:`index_like` makes a copy's."""
        return {name: getattr(self, name) for name in ("meshes", "mesh_ops", "funcs", "ops", "values")}

    def is_indexed(self) -> bool:
        """Whether ops and values were read since the last :meth:`invalidate`."""
        return "ops" in self.__dict__

    def main_func(self) -> Op | None:
        """Shardy's "main" function: the only function, else the one named main."""
        if len(self.funcs) == 1:
            return next(iter(self.funcs.values()))
        return self.funcs.get("main")

    def func_args(self, func: Op) -> list[Value]:
        return func.regions[0].blocks[0].args if func.regions and func.regions[0].blocks else []

    def func_return(self, func: Op) -> Op | None:
        blocks = func.regions[0].blocks if func.regions else []
        return blocks[-1].ops[-1] if blocks and blocks[-1].ops else None

    def print(self, binary: bool = False) -> str | bytes:
        """The module printed exactly as jaxlib prints it (``str(module)``),
        without the verification MLIR's printer runs first (to fall back to the
        generic form) when the module is :attr:`verified`; ``binary``: the text
        as UTF-8 bytes, not decoded into a string."""
        if not (self.verified or binary):
            return str(self.mlir)
        return self.mlir.operation.get_asm(binary=binary, assume_verified=self.verified)

    def location(self, op: Op) -> tuple[str, int | None, int | None]:
        return (self.file, op.line, op.col)

    def __repr__(self) -> str:
        return f"Module(file={self.file!r})"


def op_position(op_mlir) -> tuple[int | None, int | None]:
    """(line, column) in the module's text of an MLIR operation, when its location
    is one (see :mod:`~sdy_dl.ir.locations`)."""
    return position_in(str(op_mlir.location))


def position_in(location: str) -> tuple[int | None, int | None]:
    """(line, column) in the module's text of a printed location, when it is one."""
    return text_position(location) or (None, None)


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


def index_module(module: Module) -> None:
    """Read ``module``'s index from its MLIR (see :class:`Module`): ops in
    pre-order, values with ids and uses, meshes and functions, numbered by
    :func:`walk_numbered`."""
    mlir_module, file = module.mlir, module.file
    state = AsmNames(mlir_module.operation)
    ops, values, by_mlir = [], [], {}   # (by_mlir: MLIR value -> model value, for operands)
    module.__dict__.update(meshes={}, mesh_ops=[], funcs={}, ops=ops, values=values)

    # type -> (shape, static, the type): types are uniqued, values share a few, and
    # every value of a type holds one Python object for it (a tuple of them then
    # compares without calling into the bindings)
    shapes: dict = {}
    shape_and_static, value_at = _shape_and_static, by_mlir.__getitem__
    add_op, add_value = ops.append, values.append

    def new_values(mvalues, defining_op: Op | None, block: Block | None, vid: int) -> list[Value]:
        out = []
        index = 0
        for mv in mvalues:
            t = mv.type
            known = shapes.get(t)
            if known is None:
                known = shapes[t] = (*shape_and_static(t), t)
            v = Value(vid + index, state, known[0], known[1], defining_op, block, index, mv, [],
                      known[2])
            add_value(v)
            by_mlir[mv] = v
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
            op = Op(event[2], mop.name, operands, [], [], parent, block, mop)
            add_op(op)
            k = 0
            for value in operands:
                value.uses.append((op, k))
                k += 1
            op.results = new_values(mop.results, op, None, event[3])
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
            block.args = new_values(event[2].arguments, None, block, event[3])
        else:   # END
            done = parent
            parent, block = saved.pop()
            if parent is None:
                _top_level(module, done)
    _order_uses(values)


def _order_uses(values: list[Value]) -> None:
    """Put every value's uses in MLIR's use-list order (most recently created
    first): Shardy's notifications follow it.  The operands gave every value its
    uses in program order, which is that order when there is at most one."""
    for v in values:
        if len(v.uses) > 1:
            v.uses = _use_list_order(v)


def _use_list_order(value: Value) -> list[tuple[Op, int]]:
    """``value.uses`` (every use, in program order) in MLIR's use-list order.  An
    MLIR use is the model use with its operand number when only one has that
    number, else the one of those whose op is the use's owner (reading an owner
    through the bindings costs more than the rest of the match)."""
    by_number: dict[int, list] = {}
    for use in value.uses:
        by_number.setdefault(use[1], []).append(use)
    by_owner: dict[int, dict] = {}   # operand number -> {MLIR op: use}, when many share it
    out = []
    for u in value.mlir.uses:
        k = u.operand_number
        found = by_number[k]
        if len(found) == 1:
            out.append(found[0])
            continue
        owner = u.owner.operation
        if len(found) <= 8:
            out.append(next(use for use in found if use[0].mlir == owner))
            continue
        ops = by_owner.get(k)
        if ops is None:
            ops = by_owner[k] = {use[0].mlir: use for use in found}
        out.append(ops[owner])
    return out


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


def _same_names(mops: list, first: dict) -> bool:
    """Whether the ops ``mops`` (a module's pre-order walk, the module op first) are
    called as the ops of ``first`` (index fields, as many ops) are."""
    return list(map(_NAME, islice(mops, 1, None))) == [op.name for op in first["ops"]]


def _same_blocks(fop: Op, mop) -> bool:
    """Whether MLIR op ``mop`` has as many regions, blocks and block arguments as ``fop``."""
    mregions = mop.regions
    if len(mregions) != len(fop.regions):
        return False
    for fregion, mregion in zip(fop.regions, mregions):
        fblocks, mblocks = fregion.blocks, mregion.blocks
        if len(mblocks) != len(fblocks):
            return False
        for fb, mb in zip(fblocks, mblocks):
            if len(mb.arguments) != len(fb.args):
                return False
    return True


def index_like(module: Module, first: dict, cloned: bool = False) -> bool:
    """Give ``module`` the index :func:`index_module` would read, made from
    ``first`` (:meth:`Module.index_fields` of another module) when ``module``'s MLIR
    is a copy of that module's with other attributes (a what-if's module, copied
    from the first propagation's imported module with other argument shardings,
    :mod:`~sdy_dl.audit.whatif_import`): the same ops, values, types, meshes and
    functions, with this module's op handles from one walk of it (a value's
    handle is read from its op or block when first asked for, :attr:`Value.mlir`).
    The operands are the first's; the uses are listed in program order and then
    in this module's use-list order, as :func:`index_module` lists them (a copy's
    use lists are ordered as it was built, not as the first's).

    ``cloned``: ``module`` is a clone, as made (a what-if's, of the first audit's
    imported module): a clone's use lists are in reverse program order, not
    read.  (MLIR's ``Region::cloneInto`` makes a region's ops first, then sets
    each op's operands in order and clones its regions, op by op: a clone's uses
    are made in program order, and a new use goes first in its value's list.)
    False (``module`` left as it was): the op counts differ, or an op's name or
    result count, or the regions, blocks or block arguments of an op with regions
    (an op with none there holds no values here: a block it had would hold ops,
    and the op counts would differ), so every op is the first's op at the same
    place, and every value the first's value.  The names are not read (about
    0.01 s of CPU at 51k ops) when ``module`` is a clone of the module ``first``
    was read of (:attr:`Module.clone_of` is ``first``): its ops are those by
    construction."""
    mlir_module = module.mlir
    first_ops, first_values = first["ops"], first["values"]
    mops = walk_pre(mlir_module.operation)   # (the module itself first)
    if len(mops) != len(first_ops) + 1 or (module.clone_of is not first
                                           and not _same_names(mops, first)):
        return False
    state = AsmNames(mlir_module.operation)
    ops: list = [None] * len(first_ops)
    values: list = [None] * len(first_values)
    blocks: dict = {}   # id(first block) -> block
    new_value, new_op = Value, Op
    for fop, mop in zip(first_ops, islice(mops, 1, None)):
        if len(mop.results) != len(fop.results) or fop.regions and not _same_blocks(fop, mop):
            return False
        fparent = fop.parent
        if fparent is None:
            parent = block = None
        else:
            parent, block = ops[fparent.oid], blocks[id(fop.block)]
        op = ops[fop.oid] = new_op(fop.oid, fop.name, [], [], [], parent, block, mop)
        if fop.results:
            out = op.results
            for fv in fop.results:
                v = values[fv.vid] = new_value(fv.vid, state, fv.shape, fv.static, op, None,
                                               fv.index, None, [], fv.mlir_type)
                out.append(v)
        if block is not None:
            block.ops.append(op)
        if fop.regions:
            op.regions = regions = []
            for fregion in fop.regions:
                region = Region(blocks=[], owner=op)
                regions.append(region)
                for fb in fregion.blocks:
                    b = Block(args=[], ops=[], region=region)
                    region.blocks.append(b)
                    blocks[id(fb)] = b
                    args = b.args
                    for fv in fb.args:
                        v = values[fv.vid] = new_value(fv.vid, state, fv.shape, fv.static, None,
                                                       b, fv.index, None, [], fv.mlir_type)
                        args.append(v)
    if None in values:
        return False
    for fop, op in zip(first_ops, ops):
        if fop.operands:
            operands = op.operands = [values[v.vid] for v in fop.operands]
            k = 0
            for value in operands:
                value.uses.append((op, k))
                k += 1
    if cloned:
        for v in values:
            if len(v.uses) > 1:
                v.uses.reverse()
    else:
        _order_uses(values)
    module.__dict__.update(
        meshes=dict(first["meshes"]), mesh_ops=[ops[op.oid] for op in first["mesh_ops"]],
        funcs={name: ops[op.oid] for name, op in first["funcs"].items()}, ops=ops,
        values=values)
    return True
