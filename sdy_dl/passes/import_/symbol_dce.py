"""``symbol-dce`` (MLIR's ``-symbol-dce`` on the module, used by the import pipeline).

Every non-symbol top-level op and every public symbol is live; a symbol
referenced (``@name`` inside any attribute of a live op or of the ops nested
in it) from a live op is live; private symbols that are not live are erased.
"""

from __future__ import annotations

import re

from jaxlib.mlir import ir

from sdy_dl.ir.mlir_ops import module_ops, symbol_name
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import op_index
from sdy_dl.ir.opaque import readable_attributes
from sdy_dl.ir.walk import key
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


#: The symbol names each distinct attribute references.  Attributes are uniqued
#: in sdy-dl's one (process-wide) context, so each is printed once per process.
_REFS: dict = {}


#: The builtin attribute classes whose values hold no symbol reference (numbers,
#: strings, dense elements and arrays of them): not looked up in ``_REFS`` (a
#: lookup hashes and compares the attribute through the bindings; most
#: attributes of a module are of these).
_NO_REFS = frozenset((ir.BoolAttr, ir.IntegerAttr, ir.FloatAttr, ir.StringAttr, ir.UnitAttr,
                      ir.DenseElementsAttr, ir.DenseIntElementsAttr, ir.DenseFPElementsAttr,
                      ir.DenseBoolArrayAttr, ir.DenseI8ArrayAttr, ir.DenseI16ArrayAttr,
                      ir.DenseI32ArrayAttr, ir.DenseI64ArrayAttr, ir.DenseF32ArrayAttr,
                      ir.DenseF64ArrayAttr))


#: The ops whose attributes name symbols most often (a call names its callee):
#: read before the others, so that a reading that finds every wanted name stops early.
_CALLS = frozenset(("func.call",))


def symbol_refs(module: Module, top, wanted: set[str]) -> set[str]:
    """The names of the symbols the top-level op ``top`` and its nested ops
    reference: the ``@name`` tokens of their attributes (MLIR's
    ``SymbolTable::getSymbolUses`` reads the attribute dictionaries only).  The
    reading stops once every name of ``wanted`` is among them (the rest cannot
    matter then): the calls first, then every op in the order the op index
    has (the calls again: a call names one symbol)."""
    index = op_index(module)
    ops, names = index.walk_read(top)
    refs: set[str] = set()
    if not _CALLS.isdisjoint(names):
        _read_refs([op for op, name in zip(ops, names) if name in _CALLS], wanted, refs)
        if wanted <= refs:
            return refs
    _read_refs(ops, wanted, refs)
    return refs


def _read_refs(ops, wanted: set[str], refs: set[str]) -> None:
    """Add the symbol names the attributes of ``ops`` reference to ``refs``, reading
    them in order until every name of ``wanted`` is among them."""
    cache, plain = _REFS, _NO_REFS
    for op in ops:
        try:   # (the values only: listing the items costs a third more)
            attrs = op.attributes.values()
        except TypeError:   # an attribute the bindings cannot read (complex dense)
            attrs = readable_attributes(op).values()
        found = False
        for attr in attrs:
            if type(attr) in plain:
                continue
            names = cache.get(attr)
            if names is None:
                names = cache[attr] = frozenset(_names(str(attr)))
            if names:
                refs.update(names)
                found = True
        if found and wanted <= refs:
            return


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
        unreached = by_name.keys() - live  # private symbols not yet found live
        while worklist and unreached:  # once every symbol is live, no op needs reading
            op = worklist.pop()
            for ref in symbol_refs(module, op, unreached):
                if ref in unreached:
                    unreached.discard(ref)
                    live.add(ref)
                    worklist.append(by_name[ref])
        dead = [op for op in ops if symbol_name(op) is not None and symbol_name(op) not in live]
        if not dead:
            return module
        op_index(module).forget([key(op) for op in dead])
        for op in dead:
            op.erase()
        return module.invalidate(ops_kept=True)
