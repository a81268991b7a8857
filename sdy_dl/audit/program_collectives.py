"""The collectives a program writes itself: the StableHLO collectives of a
``shard_map`` body (``psum``, ``all_gather``, ``all_to_all``, ``psum_scatter``,
``ppermute``), which no sharding decides.

:func:`groups_of` reads an op's device groups (``replica_groups``, or each
``source_target_pairs`` pair), :func:`group_axes` names the mesh axes they run
over (``n`` of the cost model's formulas is the product of their sizes), and
:func:`device_count` is ``n`` where no axes name the groups.
The ledger (:mod:`~sdy_dl.audit.collectives`) makes their entries.
"""

from __future__ import annotations

from math import prod

from sdy_dl.sharding import AxisRef, Mesh

#: StableHLO collective op -> its kind (as the ledger names kinds).
PROGRAM_COLLECTIVES = {
    "stablehlo.all_reduce": "all_reduce", "stablehlo.all_gather": "all_gather",
    "stablehlo.all_to_all": "all_to_all", "stablehlo.reduce_scatter": "reduce_scatter",
    "stablehlo.collective_permute": "collective_permute",
}


def groups_of(mop) -> list[list[int]]:
    """The device groups of collective op ``mop``: its ``replica_groups`` (a group
    per row, ``-1`` padding dropped), or each ``source_target_pairs`` pair."""
    from jaxlib.mlir import ir

    name = "source_target_pairs" if mop.name == "stablehlo.collective_permute" \
        else "replica_groups"
    if name not in mop.attributes:
        return []
    attr = ir.DenseIntElementsAttr(mop.attributes[name])
    shape = ir.RankedTensorType(attr.type).shape
    ids = list(attr)
    width = shape[1] if len(shape) == 2 else 1
    return [[d for d in ids[i:i + width] if d >= 0] for i in range(0, len(ids), width)]


def device_count(mop, groups: list[list[int]]) -> int:
    """``n`` of the cost model where no mesh axes name the groups: the size of a
    group; for a collective-permute, 2 when some device sends to another (each
    sends its whole operand once), else 1."""
    if mop.name == "stablehlo.collective_permute":
        return 2 if any(a != b for a, b in groups) else 1
    return max((len(g) for g in groups), default=1)


def group_axes(groups: list[list[int]], mesh: Mesh | None, pairs: bool) -> list[AxisRef]:
    """The full axes of ``mesh`` the devices of each group differ on, in mesh order.
    Replica groups (not ``pairs``) are named so only when each is every device that
    differs from its first on those axes alone (a ``psum`` over them); else none:
    no set of axes names them.  Source-target ``pairs``: the axes any pair differs on."""
    if mesh is None or not mesh.axes or not groups:
        return []
    sizes = [a.size for a in mesh.axes]
    position = ({d: p for p, d in enumerate(mesh.device_ids)} if mesh.device_ids
                else {d: d for d in range(prod(sizes))})

    def coords(device) -> tuple | None:
        p = position.get(device)
        if p is None:
            return None
        out = []
        for size in reversed(sizes):
            out.append(p % size)
            p //= size
        return tuple(out[::-1])

    points = [[coords(d) for d in g] for g in groups]
    if any(c is None for cs in points for c in cs):
        return []
    varying = {i for cs in points for c in cs[1:] for i, (a, b) in enumerate(zip(c, cs[0]))
               if a != b}
    if not pairs:
        size = prod(sizes[i] for i in varying)
        for cs in points:
            rest = {tuple(x for i, x in enumerate(c) if i not in varying) for c in cs}
            if len(rest) != 1 or len(set(cs)) != len(cs) or len(cs) != size:
                return []
    return [AxisRef(mesh.axes[i].name) for i in sorted(varying)]
