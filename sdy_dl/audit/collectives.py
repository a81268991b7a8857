"""The collective ledger: every collective of an explicit-collectives output, its
bytes per device and its cause.

:func:`ledger` reads the output module of an :class:`~sdy_dl.audit.Audit` that
ran ``propagate --explicit-collectives`` (``insert-explicit-reshards`` in its
full version, then ``reshard-to-collectives``) and makes one
:class:`Collective` per ``sdy.all_gather``, ``all_slice``, ``all_to_all``,
``collective_permute``, ``all_reduce``, ``reduce_scatter``,
``sharded_to_unreduced``, ``replicated_to_unreduced`` and left-over
``sdy.reshard`` op, and per collective the program wrote itself
(:mod:`~sdy_dl.audit.program_collectives`: a ``shard_map`` body's ``psum``,
``ppermute``, ...; ``written``, its two sides its operands and results).
Bytes follow :mod:`sdy_dl.audit.cost_model`.

Its **cause** is the two shardings it reconciles, each with the input
annotations its derivation starts from (the leaves of ``sdy-dl explain``'s
tree of those values, :meth:`ProvenanceTracer.roots`):

* **had**: the value the chain of collectives starts from (the collectives
  of one reshard follow each other) and the sharding the output prints for
  it; for an all-reduce of a reduction factor (a dot or reduce whose
  contracting or reduced dims are sharded), the producer's operands that
  carry the all-reduced axes;
* **needed**: the sharding the chain ends with, which the consuming ops read
  (their results' derivations; a loop body's or branch's returned value: its
  op's result; a function result: the returned value; a sharding constraint
  the chain lowers: the constraint), or for a
  reduction all-reduce, the producer's result sharding (what the all-reduce
  prints as its out_sharding; the derivation of the producer's result).

A side lists at most :data:`MOST_ANNOTATIONS` annotations and says how many
there are (a value deep in a model derives from every layer before it): on
the side that had the axes, those naming the collective's axes first; on the
side that needed them elsewhere or not at all, those not naming them first.

Collectives of one pattern (kind, function, type, axes, shardings, producing
and consuming op kinds) are grouped with a count: a 64-layer model shows
about as many groups as a 2-layer one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from math import prod

from sdy_dl.audit.cost_model import CostModel, collective_bytes, local_bytes
from sdy_dl.audit.program_collectives import (PROGRAM_COLLECTIVES, device_count, group_axes,
                                              groups_of)
from sdy_dl.errors import SdyError
from sdy_dl.ir.sdy_attrs import axis_refs_in
from sdy_dl.sharding import AxisRef, TensorSharding, parse_axis_ref

#: Collective op -> its kind (the op name without ``sdy.``) and the attribute
#: holding the axes it runs over.
COLLECTIVE_OPS = {
    "sdy.all_gather": "gathering_axes", "sdy.all_slice": "slicing_axes",
    "sdy.all_to_all": "params", "sdy.collective_permute": None,
    "sdy.all_reduce": "reduction_axes", "sdy.reduce_scatter": "reduce_scatter_axes",
    "sdy.sharded_to_unreduced": "axes", "sdy.replicated_to_unreduced": "axes",
    "sdy.reshard": None,
}

def own_sharding(mop) -> TensorSharding | None:
    """The sharding collective op ``mop`` (one of :data:`COLLECTIVE_OPS`) gives its
    result: a reshard's ``sharding``, another collective's ``out_sharding``."""
    from sdy_dl.ir.storage import read_own

    return read_own(mop, "sharding" if mop.name == "sdy.reshard" else "out_sharding")


#: The most annotations a side of a cause lists (``annotation_count`` says how many).
MOST_ANNOTATIONS = 12


@dataclass
class Side:
    """One of the two decisions a collective reconciles: values and their shardings
    as the output prints them, the op there, and the input annotations they derive from."""

    values: list[dict]            # [{"value": name, "sharding": text}]
    op: str                       # the producing op (had) or the consuming ops (needed)
    place: str                    # where that op is (input line, python line or foreign location)
    annotations: list[str] = field(default_factory=list)   # at most MOST_ANNOTATIONS
    annotation_count: int = 0     # how many annotations it derives from in all

    @property
    def sharding(self) -> str:
        """The sharding of the first value (the one the entry is about)."""
        return self.values[0]["sharding"] if self.values else "(none)"

    def to_json(self) -> dict:
        return {"values": self.values, "op": self.op, "place": self.place,
                "annotations": self.annotations, "annotation_count": self.annotation_count}

    def text(self, most: int = 3) -> str:
        """One line; at most ``most`` annotations (those naming the collective's axes
        come first), then how many more."""
        values = "; ".join(f"{v['value']} {dims_text(v['sharding'])}" for v in self.values)
        notes = "; ".join(self.annotations[:most]) if self.annotations else \
            "no input annotation reaches it"
        shown = min(most, len(self.annotations))
        if self.annotation_count > shown:
            notes += f"; of {self.annotation_count} (--format json lists more)"
        return f"{values} ({self.op} at {self.place}) <- {notes}"


@dataclass
class Collective:
    """One collective (or left-over reshard) of the output module."""

    kind: str                     # all_gather, ..., reshard
    function: str                 # main, @name
    name: str                     # its result's name in the output
    output_line: int | None       # the line of the printed output defining it
    input_place: str              # the input module's line of the op it was made for
    python: str | None            # the Python source line (JAX debug info), if any
    shape: tuple[int, ...]
    element_type: str
    mesh: str
    axes: list[str]               # the mesh axes it runs over (sub-axes as such)
    devices: int                  # n: the product of their sizes
    bytes: int | None             # per device (None: a reshard, not lowered)
    in_sharding: str              # of its operand
    out_sharding: str
    had: Side
    needed: Side
    reduction: bool = False       # an all-reduce of a reduction factor
    seconds: float | None = None  # estimated (with a cost model)
    written: bool = False         # written in the program (had: its operands; needed: results)

    @property
    def axis_names(self) -> list[str]:
        """The names of the full mesh axes it runs over."""
        return [parse_axis_ref(a).name for a in self.axes]

    @property
    def type_text(self) -> str:
        return tensor_type_text(self.shape, self.element_type)

    def pattern(self) -> tuple:
        """What collectives of one pattern across layers share."""
        return (self.kind, self.function, self.shape, self.element_type, tuple(self.axes),
                self.in_sharding, self.out_sharding, self.had.op, self.needed.op)

    def to_json(self) -> dict:
        out = {"kind": self.kind, "function": self.function, "value": self.name,
               "output_line": self.output_line, "input_place": self.input_place,
               "python": self.python, "type": self.type_text, "shape": list(self.shape),
               "element_type": self.element_type, "mesh": self.mesh, "axes": self.axes,
               "devices": self.devices, "bytes_per_device": self.bytes,
               "in_sharding": self.in_sharding, "out_sharding": self.out_sharding,
               "cause": {"had": self.had.to_json(), "needed": self.needed.to_json(),
                         "reduction": self.reduction, "written": self.written}}
        if self.seconds is not None:
            out["estimated_seconds"] = self.seconds
        return out


@dataclass
class Group:
    """Collectives of one pattern (:meth:`Collective.pattern`)."""

    members: list[Collective]

    @property
    def first(self) -> Collective:
        return self.members[0]

    @property
    def bytes(self) -> int | None:
        b = [m.bytes for m in self.members]
        return None if any(x is None for x in b) else sum(b)

    @property
    def seconds(self) -> float | None:
        s = [m.seconds for m in self.members]
        return None if any(x is None for x in s) else sum(s)

    def to_json(self) -> dict:
        return {"count": len(self.members), "bytes_per_device": self.bytes,
                **({"estimated_seconds": self.seconds} if self.seconds is not None else {}),
                "example": self.first.to_json(), "values": [m.name for m in self.members]}


class Ledger:
    """Every collective of one explicit-collectives propagation, sorted by bytes
    (largest first), with groups and totals."""

    def __init__(self, entries: list[Collective], file: str, cost_model: CostModel | None):
        self.entries = sorted(entries, key=lambda c: (-(c.bytes or 0), c.output_line or 0))
        self.file = file
        self.cost_model = cost_model

    def __iter__(self):
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def groups(self) -> list[Group]:
        """The entries grouped by pattern, largest total first."""
        by: dict[tuple, list[Collective]] = {}
        for e in sorted(self.entries, key=lambda c: c.output_line or 0):
            by.setdefault(e.pattern(), []).append(e)
        groups = [Group(m) for m in by.values()]
        return sorted(groups, key=lambda g: (-(g.bytes or 0), g.first.output_line or 0))

    def totals(self) -> dict:
        """Bytes per device (and estimated seconds) in all, per function, per mesh axis
        (a collective over several axes counts under each) and per kind."""
        def add(table, key, e):
            row = table.setdefault(key, {"count": 0, "bytes_per_device": 0})
            row["count"] += 1
            row["bytes_per_device"] += e.bytes or 0
            if e.seconds is not None:
                row["estimated_seconds"] = row.get("estimated_seconds", 0.0) + e.seconds

        total: dict = {}
        per = {"function": {}, "axis": {}, "kind": {}}
        for e in self.entries:
            add(total, "all", e)
            add(per["function"], e.function, e)
            add(per["kind"], e.kind, e)
            for a in dict.fromkeys(e.axis_names):
                add(per["axis"], a, e)
        out = {"all": total.get("all", {"count": 0, "bytes_per_device": 0})}
        for k, table in per.items():
            out[k] = dict(sorted(table.items(), key=lambda kv: -kv[1]["bytes_per_device"]))
        unknown = sum(1 for e in self.entries if e.bytes is None)
        if unknown:
            out["not_lowered_reshards"] = unknown
        return out

    def __str__(self) -> str:
        """The ledger as ``sdy-dl comms`` prints it."""
        return "\n".join(text_lines(self))

    def to_json(self) -> dict:
        return {"file": self.file, "cost_model": self.cost_model.to_json() if self.cost_model
                else None, "totals": self.totals(), "groups": [g.to_json() for g in self.groups()],
                "collectives": [e.to_json() for e in self.entries]}


def text_lines(ledger: "Ledger") -> list[str]:
    """The ledger as text: totals, then one block per group of one pattern."""
    from sdy_dl.audit.cost_model import human_bytes, human_seconds

    totals = ledger.totals()
    groups = ledger.groups()
    timed = ledger.cost_model is not None
    head = (f"{len(ledger)} collective{'s' * (len(ledger) != 1)} in {len(groups)} "
            f"group{'s' * (len(groups) != 1)}; "
            f"{human_bytes(totals['all']['bytes_per_device'])} per device in all")
    if timed:
        head += (f", estimated {human_seconds(totals['all'].get('estimated_seconds', 0.0))} "
                 f"(cost model {ledger.cost_model.file})")
    lines = [f"{ledger.file}: {head}"]
    if "not_lowered_reshards" in totals:
        lines.append(f"  {totals['not_lowered_reshards']} sdy.reshard ops were not lowered to "
                     "collectives: their bytes are unknown")
    for what in ("kind", "axis", "function"):
        if totals[what]:
            cells = [f"{k} {row['count']}x {human_bytes(row['bytes_per_device'])}"
                     + (f" ~{human_seconds(row.get('estimated_seconds'))}" if timed else "")
                     for k, row in totals[what].items()]
            lines.append(f"  per {what}: " + "; ".join(cells))
    for i, g in enumerate(groups, 1):
        e = g.first
        each = human_bytes(e.bytes)
        count = f" x{len(g.members)}" if len(g.members) > 1 else ""
        time = f", ~{human_seconds(e.seconds)} each" if timed and e.seconds is not None else ""
        axes = ", ".join(e.axes) or "(no axes)"
        lines.append("")
        lines.append(f"[{i}] {e.kind}{count} over {axes} ({e.devices} devices) in {e.function}: "
                     f"{each} per device each, {human_bytes(g.bytes)} in all{time}")
        where = f"output line {e.output_line}" if e.output_line else "output"
        python = f"python {e.python}" if e.python else None
        src = f"; {e.input_place}" + (f"; {python}" if python and python != e.input_place else "")
        lines.append(f"    {e.name} at {where}{src}: {e.type_text} {dims_text(e.in_sharding)} -> "
                     f"{dims_text(e.out_sharding)}")
        if e.written:
            lines.append("    written in the program, not made for a sharding:")
            lines.append(f"    operand: {e.had.text()}")
            lines.append(f"    result:  {e.needed.text()}")
        else:
            what = "reduced over the axes: " if e.reduction else ""
            lines.append(f"    had:    {what}{e.had.text()}")
            lines.append(f"    needed: {e.needed.text()}")
        if len(g.members) > 1:
            names = [m.name for m in g.members]
            shown = ", ".join(names[:12]) + (f", ... ({len(names) - 12} more)" if len(names) > 12 else "")
            lines.append(f"    all: {shown}")
    return lines


def tensor_type_text(shape, element_type: str) -> str:
    """A ranked tensor type as MLIR prints it (``tensor<4x8xf32>``, ``tensor<f32>``)."""
    return f"tensor<{''.join(f'{d}x' for d in shape)}{element_type}>"


def dims_text(sharding: str) -> str:
    """``#sdy.sharding<@mesh, [{"a"}, {}]>`` -> ``[{"a"}, {}]`` (the mesh is in the entry)."""
    m = re.match(r"#sdy\.sharding<(?:@[\w$.\-\"]+|mesh<.*?>), (.*)>$", sharding)
    return m.group(1) if m else sharding


