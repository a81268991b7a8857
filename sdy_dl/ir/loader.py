"""Parse module text with jaxlib into the module view (:class:`~sdy_dl.ir.model.Module`)."""

from __future__ import annotations

import re

from sdy_dl.errors import InvalidModule, SdyError, UsageError
from sdy_dl.ir.context import mlir_context
from sdy_dl.ir.locations import INPUT_FILE, text_position
from sdy_dl.ir.model import Module, check_top_level
from sdy_dl.text_input import read_input

#: The file name MLIR's module parser gives the locations it makes.
_MODULE_PARSER_FILE = "-"


def read_text(path: str) -> str:
    """The text of the module file ``path`` (``-`` reads standard input), as
    :func:`~sdy_dl.text_input.read_input` reads it."""
    if not path:
        raise UsageError("the module file name is empty ('')")
    return read_input(path, "module", stdin=path == "-")


def load_module(path: str) -> Module:
    """Parse the module file ``path`` (``-`` for stdin) into the model."""
    name = "<stdin>" if path == "-" else path
    return parse_module_text(read_text(path), name)


def parse_module_text(text: str, file: str = "<string>", checked: bool = True) -> Module:
    """Parse module text; errors become :class:`SdyError` located in ``file``.
    ``checked``: the text's string literals and nesting are checked first (not for
    a module sdy-dl read and printed again with its locations, whose text was
    checked when it was read and which name :data:`~sdy_dl.ir.locations.INPUT_FILE`)."""
    from sdy_dl.ir.nesting import check_nesting
    from sdy_dl.ir.strings import check_string_literals

    if not text.strip():
        raise SdyError("empty module file", file=file)
    if checked:
        check_string_literals(text, file)
        check_nesting(text, file)
    with mlir_context():
        mlir_module = _parsed(text, file)
        check_top_level(mlir_module, file)
    return Module(mlir_module, file)


#: Blanks and comments (what may come before the first top-level op).
_LEADING = re.compile(r"(?:\s+|//[^\n]*)*")
#: A line (after the first) that starts an alias definition (``#map = ...``,
#: ``!t = ...``) or the file's metadata (``{-# ... #-}``): top-level text that is no op.
_NOT_AN_OP = re.compile(r"\n[ \t]*(?:[#!][\w.$-]*[ \t]*=|\{-#)")
#: What the text of ops without a module around them is parsed inside.
_WRAPPER = ("module {", "\n}")


def _parsed(text: str, file: str):
    """The MLIR module of ``text``, parsed once, the locations its parser made of
    the file :data:`~sdy_dl.ir.locations.INPUT_FILE`.  A text whose first op is a
    module is parsed as that op, given that file name; ops at top level (which
    MLIR's module parser puts in a module it makes) are parsed inside
    :data:`_WRAPPER`, their first line's columns taken back.  A text with alias
    definitions or metadata at a line's start (which no module may hold) is
    parsed as MLIR's module parser parses it (see :func:`_parsed_as_module`)."""
    from jaxlib.mlir import ir

    first = _LEADING.match(text).end()
    if text.startswith("module", first) and not _is_name_char(text, first + len("module")):
        try:
            op = ir.Operation.parse(text, source_name=INPUT_FILE)
        except ir.MLIRError as e:
            return _parsed_as_module(text, file, e)
        if op.name == "builtin.module":
            return _moved_into_module(op)
        return _parsed_as_module(text, file)
    if text[first:first + 1] in ("#", "!", "{") or _NOT_AN_OP.search(text, first):
        return _parsed_as_module(text, file)
    shift = len(_WRAPPER[0])
    try:
        op = ir.Operation.parse(_WRAPPER[0] + text + _WRAPPER[1], source_name=INPUT_FILE)
    except ir.MLIRError as e:
        return _parsed_as_module(text, file, e, shift)
    mlir_module = _moved_into_module(op, ir.Location.unknown())
    if "\n" not in text[:first]:   # (the first op is on line 1, after the wrapper's start)
        _unshift_first_line(mlir_module.body, shift)
    return mlir_module


def _is_name_char(text: str, at: int) -> bool:
    return at < len(text) and (text[at].isalnum() or text[at] in "_.$-")


def _parsed_as_module(text: str, file: str, first=None, shift: int = 0):
    """:func:`_parsed` by MLIR's module parser, whose locations name the file ``-``:
    they are renamed when the text cannot write ``-`` as a location's file (else
    none can be told to be the parser's, and none is).  ``first``: the error of
    parsing the text before (its line 1 shifted by ``shift`` columns), said when
    this parser fails alike (same message, and place when shifted): it is
    located exactly."""
    from jaxlib.mlir import ir

    dash = not _can_write(text, _MODULE_PARSER_FILE)
    try:
        mlir_module = ir.Module.parse(text)
    except ir.MLIRError as e:
        if first is not None and _first_message(first) == _first_message(e):
            before = mlir_error(first, file)
            if before.line == 1 and before.col is not None and before.col > shift:
                before.col -= shift
            after = mlir_error(e, file, own=_MODULE_PARSER_FILE)
            if not shift or (after.line, after.col) == (before.line, before.col):
                raise before from None
        raise mlir_error(e, file, own=_MODULE_PARSER_FILE if dash else None) from None
    if dash:
        _rename_parser_locations(mlir_module)
    return mlir_module


