"""sdy attributes read and built through jaxlib's ``sdy`` bindings (§1.1–§1.5).

The one bridge between the MLIR attributes of a module and the frozen model
types of :mod:`sdy_dl.sharding`: every mesh, axis reference and sharding that
sdy-dl reads from a module is read field by field
(``TensorShardingAttr.dimension_shardings``, ``AxisRefAttr.sub_axis_info``,
``MeshAttr.device_ids``, ...) and every one it writes is built with the
attributes' ``get`` — no attribute text is printed or parsed on the way.
Attributes are uniqued in their context, so each distinct attribute is
converted once (the caches are keyed by the attribute, or by the model value).

Some attribute kinds have no binding of their own: ``#sdy<manual_axes{...}>``
and ``#sdy<axis_ref_list{...}>`` are read through the one that prints the same
braces, ``#sdy<dimension_sharding{...}>`` (:func:`axes_of_list`),
``#sdy<list_of_axis_ref_lists[...]>`` through a sharding's dim list
(:func:`axis_lists_of`), and the axes of any other (``all_to_all_param_list``)
the same way (:func:`axis_refs_in`), so names still reach Python decoded by
jaxlib.
"""

from __future__ import annotations

import functools
import re

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import sdy

from sdy_dl.ir.context import mlir_context
from sdy_dl.sharding import (AxisRef, DimSharding, Mesh, MeshAxis, TensorSharding, interned)

_CACHE = 1 << 16


# -- reading -------------------------------------------------------------------------


@functools.lru_cache(maxsize=_CACHE)
def mesh_of_attr(attr) -> Mesh:
    """A ``#sdy.mesh<...>`` attribute as a :class:`Mesh` (jaxlib verified it; a
    mesh the Datalog engines cannot hold raises SdyError)."""
    mesh = sdy.MeshAttr(attr)
    axes = tuple(MeshAxis(a.name, a.size) for a in map(sdy.MeshAxisAttr, mesh.axes))
    out = Mesh(axes, tuple(mesh.device_ids))
    out.check_engine_limits()
    return out


def _axis_ref(attr) -> AxisRef:
    ref = sdy.AxisRefAttr(attr)
    sub = ref.sub_axis_info
    if sub is None:
        return AxisRef(ref.name)
    sub = sdy.SubAxisInfoAttr(sub)
    return AxisRef(ref.name, sub.pre_size, sub.size)


@functools.lru_cache(maxsize=_CACHE)
def axis_ref_of_attr(attr) -> AxisRef:
    """An ``#sdy<axis_ref ...>`` attribute as an :class:`AxisRef`."""
    return _axis_ref(attr)


def _axes(attrs) -> tuple[AxisRef, ...]:
    return tuple(map(axis_ref_of_attr, attrs))


@functools.lru_cache(maxsize=_CACHE)
def _dim_of_attr(attr) -> DimSharding:
    dim = sdy.DimensionShardingAttr(attr)
    return DimSharding(_axes(dim.axes), dim.is_closed, dim.priority)


@functools.lru_cache(maxsize=_CACHE)
def sharding_of_attr(attr) -> TensorSharding:
    """A ``#sdy.sharding<...>`` attribute as a :class:`TensorSharding` (interned)."""
    s = sdy.TensorShardingAttr(attr)
    mesh = s.mesh_or_ref
    mesh = mesh.value if isinstance(mesh, ir.FlatSymbolRefAttr) else mesh_of_attr(mesh)
    return interned(TensorSharding(mesh, tuple(map(_dim_of_attr, s.dimension_shardings)),
                                   _axes(s.replicated_axes), _axes(s.unreduced_axes)))


@functools.lru_cache(maxsize=_CACHE)
def per_value_of_attr(attr) -> tuple[TensorSharding, ...]:
    """A ``#sdy.sharding_per_value<[...]>`` attribute as a tuple of shardings."""
    return tuple(map(sharding_of_attr, sdy.TensorShardingPerValueAttr(attr).shardings))


@functools.lru_cache(maxsize=_CACHE)
def axes_of_list(attr) -> tuple[AxisRef, ...]:
    """The axes of an attribute printed ``#sdy<KIND{"a", "b":(1)2}>`` with no
    binding of its own (``manual_axes``, ``axis_ref_list``): the braces are read
    as a closed ``#sdy<dimension_sharding{...}>``."""
    text = str(attr)
    braces = text[text.index("{"): text.rindex("}") + 1]
    return _dim_of_attr(ir.Attribute.parse("#sdy<dimension_sharding" + braces + ">",
                                           context=attr.context)).axes


