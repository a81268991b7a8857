"""``constant-or-scalar-merger`` (Shardy's ``sdy-constant-or-scalar-merger``, §9.3).

The inverse of the import splitter: per function, constants (constant-like
ops) with the same attribute dictionary (value, sharding, ...) in the same
region, and ``broadcast_in_dim``s of a scalar with the same attributes,
result type and operand in the same region, are merged into the first one
in post-order.  Which op merges into which is the Datalog stage
``constant_or_scalar_merger``; Python gathers the facts and rewrites.
"""

from __future__ import annotations

from sdy_dl.ir.mlir_ops import funcs, is_scalar, region_key
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import op_index
from sdy_dl.ir.opaque import attribute_dict_key
from sdy_dl.ir.traits import CONSTANT_OPS
from sdy_dl.passes import PassOptions, Stage, register

#: The Datalog stage this pass runs (``datalog/constant_or_scalar_merger/``).
STAGE = Stage("constant_or_scalar_merger")


class _Ids(dict):
    def of(self, k) -> int:
        return self.setdefault(k, len(self))


class MergerFacts:
    """The facts of stage ``constant_or_scalar_merger`` (``facts``), op by op, with
    attribute dictionaries, types, values and regions numbered as met (compared as
    MLIR objects: attributes and types are uniqued)."""

    def __init__(self):
        self.keys, self.values, self.regions = _Ids(), _Ids(), _Ids()
        self.facts = {"in_constant": set(), "in_broadcast": set(), "in_result_of": set()}

    def add(self, n: int, op, name: str, attrs=None, operand=None) -> None:
        """Op ``op`` called ``name`` as op ``n``, when a constant or a scalar
        broadcast; ``attrs``: its attribute dictionary as
        :func:`~sdy_dl.ir.opaque.attribute_dict_key` gives it (read when not
        given); ``operand``: a broadcast's operand (its own when not given)."""
        keys, facts = self.keys, self.facts
        if name in CONSTANT_OPS:
            attrs = attribute_dict_key(op) if attrs is None else attrs
            facts["in_constant"].add((n, keys.of(attrs), self.regions.of(region_key(op))))
            for res in op.results:
                facts["in_result_of"].add((self.values.of(res), n))
        elif name == "stablehlo.broadcast_in_dim":
            first = op.operands[0]   # (read once)
            if not is_scalar(first):
                return
            attrs = attribute_dict_key(op) if attrs is None else attrs
            facts["in_broadcast"].add((n, keys.of(attrs), self.regions.of(region_key(op)),
                                       keys.of(("type", op.result.type)),
                                       self.values.of(first if operand is None else operand)))


def collect(module: Module) -> tuple[list, dict]:
    """The ops of every function in post-order, numbered across the functions,
    and the facts of stage ``constant_or_scalar_merger`` about them: attribute
    dictionaries, types and values numbered, compared as MLIR objects
    (attributes and types are uniqued; nothing is edited while collecting).
    Regions are numbered across the functions too (in the order their first
    constant or broadcast is met), so no op merges with one of another function."""
    ops: list = []
    facts = MergerFacts()
    index = op_index(module)
    for func in funcs(module):
        walk, names = index.walk(func, post=True)
        for op, name in zip(walk[:-1], names):
            facts.add(len(ops), op, name)
            ops.append(op)
    return ops, facts.facts


@register("constant-or-scalar-merger",
          "Merge identical, equally sharded constants and scalar broadcasts.")
def run(module: Module, options: PassOptions) -> Module:
    """Merge the constants and scalar broadcasts of every function (one engine call)."""
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        ops, facts = collect(module)
        if not facts["in_constant"] and not facts["in_broadcast"]:
            return module
        out = STAGE.run(facts, options)
        replaced = {op: first for op, first in out["merged_constant"] | out["merged_broadcast"]}
        for n in sorted(replaced):
            op, first = ops[n], ops[replaced[n]]
            for old, new in zip(op.results, first.results):
                old.replace_all_uses_with(new)
            op.erase()
        op_index(module).drop_erased([ops[n] for n in replaced], post=True)
        return module.invalidate(ops_kept=True)
