"""A rendered Soufflé program and the declarations it carries.

Every relation is declared once in a template as

    // doc: what one tuple means
    .decl name(col: number, other: symbol)   (or a type T declared `.type T <: number`)
    .input name            (an EDB relation, read from name.facts)
    .output name           (a relation read back by Python; also `.output a, b`)

``Program`` keeps the Soufflé text plus the parsed declarations, so engines
know column types and which relations are inputs and outputs.
"""

from __future__ import annotations

import functools
import re

from sdy_dl.errors import SdyError
from sdy_dl.frozen import Frozen

COLUMN_TYPES = ("number", "symbol")
BASE_TYPES = {"number": "number", "symbol": "symbol"}

_DECL_RE = re.compile(r'^\s*\.decl\s+([a-z][a-z0-9_]*)\s*\(([^)]*)\)\s*$')
_IO_RE = re.compile(r'^\s*\.(input|output)\s+(.*)$')
_IO_NAME_RE = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^)]*\))?\s*(?:,|$)')
_TYPE_RE = re.compile(r'^\s*\.type\s+([A-Za-z][A-Za-z0-9_]*)\s*<:\s*(number|symbol)\s*$')
_COMMENT_RE = re.compile(r'^\s*//\s?(.*)$')


class Decl(Frozen):
    """One relation: its columns ``(name, type)``, its doc line, its I/O role and
    its columns' declared types (``number``, ``symbol`` or a ``.type`` name)."""

    _fields = ("name", "columns", "doc", "is_input", "is_output", "type_names")

    def __init__(self, name: str, columns: tuple[tuple[str, str], ...], doc: str,
                 is_input: bool = False, is_output: bool = False,
                 type_names: tuple[str, ...] = ()):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "doc", doc)
        object.__setattr__(self, "is_input", is_input)
        object.__setattr__(self, "is_output", is_output)
        object.__setattr__(self, "type_names", type_names)

    @property
    def arity(self) -> int:
        return len(self.columns)

    # (read on every engine call: computed once per declaration)
    @functools.cached_property
    def types(self) -> tuple[str, ...]:
        return tuple(t for _, t in self.columns)


class Program(Frozen):
    """A genuine Soufflé program with its declarations (compared by both)."""

    _fields = ("text", "decls")

    def __init__(self, text: str, decls: dict[str, Decl] | None = None, key: str | None = None):
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "decls", {} if decls is None else decls)
        #: The compiler's cache key of the stage rendered into ``text`` (the text is a
        #: function of it; also a program of that text showing other relations), None
        #: for a program made otherwise: see :attr:`cache_key`.
        object.__setattr__(self, "key", key)

    # (read on every engine call: computed once per program object)
    @functools.cached_property
    def digest(self) -> str:
        """The SHA-256 of the text (keys what must follow the text itself, such as
        a compiled Soufflé binary, whatever rendered it)."""
        from sdy_dl.resources import sha256

        return sha256(self.text.encode()).hexdigest()[:20]

    @property
    def cache_key(self) -> str:
        """What keys cache entries that are quick to make again from the program
        (its Python plan, its check): :attr:`key` when it has one, so that a
        rendered stage's text is never hashed, else :attr:`digest`."""
        return self.key or self.digest

    @functools.cached_property
    def inputs(self) -> tuple[Decl, ...]:
        return tuple(d for d in self.decls.values() if d.is_input)

    @functools.cached_property
    def outputs(self) -> tuple[Decl, ...]:
        return tuple(d for d in self.decls.values() if d.is_output)


def parse_declarations(text: str, source: str = "<program>") -> dict[str, Decl]:
    """The declarations of a Soufflé program; every relation needs a doc comment."""
    decls: dict[str, Decl] = {}
    io: dict[str, set[str]] = {}
    types = dict(BASE_TYPES)
    doc_lines: list[str] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        m = _COMMENT_RE.match(line)
        if m:
            doc_lines.append(m.group(1).strip())
            continue
        m = _DECL_RE.match(line)
        if m:
            name, cols = m.group(1), m.group(2)
            if name in decls:
                raise SdyError(f"relation {name} declared twice", file=source, line=lineno)
            if not doc_lines:
                raise SdyError(f"relation {name} has no doc comment", file=source, line=lineno)
            columns, names = _columns(cols, name, source, lineno, types)
            decls[name] = Decl(name, columns, " ".join(doc_lines), type_names=names)
        elif (m := _TYPE_RE.match(line)):
            if m.group(1) in types:
                raise SdyError(f"type {m.group(1)} declared twice", file=source, line=lineno)
            types[m.group(1)] = m.group(2)
        elif (m := _IO_RE.match(line)):
            for name in _IO_NAME_RE.findall(m.group(2)):
                io.setdefault(name, set()).add(m.group(1))
        doc_lines = []
    for name, roles in io.items():
        if name not in decls:
            raise SdyError(f".{next(iter(roles))} of undeclared relation {name}", file=source)
        d = decls[name]
        decls[name] = Decl(d.name, d.columns, d.doc, "input" in roles, "output" in roles,
                           d.type_names)
    return decls


def check_input_names(decls: dict[str, Decl], source: str = "<program>") -> None:
    """Input relations, and only they, are named ``in_*``."""
    for d in decls.values():
        if d.is_input and not d.name.startswith("in_"):
            raise SdyError(f"input relation {d.name} is not named in_*", file=source)
        if not d.is_input and d.name.startswith("in_"):
            raise SdyError(f"relation {d.name} is named in_* but is not an input", file=source)


def _columns(text: str, name: str, source: str, lineno: int, types: dict[str, str]
             ) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """The columns ``(name, number or symbol)`` and their declared type names."""
    cols, names = [], []
    for part in filter(None, (p.strip() for p in text.split(","))):
        col, _, typ = (s.strip() for s in part.partition(":"))
        if typ not in types:
            raise SdyError(f"relation {name}: column {col} has type {typ!r}, expected "
                           f"{', '.join(COLUMN_TYPES)} or a type declared before it with "
                           "'.type T <: number' or '.type T <: symbol'", file=source, line=lineno)
        cols.append((col, types[typ]))
        names.append(typ)
    return tuple(cols), tuple(names)
