"""Shardy meshes, axis references and tensor shardings: model, text, verifier.

This module is the pure-Python counterpart of Shardy's ``MeshAttr``,
``AxisRefAttr``, ``DimensionShardingAttr`` and ``TensorShardingAttr``
(``shardy/dialect/sdy/ir/{attrs.td,dialect.cc,parsers.cc,printers.cc,
verifiers.cc}``); see §1.1–§1.6.
It never imports jaxlib.

Contents:

* the data model: :class:`MeshAxis`, :class:`Mesh`, :class:`AxisRef`,
  :class:`DimSharding`, :class:`TensorSharding` (frozen, hashable records);
* printing, byte for byte like the MLIR printer (``to_text`` methods,
  :func:`quote_string`, :func:`format_symbol_ref`);
* parsing of text a user types outside a module (a sharding on the command
  line) with a small tokenizer and recursive-descent parser
  (:func:`parse_axis_ref`, :func:`parse_tensor_sharding`), which verifies
  inlined meshes (:meth:`Mesh.verify`).
  Attributes of a module never go through it: they are read and built through
  jaxlib's bindings (:mod:`sdy_dl.ir.sdy_attrs`).

Every parse or verification failure raises :class:`~sdy_dl.errors.SdyError`
with a one-line message.

Design choices (matching jaxlib 0.10.2):

* An explicit ``device_ids`` list equal to ``iota(product(axis sizes))`` on a
  mesh with axes is **dropped**, as Shardy's ``MeshAttr`` builder does (and as
  its parser does: ``#sdy.mesh<["x"=2], device_ids=[0, 1]>`` prints as
  ``#sdy.mesh<["x"=2]>``).  :class:`Mesh` normalises in its constructor, so an
  iota list can never reach :meth:`Mesh.verify`.
* Parsing a mesh inlined in a sharding verifies it, because
  MLIR verifies attribute parameters while parsing.  Parsing a sharding does
  not verify it: jaxlib's verifier does when a module is parsed.
* :class:`AxisRef` keeps exactly what was written: ``"x":(1)8`` on ``"x"=8``
  is a (verifier-rejected) sub-axis, not the full axis.  Operations that
  build new refs normalise with :func:`make_sub_axis`.
* Reduction kinds on unreduced axes (``unreduced=max{...}``, Shardy HEAD only)
  are rejected, like jaxlib 0.10.2 does.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple, Optional, Union

from sdy_dl.errors import SdyError
from sdy_dl.frozen import Frozen, HashedOnce

__all__ = [
    "MeshAxis", "Mesh", "AxisRef", "DimSharding", "TensorSharding",
    "make_sub_axis", "quote_string", "format_symbol_ref",
    "parse_axis_ref", "parse_tensor_sharding",
]

_INT64_MAX = 2**63 - 1
_INF = float("inf")


# --------------------------------------------------------------------------
# Text helpers shared by printer and parser
# --------------------------------------------------------------------------

def _is_bare_identifier(text: str) -> bool:
    """MLIR's ``isBareIdentifier``: ``[a-zA-Z_][a-zA-Z0-9_$.]*`` (ASCII)."""
    if not text or not (_is_ascii_alpha(text[0]) or text[0] == "_"):
        return False
    return all(_is_ident_char(c) for c in text[1:])


def _is_ascii_alpha(c: str) -> bool:
    return ("a" <= c <= "z") or ("A" <= c <= "Z")


def _is_ident_char(c: str) -> bool:
    return _is_ascii_alpha(c) or "0" <= c <= "9" or c in "_$."


def quote_string(text: str) -> str:
    """Quote ``text`` like MLIR's ``printEscapedString`` inside ``"..."``.

    Printable ASCII other than ``"`` and ``\\`` is kept, ``\\`` becomes
    ``\\\\`` and every other byte of the UTF-8 encoding becomes ``\\XX``
    (upper-case hex).
    """
    out = []
    for byte in text.encode("utf-8", "surrogateescape"):
        if byte == 0x5C:
            out.append("\\\\")
        elif 0x20 <= byte <= 0x7E and byte != 0x22:
            out.append(chr(byte))
        else:
            out.append("\\%02X" % byte)
    return '"' + "".join(out) + '"'


def format_symbol_ref(name: str) -> str:
    """``@name`` when ``name`` is a bare identifier, else ``@"quoted"``."""
    return "@" + (name if _is_bare_identifier(name) else quote_string(name))


