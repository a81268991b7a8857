"""Shardy's ``CollectiveInserter`` (reshard-to-collectives, semantics §9.3): the
sequence of collectives that moves one sharding to another.

Axis lists in, :class:`Collective` steps out (no IR).  Whether a state needs
a collective-permute and which dims all-gather are decided by the Datalog
stage ``collective_inserter`` (:func:`insert_all` runs the inserters of all
reshards in lockstep and asks the stage once per such attempt); the axis-list
rewrites in between are Shardy's sequential code.  The state is
Shardy's: ``in_axes``/``out_axes`` per dim hold the *difference* between the
current and the target sharding (common prefixes removed), ``cur`` the
current sharding's axes, ``capacity`` the per-dim budget of the step being
chosen.  Each round tries the collectives in the order
``rules/export/reshard_to_collectives.yaml`` lists (Shardy: all-slice,
collective-permute, all-to-alls moved in order, all-to-alls, all-gather; two
rounds), each one rewriting the state, until both differences are empty.

Iterator behaviour of Shardy's ``std::list`` code is kept where it decides
the result: a dim whose last input axis is not wanted anywhere gathers all of
its remaining axes (the stage's ``all_gather_dim``).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import lru_cache
from math import gcd

from sdy_dl.sharding import AxisRef, DimSharding, Mesh, TensorSharding, add_axis_or_merge


@dataclass(frozen=True)
class Collective:
    """One collective: its kind (``all_slice``, ``all_gather``, ``all_to_all``,
    ``collective_permute``), its axes (per dim for slice/gather; for an
    all-to-all the moved axes with ``src_dim``/``tgt_dim``) and the sharding
    after it."""

    kind: str
    out_sharding: TensorSharding
    axes_per_dim: tuple[tuple[AxisRef, ...], ...] = ()
    axes: tuple[AxisRef, ...] = ()
    src_dim: int = -1
    tgt_dim: int = -1


@lru_cache(maxsize=1)
def collective_order() -> tuple[int, tuple[str, ...]]:
    """(rounds, the attempts of one round) from the shipped YAML data."""
    import yaml

    from sdy_dl.resources import rules_dir

    data = yaml.safe_load((rules_dir() / "export" / "reshard_to_collectives.yaml")
                          .read_text())
    return int(data["rounds"]), tuple(data["attempts"])


def _size(axis: AxisRef, mesh: Mesh) -> int:
    return axis.ref_size(mesh)


def _sharded_size(axes, mesh: Mesh) -> int:
    product = 1
    for axis in axes:
        product *= _size(axis, mesh)
    return product


def _divisible(a: int, b: int) -> bool:
    return a % b == 0 or b % a == 0


def _first_overlapping(axis: AxisRef, ordered: list) -> int | None:
    """``AxisRefAttr::getFirstOverlapping`` in the sorted ``ordered``."""
    if not ordered:
        return None
    after = bisect.bisect_left(ordered, axis)
    if after > 0 and axis.overlaps(ordered[after - 1]):
        return after - 1
    if after < len(ordered) and axis.overlaps(ordered[after]):
        return after
    return None


def align_sub_axes(axes: list, ordered_other: list, mesh: Mesh) -> None:
    """``alignSubAxesByDecomposition``: split each axis of ``axes`` that overlaps an
    axis of ``ordered_other`` without being contained in it into its
    prefix, overlap and suffix."""
    i = 0
    while i < len(axes):
        axis = axes[i]
        j = _first_overlapping(axis, ordered_other)
        advanced = False
        while (j is not None and j < len(ordered_other) and ordered_other[j].can_coexist(axis)
               and not ordered_other[j].contains(axis) and ordered_other[j].overlaps(axis)):
            other = ordered_other[j]
            del axes[i]
            prefix = axis.prefix_without_overlap(other, mesh)
            if prefix is not None:
                axes.insert(i, prefix)
                i += 1
            axes.insert(i, axis.overlap(other, mesh))
            i += 1
            suffix = axis.suffix_without_overlap(other, mesh)
            if suffix is None:
                advanced = True
                break
            axes.insert(i, suffix)
            axis = suffix
            j += 1
        if not advanced:
            i += 1


def _axis_to_dim_and_index(axes_per_dim) -> dict:
    result: dict = {}
    for dim, axes in enumerate(axes_per_dim):
        for index, axis in enumerate(axes):
            result.setdefault(axis, (dim, index))
    return result


def _within_capacity(axis: AxisRef, capacity: int, mesh: Mesh):
    """``getAxisWithinCapacity``: (the part of ``axis`` that fits, the rest, the
    capacity left)."""
    size = _size(axis, mesh)
    if capacity <= 1 or not _divisible(size, capacity):
        return None, None, capacity
    if capacity >= size:
        return axis, None, capacity // size
    within = AxisRef(axis.name, axis.pre, capacity)
    return within, AxisRef(axis.name, axis.pre * capacity, size // capacity), 1


class CollectiveInserter:
    """Moves ``in_sharding`` to ``out_sharding`` (same rank, meshes equal up to
    device order) on a tensor of ``shape``; :meth:`insert` returns the steps."""

    def __init__(self, in_sharding: TensorSharding, out_sharding: TensorSharding,
                 mesh: Mesh, shape: tuple[int, ...]):
        self.mesh = mesh
        self.shape = shape
        self.cur_mesh = in_sharding.mesh
        self.out_mesh = out_sharding.mesh
        self.unreduced = out_sharding.unreduced
        self.in_axes = [list(d.axes) for d in in_sharding.dims]
        self.out_axes = [list(d.axes) for d in out_sharding.dims]
        self.cur = [list(d.axes) for d in in_sharding.dims]
        self.capacity = [1] * len(self.in_axes)
        ordered_in = sorted(a for axes in self.in_axes for a in axes)
        ordered_out = sorted(a for axes in self.out_axes for a in axes)
        for axes in self.in_axes:
            align_sub_axes(axes, ordered_out, mesh)
        for axes in self.out_axes:
            align_sub_axes(axes, ordered_in, mesh)
        for ins, outs in zip(self.in_axes, self.out_axes):
            while ins and outs and ins[0] == outs[0]:
                del ins[0]
                del outs[0]
        self.in_set = {a for axes in self.in_axes for a in axes}
        self.out_index = _axis_to_dim_and_index(self.out_axes)
        self.steps: list[Collective] = []

    # -- the state as facts of stage collective_inserter ---------------------------

    def add_facts(self, i: int, facts: dict[str, set]) -> None:
        """This state's facts as instance ``i`` of stage ``collective_inserter``."""
        facts["in_state"].add((i,))
        axes = set(self.in_set) | set(self.out_index)
        for name, per_dim in (("in_in_axis", self.in_axes), ("in_out_axis", self.out_axes)):
            for d, dim_axes in enumerate(per_dim):
                for p, axis in enumerate(dim_axes):
                    facts[name].add((i, d, p, axis.to_text()))
                    axes.add(axis)
        facts["in_in_set"] |= {(i, a.to_text()) for a in self.in_set}
        facts["in_out_index"] |= {(i, a.to_text(), d, p) for a, (d, p) in self.out_index.items()}
        facts["in_axis_size"] |= {(i, a.to_text(), _size(a, self.mesh)) for a in axes}

    def done(self) -> bool:
        return (self.cur_mesh == self.out_mesh and not any(self.in_axes)
                and not any(self.out_axes))

    @property
    def rank(self) -> int:
        return len(self.in_axes)

    def current(self) -> TensorSharding:
        """Shardy's ``getCurrentSharding``: closed dims, the output's unreduced axes."""
        return TensorSharding(self.cur_mesh, tuple(DimSharding(tuple(axes), True)
                                                   for axes in self.cur),
                              (), self.unreduced)

    def _pop_back_from_current(self, cur: list, axes_to_pop: list, start: int) -> None:
        for axis in reversed(axes_to_pop[start:]):
            prefix = cur[-1].prefix_without_overlap(axis, self.mesh)
            if prefix is not None:
                cur[-1] = prefix
            else:
                cur.pop()

    def _distribute(self, add_to_front: bool, available_of, consume=None) -> None:
        """``distributeInAxesWithinCapacity``: fill each dim's capacity from
        ``available_of(dim)`` (splitting an axis that is too big)."""
        split_added = []
        for dim in range(self.rank):
            in_axes = self.in_axes[dim]
            pos = 0 if add_to_front else len(in_axes)
            available = available_of(dim)
            k = 0
            while k < len(available) and self.capacity[dim] > 1:
                within, remainder, self.capacity[dim] = _within_capacity(
                    available[k], self.capacity[dim], self.mesh)
                if within is None:
                    k += 1
                    continue
                del available[k]
                in_axes.insert(pos, within)
                pos += 1
                self.in_set.add(within)
                if consume is not None:
                    consume(within, dim)
                if remainder is not None:
                    split_added.append(within)
                    available.insert(0, remainder)
                    k += 1
        if split_added:
            ordered = sorted(split_added)
            for axes in self.out_axes:
                align_sub_axes(axes, ordered, self.mesh)

    # -- all-gather ------------------------------------------------------------

    def gathering_axes(self, dim: int, gathers: bool) -> list[AxisRef]:
        """``getGatheringAxes``: the axes ``dim`` gathers (all of them when
        ``gathers``, as the Datalog stage decided), popped from the state."""
        in_axes = self.in_axes[dim]
        if not in_axes or not gathers:
            return []
        self.in_set.discard(in_axes[-1])
        start = 0
        self._pop_back_from_current(self.cur[dim], in_axes, start)
        gathering: list[AxisRef] = []
        for axis in in_axes[start:]:
            add_axis_or_merge(gathering, axis, self.mesh)
        del in_axes[start:]
        return gathering

    def try_all_gather(self, gather_dims) -> None:
        per_dim = [tuple(self.gathering_axes(dim, dim in gather_dims)) for dim in range(self.rank)]
        if any(per_dim):
            self.steps.append(Collective("all_gather", self.current(), tuple(per_dim)))

    # -- all-slice -------------------------------------------------------------

    def axes_to_slice_for_all_to_all(self, src: int):
        """``getAxesToSliceForAllToAll``: (target dim, start, end) of the target's
        output axes to slice at ``src`` ahead of an all-to-all, or None."""
        src_in = self.in_axes[src]
        if not src_in or self.out_axes[src]:
            return None
        entry = self.out_index.get(src_in[-1])
        if entry is None:
            return None
        tgt = entry[0]
        if self.in_axes[tgt]:
            return None
        tgt_out = self.out_axes[tgt]
        if src_in[-1] not in tgt_out:
            return None
        start = tgt_out.index(src_in[-1]) + 1
        if start == len(tgt_out) or tgt_out[start] in self.in_set:
            return None
        i, o, common = len(src_in) - 1, start - 1, 1
        while i >= 0 and o >= 0 and src_in[i] == tgt_out[o]:
            common *= _size(src_in[i], self.mesh)
            i -= 1
            o -= 1
        for axis in src_in[:i + 1]:
            entry = self.out_index.get(axis)
            if entry is not None and entry[0] == tgt:
                return None
        end, added = start, 1
        while end < len(tgt_out) and tgt_out[end] not in self.in_set:
            added *= _size(tgt_out[end], self.mesh)
            end += 1
        if self.shape[src] % (_sharded_size(self.cur[src], self.mesh) * added) != 0:
            return None
        self.capacity[tgt] //= common * added
        return tgt, start, end

    def slicing_axes_per_dim(self):
        """``getSlicingAxesPerDim``: the axes each dim is sliced on, or None."""
        mesh = self.mesh
        slicing: list[list[AxisRef]] = [[] for _ in range(self.rank)]
        has = False
        for dim in range(self.rank):
            in_size = _sharded_size(self.in_axes[dim], mesh)
            out_size = _sharded_size(self.out_axes[dim], mesh)
            self.capacity[dim] = out_size // gcd(in_size, out_size)
        # 1. Slice at a source dim the axes a later all-to-all takes to its target.
        for src in range(self.rank):
            found = self.axes_to_slice_for_all_to_all(src)
            if found is None:
                continue
            has = True
            tgt, start, end = found
            for axis in self.out_axes[tgt][start:end]:
                self.in_axes[src].append(axis)
                self.in_set.add(axis)
                add_axis_or_merge(slicing[src], axis, mesh)
                add_axis_or_merge(self.cur[src], axis, mesh)
        # 2. Slice output axes in their own dim while its capacity allows.
        available: list[AxisRef] = []
        for dim in range(self.rank):
            in_axes, out_axes = self.in_axes[dim], self.out_axes[dim]
            k = 0
            while k < len(out_axes):
                axis = out_axes[k]
                if axis in self.in_set:
                    k += 1
                    continue
                within, remainder, self.capacity[dim] = _within_capacity(
                    axis, self.capacity[dim], mesh)
                if within is None:
                    available.append(axis)
                    k += 1
                    continue
                has = True
                add_axis_or_merge(slicing[dim], within, mesh)
                add_axis_or_merge(self.cur[dim], within, mesh)
                if not in_axes and k == 0:
                    del out_axes[0]
                else:
                    self.in_set.add(within)
                    in_axes.append(within)
                    out_axes[k] = within
                    k += 1
                if remainder is not None:
                    out_axes.insert(k, remainder)
                    k += 1
                    available.append(remainder)

        # 3. The rest in the first dim with capacity.
        def consume(axis, dim):
            nonlocal has
            has = True
            add_axis_or_merge(slicing[dim], axis, mesh)
            add_axis_or_merge(self.cur[dim], axis, mesh)

        self._distribute(False, lambda dim: available, consume)
        self.out_index = _axis_to_dim_and_index(self.out_axes)
        return slicing if has else None

    def try_all_slice(self) -> None:
        slicing = self.slicing_axes_per_dim()
        if slicing is not None:
            self.steps.append(Collective("all_slice", self.current(),
                                         tuple(tuple(axes) for axes in slicing)))

    # -- collective-permute ----------------------------------------------------

    def perform_collective_permute(self) -> None:
        """``performCollectivePermute``: re-pick every dim's axes at the same sizes."""
        mesh = self.mesh
        available_out: list[AxisRef] = []
        available_in_per_dim: list[list[AxisRef]] = [[] for _ in range(self.rank)]
        self.in_set = set()
        for dim in range(self.rank):
            in_axes, out_axes, cur = self.in_axes[dim], self.out_axes[dim], self.cur[dim]
            self.capacity[dim] = _sharded_size(in_axes, mesh)
            used = self.capacity[dim]
            self._pop_back_from_current(cur, in_axes, 0)
            while self.capacity[dim] > 1 and out_axes:
                within, remainder, self.capacity[dim] = _within_capacity(
                    out_axes[0], self.capacity[dim], mesh)
                if within is None:
                    break
                del out_axes[0]
                add_axis_or_merge(cur, within, mesh)
                if remainder is not None:
                    out_axes.insert(0, remainder)
            available_out.extend(out_axes)
            used //= self.capacity[dim]
            in_axes[:] = [a for a in in_axes if a not in self.out_index]
            available_in = available_in_per_dim[dim]
            while used > 1 and in_axes:
                within, remainder, used = _within_capacity(in_axes[0], used, mesh)
                if within is None:
                    break
                del in_axes[0]
                available_in.append(within)
                if remainder is not None:
                    in_axes.insert(0, remainder)
            available_in[0:0] = in_axes
            in_axes.clear()
        self._distribute(False, lambda dim: available_out)
        self._distribute(True, lambda dim: available_in_per_dim[dim])
        rest = [a for axes in available_in_per_dim for a in axes]
        self._distribute(True, lambda dim: rest)
        self.out_index = _axis_to_dim_and_index(self.out_axes)
        for in_axes, cur in zip(self.in_axes, self.cur):
            for axis in in_axes:
                add_axis_or_merge(cur, axis, mesh)

    def try_collective_permute(self, should: bool) -> None:
        """A collective-permute when ``should`` (decided by the Datalog stage:
        Shardy's ``shouldCollectivePermute``) or when the device order changes."""
        if should:
            self.perform_collective_permute()
        elif self.cur_mesh == self.out_mesh:
            return
        self.cur_mesh = self.out_mesh
        self.steps.append(Collective("collective_permute", self.current()))

    # -- all-to-all ------------------------------------------------------------

    def all_to_all_info(self, src: int, out_of_order: bool):
        """``getAllToAllInfo``: (axes, target dim) of the next all-to-all from
        ``src``, popped from the state, or None."""
        src_in = self.in_axes[src]
        i, tgt = len(src_in) - 1, None
        while i >= 0:
            entry = self.out_index.get(src_in[i])
            if entry is None or entry[0] == src or (tgt is not None and entry[0] != tgt):
                break
            tgt = entry[0]
            i -= 1
        if tgt is None:
            return None
        start = i + 1
        tgt_out = self.out_axes[tgt]
        moved = src_in[start:]
        if not out_of_order and tgt_out[:len(moved)] != moved:
            return None
        axes: list[AxisRef] = []
        tgt_cur, tgt_in = self.cur[tgt], self.in_axes[tgt]
        self._pop_back_from_current(self.cur[src], src_in, start)
        del src_in[start:]
        for axis in moved:
            add_axis_or_merge(axes, axis, self.mesh)
            add_axis_or_merge(tgt_cur, axis, self.mesh)
            self.in_set.discard(axis)
            if not tgt_in and tgt_out and tgt_out[0] == axis:
                del tgt_out[0]
            else:
                tgt_in.append(axis)
                self.in_set.add(axis)
        return axes, tgt

    def try_all_to_alls(self, out_of_order: bool) -> None:
        for src in range(self.rank):
            while (info := self.all_to_all_info(src, out_of_order)) is not None:
                axes, tgt = info
                self.steps.append(Collective("all_to_all", self.current(), axes=tuple(axes),
                                             src_dim=src, tgt_dim=tgt))


