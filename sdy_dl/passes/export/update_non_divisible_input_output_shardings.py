"""``update-non-divisible-input-output-shardings`` (Shardy's
``sdy-update-non-divisible-input-output-shardings``, §9.3).

The argument and result shardings of every function, the result shardings
of every ``func.call`` and the edge-owner shardings of every
``manual_computation`` (its ``in_shardings`` seen without the manual axes,
against the local block-argument types, and its ``out_shardings``) are made
evenly sharded: a dim whose size is not divisible by its sharded size keeps
the longest prefix of axes that divides it, where an axis that only partly
divides the rest becomes its sub-axis of gcd size and ends the dim (an axis
with gcd 1 ends it before).  A rewritten dim keeps its closed flag and loses
its priority; divisible dims are untouched.
"""

from __future__ import annotations

import math

from sdy_dl.ir.meshes import mesh_of, module_meshes
from sdy_dl.ir.mlir_ops import func_arg_types, func_result_types, funcs, tensor_info
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import ops_named
from sdy_dl.ir.storage import SHARDING_ATTR, read_per_value, update_func_shardings, write_per_value
from sdy_dl.ir.value_sharding import (block_arg_owners, get_block_arg_owner_shardings,
                                      get_result_owner_shardings, result_owners,
                                      set_block_arg_owner_shardings, set_result_owner_shardings)
from sdy_dl.passes import PassOptions, register
from sdy_dl.sharding import AxisRef, DimSharding, Mesh, TensorSharding


def evenly_sharded(s: TensorSharding, shape: tuple[int, ...], mesh: Mesh) -> TensorSharding:
    """Shardy's ``getEvenlySharded``."""
    dims = []
    for d, size in zip(s.dims, shape):
        if size % math.prod(a.ref_size(mesh) for a in d.axes) == 0:
            dims.append(d)
            continue
        remaining, axes = size, []
        for axis in d.axes:
            g = math.gcd(axis.ref_size(mesh), remaining)
            if g == 1:
                break
            if axis.ref_size(mesh) == g:
                axes.append(axis)
                remaining //= g
            else:
                axes.append(AxisRef(axis.name, axis.pre, g))
                break
        dims.append(DimSharding(tuple(axes), d.is_closed))
    return TensorSharding(s.mesh, tuple(dims), s.replicated, s.unreduced)


class _Updater:
    def __init__(self, module: Module):
        self.meshes = module_meshes(module)

    def even(self, s: TensorSharding | None, type_) -> TensorSharding | None:
        _, shape = tensor_info(type_)
        if s is None or shape is None:
            return s
        mesh = mesh_of(s, self.meshes)
        return s if mesh is None else evenly_sharded(s, shape, mesh)

    def list(self, shardings: list, types: list) -> list | None:
        """The per-value form; None when there are no shardings."""
        if not shardings:
            return None
        return [self.even(s, t) for s, t in zip(shardings, types)]


@register("update-non-divisible-input-output-shardings",
          "Make function input/output shardings evenly divisible.")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        up = _Updater(module)
        for func in funcs(module):
            for kind, types in (("arg_attrs", func_arg_types(func)),
                                ("res_attrs", func_result_types(func))):
                update_func_shardings(func, kind, lambda i, s, types=types: (
                    up.even(s, types[i]) if tensor_info(types[i])[1] is not None else s))
        # Calls and manual computations are updated independently (each op
        # reads and writes only its own shardings), in one walk.
        for op in ops_named(module, ("func.call", "sdy.manual_computation")):
            if op.name == "func.call":
                new = up.list(read_per_value(op, SHARDING_ATTR) or [], [r.type for r in op.results])
                if new is not None:
                    write_per_value(op, SHARDING_ATTR, new)
            elif op.name == "sdy.manual_computation":
                new = up.list(get_block_arg_owner_shardings(op),
                              [a.type for a in block_arg_owners(op)])
                if new is not None:
                    set_block_arg_owner_shardings(op, new)
                new = up.list(get_result_owner_shardings(op), [r.type for r in result_owners(op)])
                if new is not None:
                    set_result_owner_shardings(op, new)
        return module.invalidate(ops_kept=True)
