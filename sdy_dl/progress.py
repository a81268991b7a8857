"""A progress display on stderr for long runs (terminal only, modules of at least
``MIN_OPS`` ops, not ``--quiet``).

One row per stage, labelled with what runs — the pass and its phase
(``user-priority-propagate · user priority 0, op-priority band 2``) or the
audit's stage (``conflicts: factor records of 5120 steps``, ``explain --all:
values``) — and nothing on it ever moves backwards: counts are totals since
the stage began; a stage whose amount of work is known ahead (values to
explain) has a bar with that total, the others (a fixpoint's worklist grows
as it goes) a pulsing bar.  A stage's row is removed when it ends.
"""

from __future__ import annotations

import contextlib
import sys

#: Modules with fewer ops than this run without a progress display.
MIN_OPS = 2000


class Display:
    """The display of one run: ``stage(label, total)`` opens a row.  Hidden (every
    call a no-op) unless shown on a terminal."""

    def __init__(self, op_count: int, quiet: bool, console=None):
        """``console``: a rich console to draw on (default: stderr, when it is a terminal)."""
        self._shown = console is not None or (not quiet and op_count >= MIN_OPS
                                              and sys.stderr.isatty())
        self._console = console
        self._bar = None
        self._open = 0

    @contextlib.contextmanager
    def stage(self, label: str, total: int | None = None):
        """A row labelled ``label`` for the stage run inside the ``with``: yields a
        :class:`Stage` to report its progress on."""
        if not self._shown:
            yield Stage(None, None, label)
            return
        with self._started():
            task = self._bar.add_task(label, total=total, detail="")
            try:
                yield Stage(self._bar, task, label)
            finally:
                self._bar.remove_task(task)

    @contextlib.contextmanager
    def _started(self):
        """The rich display, started while any stage is open."""
        if self._bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 TextColumn("{task.fields[detail]}"), TimeElapsedColumn(),
                                 console=self._console or Console(stderr=True), transient=True)
        if self._open == 0:
            self._bar.start()
        self._open += 1
        try:
            yield
        finally:
            self._open -= 1
            if self._open == 0:
                self._bar.stop()


class Stage:
    """One row: ``advance()`` moves its bar on, ``detail(text)`` and ``phase(text)``
    change what it says (never the amount done)."""

    def __init__(self, bar, task, label: str):
        self._bar, self._task, self._label = bar, task, label
        self.done = 0

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done)

    def detail(self, text: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, detail=text)

    def phase(self, text: str) -> None:
        """The stage's label followed by ``text`` (``""``: the label alone)."""
        if self._bar is not None:
            self._bar.update(self._task, description=f"{self._label} · {text}" if text
                             else self._label)


class FixpointCounts:
    """``report(popped, pending, steps, calls)`` as the propagation driver calls it
    (visits of the running fixpoint; steps and engine calls of the whole pass),
    shown as totals over the whole pass: a new fixpoint (band, priority) restarts
    the driver's visit count, not this one."""

    def __init__(self, stage: Stage, phase=lambda: ""):
        """``phase()``: the phase running now (the propagator's band and priority)."""
        self._stage, self._phase = stage, phase
        self._last = 0          # the driver's visit count at its last report
        self._base = 0          # visits of the fixpoints before this one
        self._shown_phase = None

    def visits(self, popped: int) -> int:
        """The visits of the pass so far, given the running fixpoint's ``popped``."""
        if popped <= self._last:   # a new fixpoint began (one reports strictly increasing counts)
            self._base += self._last
        self._last = popped
        return self._base + popped

    def __call__(self, popped: int, pending: int, steps: int, calls: int) -> None:
        visits = self.visits(popped)
        phase = self._phase()
        if phase != self._shown_phase:
            self._stage.phase(phase)
            self._shown_phase = phase
        self._stage.detail(f"{visits} visits, {pending} pending, {steps} steps, "
                           f"{calls} engine calls")


@contextlib.contextmanager
def propagation_progress(op_count: int, quiet: bool, name: str = "propagation",
                         phase=lambda: ""):
    """Yields a ``report(popped, pending, steps, calls)`` callback for the propagation
    pass ``name`` (a no-op when hidden); ``phase()`` names the phase running."""
    display = Display(op_count, quiet)
    if not display._shown:
        yield lambda *_: None
        return
    with display.stage(name) as stage:
        yield FixpointCounts(stage, phase)
