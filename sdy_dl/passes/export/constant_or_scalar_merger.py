"""``constant-or-scalar-merger`` (Shardy's ``sdy-constant-or-scalar-merger``, §9.3).

The inverse of the import splitter: per function, constants (constant-like
ops) with the same attribute dictionary (value, sharding, ...) in the same
region, and ``broadcast_in_dim``s of a scalar with the same attributes,
result type and operand in the same region, are merged into the first one
in post-order.  Which op merges into which is the Datalog stage
``export_constant_merger``; Python gathers the facts and rewrites.
"""

from __future__ import annotations

from sdy_dl.ir.model import Module
from sdy_dl.passes import PassOptions, register
from sdy_dl.passes.export.common import funcs
from sdy_dl.passes.import_common import is_scalar, key, rebuild, run_analysis

#: Ops with MLIR's ``ConstantLike`` trait (and ``sdy.constant``).
CONSTANT_OPS = frozenset({"stablehlo.constant", "sdy.constant", "mhlo.constant",
                          "arith.constant"})


def attr_dict_text(op) -> str:
    """The op's attribute dictionary, printed (sorted by name like a DictionaryAttr)."""
    attrs = op.attributes
    named = sorted((attrs[i].name, str(attrs[i].attr)) for i in range(len(attrs)))
    return repr(named)


class _Ids(dict):
    def of(self, k) -> int:
        return self.setdefault(k, len(self))


def _walk(func) -> tuple[list, list[int]]:
    """The ops nested in ``func`` in post-order (MLIR's ``walk``), and the
    number of the region holding each."""
    ops, region_of, count = [], [], [0]

    def visit(op, region_id):
        for region in op.operation.regions:
            rid = count[0]
            count[0] += 1
            for block in region.blocks:
                for child in block.operations:
                    visit(child, rid)
        ops.append(op.operation)
        region_of.append(region_id)

    for region in func.operation.regions:
        rid = count[0]
        count[0] += 1
        for block in region.blocks:
            for child in block.operations:
                visit(child, rid)
    return ops, region_of


def collect(func):
    ops, region_of = _walk(func)
    texts, values = _Ids(), _Ids()
    facts = {"constant": set(), "broadcast": set(), "result_of": set()}
    for n, op in enumerate(ops):
        r = region_of[n]
        if op.name in CONSTANT_OPS:
            facts["constant"].add((n, texts.of(attr_dict_text(op)), r))
            for res in op.results:
                facts["result_of"].add((values.of(key(res)), n))
        elif op.name == "stablehlo.broadcast_in_dim" and is_scalar(op.operands[0]):
            facts["broadcast"].add((n, texts.of(attr_dict_text(op)), r,
                                    texts.of("type:" + str(op.results[0].type)),
                                    values.of(key(op.operands[0]))))
    return ops, facts


def merge(func, options) -> None:
    ops, facts = collect(func)
    if not facts["constant"] and not facts["broadcast"]:
        return
    out = run_analysis("export_constant_merger", facts, options)
    replaced = {op: first for op, first in out["merged_constant"] | out["merged_broadcast"]}
    for n in sorted(replaced):
        op, first = ops[n], ops[replaced[n]]
        for old, new in zip(op.results, first.results):
            old.replace_all_uses_with(new)
        op.erase()


@register("constant-or-scalar-merger",
          "Merge identical, equally sharded constants and scalar broadcasts.")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        for func in funcs(module):
            merge(func, options)
        return rebuild(module)
