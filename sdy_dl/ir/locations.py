"""Which locations of a module are positions in its text.

When sdy-dl parses a module, the parser gives every op and block argument the
text gave no ``loc(...)`` a file location of the name :data:`INPUT_FILE`.  No
module text can write that name: it holds a NUL, and a string literal that
decodes to a NUL is refused before parsing
(:func:`~sdy_dl.ir.strings.check_string_literals`; the exception, a custom
call's opaque ``backend_config``, is an attribute's value, never a location's
file).  So a location of that file is exactly a place in the text read, and
every other file location (``loc("model.py":12:3)``, a JAX program's Python
line; ``loc("x.mlir":7:3)`` or ``loc("-":7:3)``, written by the tool that made
the text, even when it names the module's own file) is a *foreign* location:
never taken for a line of the module.
"""

from __future__ import annotations

import re

#: The file name the parser gives the locations it makes (see the module docstring).
INPUT_FILE = "\0module text"
#: :data:`INPUT_FILE` as a printed location spells it.
_INPUT_PRINTED = "\\00module text"

#: A file location in a printed MLIR location: ("file", line, column).
FILE_LOC_RE = re.compile(r'"([^"]*)":(\d+):(\d+)')


def text_position(loc, file: str = INPUT_FILE) -> tuple[int, int] | None:
    """(line, column) in the module's text of the MLIR location ``loc`` (or its
    printed form), as the parser located its op; None for a location the text
    gave (a foreign location, see the module docstring) or none.  ``file``: the
    name of the parser's locations, when it is not :data:`INPUT_FILE` (``-``,
    MLIR's module parser's, in a text that writes no location of ``-``)."""
    text = str(loc)
    printed = _INPUT_PRINTED if file == INPUT_FILE else file
    if printed not in text:
        return None
    for f, line, col in FILE_LOC_RE.findall(text):
        if f == printed:
            return int(line), int(col)
    return None


def file_places(loc) -> tuple[tuple[int, int] | None, list[tuple[str, int]]]:
    """(:func:`text_position` of ``loc`` (or its printed form), the (file, line) of
    every file location in it that is not a position in the module's text, in
    printed order), read in one pass."""
    position, foreign = None, []
    for f, line, col in FILE_LOC_RE.findall(str(loc)):
        if f != _INPUT_PRINTED:
            foreign.append((f, int(line)))
        elif position is None:
            position = int(line), int(col)
    return position, foreign
