"""Shardy's ``insertUnreducedCollectives`` for insert-explicit-reshards: a value
whose target has unreduced axes it has not is made unreduced on them.  Dims
whose axes end with such axes give them up (``sdy.sharded_to_unreduced``),
the other added axes come replicated (``sdy.replicated_to_unreduced``), after
a reshard to the target's dims when they do not line up.  Which dims give
axes up and whether the reshard comes first is the Datalog stage
``insert_unreduced_collectives`` (one engine call per value that gains
unreduced axes); Python creates the ops.
"""

from __future__ import annotations

from sdy_dl.passes import Stage
from sdy_dl.propagation.step_facts import ref_triple
from sdy_dl.sharding import AxisRef, Mesh, TensorSharding, axis_set_diff, make_sub_axis

#: The Datalog stage that decides which dims give their axes up
#: (``datalog/insert_unreduced_collectives/``).
STAGE = Stage("insert_unreduced_collectives")


def unreduced_split(have: TensorSharding, out: TensorSharding, added, mesh: Mesh,
                    options) -> tuple[dict[int, tuple], bool]:
    """Stage ``insert_unreduced_collectives``'s decision for a value of sharding
    ``have`` made unreduced on ``added`` toward ``out``: the axes each dim gives
    up (``sdy.sharded_to_unreduced``; dim -> refs) and whether the value is
    resharded to ``out``'s dims first."""
    facts: dict[str, list] = {"in_dim": [], "in_have_axis": [], "in_target_axis": [],
                              "in_added": [(0,) + ref_triple(a, mesh) for a in added]}
    for d, (in_dim, out_dim) in enumerate(zip(have.dims, out.dims)):
        facts["in_dim"].append((0, d))
        for name, dim in (("in_have_axis", in_dim), ("in_target_axis", out_dim)):
            facts[name].extend((0, d, q) + ref_triple(a, mesh) for q, a in enumerate(dim.axes))
    found = STAGE.run(facts, options)
    per_dim: dict[int, dict[int, AxisRef]] = {}
    for _, d, q, a, p, s in found["sharded_to_unreduced"]:
        per_dim.setdefault(d, {})[q] = make_sub_axis(a, p, s, mesh)
    return ({d: tuple(refs[q] for q in sorted(refs)) for d, refs in per_dim.items()},
            bool(found["reshard_first"]))


def insert_unreduced_collectives(mop, index: int, out: TensorSharding | None,
                                 meshes: dict[str, Mesh], insert, options) -> TensorSharding | None:
    """Make operand ``index`` of ``mop`` unreduced on the axes ``out`` has
    unreduced beyond the operand's, as :func:`unreduced_split` decides;
    ``insert(op)`` places each new op (in order).  Returns the operand's new
    sharding, or None when nothing was inserted."""
    from jaxlib.mlir import ir

    from sdy_dl.ir.sdy_attrs import axis_ref_list_attr, axis_ref_lists_attr, sharding_attr
    from sdy_dl.ir.meshes import sort_and_merge_axes
    from sdy_dl.ir.value_sharding import get_sharding

    value = mop.operands[index]
    have = get_sharding(value)
    if have is None or out is None or not out.unreduced:
        return None
    mesh = meshes[have.mesh] if isinstance(have.mesh, str) else have.mesh
    added = axis_set_diff(out.unreduced, have.unreduced, mesh)
    if not added:
        return None
    gives, need_reshard = unreduced_split(have, out, added, mesh, options)
    per_dim = [gives.get(i, ()) for i in range(len(have.dims))]
    s2u = [a for axes in per_dim for a in axes]
    dims = [have.dims[i] if i in gives else dim for i, dim in enumerate(out.dims)]

    def create(name: str, operand, attributes: dict):
        op = ir.Operation.create(name, results=[operand.type], operands=[operand],
                                 attributes=attributes, loc=mop.location)
        insert(op)
        return op.results[0]

    result = value
    last = have
    if need_reshard:
        last = have.replace(dims=tuple(dims))
        result = create("sdy.reshard", result, {"sharding": sharding_attr(last)})
    r2u = axis_set_diff(added, s2u, mesh)
    if r2u:
        unreduced = sort_and_merge_axes(list(have.unreduced) + list(r2u), mesh)
        last = TensorSharding(have.mesh, tuple(dims), out.replicated, tuple(unreduced))
        result = create("sdy.replicated_to_unreduced", result,
                        {"axes": axis_ref_list_attr(r2u),
                         "out_sharding": sharding_attr(last)})
    if s2u:
        result = create("sdy.sharded_to_unreduced", result,
                        {"axes": axis_ref_lists_attr(per_dim),
                         "out_sharding": sharding_attr(out)})
        last = out
    if result == value:
        return None
    mop.operands[index] = result
    return last