#: The relations of stage ``collective_inserter``'s facts.
FACT_NAMES = ("in_state", "in_in_axis", "in_out_axis", "in_in_set", "in_out_index",
              "in_axis_size")


def insert_all(inserters: list[CollectiveInserter], analyse) -> list[list[Collective]]:
    """Run every inserter in lockstep and return each one's collectives.

    ``analyse(facts)`` runs the Datalog stage ``collective_inserter`` and returns
    its relations; it is called once for all unfinished inserters before each
    collective-permute and each all-gather attempt."""
    rounds, attempts = collective_order()
    for _ in range(rounds):
        active = [c for c in inserters if not c.done()]
        if not active:
            break
        for attempt in attempts:
            if attempt in ("collective_permute", "all_gather"):
                facts: dict[str, set] = {name: set() for name in FACT_NAMES}
                for i, inserter in enumerate(active):
                    inserter.add_facts(i, facts)
                derived = analyse(facts)
                if attempt == "collective_permute":
                    permute = {i for (i,) in derived["collective_permute"]}
                    for i, inserter in enumerate(active):
                        inserter.try_collective_permute(i in permute)
                else:
                    gather: dict[int, set] = {}
                    for i, d in derived["all_gather_dim"]:
                        gather.setdefault(i, set()).add(d)
                    for i, inserter in enumerate(active):
                        inserter.try_all_gather(gather.get(i, set()))
                continue
            for inserter in active:
                if attempt == "all_slice":
                    inserter.try_all_slice()
                else:
                    inserter.try_all_to_alls(attempt == "all_to_all")
    return [inserter.steps for inserter in inserters]
