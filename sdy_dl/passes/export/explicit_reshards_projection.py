"""The sharding projections of insert-explicit-reshards (Shardy's
``ShardingProjection`` as the pass builds it), computed by the Datalog stage
``explicit_reshards`` for a batch of ops in one engine call.

:func:`project` gives, per op, every tensor's factor shardings (the step's
projection, ``datalog/step/projection.dl.j2``), whether they are compatible,
whether a reduction factor is sharded unlike on two tensors, the unary
case's common axes and, for dots, ``processDot``'s decision (which factor of
the result takes which operand's axes); :func:`project_out` gives,
for new axes per factor, which tensors change and their new shardings (the
step's projection out, ``datalog/step/dims_out.dl.j2``).  Python only turns
shardings into facts and relations back into shardings.
"""

from __future__ import annotations

from collections import defaultdict

from sdy_dl.frozen import Frozen
from sdy_dl.propagation.step import StepInput
from sdy_dl.propagation.step_facts import ref_triple, step_facts
from sdy_dl.rules.instance import RuleInstance
from sdy_dl.passes import Stage
from sdy_dl.sharding import AxisRef, DimSharding, Mesh, TensorSharding, make_sub_axis

#: The Datalog stage of the insert-explicit-reshards pass
#: (``datalog/insert_explicit_reshards/``).
STAGE = Stage("insert_explicit_reshards")


class OpShardings(Frozen):
    """An op to project: its rule, its mesh (a symbol) and the shardings of its
    operands then results, all on that mesh (a missing one fully closed)."""

    _fields = ("rule", "mesh", "shardings")

    def __init__(self, rule: RuleInstance, mesh: str, shardings: tuple[TensorSharding, ...]):
        object.__setattr__(self, "rule", rule)
        object.__setattr__(self, "mesh", mesh)
        object.__setattr__(self, "shardings", shardings)

    @property
    def num_operands(self) -> int:
        return len(self.rule.operands)

    def step(self) -> StepInput:
        n = self.num_operands
        return StepInput(self.rule, self.shardings[:n], self.shardings[n:],
                         ("BOTH",) * len(self.rule.factors))


class Projection(Frozen):
    """Per tensor (operands then results): factor -> axes of its record, and
    factor -> overflow axes of the records that have some."""

    _fields = ("tensors", "overflow", "compatible", "unary_axes", "dot", "reduction_differs")

    def __init__(self, tensors: tuple[dict[int, tuple[AxisRef, ...]], ...],
                 overflow: tuple[dict[int, tuple[AxisRef, ...]], ...], compatible: bool = False,
                 unary_axes: tuple | None = None, dot: tuple[int, int] | None = None,
                 reduction_differs: bool = False):
        object.__setattr__(self, "tensors", tensors)
        object.__setattr__(self, "overflow", overflow)
        #: the factor shardings are compatible (Shardy's getCompatibleFactorShardings)
        object.__setattr__(self, "compatible", compatible)
        #: the common axes of the unary case of findCommonAxes (None: not that case)
        object.__setattr__(self, "unary_axes", unary_axes)
        #: a dot's processDot decision: (factor, operand) when its result takes that
        #: operand's axes on that factor (None: left alone, or not asked)
        object.__setattr__(self, "dot", dot)
        #: two tensors shard a reduction factor differently
        object.__setattr__(self, "reduction_differs", reduction_differs)

    def has_overflow(self) -> bool:
        return any(self.overflow)

    def factor_axes(self, num_factors: int) -> list[tuple[AxisRef, ...]]:
        """Each factor's axes on the first tensor that has it (the common axes
        when the shardings are compatible)."""
        axes: list = [None] * num_factors
        for tensor in self.tensors:
            for f, refs in tensor.items():
                if axes[f] is None:
                    axes[f] = refs
        return [a if a is not None else () for a in axes]


class TensorAxes(Frozen):
    """New axes per tensor (operands then results): factor -> axes and
    factor -> overflow axes (for the factors the tensor has records for)."""

    _fields = ("axes", "overflow")

    def __init__(self, axes: tuple[dict[int, tuple[AxisRef, ...]], ...],
                 overflow: tuple[dict[int, tuple[AxisRef, ...]], ...]):
        object.__setattr__(self, "axes", axes)
        object.__setattr__(self, "overflow", overflow)