@functools.lru_cache(maxsize=_CACHE)
def axis_lists_of(attr) -> tuple[tuple[AxisRef, ...], ...]:
    """The axis lists of a ``#sdy<list_of_axis_ref_lists[{...}, ...]>`` attribute,
    read as the dims of a sharding."""
    text = str(attr)
    dims = text[text.index("["): text.rindex("]") + 1]
    sharding = ir.Attribute.parse("#sdy.sharding<@m, " + dims + ">", context=attr.context)
    return tuple(dim.axes for dim in sharding_of_attr(sharding).dims)


#: An axis reference as printed: a quoted name, maybe a sub-axis.
_PRINTED_REF = re.compile(r'"(?:[^"\\]|\\.)*"(?::\(\d+\)\d+)?')


@functools.lru_cache(maxsize=_CACHE)
def axis_refs_in(attr) -> tuple[AxisRef, ...]:
    """Every axis reference an attribute prints, in order (for kinds with no
    binding of their own, such as ``#sdy<all_to_all_param_list[...]>``)."""
    refs = _PRINTED_REF.findall(str(attr))
    if not refs:
        return ()
    return _dim_of_attr(ir.Attribute.parse("#sdy<dimension_sharding{" + ", ".join(refs) + "}>",
                                           context=attr.context)).axes


# -- building ------------------------------------------------------------------------


@functools.lru_cache(maxsize=_CACHE)
def mesh_attr(mesh: Mesh):
    """The ``#sdy.mesh<...>`` attribute of ``mesh``."""
    ctx = mlir_context()
    return sdy.MeshAttr.get([sdy.MeshAxisAttr.get(a.name, a.size, context=ctx)
                             for a in mesh.axes], list(mesh.device_ids), context=ctx)


@functools.lru_cache(maxsize=_CACHE)
def axis_ref_attr(ref: AxisRef):
    """The ``#sdy<axis_ref ...>`` attribute of ``ref``."""
    ctx = mlir_context()
    sub = (None if ref.size is None
           else sdy.SubAxisInfoAttr.get(ref.pre, ref.size, context=ctx))
    return sdy.AxisRefAttr.get(ref.name, sub, context=ctx)


def _axis_attrs(axes) -> list:
    return [axis_ref_attr(a) for a in axes]


@functools.lru_cache(maxsize=_CACHE)
def _dim_attr(dim: DimSharding):
    return sdy.DimensionShardingAttr.get(_axis_attrs(dim.axes), dim.is_closed, dim.priority,
                                         context=mlir_context())


@functools.lru_cache(maxsize=_CACHE)
def sharding_attr(sharding: TensorSharding):
    """The ``#sdy.sharding<...>`` attribute of ``sharding``."""
    mesh = sharding.mesh
    return sdy.TensorShardingAttr.get(
        mesh if isinstance(mesh, str) else mesh_attr(mesh),
        [_dim_attr(d) for d in sharding.dims], _axis_attrs(sharding.replicated),
        _axis_attrs(sharding.unreduced), context=mlir_context())


@functools.lru_cache(maxsize=_CACHE)
def per_value_attr(shardings: tuple[TensorSharding, ...]):
    """The ``#sdy.sharding_per_value<[...]>`` attribute of a tuple of shardings."""
    return sdy.TensorShardingPerValueAttr.get([sharding_attr(s) for s in shardings],
                                              context=mlir_context())


def axes_text(axes) -> str:
    """``{"a", "b":(1)2}``: the braces of ``axes`` as the attribute kinds with no
    binding of their own print them (``axis_ref_list``,
    ``list_of_axis_ref_lists``, ``all_to_all_param_list``)."""
    return "{" + ", ".join(a.to_text() for a in axes) + "}"


def axis_ref_list_attr(axes):
    """The ``#sdy<axis_ref_list{...}>`` attribute of ``axes`` (no binding: parsed
    from :func:`axes_text`)."""
    return ir.Attribute.parse("#sdy<axis_ref_list" + axes_text(axes) + ">",
                              context=mlir_context())


def axis_ref_lists_attr(lists):
    """The ``#sdy<list_of_axis_ref_lists[...]>`` attribute of one axis list per
    dim (no binding: parsed from :func:`axes_text`)."""
    return ir.Attribute.parse("#sdy<list_of_axis_ref_lists["
                              + ", ".join(axes_text(axes) for axes in lists) + "]>",
                              context=mlir_context())


def manual_axes_attr(names) -> object:
    """The ``#sdy<manual_axes{...}>`` attribute of axis names."""
    ctx = mlir_context()
    return sdy.ManualAxesAttr.get([ir.StringAttr.get(n, context=ctx) for n in names],
                                  context=ctx)
