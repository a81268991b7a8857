"""``symbol-dce`` (MLIR's ``-symbol-dce`` on the module, used by the import pipeline).

Every non-symbol top-level op and every public symbol is live; a symbol
referenced (``@name`` inside any attribute of a live op or of the ops nested
in it) from a live op is live; private symbols that are not live are erased.
"""

from __future__ import annotations

import re

from sdy_dl.ir.mlir_ops import module_ops, rebuild, symbol_name
from sdy_dl.ir.model import Module
from sdy_dl.ir.opaque import generic_text
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


def symbol_refs(mop) -> set[str]:
    """Names of the symbols referenced by ``mop`` and the ops nested in it (read from
    the generic form, where ``@`` outside string literals only starts a reference)."""
    refs: set[str] = set()
    for token in _REF_RE.findall(generic_text(mop)):
        if token.startswith("@"):
            name = _unquote(token)
            if name is not None:
                refs.add(name.split("::")[0])
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
        unreached = by_name.keys() - live  # private symbols not yet found live
        while worklist and unreached:  # once every symbol is live, no op needs reading
            op = worklist.pop()
            for ref in symbol_refs(op):
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
