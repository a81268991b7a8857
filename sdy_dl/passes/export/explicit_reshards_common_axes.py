"""The full version's common axes (Shardy's ``findCommonAxes``), for the ops
the non-full insert-explicit-reshards treats in full: concatenates whose
operands are sharded unlike their result.

Every tensor of the op is projected onto the factors of its rule (dims of
one factor each).  When the factors are sharded alike everywhere the common
axes are those; otherwise a greedy heuristic picks, again and again, the
(factor, axes-prefix) candidate with the largest total size of the tensors
it already shards (then factor kind, then the further sharding it adds, then
the factor and axes order), gives it to the factor and trims the other
candidates that overlap it.  The axes of factors that need replication are
then moved to the batching factors where they fit.  Tensors whose factor
axes change are resharded: operands before the op, results after it (the
result takes the common sharding, a reshard restores the old one).
"""

from __future__ import annotations

import dataclasses

from sdy_dl.sharding import DimSharding, Mesh, TensorSharding

PRECEDENCE = {"pass_through": 3, "reduction": 2, "permutation": 1, "need_replication": 0}


def _size(axes, mesh: Mesh) -> int:
    n = 1
    for a in axes:
        n *= a.ref_size(mesh)
    return n


def _strict_prefix(a: tuple, b: tuple, mesh: Mesh) -> bool:
    """``AxisListRef::strictPrefixOf``."""
    if not a:
        return bool(b)
    if len(a) > len(b) or a[:-1] != b[:len(a) - 1]:
        return False
    if len(a) == len(b):
        return a[-1] != b[-1] and a[-1].prefix_of(b[-1], mesh)
    return a[-1].prefix_of(b[len(a) - 1], mesh)


def _truncate_without_overlap(axes: tuple, other: tuple, mesh: Mesh) -> tuple | None:
    """``AxisListRef::truncateWithoutOverlap``: the truncated list, None when
    nothing overlaps."""
    for i, axis in enumerate(axes):
        prefix = axis
        for o in other:
            prefix = prefix.prefix_without_overlap(o, mesh) if prefix is not None else None
            if prefix is None:
                break
        if prefix != axis:
            return axes[:i] + ((prefix,) if prefix is not None else ())
    return None


@dataclasses.dataclass
class Candidate:
    factor: int
    axes: tuple
    total: int
    precedence: int
    sharding: int

    def key(self, mesh: Mesh) -> tuple:
        axes_key = (len(self.axes), tuple((a.name, a._order_key()) for a in self.axes))
        return (self.total, self.precedence, self.sharding, self.factor, axes_key)


def _add_axis_or_merge(axes: list, axis, mesh: Mesh) -> None:
    if axes and axes[-1].can_merge(axis):
        axes[-1] = axes[-1].merge(axis, mesh)
    else:
        axes.append(axis)


def find_common_axes(projections: list[dict], sizes: list[int], rule, mesh: Mesh) -> list[tuple]:
    """Shardy's ``findCommonAxes`` for rules whose dims hold one factor each."""
    n = len(rule.factors)
    compatible = _compatible(projections, rule, mesh)
    if compatible is not None:
        return compatible
    non_scalar = [i for i, m in enumerate(list(rule.operands) + list(rule.results)) if m]
    if len(non_scalar) == 2 and not any(f.kind == "need_replication" for f in rule.factors):
        return _common_axes_on_unary(projections, sizes, non_scalar, rule, mesh)
    common: list[tuple] = [() for _ in range(n)]
    pairs = []
    for proj in projections:
        for f, axes in proj.items():
            while axes:
                if (f, axes) not in pairs:
                    pairs.append((f, axes))
                axes = axes[:-1]
    cands = []
    for f, axes in pairs:
        total = sum(size for proj, size in zip(projections, sizes)
                    if f in proj and (proj[f] == axes or _strict_prefix(axes, proj[f], mesh)))
        cands.append(Candidate(f, axes, total, PRECEDENCE[rule.factors[f].kind], _size(axes, mesh)))
    while cands:
        best = max(cands, key=lambda c: c.key(mesh))
        common[best.factor] = best.axes
        kept = []
        for c in cands:
            if c.factor == best.factor:
                if _strict_prefix(best.axes, c.axes, mesh):
                    c.sharding = _size(c.axes, mesh) // _size(best.axes, mesh)
                    kept.append(c)
                continue
            truncated = _truncate_without_overlap(c.axes, best.axes, mesh)
            if truncated is not None:
                c.axes = truncated
                if c.axes == common[c.factor]:
                    continue
                c.sharding = _size(c.axes, mesh) // _size(common[c.factor], mesh)
                kept.append(c)
                continue
            c.sharding = _size(c.axes, mesh)
            kept.append(c)
        cands = kept
    if any(f.kind == "need_replication" for f in rule.factors):
        _distribute_to_batching(common, projections, rule, mesh)
    return common


