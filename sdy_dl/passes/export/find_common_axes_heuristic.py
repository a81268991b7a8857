"""Shardy's ``findCommonAxesHeuristic`` in the full version of
insert-explicit-reshards, decided by the Datalog stage of the same name
(``datalog/find_common_axes_heuristic/``) for every op whose common axes it
chooses, in one engine call: the greedy picks of (factor, axes) candidates,
by the total size of the tensors each already shards, then factor kind, the
further sharding it adds, the factor and the axes, each pick cutting the
candidates that overlap it.  This module writes the facts (each op's rule,
tensor sizes and sharding projection) and reads the axes per factor back.

The stage unrolls one layer per pick; it is rendered with enough layers for
most ops (:data:`FIRST_PICKS`) and says which ops it did not finish, which are
run again with twice as many (an op needs at most one pick per candidate)."""

from __future__ import annotations

from collections import defaultdict

from sdy_dl.passes import Stage
from sdy_dl.passes.export.explicit_reshards_projection import per_distinct
from sdy_dl.propagation.step_facts import ref_triple
from sdy_dl.sharding import make_sub_axis

STAGE = Stage("find_common_axes_heuristic")

#: The layers (picks) the stage is first rendered with.
FIRST_PICKS = 4


def size_digits(n: int) -> tuple[int, int, int, int]:
    """``n`` (an element count, below 2^64) in base 2^16, most significant
    digit first (the engines' numbers are 32-bit)."""
    return (n >> 48) & 0xFFFF, (n >> 32) & 0xFFFF, (n >> 16) & 0xFFFF, n & 0xFFFF


def heuristic_facts(ops) -> dict[str, set]:
    """The facts of the stage for ``ops``: op ``o`` is ``(rule, tensors, sizes,
    mesh name, mesh)``, ``tensors`` its projection (per tensor, operands then
    results: factor -> axes) and ``sizes`` each tensor's number of elements."""
    facts: dict[str, set] = {name: set() for name in (
        "in_op_mesh", "in_mesh_axis", "in_axis_name_order", "in_factor", "in_dim_factor",
        "in_tensor_size", "in_axis")}
    names: set[str] = set()
    for o, (rule, tensors, sizes, mesh_name, mesh) in enumerate(ops):
        facts["in_op_mesh"].add((o, mesh_name))
        for a in mesh.axes:
            facts["in_mesh_axis"].add((mesh_name, a.name, a.size))
            names.add(a.name)
        for f, factor in enumerate(rule.factors):
            facts["in_factor"].add((o, f, factor.kind, factor.size))
        for t, mapping in enumerate(list(rule.operands) + list(rule.results)):
            for d, dim in enumerate(mapping):
                for j, f in enumerate(dim):
                    facts["in_dim_factor"].add((o, t, d, j, f))
        for t, (factors, size) in enumerate(zip(tensors, sizes)):
            facts["in_tensor_size"].add((o, t) + size_digits(size))
            for f, refs in factors.items():
                facts["in_axis"].update((o, t, f, q) + ref_triple(a, mesh)
                                        for q, a in enumerate(refs))
    facts["in_axis_name_order"] = {(name, r) for r, name in enumerate(sorted(names))}
    return facts


def find_common_axes_heuristic(ops, options) -> list[list[tuple]]:
    """The common axes per factor the heuristic gives each op of ``ops``
    (``(rule, tensors, sizes, mesh name, mesh)``, as :func:`heuristic_facts`);
    one engine call for the distinct ones, unless some need more picks."""
    def key(op):
        rule, tensors, sizes, mesh_name, _ = op
        return rule, tuple(tuple(sorted(t.items())) for t in tensors), tuple(sizes), mesh_name

    return per_distinct(lambda distinct: _run(distinct, options), list(ops),
                        [key(op) for op in ops])


def _run(ops, options) -> list[list[tuple]]:
    out: list = [None] * len(ops)
    pending, picks = list(range(len(ops))), FIRST_PICKS
    while pending:
        decided = STAGE.run(heuristic_facts([ops[k] for k in pending]), options, picks=picks)
        axes: dict[tuple, dict[int, tuple]] = defaultdict(dict)
        for o, f, q, a, p, s in decided["common_axis"]:
            axes[o, f][q] = (a, p, s)
        unfinished = {o for (o,) in decided["unfinished"]}
        for o, k in enumerate(pending):
            if o not in unfinished:
                rule, _, _, _, mesh = ops[k]
                out[k] = [tuple(make_sub_axis(*axes[o, f][q], mesh) for q in range(len(axes[o, f])))
                          if (o, f) in axes else () for f in range(len(rule.factors))]
        pending = [k for o, k in enumerate(pending) if o in unfinished]
        picks *= 2
    return out
