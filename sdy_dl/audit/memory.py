"""The memory table: bytes per device of every value of the output module.

:func:`memory_table` reads the output of an :class:`~sdy_dl.audit.Audit`:

* every value's **bytes per device**: its global bytes divided by the shard
  count of each dim (sub-axes by their own size), non-divisible dims padded
  up (:func:`sdy_dl.audit.cost_model.local_bytes`); a value without a
  sharding is whole on every device (inside a manual computation its type is
  already the local one);
* per function, the totals of its **arguments** (parameters and optimizer
  state), its **results** (as their result shardings say), and a **peak
  estimate** of live intermediates: each op result is live from its op to
  its last use in the printed op order, with no buffer reuse, fusion or
  rematerialization; the largest sum over the op order is the estimate;
* the **top N** largest values that are replicated or only partly sharded
  (on fewer devices than their mesh has), each with why (the input
  annotations its sharding derives from and why propagation did not shard
  it further, or "no annotation reaches it") and which mesh axes could
  shard it (a dim whose per-device size an axis it does not use divides; not
  a manual axis of a manual computation around it or around a call of its function).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import NamedTuple

from sdy_dl.audit.cost_model import local_bytes, local_shape, tensor_bytes
from sdy_dl.audit.manual_scope import manual_axes_around, manual_axes_of_funcs

#: Label of the intermediates' peak.
PEAK_NOTE = ("estimate: each op result is live from its op to its last use in op order "
             "(no buffer reuse, fusion or rematerialization)")


class ValueMemory(NamedTuple):
    """One value of the output and its bytes per device (a named tuple, never
    changed: the memory layouts of a propagation and of its what-ifs share rows;
    one with its output value is a copy, ``_replace``)."""

    function: str
    op: str                       # defining op, "argument", or "result" (function results)
    shape: tuple[int, ...]
    element_type: str
    sharding: str                 # as printed ("(none)": whole on every device)
    bytes_per_device: int
    global_bytes: int
    devices: int                  # how many devices it is split over
    mesh_devices: int             # how many devices its mesh has (1: no mesh)
    out: object = None            # the OutputValue

    @property
    def name(self) -> str:
        """The value's name, as the output prints it (read when asked for: naming a
        value that sibling regions share reads the printed module's lines)."""
        return self.out.name

    @property
    def replicated(self) -> bool:
        return self.devices == 1

    @property
    def partly_sharded(self) -> bool:
        return 1 < self.devices < self.mesh_devices

    @property
    def padding(self) -> int:
        """Bytes per device of padding, on average over the devices it is split over
        (dims the axes do not divide are padded to equal shards)."""
        return self.bytes_per_device - self.global_bytes // max(self.devices, 1)

    def to_json(self) -> dict:
        return {"value": self.name, "function": self.function, "op": self.op,
                "shape": list(self.shape), "element_type": self.element_type,
                "sharding": self.sharding, "bytes_per_device": self.bytes_per_device,
                "global_bytes": self.global_bytes, "devices": self.devices,
                "mesh_devices": self.mesh_devices}


class FunctionMemory(NamedTuple):
    """Per-function totals (bytes per device; a named tuple, never changed)."""

    function: str
    arguments: int
    results: int
    peak_intermediates: int       # an estimate (PEAK_NOTE)
    peak_at: str                  # the value defined where the peak is reached

    def to_json(self) -> dict:
        return {"function": self.function, "arguments": self.arguments, "results": self.results,
                "peak_intermediates_estimate": self.peak_intermediates, "peak_at": self.peak_at,
                "note": PEAK_NOTE}


@dataclass
class Unsharded:
    """A large value that is replicated or partly sharded: why, and what could shard it."""

    value: ValueMemory
    why: list[str]
    shardable: dict[str, list[int]]    # mesh axis -> dims it divides

    def to_json(self) -> dict:
        return {**self.value.to_json(), "why": self.why,
                "could_shard": [{"axis": a, "dims": d} for a, d in self.shardable.items()]}


