"""A progress display on stderr for long propagations (terminal only)."""

from __future__ import annotations

import contextlib
import sys

#: Modules with fewer ops than this propagate without a progress display.
MIN_OPS = 2000


@contextlib.contextmanager
def propagation_progress(op_count: int, quiet: bool):
    """Yields a ``report(popped, pending, steps, calls)`` callback (a no-op when hidden)."""
    if quiet or op_count < MIN_OPS or not sys.stderr.isatty():
        yield lambda *_: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("propagating"), BarColumn(), TextColumn("{task.description}"),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("", total=op_count)

        def report(popped: int, pending: int, steps: int, calls: int) -> None:
            bar.update(task, completed=max(0, op_count - pending),
                       description=f"{popped} visits, {steps} steps, {calls} engine calls")
        yield report
