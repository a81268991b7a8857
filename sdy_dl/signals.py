"""SIGTERM and SIGHUP as an exception, raised only where it reaches the command.

The ``sdy-dl`` process handles both signals with :func:`terminate`, which
raises :class:`Terminated` where the program runs, so that what is being
written is removed on the way out, as on Ctrl-C.  Python code that jaxlib's
C++ calls back (an MLIR walk's visitor; the Python a bindings module runs
while it is imported) must not raise it: the bindings turn the exception into
another error, drop it, or abort the process.  Such calls run inside
:data:`deferred`; a signal arriving there is raised when the outermost of them
returns.  Nor may an import (Python's compiler, making a module's code from
its source, runs the handler and drops what it raises): a signal arriving
while a module is imported is raised once no import is under way (checked
again every hundredth of a second, with SIGALRM, and before the command
writes its outputs and as it ends: :func:`raise_pending`).  Without the handler
installed (a program importing sdy-dl), :data:`deferred` changes nothing.
"""

from __future__ import annotations

import signal


class Terminated(BaseException):
    """Signal ``signum`` (SIGTERM, SIGHUP) reached the process."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


class _Deferred:
    """``with deferred:`` — a signal arriving inside is raised on leaving (the
    outermost, when nested)."""

    depth = 0
    pending: int | None = None
    #: SIGALRM's one-shot timer is armed to handle ``pending`` again
    timed = False

    def __enter__(self):
        _Deferred.depth += 1

    def __exit__(self, *exc_info):
        _Deferred.depth -= 1
        if _Deferred.depth == 0 and _Deferred.pending is not None:
            signum, _Deferred.pending = _Deferred.pending, None
            raise Terminated(signum)


#: The region in which :func:`terminate` only records its signal.
deferred = _Deferred()


def terminate(signum, frame) -> None:
    """The handler of SIGTERM and SIGHUP: raise :class:`Terminated`, at once or,
    inside :data:`deferred`, on leaving it, or, during an import, once it is done."""
    if _Deferred.depth:
        _Deferred.pending = signum
    elif _importing(frame):
        _Deferred.pending, _Deferred.timed = signum, True
        signal.signal(signal.SIGALRM, _again)
        signal.setitimer(signal.ITIMER_REAL, 0.01)
    else:
        raise Terminated(signum)


def raise_pending() -> None:
    """Raise the signal an import put off, if one is still waiting (before a
    command writes its outputs, and as it ends)."""
    signum, _Deferred.pending = _Deferred.pending, None
    if _Deferred.timed:   # (nothing is left for SIGALRM's timer to handle)
        signal.setitimer(signal.ITIMER_REAL, 0)
        _Deferred.timed = False
    if signum is not None:
        raise Terminated(signum)


def _again(_, frame) -> None:
    """The signal an import put off, handled again (SIGALRM's handler)."""
    _Deferred.timed = False
    signum, _Deferred.pending = _Deferred.pending, None
    if signum is not None:
        terminate(signum, frame)


def _importing(frame) -> bool:
    """Whether ``frame`` runs inside an import (a frame of Python's import system)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False