class MemoryTable:
    """Every value's bytes per device, per-function totals and the top replicated or
    partly sharded values."""

    def __init__(self, file: str, values: list[ValueMemory], layouts: list["_Layout"],
                 top: list[Unsharded]):
        self.file = file
        self.values = values
        #: each function's rows by value, where they are live (what ``functions`` totals,
        #: and what a module of the same structure's totals are remade from)
        self.layouts = layouts
        self.functions = [x.totals() for x in layouts]
        self.top = top

    def value(self, name: str) -> ValueMemory:
        """The row of the value called ``name``."""
        for v in self.values:
            if v.name == name:
                return v
        raise KeyError(name)

    def __str__(self) -> str:
        """The table as ``sdy-dl memory`` prints it (without every value)."""
        return "\n".join(text_lines(self))

    def to_json(self) -> dict:
        return {"file": self.file, "functions": [f.to_json() for f in self.functions],
                "top_unsharded": [u.to_json() for u in self.top],
                "values": [v.to_json() for v in self.values]}


def text_lines(table: "MemoryTable", all_values: bool = False) -> list[str]:
    """The table as ``sdy-dl memory`` prints it (``all_values``: every value too)."""
    from sdy_dl.audit.collectives import dims_text, tensor_type_text
    from sdy_dl.audit.cost_model import human_bytes

    lines = [f"{table.file}: bytes per device"]
    for f in table.functions:
        lines.append(f"  {f.function}: arguments {human_bytes(f.arguments)}, results "
                     f"{human_bytes(f.results)}, peak of live intermediates ~"
                     f"{human_bytes(f.peak_intermediates)} (at {f.peak_at or '-'})")
    lines.append(f"  (peak: {PEAK_NOTE})")
    lines.append("")
    lines.append(f"largest replicated or partly sharded values (top {len(table.top)}):")
    for i, u in enumerate(table.top, 1):
        v = u.value
        state = "replicated" if v.replicated else f"split over {v.devices} of {v.mesh_devices} devices"
        if not v.replicated and v.padding > 0:
            state += f", {human_bytes(v.padding)} of it padding (dims the axes do not divide)"
        lines.append(f"[{i}] {v.name} in {v.function} ({v.op}): "
                     f"{tensor_type_text(v.shape, v.element_type)} "
                     f"{dims_text(v.sharding)}: {human_bytes(v.bytes_per_device)} per device, {state}")
        for w in u.why:
            lines.append(f"    why: {w}")
        if u.shardable:
            lines.append("    could shard: " + "; ".join(
                f"{a} on dim {', '.join(map(str, d))}" for a, d in u.shardable.items()))
        else:
            lines.append("    could shard: no unused mesh axis divides a dim")
    if all_values:
        lines.append("")
        lines.append("every value:")
        for v in table.values:
            lines.append(f"  {v.function} {v.name} ({v.op}) {human_bytes(v.bytes_per_device)} "
                         f"{dims_text(v.sharding)}")
    return lines


def memory_table(audit, top: int = 10) -> MemoryTable:
    """The memory table of ``audit``'s output module, with the ``top`` largest
    replicated or partly sharded values explained: its rows are its functions'
    layouts (:func:`signature_layouts`, made from scratch) with their output values."""
    from sdy_dl.ir.context import mlir_context

    layouts = (audit.memory_layouts if audit.like is None
               else signature_layouts(audit, audit.signatures))
    outputs = audit.outputs
    outs = {out.table_key: out for out in outputs.values if out.value is not None}
    rows: list[ValueMemory] = []
    for x in layouts:
        rows += [r._replace(out=outs[k]) for k, _, r in x.arguments]
        rows += [r._replace(out=outs[k]) for _, _, k, _, r in x.intermediates]
        rows += [r._replace(out=outputs.named(name)) for name, _, r in x.results]
    with mlir_context():
        return _Builder(audit).table(rows, layouts, top)


