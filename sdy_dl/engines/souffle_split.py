"""Split the C++ that ``souffle -g`` writes into translation units compiled in parallel.

``souffle -g`` writes one file: Soufflé's runtime includes, then for every
relation type a namespace declaring ``struct Type`` followed by one defining
its methods, for every stratum a ``class Stratum_…`` declaration followed by
its definitions, the program class ``Sf_…`` likewise, and ``main``.  Every
declaration block only declares classes (member functions defined in a class
body are inline), so the declarations form a header that any number of
translation units can include, and the definition blocks can be spread over
them.  A step program (~50k lines of C++) compiles in ~60 s as one unit; in
pieces, two compilers share it.

:func:`split` returns the runtime includes (one header shared by every program,
so it can be precompiled once), the program's declarations, and the
definitions cut into pieces of about equal size.  In one piece, the relation
types' methods are made ``inline`` so that those the program never calls are
not compiled (~15% of a program's compile time).  It returns None for text
it does not recognise; the caller then compiles the file whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_OPEN = re.compile(r"namespace [^{]*\{$")
_CLOSE = re.compile(r"\} ?//\s*namespace\b")
_DECLARES = ("struct Type {", "class ")
_METHOD = re.compile(r"[A-Za-z][^;]*\bType::~?\w+\(.*\{")


@dataclass(frozen=True)
class Split:
    """A generated program cut into a runtime header, its declarations and definition pieces."""

    runtime: str       #: the ``#define``/``#include`` lines every generated program starts with
    declarations: str  #: every relation type, stratum and program class, declared
    pieces: list[str]  #: the definitions, in order, cut into about equal parts


def runtime_lines(lines: list[str]) -> int:
    """How many of ``lines`` (``souffle -g`` output) are the ``#define``/``#include``
    lines of the runtime it starts with."""
    start = 0
    while start < len(lines) and lines[start].startswith(("#define", "#include")):
        start += 1
    return start


def split(text: str, pieces: int) -> Split | None:
    """``text`` (``souffle -g`` output) cut into at most ``pieces`` definition
    pieces, or None when its layout is not the one described above."""
    lines = text.splitlines(keepends=True)
    start = runtime_lines(lines)
    runtime = "".join(lines[:start])
    if not runtime or "#include" not in runtime:
        return None
    declarations: list[str] = []
    definitions: list[str] = []
    i = start
    while i < len(lines):
        line = lines[i]
        if _OPEN.match(line):
            end = i + 1
            while end < len(lines) and not (_CLOSE.match(lines[end]) or _OPEN.match(lines[end])):
                end += 1
            if end == len(lines) or _OPEN.match(lines[end]):
                return None   # a block that does not close where expected
            block = "".join(lines[i:end + 1])
            if line.startswith("namespace functors") or _declares(lines[i + 1:end]):
                declarations.append(block)
            elif pieces <= 1 and line.startswith("namespace souffle::t_"):
                definitions.append(_inline_methods(block))
            else:
                definitions.append(block)
            i = end + 1
        elif line.startswith("#") or not line.strip():
            end = i
            if line.startswith("#if"):   # a conditional section at top level (main)
                depth = 0
                while end < len(lines):
                    if lines[end].startswith("#if"):
                        depth += 1
                    elif lines[end].startswith("#endif"):
                        depth -= 1
                        if depth == 0:
                            break
                    end += 1
                if end == len(lines):
                    return None
            definitions.append("".join(lines[i:end + 1]))
            i = end + 1
        else:
            return None   # code outside any namespace or conditional section
    if not any(d.strip() for d in definitions):
        return None
    return Split(runtime, "".join(declarations), _cut(definitions, max(1, pieces)))


def _inline_methods(block: str) -> str:
    """A relation type's method definitions declared ``inline``: in a single
    translation unit the compiler then emits only the methods the program
    calls (about a fifth of the type code is never called)."""
    return "".join("inline " + line if _METHOD.match(line) else line
                   for line in block.splitlines(keepends=True))


def _declares(body: list[str]) -> bool:
    """Whether a namespace block's ``body`` declares a class (and defines nothing outside it)."""
    code = [line for line in body if line.strip() and not line.startswith("using ")]
    return bool(code) and code[0].startswith(_DECLARES)


def _cut(blocks: list[str], pieces: int) -> list[str]:
    """``blocks`` joined into at most ``pieces`` consecutive parts of about equal size."""
    total = sum(len(b) for b in blocks)
    out: list[str] = []
    current: list[str] = []
    size = 0
    for block in blocks:
        current.append(block)
        size += len(block)
        if size >= total * (len(out) + 1) / pieces and len(out) < pieces - 1:
            out.append("".join(current))
            current = []
    if current:
        out.append("".join(current))
    return [p for p in out if p.strip()]
