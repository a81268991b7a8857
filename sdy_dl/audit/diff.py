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

from sdy_dl.audit.naming import _ssa_names
from sdy_dl.ir import Module
from sdy_dl.ir.mlir_ops import symbol_name
from sdy_dl.ir.storage import get_result_sharding, get_sharding, is_shardable

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


def signatures(module: Module, table=None) -> tuple[dict, list]:
    """(signature -> [(name, sharding text)] in module order, [reshards as (name, operand
    sig, text)]); ``table``: the module's :class:`~sdy_dl.audit.naming.ValueTable`
    when one is at hand (its names are the values')."""
    names = _ssa_names(module, table=table)
    sig: dict[int, str] = {}
    region_sig: dict[int, str] = {}   # op oid -> its own signature (for nested values)
    out: dict[str, list[tuple[str, str | None]]] = {}
    reshards = []

    def text(v):
        s = get_sharding(v) if is_shardable(v) else None
        return None if s is None else s.to_text()

    def add(key: str, name: str, v) -> None:
        out.setdefault(key, []).append((name, text(v)))

    for op in module.ops:
        parent = region_sig.get(op.parent.oid, "") if op.parent is not None else ""
        if op.name == "func.func":
            fname = symbol_name(op.mlir)
            region_sig[op.oid] = _h("func", fname)
            for v in module.func_args(op):
                sig[v.vid] = _h("arg", fname, v.index)
                add(sig[v.vid], names[v.vid][0], v)
            for i in range(len(op.mlir.attributes["function_type"].value.results)):
                s = get_result_sharding(op, i)
                out.setdefault(_h("result", fname, i), []).append(
                    (names_result(op, i, module), None if s is None else s.to_text()))
            continue
        if op.parent is None:
            continue
        operands = tuple(sig.get(v.vid, "?") for v in op.operands)
        if op.name == "sdy.reshard":
            sig[op.results[0].vid] = operands[0]
            reshards.append((names[op.results[0].vid][0], operands[0], text(op.results[0])))
            continue
        attrs = tuple(sorted((n, str(op.mlir.attributes[n])) for n in op.attr_names
                             if n not in SHARDING_ATTRS))
        own = _h(op.name, attrs, operands, parent)
        region_sig[op.oid] = own
        for r in op.results:
            sig[r.vid] = _h(own, r.index)
            add(sig[r.vid], names[r.vid][0], r)
        for ri, region in enumerate(op.regions):
            for bi, block in enumerate(region.blocks):
                for a in block.args:
                    sig[a.vid] = _h(own, ri, bi, a.index)
                    add(sig[a.vid], names[a.vid][0], a)
    return out, reshards


def names_result(func, index: int, module: Module) -> str:
    main = module.main_func()
    return f"result:{index}" if func is main else f"@{symbol_name(func.mlir)}:result:{index}"


def diff_modules(a: Module, b: Module, signatures_a: tuple | None = None, table_b=None
                 ) -> tuple[int, list[Difference]]:
    """(number of aligned values with equal shardings, the differences);
    ``signatures_a``: :func:`signatures` of ``a`` when already known; ``table_b``:
    ``b``'s :class:`~sdy_dl.audit.naming.ValueTable` when one is at hand."""
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        sa, ra = signatures_a if signatures_a is not None else signatures(a)
        sb, rb = signatures(b, table_b)
    equal, diffs = 0, []
    for key in list(sa) + [k for k in sb if k not in sa]:
        xs, ys = sa.get(key, []), sb.get(key, [])
        for (na, ta), (nb, tb) in zip(xs, ys):
            if ta == tb:
                equal += 1
            else:
                diffs.append(Difference("different", na, nb, ta, tb))
        for na, ta in xs[len(ys):]:
            diffs.append(Difference("only in A", na, None, ta, None))
        for nb, tb in ys[len(xs):]:
            diffs.append(Difference("only in B", None, nb, None, tb))
    rest_b = list(rb)
    for name, operand, text in ra:
        match = next((r for r in rest_b if r[1] == operand and r[2] == text), None)
        if match is not None:
            rest_b.remove(match)
            equal += 1
        else:
            diffs.append(Difference("reshard in A", name, None, text, None))
    diffs += [Difference("reshard in B", None, name, None, text) for name, _, text in rest_b]
    return equal, diffs
