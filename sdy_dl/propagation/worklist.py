"""MLIR's greedy-driver worklist as Shardy configures it (§7.3).

The initial list holds every op in pre-order and is processed front to back;
ops enqueued later are processed before the remaining initial ones (LIFO);
enqueueing an op that is already pending does not move it.
"""

from __future__ import annotations

from collections.abc import Iterable

from sdy_dl.ir import Op


class Worklist:
    """A LIFO stack of pending ops without duplicates.

    The fixpoint loop (``driver.Propagator.drain``, the hot loop) pops inline: it
    takes the last op of ``_stack`` and discards it from ``_pending`` exactly as
    :meth:`pop` does."""

    def __init__(self, ops: Iterable[Op]):
        self.restart(list(ops)[::-1])

    def restart(self, stack: list[Op], oids=None) -> None:
        """Hold exactly ``stack`` (bottom first: its last op is popped first);
        ``oids``: its ops' numbers, when known."""
        self._stack = stack
        self._pending = {op.oid for op in stack} if oids is None else set(oids)

    def push(self, op: Op) -> None:
        """Enqueue ``op`` unless it is already pending."""
        if op.oid not in self._pending:
            self._pending.add(op.oid)
            self._stack.append(op)

    def pop(self) -> Op | None:
        """The next op to process, or None when the list is empty."""
        if not self._stack:
            return None
        op = self._stack.pop()
        self._pending.discard(op.oid)
        return op

    def fork(self) -> ForkedWorklist:
        """A worklist that continues from this one's pending ops, in the same
        order, without changing this one (and without copying it)."""
        return ForkedWorklist(self)

    def __len__(self) -> int:
        return len(self._stack)


class ForkedWorklist:
    """A continuation of a :class:`Worklist` that leaves the original intact:
    its own pushes are popped first; then the original's stack is read
    downwards by position."""

    def __init__(self, base: Worklist):
        self._base = base
        self._next = len(base._stack)   # base._stack[:_next] not popped yet here
        self._popped: set[int] = set()  # base ops popped here
        self._stack: list[Op] = []
        self._pending: set[int] = set()

    def push(self, op: Op) -> None:
        """Enqueue ``op`` unless it is already pending."""
        oid = op.oid
        if oid in self._pending or (oid in self._base._pending and oid not in self._popped):
            return
        self._pending.add(oid)
        self._stack.append(op)

    def pop(self) -> Op | None:
        """The next op to process, or None when the list is empty."""
        if self._stack:
            op = self._stack.pop()
            self._pending.discard(op.oid)
            return op
        if not self._next:
            return None
        self._next -= 1
        op = self._base._stack[self._next]
        self._popped.add(op.oid)
        return op