class _Builder:
    """Rows of values (each distinct type and sharding's numbers computed once) and
    what the top replicated or partly sharded values' reasons read."""

    def __init__(self, audit):
        from sdy_dl.ir.meshes import module_meshes

        self.audit = audit
        self.meshes = module_meshes(audit.module)
        real = [m for m in self.meshes.values() if m.axes]
        self.only_mesh = real[0] if len(real) == 1 else None
        self._rows: dict = {}
        self._alone: dict = {}   # (type, sharding, op, function) -> its row without a value

    @functools.cached_property
    def manual_axes_of_funcs(self) -> dict:
        from sdy_dl.ir.context import mlir_context

        with mlir_context():
            return manual_axes_of_funcs(self.audit.module)

    @functools.cached_property
    def collectives(self):
        from sdy_dl.audit.collectives import _Builder as Collectives

        return Collectives(self.audit, None)

    def row(self, out, value_type, sharding, op: str, function: str | None = None
            ) -> ValueMemory | None:
        """The row of one value (None: not a statically shaped tensor).  Its numbers
        depend only on its type and sharding, which values share: computed once.
        ``function``: its function's label, when ``out`` is None (a row without
        its output value)."""
        if out is None:   # (rows without their output value are shared: none is edited)
            row = self._alone.get((value_type, sharding, op, function), False)
            if row is False:
                known = self._known(value_type, sharding)
                row = self._alone[(value_type, sharding, op, function)] = None \
                    if known[0] is None else ValueMemory(function, op, *known, None)
            return row
        known = self._known(value_type, sharding)
        if known[0] is None:
            return None
        return ValueMemory(out.func, op, *known, out)

    def _known(self, value_type, sharding) -> tuple:
        known = self._rows.get((value_type, sharding))
        if known is None:
            known = self._rows[(value_type, sharding)] = self._numbers(value_type, sharding)
        return known

    def _numbers(self, value_type, sharding) -> tuple:
        from sdy_dl.ir.meshes import mesh_of
        from sdy_dl.ir.mlir_ops import tensor_info

        shape = tensor_info(value_type)[1]
        if shape is None:
            return (None,)
        element = str(value_type.maybe_downcast().element_type)
        mesh = mesh_of(sharding, self.meshes) if sharding is not None else None
        devices = _split(shape, sharding, mesh)
        mesh_size = (mesh or self.only_mesh).total_size if (mesh or self.only_mesh) else 1
        return (tuple(shape), element, sharding.to_text() if sharding is not None else "(none)",
                local_bytes(shape, element, sharding, mesh), tensor_bytes(shape, element),
                devices, mesh_size)

    def table(self, rows: list[ValueMemory], layouts: list, top: int) -> MemoryTable:
        """The memory table of ``rows`` (each with its output value) and ``layouts``,
        with the ``top`` largest replicated or partly sharded values explained."""
        candidates = [r for r in rows if r.op != "result" and (r.replicated or r.partly_sharded)
                      and r.bytes_per_device > 0]
        if top:
            candidates.sort(key=lambda r: (-r.bytes_per_device, r.name))
        chosen = candidates[:top]
        self.records = self.step_records([r.out for r in chosen])
        explained = [self.unsharded(r) for r in chosen]
        return MemoryTable(self.audit.file, rows, layouts, explained)

    def step_records(self, outs):
        """Factor records of the steps :func:`unsharded_reasons` reads for ``outs``,
        evaluated at once (None: there are none)."""
        from sdy_dl.audit.reasons import last_steps

        steps = {}
        for out in outs:
            if out.key is not None:
                for cause in last_steps(self.audit.explainer, out.key).values():
                    steps.setdefault(cause.step)
        return self.audit.explainer.records_for(list(steps)) if steps else None

    def unsharded(self, r: ValueMemory) -> Unsharded:
        from sdy_dl.audit.reasons import unsharded_reasons
        from sdy_dl.ir.meshes import mesh_of

        out = r.out
        why = []
        if out.key is None:
            why.append(f"the result of {out.op}, created by the export passes"
                       + (" (see sdy-dl comms)" if out.op.startswith("sdy.") else ""))
            if out.value is not None:
                source = self.collectives.chain_source(out.value)
                if source is not out.value:
                    why += [f"its source {self.collectives.name_of(source)} derives from {a}"
                            for a in self.collectives.annotations([source])[0]]
        else:
            notes = self.collectives.annotations([out])[0]
            why += [f"derived from {a}" for a in notes]
            explainer = self.audit.explainer
            reasons = unsharded_reasons(explainer, out, self.records)
            if notes:
                reasons = [x for x in reasons if not x.startswith("no annotation")]
            why += reasons
        sharding = None
        try:
            sharding = self.collectives.sharding_of(out.value) if out.value is not None else None
        except Exception:
            sharding = None
        mesh = (mesh_of(sharding, self.meshes) if sharding is not None else None) or self.only_mesh
        manual = (manual_axes_around(out.value, self.manual_axes_of_funcs)
                  if out.value is not None else set())
        return Unsharded(r, list(dict.fromkeys(why)),
                         _shardable(r.shape, sharding, mesh, manual))


def _split(shape, sharding, mesh) -> int:
    """How many devices a value is split over (the product of its dims' shard counts)."""
    from sdy_dl.audit.cost_model import shard_counts

    return math.prod(shard_counts(sharding, mesh, len(shape)))


