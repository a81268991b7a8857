"""The manual axes around a value of the output: those of the manual computations it
is in, in its function or around the calls of it (a function called in a manual
computation's body computes on the local view).  No sharding of such a value may
use them (``memory``'s axes that could shard it), and no annotation holding only
them reaches it (``reasons``)."""

from __future__ import annotations


def manual_axes_around(value, of_funcs: dict) -> set[str]:
    """The manual axes of the manual computations ``value`` is inside (it is their
    body's local view: no sharding of it may use them), in its function or around
    the calls of it (``of_funcs``, :func:`manual_axes_of_funcs`)."""
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.mlir_ops import symbol_name

    with mlir_context():
        op = getattr(value.owner, "owner", None)   # a block argument: its block's op
        if op is None:
            op = value.owner.parent                 # an op result: the op around it
        axes, func = _manual_axes_in_func(op)
        return axes | of_funcs.get(symbol_name(func), set()) if func is not None else axes


def _manual_axes_in_func(op) -> tuple[set[str], object]:
    """The manual axes of the manual computations around ``op`` (itself included) up
    to its function, and that ``func.func`` (None: none)."""
    from sdy_dl.ir.manual_axes import manual_axes

    axes = set()
    while op is not None and (op := op.operation).name != "func.func":
        if op.name == "sdy.manual_computation":
            axes.update(manual_axes(op))
        op = op.parent
    return axes, op


def manual_axes_of_funcs(module) -> dict[str, set[str]]:
    """Function name -> the manual axes around its calls, through its callers (a
    function called in a manual computation's body computes on the local view)."""
    from sdy_dl.ir.mlir_ops import symbol_name
    from sdy_dl.ir.walk import key
    from sdy_dl.passes.call_graph import call_graph, callee_name

    order, calls = call_graph(module)
    axes: dict[str, set[str]] = {}
    for func in reversed(order):   # (callers before their callees)
        around = axes.get(symbol_name(func), set())
        for call in calls[key(func)]:
            axes.setdefault(callee_name(call), set()).update(
                around | _manual_axes_in_func(call)[0])
    return axes
