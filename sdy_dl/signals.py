"""SIGTERM and SIGHUP as an exception, raised only where it reaches the command.

The ``sdy-dl`` process handles both signals with :func:`terminate`, which
raises :class:`Terminated` where the program runs, so that what is being
written is removed on the way out, as on Ctrl-C.  Python code that jaxlib's
C++ calls back (an MLIR walk's visitor; the Python a bindings module runs
while it is imported) must not raise it: the bindings turn the exception into
another error, drop it, or abort the process.  Such calls run inside
:data:`deferred`; a signal arriving there is raised when the outermost of them
returns.  Without the handler installed (a program importing sdy-dl),
:data:`deferred` changes nothing.
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
    inside :data:`deferred`, on leaving it."""
    if _Deferred.depth:
        _Deferred.pending = signum
    else:
        raise Terminated(signum)