def on_mesh(sharding: TensorSharding | None, mesh: str, rank: int) -> TensorSharding:
    """``sharding`` on the mesh symbol ``mesh`` (meshes that differ only in
    device order have the same axes); fully closed and empty when missing."""
    if sharding is None:
        return TensorSharding(mesh, tuple(DimSharding((), True) for _ in range(rank)))
    return sharding.replace(mesh=mesh)


def _run(ops: list[OpShardings], meshes: dict[str, Mesh], options, phase: str,
         extra: dict | None = None) -> dict[str, set[tuple]]:

    facts = step_facts([op.step() for op in ops], meshes)
    facts.update(extra or {})
    return STAGE.run(facts, options, phase=phase)


def lists_per_factor(rows) -> dict[tuple, dict[int, tuple]]:
    """``(op, factor) -> {position: (name, pre, size)}`` of rows ``(I, F, Q, A, P, S)``."""
    out: dict[tuple, dict[int, tuple]] = defaultdict(dict)
    for i, f, q, a, p, s in rows:
        out[i, f][q] = (a, p, s)
    return out


def project(ops: list[OpShardings], elements: list[tuple[int, ...]], meshes: dict[str, Mesh],
            options, dots: list[bool] | None = None) -> list[Projection]:
    """The projection of every op in ``ops`` (one engine call for the distinct
    ones: equal rules, shardings and sizes project alike); ``elements``: the
    number of elements of each op's tensors; ``dots``: which ops are dots
    (lhs, rhs, result) whose processDot decision is asked."""
    items = list(zip(ops, elements, dots or [False] * len(ops)))
    return per_distinct(lambda distinct: _project([op for op, _, _ in distinct],
                                                  [sizes for _, sizes, _ in distinct],
                                                  meshes, options,
                                                  [dot for _, _, dot in distinct]), items, items)


def per_distinct(run, items: list, keys: list) -> list:
    """``run`` on the distinct ``items`` (those with distinct ``keys``; one
    call), its results given back per item."""
    index: dict = {}
    firsts: list = []
    for item, k in zip(items, keys):
        if k not in index:
            index[k] = len(firsts)
            firsts.append(item)
    results = run(firsts) if firsts else []
    return [results[index[k]] for k in keys]


def _project(ops: list[OpShardings], elements: list[tuple[int, ...]], meshes: dict[str, Mesh],
             options, dots: list[bool]) -> list[Projection]:
    if not ops:
        return []
    def kinds(kind):
        return [(i, f) for i, op in enumerate(ops) for f, factor in enumerate(op.rule.factors)
                if factor.kind == kind]

    ranks = []
    for i, (op, sizes) in enumerate(zip(ops, elements)):
        order = {n: r for r, n in enumerate(sorted(set(sizes)))}
        ranks.extend((i, t, order[n]) for t, n in enumerate(sizes))
    out = _run(ops, meshes, options, "project",
               {"in_need_replication": kinds("need_replication"),
                "in_permutation": kinds("permutation"), "in_reduction": kinds("reduction"),
                "in_dot": [(i,) for i, dot in enumerate(dots) if dot],
                "in_elements_rank": ranks})
    compatible = {i for (i,) in out["er_compatible"]}
    dot_decisions = {i: (f, t) for i, f, t in out["er_dot"]}
    unary = lists_per_factor(out["er_unary_axis"])
    def lists(relation):
        refs: dict[tuple, dict[int, tuple]] = defaultdict(dict)
        for i, t, f, q, a, p, s in out[relation]:
            refs[i, t, f][q] = (a, p, s)
        return refs

    axes, ovf = lists("er_rec_axis"), lists("er_rec_overflow")

    def refs_of(table, key, mesh):
        refs = table.get(key, {})
        return tuple(make_sub_axis(*refs[q], mesh) for q in range(len(refs)))

    records: dict[tuple, dict[int, tuple]] = defaultdict(dict)
    overflow: dict[tuple, dict[int, tuple]] = defaultdict(dict)
    for i, t, f in out["er_rec"]:
        mesh = meshes[ops[i].mesh]
        records[i, t][f] = refs_of(axes, (i, t, f), mesh)
        if (i, t, f) in ovf:
            overflow[i, t][f] = refs_of(ovf, (i, t, f), mesh)
    result = []
    for i, op in enumerate(ops):
        n = len(op.shardings)
        mesh = meshes[op.mesh]
        unary_axes = None
        if (i,) in out["er_unary"]:
            unary_axes = tuple(tuple(make_sub_axis(*ref, mesh) for _, ref in
                                     sorted(unary.get((i, f), {}).items()))
                               for f in range(len(op.rule.factors)))
        result.append(Projection(tuple(records.get((i, t), {}) for t in range(n)),
                                 tuple(overflow.get((i, t), {}) for t in range(n)),
                                 i in compatible, unary_axes, dot_decisions.get(i),
                                 (i,) in out["er_reduction_differs"]))
    return result


