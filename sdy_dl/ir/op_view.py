"""The model form of single MLIR ops, built on demand without indexing the module.

A pass that edits the MLIR and needs the model form (:mod:`sdy_dl.ir.model`)
of a few ops only, such as the rule database for the ops it rewrites, asks
:class:`OpViews` instead of re-indexing the whole module.  A view is an
:class:`~sdy_dl.ir.model.Op`, :class:`~sdy_dl.ir.model.Value`,
:class:`~sdy_dl.ir.model.Block` or :class:`~sdy_dl.ir.model.Region` whose
links (operands, results, regions, parent, defining op, uses, ...) are built
from the MLIR when first read; one :class:`OpViews` gives one view per MLIR
object, so views compare by identity as model objects do.  Views read the IR
as it is when each link is first read: make a new :class:`OpViews` after
editing it.
"""

from __future__ import annotations

import itertools
from functools import cached_property

from jaxlib.mlir import ir

from sdy_dl.ir.mlir_ops import parent_op
from sdy_dl.ir.model import AsmNames, Block, Op, Region, Value
from sdy_dl.ir.walk import key


class OpViews:
    """Model views of the ops, values, blocks and regions of one MLIR module."""

    def __init__(self):
        self._views: dict[tuple[type, int], object] = {}
        self._ids = itertools.count()

    def _view(self, cls, obj):
        k = (cls, key(obj))
        view = self._views.get(k)
        if view is None:
            view = self._views[k] = cls(self, obj, next(self._ids))
        return view

    def op(self, mop) -> Op:
        """The view of the MLIR operation ``mop``."""
        return self._view(OpView, mop.operation)

    def value(self, mv) -> Value:
        """The view of the MLIR value ``mv``."""
        return self._view(ValueView, mv)

    def block(self, mblock) -> Block:
        """The view of the MLIR block ``mblock``."""
        return self._view(BlockView, mblock)


class OpView(Op):
    """An :class:`~sdy_dl.ir.model.Op` read from its MLIR operation on demand."""

    def __init__(self, views: OpViews, mop, oid: int):
        self._views, self.mlir, self.oid, self.name = views, mop, oid, mop.name
        self._position = self._location = None

    @cached_property
    def operands(self) -> list[Value]:
        return [self._views.value(v) for v in self.mlir.operands]

    def types(self) -> tuple[tuple, tuple]:
        """(operand types, result types) read from the MLIR, without value views
        (the rule database's signatures ask for them)."""
        mop = self.mlir
        return tuple([v.type for v in mop.operands]), tuple(mop.results.types)

    @cached_property
    def results(self) -> list[Value]:
        return [self._views.value(v) for v in self.mlir.results]

    @cached_property
    def regions(self) -> list[Region]:
        return [RegionView(self._views, r, self) for r in self.mlir.regions]

    @cached_property
    def parent(self) -> Op | None:
        parent = parent_op(self.mlir)
        return None if parent is None else self._views.op(parent)

    @cached_property
    def block(self) -> Block | None:
        return None if self.parent is None else self._views.block(self.mlir.block)


class RegionView(Region):
    """A :class:`~sdy_dl.ir.model.Region` of an :class:`OpView`."""

    def __init__(self, views: OpViews, mregion, owner: Op):
        self._views, self._mlir, self.owner = views, mregion, owner

    @cached_property
    def blocks(self) -> list[Block]:
        return [self._views.block(b) for b in self._mlir.blocks]


class BlockView(Block):
    """A :class:`~sdy_dl.ir.model.Block` read from its MLIR block on demand."""

    def __init__(self, views: OpViews, mblock, _id: int):
        self._views, self._mlir = views, mblock

    @cached_property
    def args(self) -> list[Value]:
        return [self._views.value(a) for a in self._mlir.arguments]

    @cached_property
    def ops(self) -> list[Op]:
        return [self._views.op(op) for op in self._mlir.operations]

    @cached_property
    def region(self) -> Region:
        owner = self._views.op(self._mlir.owner)
        return next(r for r in owner.regions if self in r.blocks)


class ValueView(Value):
    """A :class:`~sdy_dl.ir.model.Value` read from its MLIR value on demand."""

    def __init__(self, views: OpViews, mv, vid: int):
        self._views, self._mlir, self.vid, self.pointer = views, mv, vid, None
        t = self.mlir_type = mv.type
        self.shape = tuple(t.shape) if isinstance(t, ir.RankedTensorType) else None
        self.static = self.shape is not None and all(d >= 0 for d in self.shape)
        typed = mv.maybe_downcast()
        self._is_arg = isinstance(typed, ir.BlockArgument)
        self.index = typed.arg_number if self._is_arg else typed.result_number
        self._owner = mv.owner if self._is_arg else mv.owner.operation

    @cached_property
    def defining_op(self) -> Op | None:
        return None if self._is_arg else self._views.op(self._owner)

    @cached_property
    def block(self) -> Block | None:
        return self._views.block(self._owner) if self._is_arg else None

    @cached_property
    def uses(self) -> list[tuple[Op, int]]:
        return [(self._views.op(u.owner), u.operand_number) for u in self.mlir.uses]

    @cached_property
    def asm_state(self):
        top = (self._owner.owner if self._is_arg else self._owner).operation
        while top.parent is not None:
            top = top.parent.operation
        return AsmNames(top)
