"""The oracle: Shardy's own passes from jaxlib, and sdy-dl's passes, on the same text."""

from __future__ import annotations

import difflib

from sdy_dl.ir import parse_module_text
from sdy_dl.ir.context import mlir_context
from sdy_dl.passes import PassOptions, get_pass


def normalize(text: str) -> str:
    """``text`` parsed and printed by jaxlib."""
    from jaxlib.mlir import ir

    with mlir_context():
        return str(ir.Module.parse(text))


def shardy(text: str, pipeline: str) -> str:
    """``text`` after Shardy's ``pipeline`` (e.g. ``sdy-aggressive-propagate``), printed."""
    from jaxlib.mlir import ir, passmanager

    with mlir_context():
        module = ir.Module.parse(text)
        passmanager.PassManager.parse(f"builtin.module({pipeline})").run(module.operation)
        return normalize(str(module))


def ours(text: str, pass_name: str, **options) -> str:
    """``text`` after sdy-dl's pass ``pass_name``, printed."""
    module = parse_module_text(text, "<test>")
    return get_pass(pass_name).run(module, PassOptions(**options)).print()


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
