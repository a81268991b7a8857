"""MLIR attributes as plain Python values, and the attribute/operand names of ops.

* :func:`convert` turns an MLIR attribute into a plain value: integers, bools,
  floats, strings, tuples (dense arrays, ``ArrayAttr``, dense elements shaped
  as nested tuples), dicts, enum attributes as their name (``TRANSPOSE``), and
  StableHLO's structured attributes (dot/gather/scatter/convolution dimension
  numbers, ...) as :class:`Record` values with the binding's field names, for
  example ``dot_dimension_numbers.lhs_contracting_dimensions``.
* :func:`op_signature` tells which attributes an op defines and how its
  operands are grouped (ODS names such as ``lhs``, ``inputs``,
  ``init_values``).  It is read from jaxlib's generated op classes, so rule
  files are validated against the dialects as jaxlib defines them.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import re
from dataclasses import dataclass
from typing import Any


class Record:
    """A read-only record of named fields (a converted structured attribute)."""

    __slots__ = ("_kind", "_fields")

    def __init__(self, kind: str, fields: dict[str, Any]):
        object.__setattr__(self, "_kind", kind)
        object.__setattr__(self, "_fields", dict(fields))

    def __getattr__(self, name: str) -> Any:
        fields = object.__getattribute__(self, "_fields")
        if name in fields:
            return fields[name]
        raise AttributeError(f"{object.__getattribute__(self, '_kind')} has no field "
                             f"'{name}' (fields: {', '.join(fields)})")

    def __setattr__(self, name, value):
        raise AttributeError("Record is read-only")

    def __eq__(self, other) -> bool:
        return isinstance(other, Record) and (self._kind, self._fields) == (other._kind,
                                                                               other._fields)

    def __hash__(self) -> int:
        return hash((self._kind, tuple(sorted(self._fields.items()))))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._fields.items())
        return f"{self._kind}({inner})"

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(self._fields)


def _structured_classes():
    """StableHLO attribute binding classes converted field by field."""
    from jaxlib.mlir.dialects import stablehlo as s
    return (s.DotDimensionNumbers, s.ConvDimensionNumbers, s.GatherDimensionNumbers,
            s.ScatterDimensionNumbers, s.ChannelHandle, s.DotAlgorithm)


def _enum_classes():
    from jaxlib.mlir.dialects import stablehlo as s
    return (s.TransposeAttr, s.FftTypeAttr, s.ComparisonDirectionAttr, s.ComparisonTypeAttr,
            s.PrecisionAttr, s.RngAlgorithmAttr, s.RngDistributionAttr)


_BASE_FIELDS = {"context", "dump", "get", "get_named", "isinstance", "maybe_downcast", "parse",
                "type", "typeid", "static_typeid"}


def _plain(value: Any) -> Any:
    """Binding values (lists, attributes) as plain immutable values."""
    from jaxlib.mlir import ir
    if isinstance(value, ir.Attribute):
        return convert(value)
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    return value


def convert(attr) -> Any:
    """The plain Python value of an MLIR attribute (its text if nothing fits)."""
    from jaxlib.mlir import ir

    for cls in _structured_classes():
        if cls.isinstance(attr):
            obj = cls(attr)
            names = [n for n in dir(cls) if not n.startswith("_") and n not in _BASE_FIELDS]
            return Record(cls.__name__, {n: _plain(getattr(obj, n)) for n in names})
    for cls in _enum_classes():
        if cls.isinstance(attr):
            return cls(attr).value
    if hasattr(attr, "maybe_downcast"):
        attr = attr.maybe_downcast()
    if isinstance(attr, ir.BoolAttr):
        return bool(attr.value)
    if isinstance(attr, ir.IntegerAttr):
        return int(attr.value)
    if isinstance(attr, ir.FloatAttr):
        return float(attr.value)
    if isinstance(attr, ir.StringAttr):
        return attr.value
    if isinstance(attr, ir.UnitAttr):
        return True
    if isinstance(attr, (ir.DenseI64ArrayAttr, ir.DenseI32ArrayAttr, ir.DenseI16ArrayAttr,
                         ir.DenseI8ArrayAttr, ir.DenseBoolArrayAttr, ir.DenseF32ArrayAttr,
                         ir.DenseF64ArrayAttr)):
        return tuple(attr)
    if isinstance(attr, ir.DenseIntElementsAttr):
        return _nested(attr, int)
    if isinstance(attr, ir.DenseFPElementsAttr):
        return _nested(attr, float)
    if isinstance(attr, ir.ArrayAttr):
        return tuple(convert(a) for a in attr)
    if isinstance(attr, ir.DictAttr):
        return {attr[i].name: convert(attr[i].attr) for i in range(len(attr))}
    return str(attr)


def _nested(dense, cast) -> Any:
    """Dense elements as nested tuples following the tensor's shape."""
    from jaxlib.mlir import ir
    shape = list(ir.ShapedType(dense.type).shape)
    if dense.is_splat:
        flat = [cast(dense.get_splat_value().value)] * math.prod(shape)
    else:
        flat = [cast(v) for v in dense]
    if not shape:
        return flat[0]

    def build(offset: int, dims: list[int]):
        if len(dims) == 1:
            return tuple(flat[offset:offset + dims[0]])
        step = math.prod(dims[1:])
        return tuple(build(offset + i * step, dims[1:]) for i in range(dims[0]))

    return build(0, shape)


