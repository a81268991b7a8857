"""Facts as Soufflé reads and writes them: one TSV file per relation.

``Facts`` maps a relation name to a list of tuples of ``int`` and ``str``.
Symbols are data: any text (quotes, backslashes, tabs, newlines, Datalog
syntax) except NUL.  In fact files a symbol is written with ``%XX`` escapes
for ``%``, ``"``, ``\\`` and every control character (tab and newline
included), so a field never holds a delimiter or a character Soufflé's reader
could interpret; outputs are unescaped when read back.  The escaping is
injective, so equality of symbols (the only comparison the programs make on
them) is preserved.
"""

from __future__ import annotations

import os
import re
from array import array
from collections.abc import Iterable, Mapping
from itertools import chain

from sdy_dl.datalog.program import Decl, Program
from sdy_dl.errors import SdyError

Facts = Mapping[str, Iterable[tuple]]


def check_facts(program: Program, facts: Facts) -> None:
    """Every fact relation is a declared input with the right arity and types, and
    every number fits the engines' 32-bit numbers."""
    for _ in checked_relations(program, facts):
        pass


def checked_relations(program: Program, facts: Facts) -> list[tuple[Decl, list[tuple]]]:
    """``(decl, rows)`` for every fact relation, checked: a declared input relation,
    its arity, ``int`` (32 bits) for number columns and ``str`` (Unicode text
    without NUL) for symbol columns.  The values of all number columns are checked
    at once, and those of all symbol columns (an engine call brings a few facts of
    many relations: checks per relation or column would cost more than the facts);
    when that quick check fails, relation after relation is checked row by row,
    which names the first bad fact."""
    out = []
    numbers: list = []
    symbols: list = []
    whole = True   # every row has its relation's arity
    for name, rows in facts.items():
        decl = _input_decl(program, name)
        rows = rows if isinstance(rows, list) else list(rows)
        out.append((decl, rows))
        if not rows:
            continue
        types = decl.types
        if set(map(len, rows)) != {len(types)}:
            whole = False
        elif "symbol" not in types:
            numbers += chain.from_iterable(rows)
        else:
            for column, typ in zip(zip(*rows), types):
                (numbers if typ == "number" else symbols).extend(column)
    if not (whole and (not numbers or _are_numbers(numbers))
            and (not symbols or _are_symbols(symbols))):
        for decl, rows in out:
            _check_rows(decl, rows)
    return out


def encoded_relations(program: Program, facts: Facts) -> dict[str, tuple[int, str | bytes]]:
    """``{relation: (number of rows, rows)}`` of every fact relation, checked as
    :func:`checked_relations` checks it: a relation of numbers only as native
    32-bit integers, row after row (:func:`number_rows`), any other (nullary
    ones too: their rows have no number) as fact-file lines (:func:`fact_lines`)."""
    out = {}
    for name, rows in facts.items():
        decl = _input_decl(program, name)
        rows = rows if isinstance(rows, list) else list(rows)
        numbers = number_rows(decl, rows) if decl.types and "symbol" not in decl.types else None
        out[name] = len(rows), fact_lines(decl, rows) if numbers is None else numbers
    return out


def number_rows(decl: Decl, rows: list[tuple]) -> bytes:
    """The checked ``rows`` of ``decl``, a relation of numbers only, as native
    32-bit integers, row after row."""
    numbers = _number_array(decl, rows)
    if numbers is not None:
        return numbers.tobytes()
    _check_rows(decl, rows)   # raises, unless the numbers are of a subclass of int
    return array("i", map(int, chain.from_iterable(rows))).tobytes()


def fact_lines(decl: Decl, rows: list[tuple]) -> str:
    """The checked ``rows`` of ``decl`` as fact-file lines: fields separated by
    tabs, one row a line."""
    if not rows:
        return ""
    columns = _checked_columns(decl, rows)
    if columns is None:
        _check_rows(decl, rows)   # raises, unless the numbers are of a subclass of int
        rows = [tuple(v if isinstance(v, str) else int(v) for v in row) for row in rows]
        columns = _checked_columns(decl, rows)
    escaped = [tuple(map(escape_symbol, column))
               if typ != "number" and _ESCAPE_RE.search("".join(column)) else column
               for column, typ in zip(columns, decl.types)]
    if any(e is not c for e, c in zip(escaped, columns)) or set(map(type, rows)) != {tuple}:
        rows = list(zip(*escaped))   # (rows as tuples: a format takes its fields from a tuple)
    return "".join(map(("\t".join(["%s"] * decl.arity) + "\n").__mod__, rows))


def _input_decl(program: Program, name: str) -> Decl:
    decl = program.decls.get(name)
    if decl is None or not decl.is_input:
        raise SdyError(f"facts given for {name}, which is not an input relation")
    return decl


def _checked_columns(decl: Decl, rows: list[tuple]) -> list[tuple] | None:
    """The columns of the non-empty ``rows`` of ``decl`` when every row has its
    arity, every number column holds only ``int`` values within 32 bits and every
    symbol column only NUL-free Unicode ``str`` values; None otherwise (then check
    row by row)."""
    if set(map(len, rows)) != {decl.arity}:
        return None
    columns = list(zip(*rows))
    for column, typ in zip(columns, decl.types):
        if not (_are_numbers(column) if typ == "number" else _are_symbols(column)):
            return None
    return columns


