"""Bytes per device of tensors and collectives, and an estimated time per collective.

**Tensors.**  A value of global shape ``S`` and element type ``T`` sharded by
``s`` holds, on every device, ``prod(ceil(S[d] / n_d)) * bytes(T)`` bytes,
where ``n_d`` is the product of the sizes of the axes (sub-axes by their own
size) on dim ``d``: a dim the axes do not divide is padded to the next
multiple, as the partitioner pads it.  Element types narrower than a byte
(``i1``, ``i4``) take one byte each (XLA stores them unpacked on CPU).

**Collectives** move, per device, with the ring algorithms that bandwidth
analyses of collectives assume (Thakur, Rabenseifner and Gropp, "Optimization
of Collective Communication Operations in MPICH", IJHPCA 2005, §4; Patarasuk
and Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
workstations", JPDC 2009; NCCL's ``nccl-tests`` ``doc/PERFORMANCE.md``, whose
"bus bandwidth" factors are the same), over ``n`` devices (the product of
the sizes of the axes the collective runs over):

=====================  ======================================================
kind                   bytes sent per device
=====================  ======================================================
all-gather             (n-1)/n of the gathered tensor: (n-1) x the local shard
reduce-scatter         (n-1)/n of the tensor before scattering
all-reduce             twice that: 2 (n-1)/n of the local tensor
all-to-all             (n-1)/n of the local shard
collective-permute     the local shard
all-slice              nothing (each device keeps a slice of what it has)
sharded/replicated-    nothing (local)
to-unreduced
=====================  ======================================================

"Local" sizes are the padded per-device sizes above; fractions are rounded to
the nearest byte.

**Time** (an estimate, only as good as the model file): the alpha-beta model
of the same papers, ``steps x latency + bytes / bandwidth``, with the ring's
step count (n-1 for all-gather, reduce-scatter and all-to-all, 2(n-1) for
all-reduce, 1 for collective-permute) and, for a collective over several
axes, the lowest bandwidth and the highest latency among them.  Bandwidth and
latency per mesh axis are data: ``rules/cost/cost_model.yaml`` (shipped,
placeholder numbers to edit), or the file given with ``--cost-model``; a
bandwidth is at least 1 B/s and a latency at most an hour, so that every
estimate is a finite number.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction

from sdy_dl.errors import SdyError, UsageError
from sdy_dl.sharding import Mesh, TensorSharding

#: Kinds of collectives and what their op is called.
KINDS = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all", "collective_permute",
         "all_slice", "sharded_to_unreduced", "replicated_to_unreduced", "reshard")

#: Ring step counts per kind, as a function of n (reshards are not lowered: no count).
_STEPS = {"all_gather": lambda n: n - 1, "reduce_scatter": lambda n: n - 1,
          "all_reduce": lambda n: 2 * (n - 1), "all_to_all": lambda n: n - 1,
          "collective_permute": lambda n: 1 if n > 1 else 0, "all_slice": lambda n: 0,
          "sharded_to_unreduced": lambda n: 0, "replicated_to_unreduced": lambda n: 0}


_FLOAT_WIDTH = re.compile(r"^b?f(\d+)")
_INT_WIDTH = re.compile(r"^[su]?i(\d+)$")


def element_bytes(element_type: str) -> int:
    """Bytes of one element of the MLIR element type ``element_type`` (``f32``,
    ``bf16``, ``i1``, ``ui8``, ``f8E4M3FN``, ``complex<f32>``, ``index``)."""
    text = element_type.strip()
    if text.startswith("complex<") and text.endswith(">"):
        return 2 * element_bytes(text[len("complex<"):-1])
    if text == "index":
        return 8
    m = _INT_WIDTH.match(text) or _FLOAT_WIDTH.match(text)
    if m is None:
        raise SdyError(f"unknown element type {element_type!r}: its size is not known")
    return max(1, math.ceil(int(m.group(1)) / 8))


def shard_counts(sharding: TensorSharding | None, mesh: Mesh | None, rank: int) -> list[int]:
    """The number of shards of each dim (1: not sharded; no sharding: replicated)."""
    if sharding is None or mesh is None:
        return [1] * rank
    out = []
    for d in range(rank):
        axes = sharding.dims[d].axes if d < len(sharding.dims) else ()
        out.append(math.prod(a.ref_size(mesh) for a in axes))
    return out


def local_shape(shape, sharding: TensorSharding | None, mesh: Mesh | None) -> tuple[int, ...]:
    """The per-device shape: each dim divided by its shard count, rounded up (padding)."""
    return tuple(-(-size // n) for size, n in zip(shape, shard_counts(sharding, mesh, len(shape))))


def tensor_bytes(shape, element_type: str) -> int:
    """Bytes of a tensor of ``shape``."""
    return math.prod(shape) * element_bytes(element_type)


def local_bytes(shape, element_type: str, sharding: TensorSharding | None,
                mesh: Mesh | None) -> int:
    """Bytes per device of a tensor of global ``shape`` sharded by ``sharding``."""
    return tensor_bytes(local_shape(shape, sharding, mesh), element_type)


def collective_bytes(kind: str, n: int, in_local: int, out_local: int) -> int | None:
    """Bytes one device sends for a collective of ``kind`` over ``n`` devices, whose
    operand and result take ``in_local`` and ``out_local`` bytes per device (the
    table of the module docstring; None: a reshard, not lowered to collectives)."""
    if kind == "all_gather":
        moved = Fraction((n - 1) * in_local)
    elif kind == "reduce_scatter":
        moved = Fraction((n - 1) * out_local)
    elif kind == "all_reduce":
        moved = Fraction(2 * (n - 1) * in_local, n)
    elif kind == "all_to_all":
        moved = Fraction((n - 1) * in_local, n)
    elif kind == "collective_permute":
        moved = Fraction(in_local if n > 1 else 0)
    elif kind == "reshard":
        return None
    else:
        moved = Fraction(0)
    return round(moved)


def human_bytes(n: int | None) -> str:
    """``4096`` -> ``4.0 KiB`` (``None``: unknown)."""
    if n is None:
        return "?"
    value, unit = float(n), "B"
    for u in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, u
    return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"


def human_seconds(s: float | None) -> str:
    """``2e-5`` -> ``20 us`` (``None``: unknown)."""
    if s is None:
        return "?"
    for scale, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "us")):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


# -- the model file ------------------------------------------------------------------

_UNITS_BW = {"b/s": 1, "kb/s": 1e3, "mb/s": 1e6, "gb/s": 1e9, "tb/s": 1e12,
             "kib/s": 2**10, "mib/s": 2**20, "gib/s": 2**30, "tib/s": 2**40}
_UNITS_T = {"s": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*([A-Za-zµ/]*)\s*$")


@dataclass(frozen=True)
class Link:
    """Bandwidth (bytes per second, per device and direction) and latency (seconds per step)."""

    bandwidth: float
    latency: float


@dataclass
class CostModel:
    """Bandwidth and latency per mesh axis, with a default for axes not listed."""

    file: str
    default: Link
    axes: dict[str, Link] = field(default_factory=dict)

    def link(self, axis_names) -> Link:
        """The link of a collective over ``axis_names``: the slowest of them."""
        links = [self.axes.get(name, self.default) for name in axis_names] or [self.default]
        return Link(min(x.bandwidth for x in links), max(x.latency for x in links))

    def seconds(self, kind: str, n: int, sent: int | None, axis_names) -> float | None:
        """Estimated time of one collective (None: a reshard, not lowered)."""
        if sent is None or kind not in _STEPS:
            return None
        if n <= 1:
            return 0.0
        link = self.link(axis_names)
        return _STEPS[kind](n) * link.latency + sent / link.bandwidth

    def to_json(self) -> dict:
        return {"file": self.file,
                "default": {"bandwidth": self.default.bandwidth, "latency": self.default.latency},
                "axes": {k: {"bandwidth": v.bandwidth, "latency": v.latency}
                         for k, v in sorted(self.axes.items())}}


def shipped_path() -> str:
    """The shipped cost model file (``rules/cost/cost_model.yaml``)."""
    from sdy_dl.resources import rules_dir

    return str(rules_dir() / "cost" / "cost_model.yaml")


def load_cost_model(path: str | None = None) -> CostModel:
    """The cost model of ``path`` (None: the shipped one); an invalid file is an
    :class:`SdyError` at its ``file:line:col``."""
    from sdy_dl.rules.yamlsrc import YMap, load_yaml
    from sdy_dl.text_input import read_input

    if path == "":
        raise UsageError("the cost model file name is empty (--cost-model '')")
    path = path if path is not None else shipped_path()
    data = load_yaml(read_input(path, "the cost model"), path)
    if not isinstance(data, YMap):
        raise SdyError("a cost model is a mapping with the keys 'default' and 'axes'", path, 1, 1)
    for key in data:
        if key not in ("default", "axes"):
            raise data.at(key).error(f"unknown key '{key}' (expected 'default' and 'axes')")
    if "default" not in data:
        raise data.loc.error("the cost model has no 'default' link (bandwidth and latency "
                             "for the axes not listed under 'axes')")
    default = _link(data, "default")
    axes = {}
    table = data.get("axes")
    if table is not None:
        if not isinstance(table, YMap):
            raise data.value_at("axes").error("'axes' maps mesh axis names to links "
                                              "({bandwidth: ..., latency: ...})")
        for name in table:
            axes[name] = _link(table, name)
    return CostModel(path, default, axes)


def _link(parent, key: str) -> Link:
    from sdy_dl.rules.yamlsrc import YMap

    entry = parent[key]
    if not isinstance(entry, YMap):
        raise parent.value_at(key).error(f"'{key}' must be a mapping with 'bandwidth' and "
                                         "'latency'")
    for k in entry:
        if k not in ("bandwidth", "latency"):
            raise entry.at(k).error(f"unknown key '{k}' (expected 'bandwidth' and 'latency')")
    for k in ("bandwidth", "latency"):
        if k not in entry:
            raise entry.loc.error(f"'{key}' has no '{k}'")
    bandwidth = _quantity(entry, "bandwidth", _UNITS_BW, "B/s")
    if bandwidth < 1:
        raise entry.value_at("bandwidth").error("bandwidth must be at least 1 B/s")
    latency = _quantity(entry, "latency", _UNITS_T, "s")
    if latency > 3600:
        raise entry.value_at("latency").error("latency must be at most 1 hour (3600 s)")
    return Link(bandwidth, latency)


def _quantity(entry, key: str, units: dict, base: str) -> float:
    value = entry[key]
    loc = entry.value_at(key)
    if isinstance(value, bool):
        raise loc.error(f"{key} must be a number or a quantity like '25 GB/s' or '5 us'")
    if isinstance(value, (int, float)):
        number, unit = (float(value) if abs(value) < 1e308 else math.inf), ""
    elif isinstance(value, str) and (m := _QUANTITY.match(value)):
        number, unit = float(m.group(1)), m.group(2)
    else:
        raise loc.error(f"{key} must be a number or a quantity like '25 GB/s' or '5 us', "
                        f"not {value!r}")
    if unit:
        scale = units.get(unit.lower()) if unit != "µs" else units["µs"]
        if scale is None:
            raise loc.error(f"unknown unit '{unit}' for {key} (one of "
                            f"{', '.join(u for u in units if u != 'µs')})")
        number *= scale
    if not math.isfinite(number) or number < 0:
        raise loc.error(f"{key} must be a finite non-negative number ({base})")
    return number