def _unshift_first_line(block, shift: int) -> None:
    """Take ``shift`` columns back from the file locations of
    :data:`~sdy_dl.ir.locations.INPUT_FILE` on line 1 of the ops in ``block`` and
    below (and their block arguments), which follow the text put before line 1.
    Ops of a block are in text order: the first below line 1 ends the block."""
    from jaxlib.mlir import ir

    for arg in block.arguments:
        loc = arg.location
        if getattr(loc, "filename", None) == INPUT_FILE and loc.start_line == 1:
            arg.set_location(ir.Location.file(INPUT_FILE, 1, loc.start_col - shift))
    for op in block.operations:
        op = op.operation
        loc = op.location
        if getattr(loc, "filename", None) == INPUT_FILE:
            if loc.start_line > 1:
                break
            op.location = ir.Location.file(INPUT_FILE, 1, loc.start_col - shift)
        for region in op.regions:
            for inner in region.blocks:
                _unshift_first_line(inner, shift)


def _can_write(text: str, name: str) -> bool:
    """Whether ``text`` may hold a file location of the one-character file ``name``:
    a string literal that decodes to it (spelt as is or as a hex escape), then
    ``:`` and a line, blanks and comments between (a superset: found in a comment
    or a longer literal too)."""
    escaped = re.escape("\\%02x" % ord(name))
    between = r"(?:\s|//[^\n]*)*"
    return re.search(f'"(?:{re.escape(name)}|(?i:{escaped}))"{between}:{between}\\d',
                     text) is not None


def _first_message(e) -> str | None:
    diags = list(getattr(e, "error_diagnostics", []) or [])
    return diags[0].message if diags else None


def _moved_into_module(op, loc=None):
    """An MLIR module holding what the parsed ``builtin.module`` op ``op`` holds (at
    ``loc``; None: ``op``'s location)."""
    from jaxlib.mlir import ir

    mlir_module = ir.Module.create(loc=op.location if loc is None else loc)
    attributes = mlir_module.operation.attributes
    for name in list(op.attributes):
        attributes[name] = op.attributes[name]
    body = mlir_module.body
    for child in list(op.regions[0].blocks[0].operations):
        child.detach_from_parent()
        body.append(child)
    return mlir_module


def _rename_parser_locations(mlir_module) -> None:
    """Give the file locations MLIR's module parser made (of the file ``-``, which
    the text did not write) the file name :data:`~sdy_dl.ir.locations.INPUT_FILE`
    (the module it makes around the ops, at line 0, none)."""
    from jaxlib.mlir import ir

    from sdy_dl.ir.walk import walk_pre

    def renamed(loc):
        if getattr(loc, "filename", None) != _MODULE_PARSER_FILE:
            return None
        if not loc.start_line:
            return ir.Location.unknown()
        return ir.Location.file(INPUT_FILE, loc.start_line, loc.start_col)

    for mop in walk_pre(mlir_module.operation):
        if (loc := renamed(mop.location)) is not None:
            mop.location = loc
        for region in mop.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    if (loc := renamed(arg.location)) is not None:
                        arg.set_location(loc)


def module_of_op(op, file: str) -> Module:
    """The module view of ``op``, a raw ``builtin.module`` op of a module already
    read (a clone, edited): its attributes and top-level ops are moved into a new
    module, as printing it with its locations and parsing the text would give
    (``op`` is left empty)."""
    with mlir_context():
        return Module(_moved_into_module(op), file)


def verify_module(module: Module) -> None:
    """Verify the whole module, as Shardy's pass manager does after a pass: an
    invalid result (a group sync that put a sharding of another rank on a
    member, an invalid collective) is the located error of its first
    diagnostic, never printed.  A valid module is marked so (``module.verified``:
    it may be printed without verifying it again, until it is invalidated)."""
    from jaxlib.mlir import ir

    with mlir_context():
        try:
            module.mlir.operation.verify()
        except ir.MLIRError as e:
            raise mlir_error(e, module.file, InvalidModule) from None
    module.verified = True


def mlir_error(e, file: str, kind: type = SdyError, own: str | None = INPUT_FILE) -> SdyError:
    """The first diagnostic of an MLIR parse/verify failure, with its place (a
    position in the module's text only: see :mod:`~sdy_dl.ir.locations`), as a
    ``kind`` (:class:`~sdy_dl.errors.InvalidModule`: the verifier's).  ``own``:
    the file name of the parser's locations (None: none is known to be)."""
    diags = list(getattr(e, "error_diagnostics", []) or [])
    if not diags:
        return kind(str(e).splitlines()[-1], file=file)
    d = diags[0]
    at = text_position(d.location, own) if own is not None else None
    line, col = at or (None, None)
    return kind(d.message.splitlines()[0], file=file, line=line, col=col)
