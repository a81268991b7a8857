"""Two annotated modules compared value by value, aligned by dataflow.

Every value gets a *signature* from what computes it, not from where it is
printed: an op result is (op name, attributes other than shardings and
rules, result number, the signatures of its operands, the signature of the
region it is in); a function argument is (function, number); a block
argument is (its op's signature, region, number).  A ``sdy.reshard`` is
transparent (its result has its operand's signature), so a reshard one
module has and the other has not does not misalign the values after it; it
is reported on its own.  Values with equal signatures pair up in order.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass

from sdy_dl.ir import Module
from sdy_dl.ir.mlir_ops import symbol_name
from sdy_dl.ir.storage import read_func_attr, read_stored

#: Attributes that hold shardings or rules (what a diff compares, not what it aligns by).
SHARDING_ATTRS = frozenset({"sdy.sharding", "sharding", "in_shardings", "out_shardings",
                            "sdy.sharding_rule", "arg_attrs", "res_attrs"})


@dataclass
class Difference:
    """One aligned value whose shardings differ, or a value only one module has."""

    kind: str                 # "different", "only in A", "only in B", "reshard in A", "reshard in B"
    a: str | None
    b: str | None
    a_sharding: str | None
    b_sharding: str | None

    def to_json(self) -> dict:
        return asdict(self)


def _h(*parts) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:24]


def signatures(module: Module, table=None) -> tuple[dict, list, object]:
    """(signature -> [(value, sharding text)] in module order, [reshards as (value,
    operand sig, text)], ``name(value)``: a value's name), read straight from the
    module's MLIR by a :class:`~sdy_dl.audit.naming.ValueTable` (``table``: the
    module's, when one is at hand; its names are the values').  Names are read only
    for the values asked for: qualifying a name that sibling regions share means
    reading the printed module's lines."""
    from sdy_dl.audit.naming import ValueTable

    if table is None:
        table = ValueTable(module.mlir.operation, module.print)
    ssa = table.names
    key_of = table.key_of

    def name(value) -> str:
        """``value``: a value key, or a function result's name."""
        if isinstance(value, str):
            return value
        if value in ssa.pending:
            ssa.resolve()
        return ssa.names[value][0]

    sig: dict[tuple, str] = {}        # value key -> its signature
    region_sig: dict = {}             # op -> its own signature (for nested values)
    out: dict[str, list[tuple[object, str | None]]] = {}
    reshards = []

    def text(mop, index: int, block_arg: bool):
        s = read_stored(mop, index, block_arg)
        return None if s is None else s.to_text()

    def add(key: str, value_key: tuple, mop, index: int, block_arg: bool) -> None:
        out.setdefault(key, []).append((value_key, text(mop, index, block_arg)))

    for n, mop in enumerate(table.ops):
        func = table.enclosing[mop]
        if mop.name == "func.func" and func is mop:
            fname = symbol_name(mop)
            region_sig[mop] = _h("func", fname)
            body = mop.regions[0].blocks
            for i, arg in enumerate(body[0].arguments if len(body) else ()):
                k = key_of(arg)
                sig[k] = _h("arg", fname, i)
                add(sig[k], k, mop, i, True)
            prefix = "" if mop == table.main else f"@{fname}:"
            for i in range(len(mop.attributes["function_type"].value.results)):
                s = read_func_attr(mop, "res_attrs", i)
                out.setdefault(_h("result", fname, i), []).append(
                    (f"{prefix}result:{i}", None if s is None else s.to_text()))
            continue
        if func is None:
            continue   # a top-level op other than a function (a mesh)
        parent = region_sig.get(mop.parent, "")
        operands = tuple(sig.get(key_of(v), "?") for v in mop.operands)
        if mop.name == "sdy.reshard":
            k = (f"o{n}", 0)
            sig[k] = operands[0]
            reshards.append((k, operands[0], text(mop, 0, False)))
            continue
        attrs = tuple(sorted((name, str(attr)) for name, attr in mop.attributes.items()
                             if name not in SHARDING_ATTRS))
        own = _h(mop.name, attrs, operands, parent)
        region_sig[mop] = own
        for i in range(len(mop.results)):
            k = (f"o{n}", i)
            sig[k] = _h(own, i)
            add(sig[k], k, mop, i, False)
        for ri, region in enumerate(mop.regions):
            for bi, block in enumerate(region.blocks):
                for i, arg in enumerate(block.arguments):
                    k = key_of(arg)
                    sig[k] = _h(own, ri, bi, i)
                    add(sig[k], k, mop, i, True)
    return out, reshards, name


def diff_modules(a: Module, b: Module, signatures_a: tuple | None = None, table_b=None
                 ) -> tuple[int, list[Difference]]:
    """(number of aligned values with equal shardings, the differences);
    ``signatures_a``: :func:`signatures` of ``a`` when already known; ``table_b``:
    ``b``'s :class:`~sdy_dl.audit.naming.ValueTable` when one is at hand."""
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        sa, ra, name_a = signatures_a if signatures_a is not None else signatures(a)
        sb, rb, name_b = signatures(b, table_b)
        equal, diffs = 0, []
        for key in list(sa) + [k for k in sb if k not in sa]:
            xs, ys = sa.get(key, []), sb.get(key, [])
            for (va, ta), (vb, tb) in zip(xs, ys):
                if ta == tb:
                    equal += 1
                else:
                    diffs.append(Difference("different", name_a(va), name_b(vb), ta, tb))
            for va, ta in xs[len(ys):]:
                diffs.append(Difference("only in A", name_a(va), None, ta, None))
            for vb, tb in ys[len(xs):]:
                diffs.append(Difference("only in B", None, name_b(vb), None, tb))
        rest_b = list(rb)
        for value, operand, text in ra:
            match = next((r for r in rest_b if r[1] == operand and r[2] == text), None)
            if match is not None:
                rest_b.remove(match)
                equal += 1
            else:
                diffs.append(Difference("reshard in A", name_a(value), None, text, None))
        diffs += [Difference("reshard in B", None, name_b(value), None, text)
                  for value, _, text in rest_b]
    return equal, diffs
