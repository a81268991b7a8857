"""``symbol-dce`` (MLIR's ``-symbol-dce`` on the module, used by the import pipeline).

Every non-symbol top-level op and every public symbol is live; a symbol
referenced (``@name`` inside any attribute of a live op or of the ops nested
in it) from a live op is live; private symbols that are not live are erased.
"""

from __future__ import annotations

import re

from sdy_dl.ir.model import Module
from sdy_dl.passes import PassOptions, register
from sdy_dl.passes.import_common import module_ops, rebuild, symbol_name, walk_pre

_REF_RE = re.compile(r'@"(?:[^"\\]|\\.)*"|@[A-Za-z_$.][\w$.\-]*|"(?:[^"\\]|\\.)*"')


def _unquote(token: str) -> str:
    import json

    return json.loads(token[1:]) if token.startswith('@"') else token[1:]


def symbol_refs(mop) -> set[str]:
    """Names of the symbols referenced by ``mop`` and the ops nested in it."""
    refs: set[str] = set()
    for op in walk_pre(mop):
        attrs = op.attributes
        for name in attrs:
            if name == "sym_name" and op == mop.operation:
                continue
            for token in _REF_RE.findall(str(attrs[name])):
                if token.startswith("@"):
                    refs.add(_unquote(token).split("::")[0])
    return refs


def is_private(mop) -> bool:
    from jaxlib.mlir import ir

    attrs = mop.attributes
    return ("sym_visibility" in attrs
            and ir.StringAttr(attrs["sym_visibility"]).value == "private")


@register("symbol-dce", "Erase private symbols (functions, meshes) that nothing live references.")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        ops = module_ops(module)
        by_name = {symbol_name(op): op for op in ops if symbol_name(op) is not None}
        live: set[str] = set()
        worklist = []
        for op in ops:
            name = symbol_name(op)
            if name is None:
                worklist.append(op)
            elif not is_private(op):
                live.add(name)
                worklist.append(op)
        while worklist:
            op = worklist.pop()
            for ref in symbol_refs(op):
                if ref in by_name and ref not in live:
                    live.add(ref)
                    worklist.append(by_name[ref])
        dead = [op for op in ops if symbol_name(op) is not None and symbol_name(op) not in live]
        if not dead:
            return module
        for op in dead:
            op.erase()
        return rebuild(module)
