"""Atomic output: a file is either written whole or not at all."""

from __future__ import annotations

import os
import sys
import tempfile

from sdy_dl.errors import SdyError


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and a rename (``-`` is stdout)."""
    if path == "-":
        sys.stdout.write(text)
        return
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".sdy-dl-", dir=directory)
    except OSError as e:
        raise SdyError(f"cannot write output: {e.strerror}", file=path) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
