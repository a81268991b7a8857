"""The one exception type of sdy-dl: an error with a place.

Every user-facing failure (malformed MLIR, invalid sharding, unknown mesh, bad
YAML rule, ...) is raised as :class:`SdyError`.  The CLI prints it as
``sdy-dl: error: <file>:<line>:<col>: <message>`` and exits with status 1 (``diff``:
2); :func:`one_line` makes any text such a line (control characters escaped).
"""

from __future__ import annotations

import re

#: Control characters (C0, DEL, C1), escaped in a printed error.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


class SdyError(Exception):
    """A user error, optionally located at ``file:line:col``."""

    def __init__(self, message: str, file: str | None = None,
                 line: int | None = None, col: int | None = None):
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.col = col

    def where(self) -> str:
        """The ``file:line:col`` prefix (only the parts that are known)."""
        parts = [p for p in (self.file, self.line, self.col) if p is not None]
        return ":".join(str(p) for p in parts)

    def located(self, file: str | None = None, line: int | None = None,
                col: int | None = None) -> "SdyError":
        """Fill in the parts of the place that are still unknown."""
        self.file = self.file if self.file is not None else file
        self.line = self.line if self.line is not None else line
        self.col = self.col if self.col is not None else col
        return self

    def __str__(self) -> str:
        where = _escaped(self.where())
        return f"{where}: {one_line(self.message)}" if where else one_line(self.message)


def one_line(text: str) -> str:
    """``text`` as one line of an error: its blanks and line breaks one space, its
    control characters escaped (``\\x1b``: a name in an input cannot drive the
    terminal showing the error)."""
    return _escaped(" ".join(text.split()))


def _escaped(text: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class InvalidModule(SdyError):
    """A module the MLIR verifier refuses (``verify_module``, after the passes)."""


class UsageError(SdyError):
    """A command-line usage error (an unknown or badly typed option): exit status 2."""

    exit_code = 2
