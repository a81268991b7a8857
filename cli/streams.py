"""The standard streams of an ``sdy-dl`` process, whatever state they come in.

A command may start with a standard stream closed (``<&-``, ``>&-``, ``2>&-``),
with standard output on a full disk (``> /dev/full``) or piped into a reader
that goes away (``| head``).  :func:`guard` (called once, before the command)
makes each of these a plain outcome:

* a closed descriptor 0, 1 or 2 is reopened on ``/dev/null``, so no file the
  command opens later takes its number (nor does a child process write into
  it);
* standard output is UTF-8, whatever the locale or ``PYTHONIOENCODING`` say
  (MLIR text is UTF-8: ``-o -`` writes the bytes ``-o FILE`` does), buffered
  whatever ``PYTHONUNBUFFERED`` says (a write is whole or an error), and a
  :class:`CheckedOutput`: writing to it when it was
  closed, or a write that fails (a full disk), raises :class:`SdyError`
  (``<stdout>: cannot write output: ...``), the CLI's one-line error; a
  broken pipe stays :class:`BrokenPipeError`, which the CLI ends quietly;
* standard input that was closed raises :class:`SdyError` when read;
* standard error never fails: when it is closed or cannot be written,
  messages are dropped (the exit status still tells).

As GNU tools do, a closed stream is a fault only when the command uses it:
``sdy-dl propagate M -o out.mlir >&-`` writes ``out.mlir`` and succeeds.
:func:`finish` flushes what is left at exit and turns a late write failure
into the error line and exit status 1.
"""

from __future__ import annotations

import os
import sys

from sdy_dl.errors import SdyError

STDOUT = "<stdout>"
STDIN = "<stdin>"


class CheckedOutput:
    """Standard output whose failures are :class:`SdyError` (``stream`` None: closed)."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        if self._stream is None:
            if not isinstance(text, str):
                raise TypeError("write() argument must be str")
            if text:
                raise SdyError("cannot write output: standard output is closed", file=STDOUT)
            return 0
        return _checked(self._stream.write, text)

    def flush(self) -> None:
        if self._stream is not None:
            _checked(self._stream.flush)

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    def writable(self) -> bool:
        return True

    def __getattr__(self, name):
        if self._stream is None:
            raise AttributeError(name)
        return getattr(self._stream, name)


def _checked(call, *args):
    """``call(*args)`` on standard output, a failure but a broken pipe raised as
    :class:`SdyError`."""
    try:
        return call(*args)
    except BrokenPipeError:
        raise
    except OSError as e:
        raise SdyError(f"cannot write output: {e.strerror or e}", file=STDOUT) from None


class ClosedInput:
    """Standard input that was closed: reading it is an error."""

    encoding = "utf-8"

    @property
    def buffer(self):
        return self

    def read(self, *_):
        raise SdyError("cannot read module: standard input is closed", file=STDIN)

    readline = read

    def isatty(self) -> bool:
        return False


class QuietError:
    """Standard error that never raises (writes to a closed or full stream are dropped)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except (OSError, ValueError):
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError):
            pass

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
        return False
    except OSError:
        return True


def guard() -> None:
    """Make the standard streams safe as the module docstring says (process-wide)."""
    closed = [fd for fd in (0, 1, 2) if _closed(fd)]
    for fd in closed:
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
    if 0 in closed or sys.stdin is None:
        sys.stdin = ClosedInput()
    if 1 not in closed and sys.stdout is not None:
        sys.stdout = _utf8_buffered(sys.stdout)
    sys.stdout = CheckedOutput(None if 1 in closed or sys.stdout is None else sys.stdout)
    if 2 in closed or sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")
    sys.stderr = QuietError(sys.stderr)


def _utf8_buffered(stream):
    """Standard output as UTF-8 text over a buffered writer of its descriptor (a
    stream that is no file, a test's, as it is).  With ``PYTHONUNBUFFERED`` Python's
    own writes each piece to the descriptor once: a pipe or a non-blocking
    descriptor that takes part of it lost the rest without an error."""
    import io

    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return stream
    return io.TextIOWrapper(io.BufferedWriter(io.FileIO(fd, "w", closefd=False)),
                            encoding="utf-8", errors="strict",
                            line_buffering=getattr(stream, "line_buffering", False))


def say_error(message: str) -> None:
    """Write the command's one error line, ``sdy-dl: error: MESSAGE``, to standard
    error (a plain write: it must work before click runs and after :func:`guard`)."""
    print(f"sdy-dl: error: {message}", file=sys.stderr)


def finish(code: int) -> int:
    """Flush the standard streams at exit; the exit status, 1 if standard output
    could not be written (with the error line) unless the command already failed."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    except SdyError as e:
        if not code:
            say_error(str(e))
            code = 1
    sys.stderr.flush()
    return code
