"""The shardings propagation reads and writes, kept in Python during a pass.

Values are read through the data-flow-edge slots (``edges.slot_map``).  A
write to one result of an ordinary op with no sharding yet gives the op's
other results open-empty shardings on the same mesh, as Shardy's setter
does.  ``write_back`` stores every changed sharding in the module's
attributes at the end of the pass.
"""

from __future__ import annotations

from sdy_dl.ir import Module, Op, Value
from sdy_dl.ir.manual_axes import add_free_axes, erase_manual_axes, manual_axes
from sdy_dl.ir.storage import (is_shardable, store_shardings, stored_result_sharding,
                               stored_sharding, write_func_attrs)
from sdy_dl.ir.traits import COMPUTATION_OPS, OWN_SHARDING_OPS
from sdy_dl.ir.walk import key
from sdy_dl.sharding import TensorSharding


#: A function result :meth:`ShardingState.results_of` finds neither read nor written.
_UNREAD = object()


def value_key(value: Value) -> int:
    """A key for a value that survives IR changes and re-indexing (its C++ pointer,
    read once per model value: provenance asks for it at every traced step; a
    what-if's copy of a module keys its values as the first propagation did,
    ``audit.naming.PropagationIndex``)."""
    found = value.pointer
    if found is None:
        found = value.pointer = key(value.mlir)
    return found


def results_share_a_slot(op: Op | None) -> bool:
    """Whether ``op``'s results are read and written together: an op with several
    results that neither holds its own sharding nor is a computation (one result
    sharded gives the others an open empty sharding, :meth:`ShardingState.set`)."""
    return (op is not None and len(op.results) > 1 and op.name not in OWN_SHARDING_OPS
            and op.name not in COMPUTATION_OPS)


def _manual_block_arg(value: Value) -> list[str] | None:
    """The manual axes, if ``value`` is a block argument of a manual computation: its
    stored in_sharding is global, propagation reads and writes it locally (§8.6)."""
    if not value.is_block_arg or value.block.region.owner.name != "sdy.manual_computation":
        return None
    return manual_axes(value.block.region.owner.mlir)


class _Layer(dict):
    """A dict read through to ``base`` for keys it does not hold; writes stay in
    the layer (the speculative copy of a state, without copying the base)."""

    def __init__(self, base: dict):
        super().__init__()
        self.base = base

    def __contains__(self, key) -> bool:
        return dict.__contains__(self, key) or key in self.base

    def __missing__(self, key):
        return self.base[key]

    def get(self, key, default=None):
        return self[key] if key in self else default