def _are_numbers(values) -> bool:
    """Whether the non-empty ``values`` are all ``int`` (not a subclass) within 32 bits."""
    return set(map(type, values)) == {int} and min(values) >= -2**31 and max(values) < 2**31


def _are_symbols(values) -> bool:
    """Whether the non-empty ``values`` are all ``str`` (not a subclass) holding
    text without NUL."""
    return set(map(type, values)) == {str} and _is_text("".join(values))


def _number_array(decl: Decl, rows: list[tuple]) -> array | None:
    """The values of ``rows`` of ``decl``, a relation of numbers, as a 32-bit
    array, row after row, when every row has its arity and only ``int`` values
    within 32 bits; None otherwise (then check row by row)."""
    if not set(map(len, rows)) <= {decl.arity}:
        return None
    values = list(chain.from_iterable(rows))
    if not set(map(type, values)) <= {int}:
        return None
    try:
        return array("i", values)
    except OverflowError:
        return None


def _check_rows(decl: Decl, rows: list[tuple]) -> None:
    """Raise the error of the first ill-typed fact of ``rows``."""
    for row in rows:
        _check_row(decl, row)


def _is_text(value: str) -> bool:
    """No NUL character and valid Unicode text (no lone surrogates)."""
    return "\0" not in value and (value.isascii() or _is_unicode_text(value))


def _check_row(decl: Decl, row: tuple) -> None:
    """Raise the error for the first ill-typed column of the fact ``row`` of ``decl``."""
    name, types = decl.name, decl.types
    if len(row) != len(types):
        raise SdyError(f"fact {name}{row!r}: expected {decl.arity} columns")
    for value, typ in zip(row, types):
        if typ == "number":
            if not isinstance(value, int) or isinstance(value, bool):
                raise SdyError(f"fact {name}{row!r}: column type {typ} mismatch")
            if not -2**31 <= value < 2**31:
                raise SdyError(f"the number {value} is beyond the 32-bit numbers of "
                               f"the Datalog engines (relation {name})")
        elif not isinstance(value, str):
            raise SdyError(f"fact {name}{row!r}: column type {typ} mismatch")
        elif "\0" in value:
            raise SdyError(f"fact {name}{row!r}: symbol with a NUL character")
        elif not value.isascii() and not _is_unicode_text(value):
            raise SdyError(f"the name {value!r} is not valid Unicode text")


def _is_unicode_text(value: str) -> bool:
    """False for strings holding lone surrogates (undecodable bytes)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_ESCAPE_RE = re.compile(r'[%"\\\x00-\x1f\x7f]')
_UNESCAPE_RE = re.compile(r"%([0-9A-F]{2})")


def escape_symbol(text: str) -> str:
    """``text`` as a fact-file field: ``%XX`` for ``%``, ``"``, ``\\`` and control characters."""
    return _ESCAPE_RE.sub(lambda m: f"%{ord(m.group()):02X}", text)


def unescape_symbol(field: str) -> str:
    """The symbol of a fact-file field (inverse of :func:`escape_symbol`)."""
    return _UNESCAPE_RE.sub(lambda m: chr(int(m.group(1), 16)), field) if "%" in field else field


def write_facts_dir(program: Program, facts: Facts, directory: str) -> None:
    """Write ``<relation>.facts`` for every input relation (empty files included)."""
    os.makedirs(directory, exist_ok=True)
    for decl in program.inputs:
        rows = sorted(set(facts.get(decl.name, ())))
        with open(os.path.join(directory, f"{decl.name}.facts"), "w", encoding="utf-8") as f:
            f.write(fact_lines(decl, rows))


def read_relation_file(decl: Decl, path: str) -> set[tuple]:
    """Read a Soufflé output (``.csv``, tab-separated) of relation ``decl``; a
    malformed line is an error located at it."""
    from sdy_dl.text_input import read_input

    if not os.path.exists(path):
        return set()
    lines = read_input(path, f"relation {decl.name}").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return parse_rows(decl, lines, path)


def parse_rows(decl: Decl, lines: list[str], source: str) -> set[tuple]:
    """The rows of relation ``decl`` written as ``lines`` (tab-separated fields,
    symbols escaped); a malformed line is an error located in ``source``.
    Columns are converted whole; a column that fails is read line by line,
    which names the first bad field."""
    if decl.arity == 0:
        return {()} if lines else set()
    split = [line.split("\t") for line in lines]
    if any(len(fields) != decl.arity for fields in split):
        n = next(n for n, fields in enumerate(split, 1) if len(fields) != decl.arity)
        raise SdyError(f"relation {decl.name} has {decl.arity} columns, "
                       f"this line has {len(split[n - 1])}", file=source, line=n, col=1)
    columns = []
    for k, (column, t) in enumerate(zip(zip(*split), decl.types)):
        if t != "number":
            columns.append(tuple(map(unescape_symbol, column)) if "%" in "".join(column)
                           else column)
            continue
        try:
            columns.append(tuple(map(int, column)))
        except ValueError:
            for n, (v, fields) in enumerate(zip(column, split), 1):
                try:
                    int(v)
                except ValueError:
                    col = sum(len(x) + 1 for x in fields[:k]) + 1
                    raise SdyError(f"column {k + 1} of relation {decl.name} is a number, "
                                   f"not {v[:40]!r}", file=source, line=n, col=col) from None
    return set(zip(*columns))
