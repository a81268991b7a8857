"""A user's input file read as text, bounded: a module, a rule file, a cost model, a
replay's program and relations.

:func:`read_input` reads a file or standard input and refuses, each as a
located :class:`~sdy_dl.errors.SdyError`:

* a NUL byte, at its place: MLIR's lexer takes NUL for blank space, so a
  binary file would parse as something else, and ``/dev/zero`` would be read
  until memory runs out;
* more than :data:`MAX_INPUT_BYTES` (2 GiB - 1, the most MLIR's 32-bit
  locations place): a device or a pipe that never ends (``yes |``) is refused
  once past it rather than read for ever;
* bytes that are not UTF-8, at the first.

Columns count bytes from 1, as MLIR's do.
"""

from __future__ import annotations

import sys

from sdy_dl.errors import SdyError

#: The largest input read, in bytes.
MAX_INPUT_BYTES = 2**31 - 1
#: Bytes read at a time (a NUL or the limit is found after at most one more).
CHUNK = 1 << 20


def read_input(path: str, what: str, stdin: bool = False) -> str:
    """The text of file ``path`` (``stdin``: of standard input, named ``<stdin>``),
    ``what`` it is naming it in the errors (``module``, ``rule file``)."""
    name = "<stdin>" if stdin else path
    try:
        if stdin:
            data = _read_bounded(sys.stdin.buffer, name)
        else:
            with open(path, "rb") as f:
                data = _read_bounded(f, name)
    except OSError as e:
        raise SdyError(f"cannot read {what}: {e.strerror or e}", file=name) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _at(data, e.start, name, "not UTF-8 text") from None


def _read_bounded(f, name: str) -> bytes:
    """The bytes of ``f`` up to :data:`MAX_INPUT_BYTES`; a NUL byte or more is an error."""
    parts: list[bytes] = []
    size = 0
    while chunk := f.read(CHUNK):
        nul = chunk.find(b"\0")
        if nul >= 0:
            raise _at(b"".join(parts) + chunk, size + nul, name,
                      "a NUL byte (inputs are text)")
        size += len(chunk)
        if size > MAX_INPUT_BYTES:
            raise SdyError(f"more than {MAX_INPUT_BYTES} bytes (the largest input read)",
                           file=name)
        parts.append(chunk)
    return b"".join(parts)


def _at(data: bytes, offset: int, name: str, what: str) -> SdyError:
    """Error ``what`` at byte ``offset`` of ``data``, placed by line and byte column."""
    return SdyError(what, name, *position(data, offset))


def position(text: str | bytes, offset: int) -> tuple[int, int]:
    """(line, column) of ``offset`` in ``text``, both from 1, the column counted in
    UTF-8 bytes (as MLIR counts its locations' columns)."""
    newline = "\n" if isinstance(text, str) else b"\n"
    start = text.rfind(newline, 0, offset) + 1
    before = text[start:offset]
    return (text.count(newline, 0, offset) + 1,
            len(before.encode() if isinstance(before, str) else before) + 1)
