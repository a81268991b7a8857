"""Trim, from the C++ that ``souffle -g`` writes, what sdy-dl's server never uses.

Two edits, each saving only compile time (the step program's translation unit:
~80 → ~60 s of CPU; measurements in ``docs/performance.md``):

* **Internal relations lose their** ``RelationWrapper`` (the member, its
  initialiser and its ``addRelation`` call, :func:`drop_internal_wrappers`).
  The wrapper template is instantiated per relation type with every virtual
  method, and the server reaches only input and output relations by name.
  Internal relations are emptied by the program itself at their last use: the
  server runs programs with ``pruneImdtRels`` (``runAll("", "", false, true)``).
* **Soufflé's I/O is reached through the server object**
  (:func:`call_io_through_server`): ``IOSystem::getInstance()`` becomes
  ``souffle::sdy_dl_io()``, defined in ``souffle_server.cpp``, which is compiled
  once per cache.  Every reader and writer Soufflé has (CSV, JSON, SQLite, gzip)
  is then compiled once, not once per translation unit.

Text an edit does not recognise in full is left as it is; the builder compiles
the unedited file when the edited one fails (:mod:`sdy_dl.engines.souffle_build`).
"""

from __future__ import annotations

import re

from sdy_dl.engines.souffle_split import runtime_lines

_ADD_INTERNAL = re.compile(r'addRelation\("[^"\n]*", (wrapper_rel_\w+), false, false\);$')
_MEMBER = re.compile(r"souffle::RelationWrapper<[\w:]+> (wrapper_rel_\w+);$")
_INITIALISER = re.compile(r"(wrapper_rel_\w+)\(\d+, \*rel_\w+, \*this, .*\),$")

#: What the generated code calls for Soufflé's I/O, and what it calls instead.
IO_CALL = "IOSystem::getInstance()"
IO_THROUGH_SERVER = "souffle::sdy_dl_io()"

#: The declaration of :data:`IO_THROUGH_SERVER`, a block ahead of the program's own.
IO_DECLARATION = ("namespace souffle {\n"
                  "class IOSystem; IOSystem& sdy_dl_io();   // defined in souffle_server.cpp\n"
                  "} // namespace souffle\n")


def trim(text: str) -> str:
    """``text`` (``souffle -g`` output) with both edits."""
    return call_io_through_server(drop_internal_wrappers(text))


def drop_internal_wrappers(text: str) -> str:
    """``text`` without the wrappers of relations that are neither input nor
    output, or unchanged unless each such wrapper has exactly its member, its
    initialiser and its ``addRelation`` line."""
    lines = text.splitlines(keepends=True)
    internal = {m.group(1) for line in lines if (m := _ADD_INTERNAL.match(line.strip()))}
    if not internal:
        return text
    kept, dropped = [], {name: 0 for name in internal}
    for line in lines:
        stripped = line.strip()
        match = (_ADD_INTERNAL.match(stripped) or _MEMBER.match(stripped)
                 or _INITIALISER.match(stripped))
        if match and match.group(1) in internal:
            dropped[match.group(1)] += 1
            continue
        kept.append(line)
    if any(n != 3 for n in dropped.values()):
        return text
    out = "".join(kept)
    if any(name in out for name in internal):   # used somewhere else: keep them all
        return text
    return out


def call_io_through_server(text: str) -> str:
    """``text`` calling :data:`IO_THROUGH_SERVER` for :data:`IO_CALL`, declared in a
    block after the runtime includes (unchanged when it never calls it)."""
    if IO_CALL not in text:
        return text
    lines = text.splitlines(keepends=True)
    start = runtime_lines(lines)
    body = "".join(lines[start:]).replace(IO_CALL, IO_THROUGH_SERVER)
    return "".join(lines[:start]) + IO_DECLARATION + body
