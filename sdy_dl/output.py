"""Output files: written whole or not at all, and never clobbering what a path points to.

* ``-`` is standard output; nothing is written to it until the whole text is
  made.  An empty name is a usage error.
* A new file, or an existing regular file, is written to a temporary file in
  the same directory and renamed over the target: a failure leaves no partial
  file (a directory that takes no new file, ``/proc``, is an error about the
  target naming its directory).  A new file gets the permissions the umask
  gives (like ``open``); a replaced file keeps its own.
* A symlink is followed: its target is written (atomically when it is a
  regular file or does not exist yet); the link itself stays.
* Anything else that exists (a FIFO, a device such as ``/dev/stdout``) is
  opened and written through; renaming over it would replace it.
* A command's several outputs (:func:`write_all`) are written all or none,
  as far as an output can be taken back: a failure leaves no file written or
  replaced, but what standard output, a FIFO or a device took before it stays.
  Two of them naming one file (also ``-`` and ``/dev/stdout``, or the file
  standard output is redirected to) are a usage error.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from collections.abc import Callable, Iterable, Sequence

from sdy_dl.errors import SdyError, UsageError
from sdy_dl.signals import raise_pending


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
    the files all or none.  In order, a failure at a step leaving no file written:
    every text is made and every file that is replaced is written to its
    temporary file; every FIFO and device is opened; standard output, the FIFOs
    and devices are written (a failure there cannot take back what they took);
    the temporary files are renamed over their targets (:func:`_replace_all`: a
    rename that fails puts back the files renamed before it).  Two outputs
    naming the same file (:func:`_file_names`) are a usage error."""
    if any(not path for path, _ in outputs):
        raise UsageError("the output file name is empty (-o '')")
    raise_pending()
    seen = {}
    staged, streams, opened = [], [], []
    try:
        for path, text in outputs:
            target = _target(path)
            names = _file_names(path, target)
            for name in names:
                if name in seen:
                    raise UsageError(f"two outputs name the same file: {seen[name]} and {path}")
            seen.update(dict.fromkeys(names, path))
            if target is None:
                streams.append((path, list(_pieces(text))))
                continue
            staged.append((_stage(path, target[0], text, target[1]), target[0], path))
        for path, pieces in streams:
            if path != "-":
                opened.append((_open_through(path), path, pieces))
        if any(path == "-" for path, _ in streams):
            _write_stdout([piece for path, pieces in streams if path == "-" for piece in pieces])
        for f, path, pieces in opened:
            _write_through(f, path, pieces)
        _replace_all(staged)
    except BaseException:
        for tmp, _, _ in staged:
            if os.path.lexists(tmp):
                os.unlink(tmp)
        raise
    finally:
        for f, _, _ in opened:
            with contextlib.suppress(OSError):
                f.close()


def _replace_all(staged: Sequence[tuple[str, str, str]]) -> None:
    """Rename each temporary file of ``staged`` (``(tmp, target, path)``) over its
    target, all or none: a rename that fails puts back the targets renamed
    before it (removes the new ones; an existing one is kept as a hard link
    beside it until the last rename, unless its file system has no hard links)."""
    done = []   # (target, its kept copy or None, whether it existed)
    try:
        for n, (tmp, target, path) in enumerate(staged):
            existed = os.path.lexists(target)
            kept = _keep(target) if existed and n + 1 < len(staged) else None
            try:
                os.replace(tmp, target)
            except OSError as e:
                if kept is not None:
                    os.unlink(kept)
                raise SdyError(f"cannot write output: {e.strerror}", file=path) from None
            done.append((target, kept, existed))
    except BaseException:
        for target, kept, existed in reversed(done):
            with contextlib.suppress(OSError):
                if kept is not None:
                    os.replace(kept, target)
                elif not existed:
                    os.unlink(target)
        raise
    for _, kept, _ in done:
        if kept is not None:
            os.unlink(kept)


def _keep(target: str) -> str | None:
    """A hard link to ``target`` beside it, under a name no other file has (None:
    the file system makes none)."""
    try:
        return _made_beside(os.path.dirname(os.path.abspath(target)), "kept-",
                            lambda path: os.link(target, path))[1]
    except OSError:
        return None


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


def _file_names(path: str, target: tuple[str, int | None] | None) -> list:
    """What names the file ``path`` writes, to tell two outputs of one file: its
    device and inode numbers when it is a regular file or a FIFO (standard
    output's for ``-``, so ``/dev/stdout``, a FIFO or a file standard output is
    redirected to are standard output too; a device such as ``/dev/null`` or a
    terminal holds nothing one output could spoil for another), and the real path
    of a file written whole (``target``)."""
    names: list = ["-"] if path == "-" else []
    try:
        st = os.fstat(sys.stdout.fileno()) if path == "-" else os.stat(path)
        if stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            names.append((st.st_dev, st.st_ino))
    except (OSError, ValueError, AttributeError):   # (standard output with no descriptor)
        pass
    if target is not None:
        try:
            names.append(os.path.realpath(target[0]))
        except OSError as e:   # (a relative path in a working directory removed)
            raise SdyError(f"cannot write output: {e.strerror}", file=path) from None
    return names


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


def _open_through(path: str):
    """``path``, a FIFO or a device, opened to be written through."""
    try:
        return open(path, "wb")
    except OSError as e:
        raise SdyError(f"cannot write output: {e.strerror}", file=path) from None


def _write_through(f, path: str, pieces: Iterable[str | bytes]) -> None:
    """Write ``pieces`` to ``f``, opened on ``path``, and close it."""
    try:
        with f:
            for piece in pieces:
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
    return _made_beside(directory, "", lambda path: os.open(
        path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))


def _made_beside(directory: str, prefix: str, make: Callable[[str], object]):
    """``(make(path), path)`` for the first ``path`` in ``directory`` of this
    process's names (``prefix`` and a number) that ``make`` does not find taken."""
    for n in range(10000):
        path = os.path.join(directory, f".sdy-dl-{os.getpid()}-{prefix}{n}")
        try:
            return make(path), path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary file name")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