def _text(sharding: TensorSharding | None) -> str:
    return "(none)" if sharding is None else sharding.to_text()


def axes_of(mop, attribute: str | None) -> list[AxisRef]:
    """The axis refs of a collective's axes attribute, in order."""
    if attribute is None or attribute not in mop.attributes:
        return []
    return list(axis_refs_in(mop.attributes[attribute]))


def _permuted_axes(have: TensorSharding | None, want: TensorSharding | None) -> list[AxisRef]:
    """The axes a collective-permute moves: those not on the same dim at the same place."""
    if want is None:
        return []
    old = {}
    for d, dim in enumerate(have.dims if have is not None else ()):
        for i, a in enumerate(dim.axes):
            old[a] = (d, i)
    moved = [a for d, dim in enumerate(want.dims) for i, a in enumerate(dim.axes)
             if old.get(a) != (d, i)]
    return moved or [a for dim in want.dims for a in dim.axes]


class _Builder:
    """Reads the collectives of one audit's output module."""

    def __init__(self, audit, cost_model: CostModel | None):
        from sdy_dl.ir.meshes import module_meshes

        self.audit = audit
        self.outputs = audit.outputs
        self.explainer = audit.explainer
        self.tracer = audit.tracer
        self.meshes = module_meshes(audit.module)
        self.cost_model = cost_model
        self._notes: dict = {}
        self._axis_masks: dict[str, int] = {}
        self._masked = 0
        #: per input annotation met as several leaf keys (as written, and moved onto
        #: another value by the import passes): (their bits, theirs as written first)
        self._twins: dict[str, tuple[int, list[int]]] = {}
        self._twinned = 0

    # -- values ------------------------------------------------------------

    def sharding_of(self, value) -> TensorSharding | None:
        """The sharding the output shows for ``value`` (a collective's own out_sharding)."""
        owner = getattr(value.owner, "operation", None)
        if owner is not None and owner.name in COLLECTIVE_OPS:
            return own_sharding(owner)
        out = self.outputs.by_value.get(value)
        if out is not None and out.sharding is not None:
            return out.sharding
        if owner is None:
            # a block argument of a while or case: the sharding its op stores for it
            # (a manual computation's body argument: its local view)
            from sdy_dl.ir.value_sharding import get_sharding

            return get_sharding(value)
        return None

    def name_of(self, value) -> str:
        return self.outputs.name_of(value)

    def annotations(self, values, axes=(), naming_first: bool = True) -> tuple[list[str], int]:
        """The input annotations the shardings of ``values`` (MLIR values, or output
        values) derive from, and how many there are; a collective's result stands for
        its chain's source.  At most :data:`MOST_ANNOTATIONS` are listed (a layer deep
        in a model derives from every layer before it): with ``axes`` (mesh axis
        names), those naming one of them first (``naming_first``: the side that had
        the axes) or last (the side that needed them elsewhere or not at all)."""
        tracer = self.tracer
        bits, notes = 0, []
        for v in values:
            if v is None:
                continue
            if not hasattr(v, "key"):
                v = self.outputs.by_value.get(self.chain_source(v))
                if v is None:
                    continue
            if v.key is None and v.result_of is not None:
                v = v.result_of   # (a function result: the returned value's derivation)
            key = v.key if v.key is not None else self.constraint_key(v.value)
            if key is None:
                if v.op not in COLLECTIVE_OPS:
                    notes.append(f"{v.name}: created by the export passes, no derivation")
                continue
            bits |= tracer.root_bits(key)
        bits = self._once(bits)
        total = bits.bit_count() + len(notes)
        groups = [bits]
        if axes:
            naming = bits & self.axis_mask(axes)
            groups = [naming, bits & ~naming] if naming_first else [bits & ~naming, naming]
        for group in groups:
            left = MOST_ANNOTATIONS - len(notes)
            if left > 0:
                notes += [self._note(k)[1] for k in tracer.root_keys(group, left)]
        return list(dict.fromkeys(notes)), total

    def _once(self, bits: int) -> int:
        """``bits`` (over the leaf keys) with each input annotation once: of the keys
        of one annotation (as written, and moved onto another value by the import
        passes, :func:`~sdy_dl.audit.tree_text.one_per_annotation`), the one as written
        when it is among them."""
        keys = self.tracer._root_keys
        twins = self._twins
        for i in range(self._twinned, len(keys)):
            leaf = self._note(keys[i])[0]
            if leaf is not None and leaf.cited:
                mask, order = twins.get(leaf.cited, (0, []))
                order = ([i] + order) if not leaf.moved else order + [i]
                twins[leaf.cited] = (mask | 1 << i, order)
        self._twinned = len(keys)
        for mask, order in twins.values():
            present = bits & mask
            if present & (present - 1):   # (more than one of them)
                first = next(i for i in order if present >> i & 1)
                bits &= ~present | 1 << first
        return bits

    def axis_mask(self, axes) -> int:
        """The bit set of the leaf keys whose sharding names one of ``axes``."""
        tracer, masks = self.tracer, self._axis_masks
        keys = tracer._root_keys
        for i in range(self._masked, len(keys)):
            sharding = tracer.initial[keys[i]]
            for a in dict.fromkeys(a.name for a in sharding.axes_used()):
                masks[a] = masks.get(a, 0) | 1 << i
        self._masked = len(keys)
        mask = 0
        for a in axes:
            mask |= masks.get(a, 0)
        return mask

    def constraint_key(self, value):
        """The tracer key of the sharding constraint a collective's result ``value``
        lowers (the collective keeps the constraint's location), or None."""
        owner = getattr(getattr(value, "owner", None), "operation", None)
        if owner is None or owner.name not in COLLECTIVE_OPS:
            return None
        from sdy_dl.ir.context import mlir_context

        with mlir_context():
            record = self.audit.propagated.lookup_at(owner.location, 0, "sdy.sharding_constraint")
        return record.key if record is not None and record.op == "sdy.sharding_constraint" else None

    @staticmethod
    def chain_source(value):
        """The value a chain of collectives ending in ``value`` starts from."""
        while (owner := getattr(value.owner, "operation", None)) is not None \
                and owner.name in COLLECTIVE_OPS:
            value = owner.operands[0]
        return value

    def _note(self, key) -> tuple:
        """(the leaf, ``NAME = SHARDING (op at place)``) of a derivation leaf."""
        note = self._notes.get(key)
        if note is None:
            from sdy_dl.audit.provenance import Derivation

            leaf = self.explainer.leaf(Derivation(key, self.tracer.initial[key], None),
                                        self.explainer.key_name(key))
            text = leaf.because.removeprefix("annotation in the input: ")
            if leaf.kind != "annotation":
                text = f"{leaf.what}: {text}"
            note = self._notes[key] = (leaf, text)
        return note

    def place(self, mop) -> tuple[str, str | None]:
        """(place, python place) of an op from its location: its place is its line of
        the module read where the parser located it, else its Python line, else a
        foreign location the module's text gives it (``location FILE:LINE``, see
        :mod:`~sdy_dl.ir.locations`), else ``(unknown)``."""
        from sdy_dl.audit.naming import located

        line, python, foreign = located(mop.location)
        if line is not None:
            return f"input line {line}", python
        if python is not None:
            return f"python {python}", python
        return (f"location {foreign}" if foreign is not None else "(unknown)"), python

    # -- the ledger --------------------------------------------------------

    def build(self) -> list[Collective]:
        from sdy_dl.ir.context import mlir_context
        from sdy_dl.ir.walk import walk_pre

        with mlir_context():
            ops = walk_pre(self.audit.module.mlir.operation)
            by_value = self.outputs.by_value
            return [self.entry(op, by_value[op.results[0]].line or None)
                    if op.name in COLLECTIVE_OPS else
                    self.written(op, by_value[op.results[0]].line or None)
                    for op in ops if op.name in COLLECTIVE_OPS or op.name in PROGRAM_COLLECTIVES]

    def entry(self, mop, output_line: int | None) -> Collective:
        from sdy_dl.ir.meshes import mesh_of
        from sdy_dl.ir.mlir_ops import tensor_info

        kind = mop.name[len("sdy."):]
        operand, result = mop.operands[0], mop.results[0]
        out_sharding = own_sharding(mop)
        in_sharding = self.sharding_of(operand)
        mesh = mesh_of(out_sharding, self.meshes) if out_sharding is not None else None
        if mesh is None:
            raise SdyError(f"{mop.name} at output line {output_line}: unknown mesh")
        shape = tensor_info(result.type)[1]
        if shape is None:
            raise SdyError(f"{mop.name} at output line {output_line}: not a statically shaped "
                           "tensor")
        element = str(result.type.maybe_downcast().element_type)
        if kind == "collective_permute":
            axes = _permuted_axes(in_sharding, out_sharding)
        elif kind == "reshard":
            axes = list(dict.fromkeys(
                a for s in (in_sharding, out_sharding) if s is not None for a in s.axes_used()))
        else:
            axes = axes_of(mop, COLLECTIVE_OPS[mop.name])
        n = 1
        for a in axes:
            n *= a.ref_size(mesh)
        in_local = local_bytes(shape, element, in_sharding, mesh)
        out_local = local_bytes(shape, element, out_sharding, mesh)
        sent = collective_bytes(kind, n, in_local, out_local)
        input_place, python = self.place(mop)
        had, needed, reduction = self.cause(mop, kind, axes, out_sharding)
        axis_names = [a.to_text() for a in axes]
        seconds = (self.cost_model.seconds(kind, n, sent, [a.name for a in axes])
                   if self.cost_model is not None else None)
        return Collective(kind, self.outputs.by_value[result].func, self.name_of(result),
                          output_line, input_place, python, tuple(shape), element,
                          out_sharding.mesh_text(), axis_names, n, sent, _text(in_sharding),
                          _text(out_sharding), had, needed, reduction, seconds)

    def written(self, mop, output_line: int | None) -> Collective:
        """The entry of a collective the program wrote (:mod:`program_collectives`):
        its operands and results, as the output shows them (a manual computation's
        body in its local view), are its two sides; bytes by the same formulas."""
        from sdy_dl.ir.meshes import mesh_of
        from sdy_dl.ir.mlir_ops import tensor_info

        kind = PROGRAM_COLLECTIVES[mop.name]
        operands, results = list(mop.operands), list(mop.results)
        in_s = [self.sharding_of(v) for v in operands]
        out_s = [self.sharding_of(v) for v in results]
        given = next((x for x in in_s + out_s if x is not None), None)
        mesh = (mesh_of(given, self.meshes) if given is not None else
                next(iter(self.meshes.values())) if len(self.meshes) == 1 else None)
        groups = groups_of(mop)
        axes = group_axes(groups, mesh, mop.name == "stablehlo.collective_permute")
        n = prod(a.ref_size(mesh) for a in axes) if axes else device_count(mop, groups)
        shapes = [tensor_info(v.type)[1] for v in operands + results]
        if any(shape is None for shape in shapes):
            raise SdyError(f"{mop.name} at output line {output_line}: not a statically shaped "
                           "tensor")

        def local(values, shardings, shapes) -> int:
            return sum(local_bytes(shape, str(v.type.maybe_downcast().element_type), sh, mesh)
                       for v, sh, shape in zip(values, shardings, shapes))
        in_local = local(operands, in_s, shapes[:len(operands)])
        out_local = local(results, out_s, shapes[len(operands):])
        sent = collective_bytes(kind, n, in_local, out_local)
        input_place, python = self.place(mop)
        names = [a.name for a in axes]

        def side(values, shardings, op, place) -> Side:
            return Side([{"value": self.name_of(v), "sharding": _text(x)}
                         for v, x in zip(values, shardings)], op, place,
                        *self.annotations(values, names))
        consumers = [u.owner for v in results for u in v.uses]
        producer = getattr(operands[0].owner, "operation", None) if operands else None
        had = (side(operands, in_s, producer.name, self.place(producer)[0]) if producer is not None
               else side(operands, in_s, "block argument", self.outputs.by_value[results[0]].func))
        needed = side(results, out_s, ", ".join(dict.fromkeys(o.name for o in consumers))
                      or "(unused)", ", ".join(dict.fromkeys(self.place(o)[0] for o in consumers))
                      or "(unused)")
        seconds = (self.cost_model.seconds(kind, n, sent, names)
                   if self.cost_model is not None else None)
        mesh_text = (given.mesh_text() if given is not None else
                     f"@{next(iter(self.meshes))}" if len(self.meshes) == 1 else "")
        return Collective(kind, self.outputs.by_value[results[0]].func, self.name_of(results[0]),
                          output_line, input_place, python, tuple(shapes[len(operands)]),
                          str(results[0].type.maybe_downcast().element_type), mesh_text,
                          [a.to_text() for a in axes], n, sent, _text(in_s[0]), _text(out_s[0]),
                          had, needed, False, seconds, written=True)

    # -- causes ------------------------------------------------------------

    def cause(self, mop, kind: str, axes: list[AxisRef], out_sharding) -> tuple[Side, Side, bool]:
        source = self.chain_source(mop.operands[0])
        by_value = self.outputs.by_value
        names = list(dict.fromkeys(a.name for a in axes))
        if kind == "all_reduce":
            producer = getattr(mop.operands[0].owner, "operation", None)
            have = self.sharding_of(mop.operands[0])
            unreduced = set(have.unreduced) if have is not None else set()
            if producer is not None and producer.name not in COLLECTIVE_OPS \
                    and not set(axes) <= unreduced:
                carriers = [v for v in producer.operands
                            if (s := self.sharding_of(v)) is not None
                            and set(axes) & set(s.axes_used())]
                if carriers:
                    place = self.place(producer)
                    had = Side([{"value": self.name_of(v), "sharding": _text(self.sharding_of(v))}
                                for v in carriers], producer.name, place[0],
                               *self.annotations(carriers, names))
                    # the producer's result as the all-reduce leaves it (not partial)
                    needed = Side([{"value": self.name_of(mop.results[0]),
                                    "sharding": _text(out_sharding)}],
                                  producer.name, place[0],
                                  *self.annotations([mop.operands[0]], names, False))
                    return had, needed, True
        src_owner = getattr(source.owner, "operation", None)
        if src_owner is not None:
            src_op, src_place = src_owner.name, self.place(src_owner)[0]
        else:
            arg = by_value.get(source)
            src_op, src_place = "block argument", arg.func if arg is not None else "?"
        had = Side([{"value": self.name_of(source), "sharding": _text(self.sharding_of(source))}],
                   src_op, src_place, *self.annotations([source], names))
        end, consumers = self.chain_end(mop)
        targets, ops, places = [], [], []
        for user, index in consumers:
            ops.append(user.name)
            places.append(self.place(user)[0])
            if user.name == "func.return":
                targets.append(self.function_result(user, index))
            elif user.name in ("stablehlo.return", "sdy.return"):
                # a loop body's or branch's returned value: its op's result reads it
                results = user.parent.results
                targets += [results[index]] if index < len(results) else []
            else:
                targets += list(user.results)
        # (the chain's own output value, not its source: a sharding constraint it lowers)
        targets.append(by_value.get(end))
        needed = Side([{"value": self.name_of(end), "sharding": _text(self.sharding_of(end))}],
                      ", ".join(dict.fromkeys(ops)) or "(unused)",
                      ", ".join(dict.fromkeys(places)) or "(unused)",
                      *self.annotations(targets, names, False))
        return had, needed, False

    def chain_end(self, mop):
        """The last collective of ``mop``'s chain and the (op, operand index) uses of it
        that are not collectives."""
        value, seen = mop.results[0], 0
        while True:
            uses = [(u.owner, u.operand_number) for u in value.uses]
            nxt = [o for o, _ in uses if o.name in COLLECTIVE_OPS]
            if len(nxt) == 1 and len(uses) == 1 and seen < 64:
                value, seen = nxt[0].results[0], seen + 1
                continue
            return value, [(o, i) for o, i in uses if o.name not in COLLECTIVE_OPS]

    def function_result(self, ret, index: int):
        """The output value of result ``index`` of the function returning with ``ret``."""
        func = ret.parent
        while func is not None and func.name != "func.func":
            func = func.parent
        if func is None:
            return None
        from sdy_dl.ir.mlir_ops import symbol_name

        label = self.outputs.by_value.get(ret.operands[index])
        prefix = "" if label is not None and label.func == "main" else f"@{symbol_name(func)}:"
        return self.outputs.named(f"{prefix}result:{index}")


def ledger(audit, cost_model: CostModel | None = None) -> Ledger:
    """The collective ledger of ``audit``'s output (which must come from a propagation
    with explicit collectives: ``enable-insert-explicit-collectives``)."""
    from sdy_dl.pipeline import ENABLE_INSERT_EXPLICIT_COLLECTIVES

    if not audit.options[ENABLE_INSERT_EXPLICIT_COLLECTIVES]:
        raise SdyError("the collective ledger needs a propagation with explicit collectives "
                       "(sdy-dl comms runs one; in Python, sdy_dl.propagate(..., "
                       "explicit_collectives=True))")
    return Ledger(_Builder(audit, cost_model).build(), audit.file, cost_model)
