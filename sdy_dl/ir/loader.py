"""Parse module text with jaxlib into the module view (:class:`~sdy_dl.ir.model.Module`)."""

from __future__ import annotations

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


def _parsed(text: str, file: str):
    """The MLIR module of ``text``, the locations its parser made of the file
    :data:`~sdy_dl.ir.locations.INPUT_FILE`.  A text whose one top-level op is a
    module is parsed as that op, given that file name; else (ops at top level,
    which MLIR's module parser puts in a module it makes) as a module, whose
    parser names its locations ``-``: they are renamed when the text cannot write
    ``-`` (else no location can be told to be the parser's, and none is)."""
    from jaxlib.mlir import ir

    try:
        op = ir.Operation.parse(text, source_name=INPUT_FILE)
    except ir.MLIRError as e:
        op, first = None, e
    else:
        first = None
        if op.name == "builtin.module":
            return _moved_into_module(op)
    dash = not _can_write(text, _MODULE_PARSER_FILE)
    try:
        mlir_module = ir.Module.parse(text)
    except ir.MLIRError as e:
        if first is not None and _first_message(first) == _first_message(e):
            raise mlir_error(first, file) from None
        raise mlir_error(e, file, own=_MODULE_PARSER_FILE if dash else None) from None
    if dash:
        _rename_parser_locations(mlir_module)
    return mlir_module


def _can_write(text: str, name: str) -> bool:
    """Whether ``text`` may hold a string literal that decodes to the one-character
    ``name`` (spelt as is or as a hex escape; a superset: found in a comment or
    inside a longer literal too)."""
    escaped = "\\%02x" % ord(name)
    return f'"{name}"' in text or f'"{escaped}"' in text or f'"{escaped.upper()}"' in text


def _first_message(e) -> str | None:
    diags = list(getattr(e, "error_diagnostics", []) or [])
    return diags[0].message if diags else None


def _moved_into_module(op):
    """An MLIR module holding what the parsed ``builtin.module`` op ``op`` holds."""
    from jaxlib.mlir import ir

    mlir_module = ir.Module.create(loc=op.location)
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
