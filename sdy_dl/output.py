"""Output files: written whole or not at all, and never clobbering what a path points to.

* ``-`` is standard output; nothing is written to it until the whole text is
  made.  An empty name is a usage error.
* A new file, or an existing regular file, is written to a temporary file in
  the same directory and renamed over the target: a failure leaves no partial
  file (a directory that takes no new file, ``/proc``, is an error about the
  target naming its directory).  A new file gets the permissions the umask gives (like ``open``); a
  replaced file keeps its own.
* A symlink is followed: its target is written (atomically when it is a
  regular file or does not exist yet); the link itself stays.
* Anything else that exists (a FIFO, a device such as ``/dev/stdout``) is
  opened and written through; renaming over it would replace it.
* A command's several outputs (:func:`write_all`) are written all or none.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Callable, Iterable, Sequence

from sdy_dl.errors import SdyError, UsageError


def write_report(path: str, fmt: str, report, text: Callable[[], str]) -> None:
    """Write a command's ``report`` to ``path`` as :func:`write_atomic` does: its
    ``to_json()`` indented for ``fmt`` ``json``, else the text ``text()`` makes."""
    import json

    body = json.dumps(report.to_json(), indent=2) if fmt == "json" else text()
    write_atomic(path, body + "\n")


def write_atomic(path: str, text: str | bytes | Iterable[str]) -> None:
    """Write ``text`` to ``path`` (``-`` is stdout) as described above; ``text`` may
    come in pieces (written as they come: a piece that fails leaves no file), or as
    its UTF-8 bytes."""
    write_all([(path, text)])


def write_all(outputs: Sequence[tuple[str, str | bytes | Iterable[str]]]) -> None:
    """Write each ``(path, text)`` of ``outputs`` as :func:`write_atomic` does, and
    the files all or none: every file that is replaced is written to its
    temporary file before the first is renamed over its target; FIFOs, devices
    and standard output, which cannot be taken back, are written last.  Two
    outputs naming the same file are a usage error."""
    if any(not path for path, _ in outputs):
        raise UsageError("the output file name is empty (-o '')")
    seen = {}
    staged, later = [], []
    try:
        for path, text in outputs:
            target = _target(path)
            if target is None:
                later.append((path, text))
                continue
            real = os.path.realpath(target[0])
            if real in seen:
                raise UsageError(f"two outputs name the same file: {seen[real]} and {path}")
            seen[real] = path
            staged.append((_stage(path, target[0], text, target[1]), target[0], path))
        for i, (tmp, target, path) in enumerate(staged):
            try:
                os.replace(tmp, target)
            except OSError as e:
                raise SdyError(f"cannot write output: {e.strerror}", file=path) from None
            staged[i] = (None, target, path)
    except BaseException:
        for tmp, _, _ in staged:
            if tmp is not None:
                os.unlink(tmp)
        raise
    for path, text in later:
        if path == "-":
            _write_stdout(text)
        else:
            _write_through(path, text)


def _target(path: str) -> tuple[str, int | None] | None:
    """Where a file written whole goes for ``path``: the file to rename over and the
    permissions to keep (None: a new file); None for standard output and what
    exists and is not a regular file (written through)."""
    if path == "-":
        return None
    try:
        st = os.stat(path)  # follows symlinks
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise SdyError(f"cannot write output: {e.strerror}", file=path) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise SdyError("cannot write output: is a directory", file=path)
    if st is not None and not stat.S_ISREG(st.st_mode):
        return None
    target = os.path.realpath(path) if os.path.islink(path) else path
    return target, None if st is None else stat.S_IMODE(st.st_mode)


def _pieces(text: str | bytes | Iterable[str]) -> Iterable[str | bytes]:
    """``text`` as a sequence of pieces to write."""
    return (text,) if isinstance(text, (str, bytes)) else text


def _utf8(piece: str | bytes) -> bytes:
    return piece.encode("utf-8") if isinstance(piece, str) else piece


def _write_stdout(text: str | bytes | Iterable[str]) -> None:
    """Every piece is made before the first is written: a failure while making
    them leaves standard output untouched.  A broken pipe stays
    :class:`BrokenPipeError` (the CLI stops quietly); any other failure is an
    error about ``<stdout>``."""
    pieces = list(_pieces(text))
    out = sys.stdout
    binary = getattr(out, "buffer", None)   # (None: a text-only stream, e.g. io.StringIO)
    try:
        for piece in pieces:
            if isinstance(piece, str):
                out.write(piece)
            elif binary is None:
                out.write(piece.decode("utf-8"))
            else:   # (the bytes as they are, after any text written before them)
                out.flush()
                binary.write(piece)
        out.flush()
        if binary is not None:
            binary.flush()
    except BrokenPipeError:
        # Nobody reads the rest; keep Python from complaining again at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise
    except OSError as e:
        raise SdyError(f"cannot write output: {e.strerror or e}", file="<stdout>") from None


def _write_through(path: str, text: str | bytes | Iterable[str]) -> None:
    try:
        with open(path, "wb") as f:
            for piece in _pieces(text):
                f.write(_utf8(piece))
    except OSError as e:
        raise SdyError(f"cannot write output: {e.strerror}", file=path) from None


def _stage(path: str, target: str, text: str | bytes | Iterable[str], mode: int | None) -> str:
    """A new temporary file beside ``target`` holding ``text``, with permissions
    ``mode`` (None: the umask's), ready to be renamed over ``target``."""
    directory = os.path.dirname(os.path.abspath(target))
    try:
        fd, tmp = _new_file(directory)
    except OSError as e:   # (the error is the directory's, not the target's: say so)
        raise SdyError(f"cannot write output: no new file can be made in its directory "
                       f"{directory} ({e.strerror})", file=path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            for piece in _pieces(text):
                f.write(_utf8(piece))
        os.chmod(tmp, mode if mode is not None else 0o666 & ~_umask())
    except OSError as e:
        os.unlink(tmp)
        raise SdyError(f"cannot write output: {e.strerror}", file=path) from None
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def _new_file(directory: str) -> tuple[int, str]:
    """A file no other process has, made in ``directory`` (mode 0600, open for
    writing), and its path; as ``tempfile.mkstemp`` makes it, without importing
    ``tempfile`` (with ``shutil`` and ``random``, a measurable share of a
    command's start)."""
    for n in range(10000):
        path = os.path.join(directory, f".sdy-dl-{os.getpid()}-{n}")
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary file name")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