def _shardable(shape, sharding, mesh, manual=frozenset()) -> dict[str, list[int]]:
    """Mesh axis (unused by ``sharding``, not one of the ``manual`` axes around the
    value) -> the dims whose per-device size it divides."""
    if mesh is None:
        return {}
    used = {a.name for a in sharding.axes_used()} if sharding is not None else set()
    used |= set(manual)
    local = local_shape(shape, sharding, mesh)
    out = {}
    for axis in mesh.axes:
        if axis.name in used or axis.size <= 1:
            continue
        dims = [d for d, size in enumerate(local) if size % axis.size == 0 and size > 0]
        if dims:
            out[axis.name] = dims
    return out


@dataclass
class _Layout:
    """A function's rows and where they are live, by value: its totals
    (:meth:`totals`) follow, and another module of the same structure's totals
    follow from the rows whose shardings differ (:meth:`with_shardings`)."""

    function: str
    arguments: list         # (value key, type, row)
    intermediates: list     # (op position, last use position, value key, type, row)
    results: list           # (result name, type, row)
    #: value key -> its name (None: its row's ``name``; rows without their output value)
    names: object = field(default=None, repr=False)
    _places: tuple | None = field(default=None, repr=False, compare=False)

    def totals(self) -> FunctionMemory:
        peak, at = _peak(self.intermediates)
        name = "" if at is None else at[4].name if self.names is None else self.names(at[2])
        return FunctionMemory(self.function, sum(r.bytes_per_device for *_, r in self.arguments),
                              sum(r.bytes_per_device for *_, r in self.results), peak, name)

    def with_shardings(self, rows: "_Builder", shardings: dict) -> "_Layout":
        """This layout with the rows of the values in ``shardings`` (value key or result
        name -> its sharding) remade by ``rows`` for those shardings (the entries
        found by :meth:`places`, the others shared)."""
        places = self.places()

        def remade(k: int, entries):
            out = list(entries)
            at_key = places[k]
            # (the keys both hold: the intersection iterates the smaller of the two,
            # the entries of one function or the values a what-if changed)
            for value_key in at_key.keys() & shardings.keys():
                at = at_key[value_key]
                *place, _, value_type, r = entries[at]
                out[at] = (*place, value_key, value_type,
                           rows.row(r.out, value_type, shardings[value_key], r.op, r.function))
            return out
        return _Layout(self.function, remade(0, self.arguments), remade(1, self.intermediates),
                       remade(2, self.results), self.names)

    def places(self) -> tuple:
        """(value key -> its place in ``arguments``, in ``intermediates``, in
        ``results``), made once."""
        if self._places is None:
            self._places = tuple({entry[-3]: k for k, entry in enumerate(entries)}
                                 for entries in (self.arguments, self.intermediates,
                                                 self.results))
        return self._places


def functions_with_shardings(audit, layouts: list, shardings: dict, kept: list | None = None,
                             edit_main=None) -> list[FunctionMemory]:
    """The per-function rows of ``audit``'s output with the values in ``shardings``
    (value key or function result name -> sharding) sharded so instead: the memory
    of a module of the same structure and types (``layouts``: ``audit``'s, a
    :class:`MemoryTable`'s or :func:`signature_layouts`').  ``kept``: the totals
    of ``layouts``, which a function whose layout does not change (holding none
    of ``shardings``' values, :func:`functions_holding`, and not main when
    ``edit_main`` is given) keeps without being remade;
    ``edit_main(layout, rows)``: main's layout (with the new shardings;
    ``rows``: the :class:`_Builder` that made its rows) in the module measured
    (default: that layout)."""
    from sdy_dl.ir.context import mlir_context

    changed = None
    if kept is not None:
        changed = functions_holding(audit.signatures, shardings)
        if edit_main is not None:
            changed.add("main")
    with mlir_context():
        rows = _Builder(audit)
        out = []
        for k, layout in enumerate(layouts):
            if changed is not None and layout.function not in changed:
                out.append(kept[k])
                continue
            x = layout.with_shardings(rows, shardings)
            if edit_main is not None and x.function == "main":
                x = edit_main(x, rows)
            out.append(x.totals())
        return out


def functions_holding(signatures, values) -> set[str]:
    """The labels (:func:`~sdy_dl.audit.naming.func_label`) of the functions of
    ``signatures``' module holding ``values`` (its value keys or function
    result names)."""
    from sdy_dl.audit.naming import func_label

    table = signatures.table
    functions_at, op_number = table.functions_at, signatures.op_number
    return {func_label(functions_at[op_number(v)], table.main) for v in values}


