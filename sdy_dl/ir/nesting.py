"""The bracket nesting of module text, bounded before jaxlib parses it.

MLIR's parser (and its printer and walks) recurse once per nested region,
attribute, array or type: a module nested deeply enough (about 3,500 nested
``stablehlo.while`` loops, 8,000 nested arrays in an attribute) overflows the
stack of the process, which dies with a segmentation fault, as Shardy's tools
do.  :func:`check_nesting` refuses, at the bracket that goes deeper, text
with more than :func:`max_depth` brackets (``( [ { <``; ``->`` and ``>=``,
string literals and comments aside) open at once: 2,000 with the usual 8 MiB
stack, which every kind of nesting parses, propagates and prints within
(about 4 KiB of stack per level), proportionally fewer with a smaller stack.
"""

from __future__ import annotations

import re

from sdy_dl.errors import SdyError
from sdy_dl.text_input import position

#: Bracket depth allowed with an 8 MiB stack (or more, or none set).
MAX_DEPTH = 2000
#: Stack bytes one bracket level may take in the parser, printer and walks.
_STACK_PER_LEVEL = 4096

#: What does not count: string literals, comments, arrows, ``>=``, and runs of
#: characters that are no bracket (``/`` and ``-`` one at a time).
_NOT_BRACKETS = re.compile(r'"(?:[^"\\\n]|\\.)*"?|//[^\n]*|->|>=|[^(){}\[\]<>"/\-]+|[/\-]')
_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"?|//[^\n]*|->|>=|[(\[{<]|[)\]}>]')
_TWO_KINDS = str.maketrans("([{<)]}>", "(((())))")
#: The same on the bytes of a text without backslashes (no escapes in its string
#: literals), ``>=`` or NUL: each ``//`` made a NUL, ``->`` deleted, then every
#: byte but brackets, quotes, NULs and newlines (a few passes in C).
_OTHER_BYTES = bytes(b for b in range(256) if b not in b'()[]{}<>"\0\n')
_NOT_BRACKET_BYTES = re.compile(rb'"[^"\n]*"?|\0[^\n]*|[^(){}\[\]<>"\0]+')
_TWO_KINDS_BYTES = bytes.maketrans(b"([{<)]}>", b"(((())))")


def max_depth() -> int:
    """The deepest bracket nesting allowed under this process's stack limit."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
    if soft == resource.RLIM_INFINITY:
        return MAX_DEPTH
    return max(1, min(MAX_DEPTH, soft // _STACK_PER_LEVEL))


def check_nesting(text: str, file: str) -> None:
    """Raise :class:`SdyError` at the first bracket of ``text`` nested deeper than
    :func:`max_depth` (see the module docstring)."""
    limit = max_depth()
    if len(text) <= limit:
        return   # (fewer characters than the depth allowed; counting the brackets of a
                 # large text costs as much as finding its depth)
    # Each pass removes the innermost pairs; what stays is the unmatched brackets.
    # The passes that remove some and the unmatched openers bound the depth.
    brackets = _brackets(text)
    for passes in range(limit + 1):
        fewer = brackets.replace(b"()", b"")
        if fewer == brackets:
            if passes + brackets.count(b"(") <= limit:
                return
            break
        brackets = fewer
    depth = 0
    for m in _TOKENS.finditer(text):
        token = m.group()
        if token in "([{<":
            depth += 1
            if depth > limit:
                line, col = position(text, m.start())
                raise SdyError(f"nested more than {limit} brackets deep (the parser would "
                               "overflow the stack)", file, line, col)
        elif token in ")]}>":
            depth = max(0, depth - 1)


def _brackets(text: str) -> bytes:
    """The brackets of ``text`` that count, openers as ``(`` and closers as ``)``."""
    if "\\" in text or ">=" in text or "\0" in text:
        return _NOT_BRACKETS.sub("", text).translate(_TWO_KINDS).encode()
    data = text.encode().replace(b"//", b"\0").replace(b"->", b"").translate(None, _OTHER_BYTES)
    return _NOT_BRACKET_BYTES.sub(b"", data).translate(_TWO_KINDS_BYTES)
