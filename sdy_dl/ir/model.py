"""The plain Python model of a module: values, ops, blocks, regions, meshes.

The model is a read-only index over the jaxlib MLIR module it was built from
(``Module.mlir``).  Ops are listed in pre-order (parents before children, then
program order), the order Shardy's worklist starts from.  Every value (block
argument or op result) has a dense integer id; every op has one too.  Writing
shardings goes through :mod:`sdy_dl.ir.storage`, printing through
``Module.print``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sdy_dl.ir.traits import TERMINATORS

_LOC_RE = re.compile(r':(\d+):(\d+)')


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


@dataclass(eq=False, slots=True)
class Value:
    """An SSA value: a block argument or an op result."""

    vid: int
    asm_state: AsmNames = field(repr=False)  # names values as jaxlib prints them
    shape: tuple[int, ...] | None  # None: not a ranked tensor (token, tuple, unranked)
    static: bool                    # a ranked tensor with a static shape
    defining_op: "Op | None"        # None for block arguments
    block: "Block | None"           # the owning block, for block arguments
    index: int                      # result number, or argument number
    mlir: Any = field(repr=False)
    uses: list[tuple["Op", int]] = field(default_factory=list, repr=False)  # MLIR use-list order
    mlir_type: Any = field(default=None, repr=False)   # the MLIR type (uniqued: compares as an object)
    pointer: int | None = field(default=None, repr=False)   # its C++ pointer, once read (value_key)

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


@dataclass(eq=False)
class Block:
    """A block: its arguments and its ops in program order."""

    args: list[Value]
    ops: list["Op"]
    region: "Region"


@dataclass(eq=False)
class Region:
    """A region of an op: its blocks."""

    blocks: list[Block]
    owner: "Op"


@dataclass(eq=False, slots=True)
class Op:
    """An operation with its operands, results, regions and place."""

    oid: int
    name: str
    operands: list[Value]
    results: list[Value]
    regions: list[Region]
    parent: "Op | None"     # the op whose region holds this op (None at module level)
    block: Block | None
    mlir: Any = field(repr=False)
    _position: tuple[int | None, int | None] | None = field(default=None, repr=False)
    _location: str | None = field(default=None, repr=False)   # see location_text

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
        attrs = self.mlir.attributes
        return attrs[name] if name in attrs else None

    def attr_text(self, name: str) -> str | None:
        """The printed form of attribute ``name`` or None."""
        a = self.attr(name)
        return None if a is None else str(a)

    @property
    def attr_names(self) -> list[str]:
        return list(self.mlir.attributes)

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


@dataclass(eq=False)
class Module:
    """A parsed module: meshes, functions, ops in pre-order and values."""

    file: str
    mlir: Any = field(repr=False)
    meshes: dict = field(default_factory=dict)         # symbol name -> sharding.Mesh
    mesh_ops: list[Op] = field(default_factory=list)
    funcs: dict[str, Op] = field(default_factory=dict)
    ops: list[Op] = field(default_factory=list)
    values: list[Value] = field(default_factory=list)
    _by_mlir: dict = field(default_factory=dict, repr=False)
    #: The names of its ops, once read (``op_index.op_names``; maybe more, see there).
    _op_names: frozenset[str] | None = field(default=None, repr=False)
    #: Its ops in walk order, once read (:mod:`sdy_dl.ir.op_index`).
    _op_index: Any = field(default=None, repr=False)

    def value_of(self, mlir_value) -> Value:
        """The model value of an MLIR value."""
        return self._by_mlir[mlir_value]

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

    def print(self) -> str:
        """The module printed exactly as jaxlib prints it."""
        return str(self.mlir)

    def location(self, op: Op) -> tuple[str, int | None, int | None]:
        return (self.file, op.line, op.col)


def op_position(op_mlir) -> tuple[int | None, int | None]:
    """(line, column) of an MLIR operation's location, when it has one."""
    return position_in(str(op_mlir.location))


def position_in(location: str) -> tuple[int | None, int | None]:
    """(line, column) of a printed location, when it has one."""
    m = _LOC_RE.search(location)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)