class ShardingState:
    """Current shardings of values (by slot) and of function results."""

    def __init__(self, module: Module, slots: dict[int, Value]):
        self.module = module
        self.slots = slots
        self.tracer = None   # an audit.provenance.ProvenanceTracer, when provenance is recorded
        self._value: dict[int, TensorSharding | None] = {}
        self._changed: set[int] = set()
        self._results: dict[tuple[int, int], TensorSharding | None] = {}
        self._changed_results: set[tuple[int, int]] = set()
        #: A write counter, and the count at the last write of each slot (by vid).
        self.clock = 0
        self.stamps: dict[int, int] = {}
        #: The manual axes of the slots (by vid) that are block arguments of a
        #: manual computation, for each slot read or written so far.
        self._manual: dict[int, list[str]] = {}
        #: When recording (a list): every write of a value's sharding in order, as
        #: (vid, sharding stored), the open-empty siblings' too; ``read0`` then
        #: keeps each slot's sharding as first read (see ``propagation.replay``).
        self.log: list | None = None
        self.read0: dict | None = None

    def held(self, vid: int, default=None):
        """The sharding held for slot ``vid`` if it was read or written (``default``
        otherwise), without reading it from the module."""
        return self._value.get(vid, default)

    def read_vids(self):
        """The slots (by vid) read or written so far (a live view)."""
        return self._value.keys()

    def manual_slots(self) -> dict:
        """The manual axes of the slots (by vid) read or written so far that are block
        arguments of a manual computation (a copy)."""
        return dict(self._manual)

    def take_reads(self, reads: list, manual: dict) -> None:
        """Hold ``reads``, (vid, sharding stored) of slots not read yet, as
        :meth:`get` reads them (``manual``: the manual axes of those that are
        block arguments of a manual computation), not traced (the caller
        records them with the tracer)."""
        self._value.update(reads)
        self._manual.update(manual)
        if self.read0 is not None:
            self.read0.update(reads)

    def take_writes(self, writes: list) -> None:
        """Make ``writes``, (vid, sharding stored) as :attr:`log` records them, as
        :meth:`set` made them in another propagation of the same module whose
        shardings of the slots read for them (each read already here) were these:
        stored, stamped and logged in order, not traced (the caller records them
        with the tracer)."""
        vids = [vid for vid, _ in writes]
        self._value.update(writes)
        self._changed.update(vids)
        clock = self.clock
        self.stamps.update(zip(vids, range(clock + 1, clock + 1 + len(vids))))
        self.clock = clock + len(vids)
        if self.log is not None:
            self.log.extend(writes)

    def results_of(self, func: Op, count: int) -> tuple:
        """The shardings held for results 0 to ``count - 1`` of function ``func``
        (a marker for those not read or written), without reading them."""
        results, oid = self._results, func.oid
        return tuple([results.get((oid, i), _UNREAD) for i in range(count)])

    def take_results(self, func: Op, writes: list) -> None:
        """Make ``writes``, (result index, sharding) of function ``func``'s results, as
        :meth:`set_result` made them in another propagation of the same module,
        not traced (the caller records them with the tracer)."""
        for index, sharding in writes:
            self._results[(func.oid, index)] = sharding
            self._changed_results.add((func.oid, index))

    def held_results(self) -> dict:
        """(function op, result index) -> its sharding, of the results read or written."""
        return dict(self._results)

    def slot(self, v: Value) -> Value:
        """The value whose sharding ``v`` uses."""
        return self.slots.get(v.vid, v)

    def fork(self) -> ShardingState:
        """A copy for speculation: reads see this state, writes stay in the copy
        (which records no changes and traces nothing); costs nothing per value."""
        other = ShardingState(self.module, self.slots)
        other._value, other._results = _Layer(self._value), _Layer(self._results)
        other._manual = self._manual   # facts of the module, not of the state
        return other

    def get(self, v: Value) -> TensorSharding | None:
        s = self.slots.get(v.vid, v)
        vid = s.vid
        try:
            sharding = self._value[vid]
        except KeyError:
            sharding = self._read(s)
        if sharding is not None and vid in self._manual:
            return erase_manual_axes(sharding, self._manual[vid])
        return sharding

    def _read(self, s: Value) -> TensorSharding | None:
        """The stored sharding of slot ``s``, read once."""
        manual = _manual_block_arg(s)
        if manual is not None:
            self._manual[s.vid] = manual
        sharding = self._value[s.vid] = stored_sharding(s) if is_shardable(s) else None
        if self.read0 is not None:
            self.read0[s.vid] = sharding
        if self.tracer is not None:
            self.tracer.on_read(value_key(s), sharding)
        return sharding

    def can_hold(self, v: Value) -> bool:
        return is_shardable(self.slot(v))

    def set(self, v: Value, sharding: TensorSharding) -> None:
        s = self.slot(v)
        manual = _manual_block_arg(s)
        if manual is not None:
            self._manual[s.vid] = manual
            outer = self._value.get(s.vid) or stored_sharding(s)
            sharding = add_free_axes(outer, sharding, manual) if outer is not None else sharding
        op = s.defining_op
        if results_share_a_slot(op):
            for other in op.results:
                if other is not s and self.get(other) is None and other.shape is not None:
                    empty = self._value[other.vid] = TensorSharding.open_empty(
                        sharding.mesh, len(other.shape))
                    self._changed.add(other.vid)
                    self._stamp(other.vid)
                    if self.log is not None:
                        self.log.append((other.vid, empty))
        self._value[s.vid] = sharding
        if self.log is not None:
            self.log.append((s.vid, sharding))
        self._changed.add(s.vid)
        self._stamp(s.vid)
        if self.tracer is not None:
            self.tracer.on_write(value_key(s), sharding)

    def _stamp(self, vid: int) -> None:
        self.clock += 1
        self.stamps[vid] = self.clock

    def unchanged_since(self, values, clock: int) -> bool:
        """No sharding of ``values`` was written after write count ``clock``."""
        stamps, slots = self.stamps, self.slots
        for v in values:
            if stamps.get(slots.get(v.vid, v).vid, 0) > clock:
                return False
        return True

    def get_result(self, func: Op, index: int) -> TensorSharding | None:
        key = (func.oid, index)
        if key not in self._results:
            self._results[key] = stored_result_sharding(func, index)
            if self.tracer is not None:
                self.tracer.on_read(("result", index), self._results[key])
        return self._results[key]

    def set_result(self, func: Op, index: int, sharding: TensorSharding) -> None:
        self._results[(func.oid, index)] = sharding
        self._changed_results.add((func.oid, index))
        if self.tracer is not None:
            self.tracer.on_write(("result", index), sharding)

    def write_back(self) -> None:
        """Store every changed sharding in the module's attributes (function
        argument and result attributes once per function)."""
        values, ops = self.module.values, self.module.ops
        store_shardings(self.module, [(values[vid], self._value[vid]) for vid in sorted(self._changed)])
        func_results: dict[int, dict[int, TensorSharding]] = {}
        for oid, index in sorted(self._changed_results):
            func_results.setdefault(oid, {})[index] = self._results[(oid, index)]
        for oid, shardings in func_results.items():
            write_func_attrs(ops[oid].mlir, "res_attrs", shardings)
