"""String literals of module text, checked before jaxlib parses it.

An MLIR string literal may spell any byte with a two-digit hex escape
(``"a\\FFb"``), so valid UTF-8 text can hold strings that are not UTF-8 once
their escapes are decoded.  jaxlib turns every string it hands to Python into
a ``str``, and one that is not UTF-8 raises, or, inside a diagnostic callback
(``unknown axis "a\\xFFb"``), aborts the process.  So no such string may reach
jaxlib: :func:`check_string_literals` rejects, with the place of the first bad
byte, every literal that decodes to invalid UTF-8 or holds a NUL (a NUL in a
name cannot reach Datalog).  The one exception is the value of
``backend_config``: opaque bytes for a custom call's implementation, which
neither Shardy nor sdy-dl reads and jaxlib prints escaped.  A literal is that
value when the tokens before it, comments skipped, are ``{`` or ``,`` (an
attribute dictionary's), ``backend_config`` and ``=``; a comment's text is no
token, so no literal a symbol, axis or location name is made of is exempt.
"""

from __future__ import annotations

import re

from sdy_dl.errors import SdyError
from sdy_dl.text_input import position

#: A byte that may start trouble: an escape of a non-ASCII byte or of NUL, or a raw NUL.
_SUSPECT = re.compile(r"\\(?:[89a-fA-F][0-9a-fA-F]|00)|\x00")
#: String literals (the closing quote may be missing: the parser reports that) and comments.
_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"?|//[^\n]*')
_HEX = set("0123456789abcdefABCDEF")
_SIMPLE = {'"': 0x22, "\\": 0x5C, "n": 0x0A, "t": 0x09}
#: The characters MLIR's lexer skips between tokens.
_BLANK = " \t\r\n"


def check_string_literals(text: str, file: str) -> None:
    """Raise :class:`SdyError` at the first string literal of ``text`` that is not
    UTF-8 or holds a NUL once its escapes are decoded (see the module docstring)."""
    # (every suspect byte is a backslash or a NUL: most modules have neither, and
    # looking for one character is much cheaper than the pattern's scan)
    if ("\\" not in text and "\0" not in text) or _SUSPECT.search(text) is None:
        return
    code_start, comments = 0, []   # (since the last literal: where its code starts, its comments)
    for m in _TOKEN.finditer(text):
        token = m.group()
        if token[0] != '"':
            comments.append(m.span())
            continue
        start = code_start
        code_start = m.end()
        if _SUSPECT.search(token) is None or _is_opaque(text, start, comments, m.start()):
            if comments:
                comments = []
            continue
        data, where = _decode(token[1:])
        bad, what = _first_bad(data)
        if bad is not None:
            offset = m.start() + 1 + where[bad]
            line, col = position(text, offset)
            shown = token if len(token) <= 40 else token[:37] + "..."
            raise SdyError(f"string {shown} {what} once its escapes are decoded",
                           file, line, col)


def _is_opaque(text: str, start: int, comments: list[tuple[int, int]], end: int) -> bool:
    """Whether the tokens of ``text[start:end]`` (code after a literal, the spans
    ``comments`` skipped) end with ``{`` or ``,``, ``backend_config`` and ``=``."""
    bounds = [start, *(p for span in comments for p in span), end]
    code = " ".join(text[bounds[i]:bounds[i + 1]] for i in range(0, len(bounds), 2))
    for token in ("=", "backend_config"):
        code = code.rstrip(_BLANK)
        if not code.endswith(token):
            return False
        code = code[:-len(token)]
    return code.rstrip(_BLANK).endswith(("{", ","))


def _decode(body: str) -> tuple[bytes, list[int]]:
    """The bytes a literal's body (after the opening quote) stands for, and for each
    byte the offset in ``body`` of the character or escape it comes from."""
    out, where = bytearray(), []
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c == '"' and i == n - 1:
            break
        if c == "\\" and i + 1 < n:
            nxt = body[i + 1]
            if nxt in _SIMPLE:
                out.append(_SIMPLE[nxt])
                where.append(i)
                i += 2
                continue
            if i + 2 < n and nxt in _HEX and body[i + 2] in _HEX:
                out.append(int(body[i + 1:i + 3], 16))
                where.append(i)
                i += 3
                continue
        encoded = c.encode()
        out += encoded
        where += [i] * len(encoded)
        i += 1
    return bytes(out), where


def _first_bad(data: bytes) -> tuple[int | None, str]:
    """The index of the first byte of ``data`` that is not valid UTF-8 or is NUL."""
    nul = data.find(0)
    try:
        data.decode("utf-8")
        invalid = None
    except UnicodeDecodeError as e:
        invalid = e.start
    if invalid is not None and (nul < 0 or invalid < nul):
        return invalid, "is not valid UTF-8"
    if nul >= 0:
        return nul, "holds a NUL character"
    return None, ""