# --------------------------------------------------------------------------
# Meshes
# --------------------------------------------------------------------------

class MeshAxis(Frozen):
    """A named mesh axis, ``"x"=2``."""

    _fields = ("name", "size")

    def __init__(self, name: str, size: int):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "size", size)

    def to_text(self) -> str:
        """``"x"=2``."""
        return f"{quote_string(self.name)}={self.size}"

    __str__ = to_text


#: The most devices a mesh may have: every device id and size must be a
#: non-negative 32-bit signed number (clingo's and Soufflé's ``number``).
MAX_DEVICES = 2**31 - 1


class Mesh(HashedOnce):
    """A ``MeshAttr``: ordered named axes plus optional explicit device ids.

    An iota ``device_ids`` list on a mesh with axes is dropped on
    construction (Shardy's attribute builder does the same).
    """

    _fields = ("axes", "device_ids")

    def __init__(self, axes: tuple[MeshAxis, ...] = (), device_ids: tuple[int, ...] = ()):
        axes = tuple(axes)
        ids = tuple(device_ids)
        if axes and ids and len(ids) == math.prod(a.size for a in axes) \
                and all(i == d for i, d in enumerate(ids)):
            ids = ()
        object.__setattr__(self, "axes", axes)
        object.__setattr__(self, "device_ids", ids)

    @functools.cached_property
    def _index(self) -> dict[str, int]:
        index: dict[str, int] = {}
        for i, axis in enumerate(self.axes):
            index.setdefault(axis.name, i)
        return index

    @property
    def is_empty(self) -> bool:
        """No axes and no device ids (the placeholder mesh ``<[]>``)."""
        return not self.axes and not self.device_ids

    @property
    def is_maximal(self) -> bool:
        """No axes and exactly one device id (``<[], device_ids=[3]>``)."""
        return not self.axes and len(self.device_ids) == 1

    @property
    def total_size(self) -> int:
        """Product of the axis sizes (the number of devices)."""
        return math.prod(a.size for a in self.axes)

    @property
    def axis_names(self) -> tuple[str, ...]:
        """Axis names in mesh order."""
        return tuple(a.name for a in self.axes)

    def has_axis(self, name: str) -> bool:
        """Whether an axis called ``name`` exists."""
        return name in self._index

    def axis_index(self, name: str) -> int:
        """Position of axis ``name`` in the mesh (SdyError if absent)."""
        try:
            return self._index[name]
        except KeyError:
            raise SdyError(f"axis {quote_string(name)} is not in mesh "
                           f"{self.to_text()}") from None

    def axis_size(self, name: str) -> int:
        """Size of axis ``name`` (SdyError if absent)."""
        return self.axes[self.axis_index(name)].size

    def to_text(self) -> str:
        """Shardy's print form, e.g. ``<["x"=2], device_ids=[1, 0]>``."""
        text = "<[" + ", ".join(a.to_text() for a in self.axes) + "]"
        if self.device_ids:
            text += ", device_ids=[" + ", ".join(map(str, self.device_ids)) + "]"
        return text + ">"

    __str__ = to_text

    def check_engine_limits(self, what: str = "mesh") -> None:
        """What jaxlib accepts but the Datalog engines cannot hold: more than
        :data:`MAX_DEVICES` devices; raise SdyError."""
        if self.total_size > MAX_DEVICES:
            raise SdyError(f"{what} {self.to_text()}: {self.total_size} devices; at most "
                           f"{MAX_DEVICES} (device ids and sizes are 31-bit numbers in the "
                           "Datalog engines)")

    def verify(self, what: str = "mesh") -> None:
        """Check the §1.1 rules (``MeshAttr::verify``); raise SdyError."""
        where = f"{what} {self.to_text()}"
        for axis in self.axes:
            if axis.size < 1:
                raise SdyError(f"{where}: axis {quote_string(axis.name)} has "
                               f"size {axis.size}; axis sizes must be at least 1")
        self.check_engine_limits(what)
        for device_id in self.device_ids:
            if device_id < 0:
                raise SdyError(f"{where}: device id {device_id} is negative; "
                               "device ids must be non-negative")
        if not self.axes:
            if len(self.device_ids) > 1:
                raise SdyError(f"{where}: a mesh without axes may have at most "
                               "one device id (maximal mesh)")
            return
        seen: set[str] = set()
        for axis in self.axes:
            if axis.name in seen:
                raise SdyError(f"{where}: duplicate axis name "
                               f"{quote_string(axis.name)}")
            seen.add(axis.name)
        if not self.device_ids:
            return
        total = self.total_size
        if len(self.device_ids) != total:
            raise SdyError(f"{where}: {len(self.device_ids)} device ids but the "
                           f"product of the axis sizes is {total}")
        if sorted(self.device_ids) != list(range(total)):
            raise SdyError(f"{where}: sorted device ids must be "
                           f"0..{total - 1} (a permutation of iota)")
        if list(self.device_ids) == sorted(self.device_ids):
            # Unreachable through the constructor, kept for completeness.
            raise SdyError(f"{where}: iota device ids must be omitted")