class Update(Frozen):
    """The outcome of setting every factor of an op to new axes: which tensors
    change (operands then results) and every tensor's sharding afterwards."""

    _fields = ("updated", "shardings")

    def __init__(self, updated: tuple[bool, ...], shardings: tuple[TensorSharding, ...]):
        object.__setattr__(self, "updated", updated)
        object.__setattr__(self, "shardings", shardings)


def project_out(ops: list[OpShardings], new: list, meshes: dict[str, Mesh],
                options) -> list[Update]:
    """For each op, its tensors after their factors take new axes (Shardy's
    ``updateSharding`` of every factor and ``createTensorShardingAttr``; one
    engine call): ``new[i]`` is the axes of every factor (a list, no overflow
    axes) or :class:`TensorAxes`.  Closed flags and replicated and unreduced
    axes are kept."""
    items = list(zip(ops, new))
    keys = [(op, _axes_key(axes)) for op, axes in items]
    return per_distinct(lambda distinct: _project_out([op for op, _ in distinct],
                                                      [axes for _, axes in distinct],
                                                      meshes, options), items, keys)


def _axes_key(axes) -> tuple:
    """New axes (a list per factor, or :class:`TensorAxes`) as a hashable key."""
    if not isinstance(axes, TensorAxes):
        return "factors", tuple(tuple(refs) for refs in axes)
    return ("tensors", tuple(tuple(sorted(per.items())) for per in axes.axes),
            tuple(tuple(sorted(per.items())) for per in axes.overflow))


def _project_out(ops: list[OpShardings], new: list, meshes: dict[str, Mesh],
                 options) -> list[Update]:
    if not ops:
        return []
    rows: dict[str, list] = {"in_factor_axis": [], "in_tensor_axis": [],
                             "in_tensor_overflow": []}
    for i, (op, axes) in enumerate(zip(ops, new)):
        mesh = meshes[op.mesh]
        if not isinstance(axes, TensorAxes):
            for f, refs in enumerate(axes):
                rows["in_factor_axis"].extend((i, f, q) + ref_triple(a, mesh)
                                              for q, a in enumerate(refs))
            continue
        for name, per_tensor in (("in_tensor_axis", axes.axes),
                                 ("in_tensor_overflow", axes.overflow)):
            for t, factors in enumerate(per_tensor):
                for f, refs in factors.items():
                    rows[name].extend((i, t, f, q) + ref_triple(a, mesh)
                                      for q, a in enumerate(refs))
    out = _run(ops, meshes, options, "out", rows)
    dims: dict[tuple, dict[int, tuple]] = defaultdict(dict)
    for i, t, d, o, a, p, s in out["er_dim_axis"]:
        dims[i, t, d][o] = (a, p, s)
    updated = {(i, t) for i, t in out["er_updated"]}
    result = []
    for i, op in enumerate(ops):
        mesh = meshes[op.mesh]
        new = []
        for t, old in enumerate(op.shardings):
            new_dims = []
            for d, dim in enumerate(old.dims):
                refs = dims.get((i, t, d), {})
                new_dims.append(DimSharding(tuple(make_sub_axis(*refs[o], mesh)
                                                  for o in range(len(refs))), dim.is_closed))
            new.append(old.replace(dims=tuple(new_dims)))
        result.append(Update(tuple((i, t) in updated for t in range(len(op.shardings))),
                             tuple(new)))
    return result
