"""``symbol-dce`` (MLIR's ``-symbol-dce`` on the module, used by the import pipeline).

Every non-symbol top-level op and every public symbol is live; a symbol
referenced (``@name`` inside any attribute of a live op or of the ops nested
in it) from a live op is live; private symbols that are not live are erased.
"""

from __future__ import annotations

import re

from sdy_dl.ir.mlir_ops import module_ops, rebuild, symbol_name
from sdy_dl.ir.model import Module
from sdy_dl.ir.opaque import readable_attributes
from sdy_dl.passes import PassOptions, register

_REF_RE = re.compile(r'@"(?:[^"\\]|\\.)*"|@[A-Za-z_$.][\w$.\-]*|"(?:[^"\\]|\\.)*"')


def _unquote(token: str) -> str | None:
    r"""The symbol name of an ``@name`` or ``@"quoted"`` token, undoing MLIR's string
    escapes (``\\``, ``\"``, ``\n``, ``\t``, ``\XX``); None if not UTF-8."""
    if not token.startswith('@"'):
        return token[1:]
    body, out, i = token[2:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
        elif body[i + 1] in '"\\':
            out += body[i + 1].encode()
            i += 2
        elif body[i + 1] in "nt":
            out += b"\n" if body[i + 1] == "n" else b"\t"
            i += 2
        else:
            out.append(int(body[i + 1:i + 3], 16))
            i += 3
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        return None


class SymbolRefs:
    """Reads the names of the symbols an op and the ops nested in it reference: the
    ``@name`` tokens of their attributes and of their result and block-argument
    types (what the op's generic form prints, locations aside).  Each distinct
    attribute and type is printed once (they are uniqued in the context)."""

    def __init__(self) -> None:
        self._printed: dict = {}

    def _refs_of(self, entity) -> frozenset[str]:
        try:
            return self._printed[entity]
        except KeyError:
            refs = frozenset(_names(str(entity)))
            self._printed[entity] = refs
            return refs

    def __call__(self, mop, wanted: set[str]) -> set[str]:
        """The names ``mop`` and its nested ops reference; the walk stops once
        every name of ``wanted`` is among them (the rest cannot matter then)."""
        from jaxlib.mlir import ir

        refs: set[str] = set()
        refs_of, advance, interrupt = self._refs_of, ir.WalkResult.ADVANCE, ir.WalkResult.INTERRUPT

        def visit(op):
            before = len(refs)
            for attr in readable_attributes(op).values():
                refs.update(refs_of(attr))
            for type_ in op.results.types:
                refs.update(refs_of(type_))
            for region in op.regions:
                for block in region.blocks:
                    for arg in block.arguments:
                        refs.update(refs_of(arg.type))
            return interrupt if len(refs) > before and wanted <= refs else advance

        mop.operation.walk(visit)
        return refs


def _names(text: str):
    """The symbol names of the ``@`` references in printed MLIR ``text`` (outside
    string literals, ``@`` only starts a reference); nested references give their root."""
    for token in _REF_RE.findall(text):
        if token.startswith("@"):
            name = _unquote(token)
            if name is not None:
                yield name.split("::")[0]


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
        symbol_refs = SymbolRefs()
        unreached = by_name.keys() - live  # private symbols not yet found live
        while worklist and unreached:  # once every symbol is live, no op needs reading
            op = worklist.pop()
            for ref in symbol_refs(op, unreached):
                if ref in unreached:
                    unreached.discard(ref)
                    live.add(ref)
                    worklist.append(by_name[ref])
        dead = [op for op in ops if symbol_name(op) is not None and symbol_name(op) not in live]
        if not dead:
            return module
        for op in dead:
            op.erase()
        return rebuild(module)
