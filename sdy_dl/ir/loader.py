"""Parse module text with jaxlib into the module view (:class:`~sdy_dl.ir.model.Module`)."""

from __future__ import annotations

import re

from sdy_dl.errors import InvalidModule, SdyError, UsageError
from sdy_dl.ir.context import mlir_context
from sdy_dl.ir.model import Module, check_top_level
from sdy_dl.text_input import read_input

#: A file location in a printed MLIR location: ("file", line, column).
FILE_LOC_RE = re.compile(r'"([^"]*)":(\d+):(\d+)')


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


def parse_module_text(text: str, file: str = "<string>") -> Module:
    """Parse module text; errors become :class:`SdyError` located in ``file``."""
    from jaxlib.mlir import ir

    from sdy_dl.ir.strings import check_string_literals

    if not text.strip():
        raise SdyError("empty module file", file=file)
    check_string_literals(text, file)
    ctx = mlir_context()
    with ctx:
        try:
            mlir_module = ir.Module.parse(text)
        except ir.MLIRError as e:
            raise mlir_error(e, file) from None
        check_top_level(mlir_module, file)
    return Module(mlir_module, file)


def module_of_op(op, file: str) -> Module:
    """The module view of ``op``, a raw ``builtin.module`` op of a module already
    read (a clone, edited): its attributes and top-level ops are moved into a new
    module, as printing it with its locations and parsing the text would give
    (``op`` is left empty)."""
    from jaxlib.mlir import ir

    with mlir_context():
        mlir_module = ir.Module.create(loc=op.location)
        attributes = mlir_module.operation.attributes
        for name in list(op.attributes):
            attributes[name] = op.attributes[name]
        body = mlir_module.body
        for child in list(op.regions[0].blocks[0].operations):
            child.detach_from_parent()
            body.append(child)
    return Module(mlir_module, file)


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


def mlir_error(e, file: str, kind: type = SdyError) -> SdyError:
    """The first diagnostic of an MLIR parse/verify failure, with its place, as a
    ``kind`` (:class:`~sdy_dl.errors.InvalidModule`: the verifier's)."""
    diags = list(getattr(e, "error_diagnostics", []) or [])
    if not diags:
        return kind(str(e).splitlines()[-1], file=file)
    d = diags[0]
    line, col = text_position(d.location, file) or (None, None)
    return kind(d.message.splitlines()[0], file=file, line=line, col=col)


def text_position(loc, file: str) -> tuple[int, int] | None:
    """(line, column) in the text of the module read from ``file`` of the MLIR
    location ``loc``, as the parser located its op; None for a location the
    module gave the op itself (``loc("model.py":12:3)``: a JAX program's Python
    lines, not this file's)."""
    for f, line, col in FILE_LOC_RE.findall(str(loc)):
        if f in ("-", file):
            return int(line), int(col)
    return None
