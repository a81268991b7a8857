"""MLIR's greedy-driver worklist as Shardy configures it (§7.3).

The initial list holds every op in pre-order and is processed front to back;
ops enqueued later are processed before the remaining initial ones (LIFO);
enqueueing an op that is already pending does not move it.
"""

from __future__ import annotations

from collections.abc import Iterable

from sdy_dl.ir import Op


class Worklist:
    """A LIFO stack of pending ops without duplicates."""

    def __init__(self, ops: Iterable[Op]):
        self._stack = list(ops)[::-1]
        self._pending = {op.oid for op in self._stack}

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

    def copy(self) -> Worklist:
        """An independent worklist with the same pending ops in the same order."""
        other = Worklist(())
        other._stack, other._pending = list(self._stack), set(self._pending)
        return other

    def __len__(self) -> int:
        return len(self._stack)