# --------------------------------------------------------------------------
# Axis references
# --------------------------------------------------------------------------

@functools.total_ordering
class AxisRef(Frozen):
    """A full axis ``"x"`` (``size is None``) or a sub-axis ``"x":(pre)size``.

    Comparison operators implement Shardy's ``AxisRefAttr::operator<``:
    names lexicographically; for one name ``"x":(1)k < "x" < "x":(m)k``
    (``m > 1``), and sub-axes by ``(pre, size)``.
    """

    _fields = ("name", "pre", "size")

    def __init__(self, name: str, pre: int = 1, size: Optional[int] = None):
        if size is None and pre != 1:
            raise ValueError(f"full axis ref {name!r} must have pre=1")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "pre", pre)
        object.__setattr__(self, "size", size)

    # -- sizes -------------------------------------------------------------

    @property
    def is_sub_axis(self) -> bool:
        """True for ``"x":(m)k``, False for the full axis ``"x"``."""
        return self.size is not None

    def full_size(self, mesh: Mesh) -> int:
        """Size of the full axis this ref belongs to."""
        return mesh.axis_size(self.name)

    def ref_size(self, mesh: Mesh) -> int:
        """Size of this ref (the sub-axis size, or the full size)."""
        return self.size if self.size is not None else self.full_size(mesh)

    def next_pre(self, mesh: Optional[Mesh] = None) -> int:
        """``pre * size``; the full size for a full axis (needs ``mesh``)."""
        if self.size is not None:
            return self.pre * self.size
        if mesh is None:
            raise ValueError(f"next_pre of full axis {self.name!r} needs a mesh")
        return self.full_size(mesh)

    # -- relations (§1.2) --------------------------------------------------

    def contains(self, other: "AxisRef", mesh: Optional[Mesh] = None) -> bool:
        """Same name, and ``self`` is full or covers ``other``'s range."""
        if other.name != self.name:
            return False
        if not self.is_sub_axis:
            return True
        if not other.is_sub_axis:
            return False
        return self.pre <= other.pre and self.next_pre() >= other.next_pre()

    def prefix_of(self, other: "AxisRef", mesh: Optional[Mesh] = None) -> bool:
        """``other`` contains ``self`` and both start at the same pre-size."""
        return other.contains(self) and self.pre == other.pre

    def overlaps(self, other: "AxisRef", mesh: Optional[Mesh] = None) -> bool:
        """Same name and either one is full or ``[pre, next)`` ranges meet."""
        if other.name != self.name:
            return False
        if not self.is_sub_axis or not other.is_sub_axis:
            return True
        return self.pre < other.next_pre() and other.pre < self.next_pre()

    def can_coexist(self, other: "AxisRef", mesh: Optional[Mesh] = None) -> bool:
        """Whether both refs fit one consistent factorisation of the axis."""
        if other.name != self.name or not self.is_sub_axis or not other.is_sub_axis:
            return True
        return _can_sub_axes_coexist(*self._bounds(other))

    def can_merge(self, other: "AxisRef") -> bool:
        """Same name, both sub-axes, and ``other`` starts where ``self`` ends."""
        return (other.name == self.name and self.is_sub_axis
                and other.is_sub_axis and self.next_pre() == other.pre)

    # -- derived refs ------------------------------------------------------

    def merge(self, other: "AxisRef", mesh: Mesh) -> "AxisRef":
        """``"x":(pre)(size*other.size)``, or the full axis if that is all."""
        if not self.can_merge(other):
            raise ValueError(f"cannot merge {self.to_text()} and {other.to_text()}")
        return make_sub_axis(self.name, self.pre, self.size * other.size, mesh)

    def overlap(self, other: "AxisRef",
                mesh: Optional[Mesh] = None) -> Optional["AxisRef"]:
        """The common part of both refs, or None (disjoint / can't coexist)."""
        if other.name != self.name:
            return None
        if not self.is_sub_axis:
            return other
        if not other.is_sub_axis:
            return self
        lo, hi, lo_next, hi_next = self._bounds(other)
        if lo_next <= hi or not _can_sub_axes_coexist(lo, hi, lo_next, hi_next):
            return None
        return _derived(self.name, hi, lo_next // hi, mesh)

    def prefix_without_overlap(self, other: "AxisRef",
                               mesh: Optional[Mesh] = None) -> Optional["AxisRef"]:
        """Largest prefix of ``self`` not overlapping ``other``, or None."""
        if not self.can_coexist(other):
            return None
        if not self.overlaps(other):
            return self
        if self.pre >= other.pre:
            return None
        return _derived(self.name, self.pre, other.pre // self.pre, mesh)

    def suffix_without_overlap(self, other: "AxisRef",
                               mesh: Mesh) -> Optional["AxisRef"]:
        """Largest suffix of ``self`` not overlapping ``other``, or None."""
        if not self.can_coexist(other):
            return None
        if not self.overlaps(other):
            return self
        self_next, other_next = self.next_pre(mesh), other.next_pre(mesh)
        if self_next <= other_next:
            return None
        return _derived(self.name, other_next, self_next // other_next, mesh)

    def greatest_common_prefix(self, other: "AxisRef",
                               mesh: Optional[Mesh] = None) -> Optional["AxisRef"]:
        """``self`` or ``other``, whichever is a prefix of the other, or None."""
        if not self.can_coexist(other):
            return None
        if self.prefix_of(other):
            return self
        if other.prefix_of(self):
            return other
        return None

    def _bounds(self, other: "AxisRef") -> tuple[int, int, int, int]:
        """``(min pre, max pre, min next, max next)`` of two sub-axes."""
        lo, hi = sorted((self.pre, other.pre))
        lo_next, hi_next = sorted((self.next_pre(), other.next_pre()))
        return lo, hi, lo_next, hi_next

    # -- ordering ----------------------------------------------------------

    def _order_key(self) -> tuple:
        # The full axis sorts like the sub-axis (1, inf): after "x":(1)k and
        # before every "x":(m)k with m > 1.
        return (self.pre, self.size if self.size is not None else _INF)

    def __lt__(self, other: "AxisRef") -> bool:
        if not isinstance(other, AxisRef):
            return NotImplemented
        return (self.name, self._order_key()) < (other.name, other._order_key())

    def sort_key_in(self, mesh: Mesh) -> tuple:
        """Key for Shardy's mesh comparator: mesh position, then ``<``."""
        return (mesh.axis_index(self.name), self._order_key())

    # -- text --------------------------------------------------------------

    def to_text(self) -> str:
        """``"x"`` or ``"x":(2)4``."""
        text = quote_string(self.name)
        if self.size is not None:
            text += f":({self.pre}){self.size}"
        return text

    __str__ = to_text


def _can_sub_axes_coexist(lo: int, hi: int, lo_next: int, hi_next: int) -> bool:
    """Shardy's ``canSubAxesCoexist`` formula (§1.2)."""
    if lo_next > hi:
        return lo_next % hi == 0 and hi % lo == 0 and hi_next % lo_next == 0
    return hi % lo_next == 0


def merge_adjacent(refs, mesh: "Mesh") -> list[AxisRef]:
    """``refs`` with every run of consecutive, mergeable sub-axes merged
    (``"x":(1)2, "x":(2)2`` becomes ``"x":(1)4``, or ``"x"`` if that is the whole axis)."""
    out: list[AxisRef] = []
    for ref in refs:
        if out and out[-1].can_merge(ref):
            out[-1] = out[-1].merge(ref, mesh)
        else:
            out.append(ref)
    return out


def add_axis_or_merge(axes: list, axis: AxisRef, mesh: Mesh) -> None:
    """Shardy's ``addAxisOrMerge``: ``axis`` at the end of ``axes``, merged with
    the last one when they are consecutive parts of one axis."""
    if axes and axes[-1].can_merge(axis):
        axes[-1] = axes[-1].merge(axis, mesh)
    else:
        axes.append(axis)


def axis_set_diff(axes_a, axes_b, mesh: Mesh) -> list[AxisRef]:
    """Shardy's ``getAxisSetDiff``: the parts of ``axes_a`` that no axis of ``axes_b``
    covers, in order."""
    axes_a, axes_b = list(axes_a), list(axes_b)
    if not axes_a or axes_a == axes_b:
        return []
    if not axes_b:
        return axes_a
    set_b = sorted(axes_b)
    result: list[AxisRef] = []
    for axis in axes_a:
        while axis is not None:
            other = next((b for b in set_b if axis.overlaps(b)), None)
            if other is None:
                result.append(axis)
                break
            prefix = axis.prefix_without_overlap(other, mesh)
            if prefix is not None:
                result.append(prefix)
            axis = axis.suffix_without_overlap(other, mesh)
    return result


def make_sub_axis(name: str, pre: int, size: int, mesh: Mesh) -> AxisRef:
    """``"name":(pre)size``, or the full axis when ``pre == 1`` and ``size``
    is the full size."""
    if pre == 1 and size == mesh.axis_size(name):
        return AxisRef(name)
    return AxisRef(name, pre, size)


def _derived(name: str, pre: int, size: int, mesh: Optional[Mesh]) -> AxisRef:
    """A computed sub-axis, normalised when the mesh is known."""
    if mesh is not None:
        return make_sub_axis(name, pre, size, mesh)
    return AxisRef(name, pre, size)


# --------------------------------------------------------------------------
# Dimension and tensor shardings
# --------------------------------------------------------------------------

class DimSharding(HashedOnce):
    """Axes of one dimension (major to minor), open/closed flag, priority."""

    _fields = ("axes", "is_closed", "priority")

    def __init__(self, axes: tuple[AxisRef, ...] = (), is_closed: bool = False,
                 priority: Optional[int] = None):
        object.__setattr__(self, "axes", tuple(axes))
        object.__setattr__(self, "is_closed", is_closed)
        object.__setattr__(self, "priority", priority)

    @property
    def is_empty(self) -> bool:
        """No axes (open or closed)."""
        return not self.axes

    def to_text(self) -> str:
        """``{"x", ?}``, ``{?}``, ``{}``, ``{"x"}p2``."""
        parts = [a.to_text() for a in self.axes]
        if not self.is_closed:
            parts.append("?")
        text = "{" + ", ".join(parts) + "}"
        if self.priority is not None:
            text += f"p{self.priority}"
        return text

    __str__ = to_text


MeshOrName = Union[str, Mesh]


class TensorSharding(HashedOnce):
    """A ``TensorShardingAttr``.

    ``mesh`` is a mesh symbol name (without ``@``) or an inlined
    :class:`Mesh`.
    """

    _fields = ("mesh", "dims", "replicated", "unreduced")

    def __init__(self, mesh: MeshOrName, dims: tuple[DimSharding, ...] = (),
                 replicated: tuple[AxisRef, ...] = (), unreduced: tuple[AxisRef, ...] = ()):
        object.__setattr__(self, "mesh", mesh)
        object.__setattr__(self, "dims", tuple(dims))
        object.__setattr__(self, "replicated", tuple(replicated))
        object.__setattr__(self, "unreduced", tuple(unreduced))

    @classmethod
    def open_empty(cls, mesh: MeshOrName, rank: int) -> "TensorSharding":
        """Every dim open and empty: the same as having no sharding."""
        return cls(mesh, (DimSharding(),) * rank)

    @property
    def rank(self) -> int:
        """Number of dim shardings."""
        return len(self.dims)

    @property
    def mesh_name(self) -> Optional[str]:
        """The mesh symbol name, or None for an inlined mesh."""
        return self.mesh if isinstance(self.mesh, str) else None

    @property
    def is_fully_open_empty(self) -> bool:
        """Equal to :meth:`open_empty`: all dims ``{?}`` without priority,
        no replicated or unreduced axes."""
        return (not self.replicated and not self.unreduced
                and all(d == DimSharding() for d in self.dims))

    @property
    def is_fully_closed(self) -> bool:
        """Every dim is closed (Shardy's ``isFullyClosed``)."""
        return all(d.is_closed for d in self.dims)

    def axes_used(self) -> tuple[AxisRef, ...]:
        """All axis refs: dims in order, then replicated, then unreduced."""
        dim_axes = tuple(a for d in self.dims for a in d.axes)
        return dim_axes + self.replicated + self.unreduced

    def mesh_text(self) -> str:
        """``@name`` or ``mesh<[...]>``, as printed inside the sharding."""
        if isinstance(self.mesh, Mesh):
            return "mesh" + self.mesh.to_text()
        return format_symbol_ref(self.mesh)

    def to_inner_text(self) -> str:
        """``<@mesh, [...]>``, the form used inside ``sharding_per_value``."""
        text = (f"<{self.mesh_text()}, ["
                + ", ".join(d.to_text() for d in self.dims) + "]")
        for keyword, axes in (("replicated", self.replicated),
                              ("unreduced", self.unreduced)):
            if axes:
                text += f", {keyword}={{" + ", ".join(a.to_text() for a in axes) + "}"
        return text + ">"

    def to_text(self) -> str:
        """``#sdy.sharding<@mesh, [{"a", ?}, {}], replicated={"b"}>``."""
        return "#sdy.sharding" + self.to_inner_text()

    __str__ = to_text


#: One object per distinct sharding read or derived (see :func:`interned`).
_INTERNED: dict[TensorSharding, TensorSharding] = {}


def interned(sharding: TensorSharding) -> TensorSharding:
    """The one object of shardings equal to ``sharding``: shardings are compared
    on nearly every propagation visit (inside memo keys), and equal objects that
    are the same object compare without walking their fields."""
    return _INTERNED.setdefault(sharding, sharding)


# --------------------------------------------------------------------------
# Tokenizer and parser
# --------------------------------------------------------------------------

class _Token(NamedTuple):
    kind: str    # "str", "int", "ident", "sym", "hash", "float", punctuation, "eof"
    value: object
    pos: int     # offset of the first character
    end: int     # offset after the last character


_PUNCT = "<>[]{}(),=:?-"


def _tokenize(text: str) -> list[_Token]:
    """Split ``text`` into MLIR-like tokens; whitespace and ``//`` comments
    are skipped."""
    tokens: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            i += 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif c == '"':
            value, j = _lex_string(text, i)
            tokens.append(_Token("str", value, i, j))
            i = j
        elif c == "@":
            if i + 1 < n and text[i + 1] == '"':
                value, j = _lex_string(text, i + 1)
            else:
                j = i + 1
                if j < n and (_is_ascii_alpha(text[j]) or text[j] == "_"):
                    while j < n and _is_ident_char(text[j]):
                        j += 1
                value = text[i + 1:j]
            if not value:
                raise _error(text, i, "expected a symbol name after '@'")
            tokens.append(_Token("sym", value, i, j))
            i = j
        elif c == "#":
            j = i + 1
            while j < n and _is_ident_char(text[j]):
                j += 1
            tokens.append(_Token("hash", text[i + 1:j], i, j))
            i = j
        elif "0" <= c <= "9":
            j = i + 1
            if c == "0" and j < n and text[j] == "x" and j + 1 < n and _is_hex(text[j + 1]):
                j += 1
                while j < n and _is_hex(text[j]):
                    j += 1
                tokens.append(_Token("int", int(text[i + 2:j], 16), i, j))
            else:
                while j < n and "0" <= text[j] <= "9":
                    j += 1
                if j < n and text[j] == ".":
                    j += 1
                    while j < n and (text[j].isdigit() or text[j] in "eE+-"):
                        j += 1
                    tokens.append(_Token("float", text[i:j], i, j))
                else:
                    tokens.append(_Token("int", int(text[i:j]), i, j))
            i = j
        elif _is_ascii_alpha(c) or c == "_":
            j = i + 1
            while j < n and _is_ident_char(text[j]):
                j += 1
            tokens.append(_Token("ident", text[i:j], i, j))
            i = j
        elif c in _PUNCT:
            tokens.append(_Token(c, c, i, i + 1))
            i += 1
        else:
            raise _error(text, i, f"unexpected character {c!r}")
    tokens.append(_Token("eof", None, n, n))
    return tokens


def _is_hex(c: str) -> bool:
    return c in "0123456789abcdefABCDEF"


def _lex_string(text: str, start: int) -> tuple[str, int]:
    """Lex an MLIR string literal at ``text[start] == '"'``.

    Escapes: ``\\"``, ``\\\\``, ``\\n``, ``\\t`` and ``\\XX`` (two hex digits,
    one byte).  Returns the decoded string and the offset after the quote.
    """
    out = bytearray()
    i, n = start + 1, len(text)
    while True:
        if i >= n or text[i] in "\n\r":
            raise _error(text, start, "unterminated string literal")
        c = text[i]
        if c == '"':
            return out.decode("utf-8", "surrogateescape"), i + 1
        if c == "\\":
            nxt = text[i + 1:i + 2]
            if nxt in ('"', "\\"):
                out += nxt.encode()
                i += 2
            elif nxt in ("n", "t"):
                out += b"\n" if nxt == "n" else b"\t"
                i += 2
            elif len(text) >= i + 3 and _is_hex(text[i + 1]) and _is_hex(text[i + 2]):
                out.append(int(text[i + 1:i + 3], 16))
                i += 3
            else:
                raise _error(text, i, "unknown escape in string literal")
        else:
            out += c.encode("utf-8", "surrogateescape")
            i += 1


def _error(text: str, pos: int, message: str) -> SdyError:
    """A parse error naming the 1-based column (and line if not the first)."""
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    where = f"line {line}, column {col}" if line > 1 else f"column {col}"
    snippet = " ".join(text.split())
    if len(snippet) > 80:
        snippet = snippet[:77] + "..."
    return SdyError(f"cannot parse '{snippet}' at {where}: {message}")


def _describe(tok: _Token, text: str) -> str:
    if tok.kind == "eof":
        return "end of input"
    return repr(text[tok.pos:tok.end])


class _Parser:
    """Recursive-descent parser over :func:`_tokenize` tokens."""

    def __init__(self, text: str):
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0

    # -- token helpers -----------------------------------------------------

    @property
    def tok(self) -> _Token:
        return self.tokens[self.i]

    def fail(self, message: str, tok: Optional[_Token] = None,
             got: bool = True) -> SdyError:
        """A parse error at ``tok`` (default: the current token)."""
        tok = tok or self.tok
        if got:
            message += f", got {_describe(tok, self.text)}"
        return _error(self.text, tok.pos, message)

    def accept(self, kind: str, value: object = None) -> Optional[_Token]:
        tok = self.tok
        if tok.kind == kind and (value is None or tok.value == value):
            self.i += 1
            return tok
        return None

    def expect(self, kind: str, what: Optional[str] = None) -> _Token:
        tok = self.accept(kind)
        if tok is None:
            raise self.fail(f"expected {what or repr(kind)}")
        return tok

    def expect_keyword(self, word: str) -> None:
        if self.accept("ident", word) is None:
            raise self.fail(f"expected '{word}'")

    def expect_end(self) -> None:
        if self.tok.kind != "eof":
            raise self.fail("expected end of input")

    def accept_prefix(self, name: str) -> bool:
        """Consume an optional ``#name`` prefix, which must be followed
        directly (no whitespace) by ``<``; True if it was present."""
        prefix = self.accept("hash", name)
        if prefix is None:
            if self.tok.kind == "hash":
                raise self.fail(f"expected '#{name}'")
            return False
        if self.tok.kind != "<" or self.tok.pos != prefix.end:
            raise self.fail(f"expected '<' right after '#{name}'")
        return True

    def integer(self, what: str) -> int:
        negative = self.accept("-") is not None
        tok = self.tok
        if tok.kind != "int":
            raise self.fail(f"expected an integer {what}")
        self.i += 1
        value = -tok.value if negative else tok.value
        if not -_INT64_MAX - 1 <= value <= _INT64_MAX:
            raise self.fail(f"integer {what} does not fit in 64 bits", tok)
        return value

    def comma_list(self, close: str, element, what: str) -> list:
        """``element (',' element)*`` up to ``close``; at least one element
        unless ``close`` comes first."""
        items = []
        if self.accept(close):
            return items
        while True:
            items.append(element())
            if self.accept(close):
                return items
            if not self.accept(","):
                raise self.fail(f"expected ',' or '{close}' in {what}")

    # -- grammar -----------------------------------------------------------

    def mesh_body(self) -> Mesh:
        """``<[ "x"=2, ... ] (, device_ids=[...])? >``; verified."""
        start = self.tok
        self.expect("<")
        self.expect("[")
        axes = self.comma_list("]", self.mesh_axis, "mesh axes")
        device_ids: list[int] = []
        if self.accept(","):
            self.expect_keyword("device_ids")
            self.expect("=")
            self.expect("[")
            device_ids.append(self.integer("device id"))
            while self.accept(","):
                device_ids.append(self.integer("device id"))
            self.expect("]", "',' or ']' in device ids")
        self.expect(">")
        mesh = Mesh(tuple(axes), tuple(device_ids))
        try:
            mesh.verify()
        except SdyError as e:
            raise _error(self.text, start.pos, e.message) from None
        return mesh

    def mesh_axis(self) -> MeshAxis:
        name = self.expect("str", "a quoted axis name").value
        self.expect("=")
        return MeshAxis(name, self.integer("axis size"))

    def axis_ref(self) -> AxisRef:
        """``"x"`` or ``"x":(pre)size``."""
        name = self.expect("str", "a quoted axis name").value
        if not self.accept(":"):
            return AxisRef(name)
        self.expect("(")
        pre = self.integer("sub-axis pre-size")
        self.expect(")")
        return AxisRef(name, pre, self.integer("sub-axis size"))

    def dim_sharding(self) -> DimSharding:
        """``{axes (, ?)?}`` then an optional ``p<N>`` priority."""
        self.expect("{")
        axes: list[AxisRef] = []
        is_closed = True
        while not self.accept("}"):
            if axes and not self.accept(","):
                raise self.fail("expected ',' or '}' in dimension sharding")
            if self.accept("?"):
                is_closed = False
                self.expect("}", "'}' after '?'")
                break
            axes.append(self.axis_ref())
        priority = None
        tok = self.accept("ident")
        if tok is not None:
            word = tok.value
            digits = word[1:]
            if len(word) < 2 or word[0] != "p" or not digits.isdigit():
                raise self.fail("expected a priority 'p<number>'", tok)
            if len(digits) > 1 and digits[0] == "0":
                raise self.fail("priorities with leading zeros are not allowed", tok)
            priority = int(digits)
            if priority > _INT64_MAX:
                raise self.fail("priority does not fit in 64 bits", tok)
        return DimSharding(tuple(axes), is_closed, priority)

    def axis_list(self, what: str) -> tuple[AxisRef, ...]:
        """``{ref (, ref)*}`` with at least one ref."""
        self.expect("{")
        refs = [self.axis_ref()]
        while self.accept(","):
            refs.append(self.axis_ref())
        self.expect("}", f"',' or '}}' in {what} axes")
        return tuple(refs)

    def sharding_body(self) -> TensorSharding:
        """``<mesh-or-ref, [dims] (, replicated={..})? (, unreduced={..})?>``."""
        self.expect("<")
        mesh: MeshOrName
        if self.accept("ident", "mesh"):
            mesh = self.mesh_body()
        elif self.tok.kind == "sym":
            mesh = self.expect("sym").value
        else:
            raise self.fail("expected a mesh symbol '@name' or an inlined 'mesh<...>'")
        self.expect(",")
        self.expect("[")
        dims = self.comma_list("]", self.dim_sharding, "dimension shardings")
        lists: dict[str, tuple[AxisRef, ...]] = {}
        while self.accept(","):
            tok = self.tok
            if tok.kind != "ident" or tok.value not in ("replicated", "unreduced"):
                raise self.fail("expected 'replicated' or 'unreduced'")
            if tok.value in lists:
                raise self.fail(f"{tok.value} axes given twice", got=False)
            self.i += 1
            self.expect("=")
            if tok.value == "unreduced" and self.tok.kind == "ident":
                raise self.fail("reduction kinds on unreduced axes are not supported")
            lists[tok.value] = self.axis_list(tok.value)
        self.expect(">", "',' or '>' after dimension shardings")
        return TensorSharding(mesh, tuple(dims), lists.get("replicated", ()),
                              lists.get("unreduced", ()))

    def tensor_sharding(self) -> TensorSharding:
        """A sharding with or without the ``#sdy.sharding`` prefix."""
        self.accept_prefix("sdy.sharding")
        return self.sharding_body()


@functools.lru_cache(maxsize=1 << 16)
def _parse_whole(text: str, rule: str):
    """``text`` parsed by ``rule`` to its end; results are immutable, so equal texts
    share one parse (a module repeats few distinct shardings many times)."""
    parser = _Parser(text)
    result = getattr(parser, rule)()
    parser.expect_end()
    return result


def parse_axis_ref(text: str) -> AxisRef:
    """Parse ``"x"`` or ``"x":(2)4``."""
    return _parse_whole(text, "axis_ref")


def parse_tensor_sharding(text: str) -> TensorSharding:
    """Parse ``#sdy.sharding<...>`` or the bare ``<...>`` form (not verified)."""
    return _parse_whole(text, "tensor_sharding")
