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

    ``stack`` (bottom first) and ``pending`` (its ops' numbers) are public: the
    fixpoint loop (``driver.Propagator.drain``, the hot loop) pops inline, taking
    the last op of ``stack`` and discarding it from ``pending`` exactly as
    :meth:`pop` does, and the replay reads and restarts them."""

    def __init__(self, ops: Iterable[Op]):
        self.restart(list(ops)[::-1])

    def restart(self, stack: list[Op], oids=None) -> None:
        """Hold exactly ``stack`` (bottom first: its last op is popped first);
        ``oids``: its ops' numbers, when known."""
        self.stack = stack
        self.pending = {op.oid for op in stack} if oids is None else set(oids)

    def push(self, op: Op) -> None:
        """Enqueue ``op`` unless it is already pending."""
        if op.oid not in self.pending:
            self.pending.add(op.oid)
            self.stack.append(op)

    def pop(self) -> Op | None:
        """The next op to process, or None when the list is empty."""
        if not self.stack:
            return None
        op = self.stack.pop()
        self.pending.discard(op.oid)
        return op

    def fork(self) -> ForkedWorklist:
        """A worklist that continues from this one's pending ops, in the same
        order, without changing this one (and without copying it)."""
        return ForkedWorklist(self)

    def __len__(self) -> int:
        return len(self.stack)


class ForkedWorklist:
    """A continuation of a :class:`Worklist` that leaves the original intact:
    its own pushes are popped first; then the original's stack is read
    downwards by position."""

    def __init__(self, base: Worklist):
        self._base = base
        self._next = len(base.stack)   # base.stack[:_next] not popped yet here
        self._popped: set[int] = set()  # base ops popped here
        self.stack: list[Op] = []
        self.pending: set[int] = set()

    def push(self, op: Op) -> None:
        """Enqueue ``op`` unless it is already pending."""
        oid = op.oid
        if oid in self.pending or (oid in self._base.pending and oid not in self._popped):
            return
        self.pending.add(oid)
        self.stack.append(op)

    def pop(self) -> Op | None:
        """The next op to process, or None when the list is empty."""
        if self.stack:
            op = self.stack.pop()
            self.pending.discard(op.oid)
            return op
        if not self._next:
            return None
        self._next -= 1
        op = self._base.stack[self._next]
        self._popped.add(op.oid)
        return op