def _common_axes_on_unary(projections, sizes, tensors, rule, mesh: Mesh) -> list[tuple]:
    """``findCommonAxesOnUnaryOperation``: one of the two tensors keeps its
    axes and only the other is resharded.  The kept one is the tensor without
    sharded permutation factors, then the larger, then the more sharded (the
    first on a tie); factors only the other tensor has keep its axes, cut
    where they overlap the kept tensor's."""
    def preference(i):
        proj = projections[i]
        permuted = any(rule.factors[f].kind == "permutation" and axes for f, axes in proj.items())
        return (not permuted, sizes[i], _size([a for axes in proj.values() for a in axes], mesh))

    first, second = tensors
    kept, other = (first, second) if preference(first) >= preference(second) else (second, first)
    common: list[tuple] = [() for _ in rule.factors]
    taken = []
    for f, axes in projections[kept].items():
        common[f] = axes
        taken.extend(axes)
    for f, axes in projections[other].items():
        if f not in projections[kept]:
            truncated = _truncate_without_overlap(axes, tuple(taken), mesh)
            common[f] = axes if truncated is None else truncated
    return common


def _compatible(projections, rule, mesh: Mesh) -> list[tuple] | None:
    """``getCompatibleFactorShardings`` (None when not compatible)."""
    common: list[tuple] = []
    seen: list = []
    for f, factor in enumerate(rule.factors):
        shardings = [p[f] for p in projections if f in p]
        if any(s != shardings[0] for s in shardings):
            return None
        axes = shardings[0] if shardings else ()
        if factor.kind == "need_replication":
            if axes:
                return None
            common.append(())
            continue
        if any(a.overlaps(b) for a in axes for b in seen):
            return None
        common.append(axes)
        seen.extend(axes)
    return common


def _in_all_tensors(f: int, rule) -> bool:
    return all(any(f in dim for dim in t) for t in rule.operands + rule.results if t)


def _distribute_to_batching(common: list, projections, rule, mesh: Mesh) -> None:
    batching = [f for f, factor in enumerate(rule.factors)
                if factor.kind == "pass_through" and _in_all_tensors(f, rule)]
    for f, factor in enumerate(rule.factors):
        if factor.kind != "need_replication":
            continue
        pending = list(common[f])
        common[f] = ()
        if not pending or not _in_all_tensors(f, rule):
            continue
        for b in batching:
            size = rule.factors[b].size
            if size == 0:
                continue
            axes = list(common[b])
            sharded = _size(axes, mesh)
            if size % sharded:
                continue
            capacity = size // sharded
            while pending:
                axis_size = pending[0].ref_size(mesh)
                if capacity % axis_size:
                    break
                _add_axis_or_merge(axes, pending.pop(0), mesh)
                capacity //= axis_size
            common[b] = tuple(axes)
            if not pending:
                break


def projected_sharding(mapping, common: list[tuple], original: TensorSharding | None,
                       mesh_name: str) -> TensorSharding:
    """``TensorFactorShardings::createTensorShardingAttr`` for one-factor dims."""
    dims = []
    for d, factors in enumerate(mapping):
        closed = True if original is None else original.dims[d].is_closed
        dims.append(DimSharding(common[factors[0]], closed))
    if original is None:
        return TensorSharding(mesh_name, tuple(dims))
    return dataclasses.replace(original, mesh=mesh_name, dims=tuple(dims))


def concat_needs_full_version(mop) -> bool:
    """``isOnFullVersion`` for a concatenate: an operand's sharding differs
    from the result's."""
    from sdy_dl.ir.value_sharding import get_sharding

    result = get_sharding(mop.results[0])
    return any(get_sharding(v) != result for v in mop.operands)


def reshard_to_common_axes(mop, rule, meshes: dict[str, Mesh]) -> bool:
    """``processOp`` in the full version (one-factor dims):
    reshard the operands and results whose factor axes differ from the common
    axes."""
    from jaxlib.mlir import ir

    from sdy_dl.passes.export.explicit_reshards_util import _num_elements, factor_projections
    from sdy_dl.ir.storage import parse_attr
    from sdy_dl.ir.value_sharding import get_sharding, set_sharding

    if rule is None or rule.is_custom:
        return False
    projected = factor_projections(mop, rule, meshes)
    if projected is None:
        return False
    mesh_name, shardings, projections = projected
    mesh = meshes[mesh_name]
    ins, outs = shardings[:len(mop.operands)], shardings[len(mop.operands):]
    sizes = [_num_elements(v.type) for v in list(mop.operands) + list(mop.results)]
    common = find_common_axes(projections, sizes, rule, mesh)

    def changed(proj) -> bool:
        return any(common[f] != axes for f, axes in proj.items())

    done = False
    for i, operand in enumerate(list(mop.operands)):
        if not changed(projections[i]):
            continue
        sharding = projected_sharding(rule.operands[i], common, ins[i], mesh_name)
        reshard = ir.Operation.create("sdy.reshard", results=[operand.type], operands=[operand],
                                      attributes={"sharding": parse_attr(sharding.to_text())},
                                      loc=mop.location)
        ir.InsertionPoint(mop).insert(reshard)
        mop.operands[i] = reshard.results[0]
        done = True
    n = len(mop.operands)
    anchor = mop
    for j, result in enumerate(list(mop.results)):
        if not changed(projections[n + j]):
            continue
        old = get_sharding(result) or TensorSharding(
            mesh_name, tuple(DimSharding((), True) for _ in rule.results[j]))
        reshard = ir.Operation.create("sdy.reshard", results=[result.type], operands=[result],
                                      attributes={"sharding": parse_attr(old.to_text())},
                                      loc=mop.location)
        ir.InsertionPoint.after(anchor).insert(reshard)
        anchor = reshard
        result.replace_all_uses_except(reshard.results[0], reshard)
        set_sharding(result, projected_sharding(rule.results[j], common, outs[j], mesh_name))
        done = True
    return done