# --------------------------------------------------------------------------- signatures

@dataclass(frozen=True)
class OpSignature:
    """What an op defines: attribute names and operand groups in ODS order."""

    name: str
    attributes: tuple[str, ...]
    operand_groups: tuple[tuple[str, str], ...]  # (ODS name, 'single'|'optional'|'variadic')
    known: bool = True                           # False: not found in jaxlib's op classes

    def has_attribute(self, name: str) -> bool:
        return not self.known or name in self.attributes


_ATTR_RE = re.compile(r'self\.operation\.attributes\["(\w+)"\]')
_OPERAND_RE = re.compile(
    r'^\s*(if (\w+) is not None: )?operands\.(append|extend)\((?:_get_op_results?_or_values?\()?'
    r'(\w+)', re.M)
_CLASS_RE = re.compile(r"^class (\w+)\(", re.M)
_NAME_RE = re.compile(r'^\s*OPERATION_NAME = "([^"]+)"', re.M)


@functools.lru_cache(maxsize=None)
def _dialect_sources(dialect: str) -> dict[str, str]:
    """Op name -> source text of its generated class, for one dialect."""
    try:
        mod = importlib.import_module(f"jaxlib.mlir.dialects._{dialect}_ops_gen")
        text = inspect.getsource(mod)
    except (ImportError, OSError, TypeError):
        return {}
    starts = [m.start() for m in _CLASS_RE.finditer(text)] + [len(text)]
    out: dict[str, str] = {}
    for a, b in zip(starts, starts[1:]):
        block = text[a:b]
        m = _NAME_RE.search(block)
        if m:
            out.setdefault(m.group(1), block)
    return out


@functools.lru_cache(maxsize=None)
def op_signature(op_name: str) -> OpSignature:
    """The attributes and operand groups of ``op_name`` as jaxlib defines them."""
    src = _dialect_sources(op_name.split(".", 1)[0]).get(op_name)
    if src is None:
        return OpSignature(op_name, (), (), known=False)
    attrs = tuple(dict.fromkeys(_ATTR_RE.findall(src)))
    groups: list[tuple[str, str]] = []
    for optional, _, how, name in _OPERAND_RE.findall(src):
        kind = "optional" if optional else ("variadic" if how == "extend" else "single")
        if name not in (g for g, _ in groups):
            groups.append((name, kind))
    return OpSignature(op_name, attrs, tuple(groups))


def operand_groups(op_mlir, signature: OpSignature) -> dict[str, tuple[int, ...]]:
    """Operand indices of each ODS operand group of one op."""
    if not signature.operand_groups:
        return {}
    view = op_mlir.opview
    out: dict[str, tuple[int, ...]] = {}
    offset = 0
    for name, kind in signature.operand_groups:
        value = getattr(view, name, None)
        if kind == "variadic":
            count = len(value)
        else:
            count = 0 if value is None else 1
        out[name] = tuple(range(offset, offset + count))
        offset += count
    if offset != len(op_mlir.operands):
        return {}
    return out