def signature_layouts(audit, signatures, first: list | None = None) -> list["_Layout"]:
    """Each function's layout of ``audit``'s output (its rows, without their output
    values, and where they are live), read from the walk its
    :class:`~sdy_dl.audit.diff.Signatures` made (``signatures``: each value's site
    and last use; no output index).  ``first``: the layouts of the output whose
    signatures ``signatures`` was made like (a what-if's first output): a value
    stored at the same place of a twin op (every attribute the same) with the
    same type has the first's row, a twin function the first's arguments and
    results; the other rows are made."""
    from sdy_dl.audit.collectives import COLLECTIVE_OPS, own_sharding
    from sdy_dl.audit.diff import stored_in
    from sdy_dl.audit.naming import func_label
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.mlir_ops import func_result_types
    from sdy_dl.ir.storage import read_func_attr, read_stored

    table = signatures.table
    twins = signatures.twins if first is not None else {}
    last_use = signatures.last_use
    stored, op_names, counts = signatures.stored, table.op_names, table.result_counts
    first_layouts = {x.function: x for x in first or ()}
    first_rows = {key: (value_type, r) for x in first or ()
                  for *_, key, value_type, r in x.intermediates}
    ops, main, places = table.ops, table.main, table.places
    ends = signatures.top_level[1:] + [len(ops)]
    out = []
    with mlir_context():
        rows = _Builder(audit)
        for start, end in zip(signatures.top_level, ends):
            func = ops[start]
            if func.name != "func.func" or not len(func.regions[0].blocks):
                continue
            label = func_label(func, main)
            known = first_layouts.get(label) if start in twins else None
            if known is not None:   # the same arguments and results (types and shardings)
                arguments, results = known.arguments, known.results
            else:
                arguments = []
                for i, arg in enumerate(func.regions[0].blocks[0].arguments):
                    r = rows.row(None, arg.type, read_stored(func, i, True), "argument", label)
                    if r is not None:
                        arguments.append(((f"a{start}.{i}", -1), arg.type, r))
                prefix = "" if label == "main" else f"{label}:"
                results = []
                for i, t in enumerate(func_result_types(func)):
                    r = rows.row(None, t, read_func_attr(func, "res_attrs", i), "result", label)
                    if r is not None:
                        results.append((f"{prefix}result:{i}", t, r))
            intermediates = []
            add = intermediates.append
            # (a row depends on its value's type and sharding, its op's name and the
            # function: made once per type, sharding attributes, op name and result)
            made: dict = {}
            for n in range(start + 1, end):
                count = counts[n]
                if not count:
                    continue
                name, m, tag = op_names[n], twins.get(n), f"o{n}"
                shardings = stored.get(n)
                for index in range(count):
                    value = (tag, index)
                    value_type = places[value][1].type
                    r = None
                    if m is not None:
                        found = first_rows.get((f"o{m}", index))
                        if found is not None and found[0] == value_type:
                            r = found[1]
                    if r is None:
                        if name in COLLECTIVE_OPS:   # (its sharding is not among ``stored``'s)
                            r = rows.row(None, value_type, own_sharding(ops[n]), name, label)
                        else:
                            at = (value_type, shardings, name, index)
                            r = made.get(at, False)
                            if r is False:
                                r = made[at] = rows.row(None, value_type,
                                                        stored_in(shardings, name, index),
                                                        name, label)
                        if r is None:
                            continue
                    i = n - start - 1
                    last = last_use.get(value)
                    add((i, i if last is None or last - start - 1 < i else last - start - 1,
                         value, value_type, r))
            out.append(_Layout(label, arguments, intermediates, results, names=signatures.name))
    return out


def _peak(intermediates) -> tuple[int, tuple | None]:
    """The largest sum of live intermediates' bytes over the op order (each live from
    its op's position to its last use's), and the entry of the value defined where it
    is reached (None: none): the first position where the running sum of what starts
    and ends at each position exceeds every earlier one (a position where nothing
    starts cannot, so the entry is the first defined there)."""
    if not intermediates:
        return 0, None
    size = max(entry[1] for entry in intermediates) + 2   # (a value ends at or after its op)
    change = [0] * size
    first: list = [None] * size
    for entry in intermediates:
        i, b = entry[0], entry[4].bytes_per_device
        change[i] += b
        change[entry[1] + 1] -= b
        if first[i] is None:
            first[i] = entry
    live = peak = 0
    at = None
    for i, d in enumerate(change):
        if d:
            live += d
            if live > peak:
                peak, at = live, first[i]
    return peak, at
