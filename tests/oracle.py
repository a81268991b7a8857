"""The oracle: Shardy's own passes from jaxlib, and sdy-dl's passes, on the same text."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from sdy_dl.errors import SdyError
from sdy_dl.ir import parse_module_text
from sdy_dl.ir.context import mlir_context
from sdy_dl.passes import PassOptions, get_pass


def normalize(text: str) -> str:
    """``text`` parsed and printed by jaxlib."""
    from jaxlib.mlir import ir

    with mlir_context():
        return str(ir.Module.parse(text))


def read_mesh(text: str):
    """The mesh ``text`` (``<["x"=2]>``, as a module writes it) read as sdy-dl
    reads a module's meshes: through jaxlib's bindings."""
    from jaxlib.mlir import ir

    from sdy_dl.ir.sdy_attrs import mesh_of_attr

    with mlir_context():
        return mesh_of_attr(ir.Attribute.parse("#sdy.mesh" + text))


def shardy(text: str, pipeline: str) -> str:
    """``text`` after Shardy's ``pipeline`` (e.g. ``sdy-aggressive-propagate``), printed."""
    from jaxlib.mlir import ir, passmanager

    with mlir_context():
        module = ir.Module.parse(text)
        passmanager.PassManager.parse(f"builtin.module({pipeline})").run(module.operation)
        return normalize(str(module))


@dataclass(frozen=True)
class Failure:
    """Why one side failed: the place and first line of its first diagnostic.
    For an input jaxlib cannot parse or verify the message is
    ``<invalid input>``: both sides agree when they reject it at one place."""

    line: int | None
    col: int | None
    message: str


_LOC = re.compile(r'loc\("[^"]*":(\d+):(\d+)\)')


def failure(e: Exception) -> Failure:
    """The :class:`Failure` of a jaxlib ``MLIRError`` or an :class:`SdyError`."""
    if isinstance(e, SdyError):
        return Failure(e.line, e.col, e.message.splitlines()[0])
    diagnostics = list(e.error_diagnostics)
    if not diagnostics:
        return Failure(None, None, str(e).splitlines()[-1])
    m = _LOC.search(str(diagnostics[0].location))
    return Failure(int(m.group(1)) if m else None, int(m.group(2)) if m else None,
                   diagnostics[0].message.splitlines()[0])


def accepted(text: str) -> bool:
    """Whether jaxlib parses and verifies ``text``."""
    from jaxlib.mlir import ir

    with mlir_context():
        try:
            ir.Module.parse(text)
        except ir.MLIRError:
            return False
    return True


def outcome(fn, text: str):
    """``fn()`` (a printed module), or the :class:`Failure` it raised on input
    ``text``.  Only a diagnostic (jaxlib's ``MLIRError``, sdy-dl's
    :class:`SdyError`) is a failure; any other exception propagates, so that two
    sides agree only when they fail for the same reason."""
    from jaxlib.mlir import ir

    try:
        return fn()
    except (ir.MLIRError, SdyError) as e:
        f = failure(e)
        return f if accepted(text) else Failure(f.line, f.col, "<invalid input>")


def ours(text: str, pass_name: str, options=None, **context) -> str:
    """``text`` after sdy-dl's pass ``pass_name`` with Shardy's pass ``options``
    (a mapping, checked as ``--pass-option`` checks them) and the run ``context``
    (engine, ...), printed."""
    module = parse_module_text(text, "<test>")
    return get_pass(pass_name).run(module, PassOptions.create(pass_name, options, **context)).print()


def sharding_lines(text: str) -> list[str]:
    """The lines of a printed module that carry shardings (for readable diffs)."""
    return [line.strip() for line in text.splitlines() if "sdy.sharding" in line or "sharding=" in line
            or "in_shardings" in line or "sharding_constraint" in line or "data_flow_edge" in line]


def assert_same(expected: str, actual: str) -> None:
    """Equal module texts; on a difference, show the sharding lines that differ."""
    if expected == actual:
        return
    diff = "\n".join(difflib.unified_diff(sharding_lines(expected), sharding_lines(actual),
                                          "shardy", "sdy-dl", lineterm="", n=0))
    raise AssertionError("modules differ:\n" + (diff or "\n".join(
        difflib.unified_diff(expected.splitlines(), actual.splitlines(), "shardy", "sdy-dl",
                             lineterm="", n=1))))
