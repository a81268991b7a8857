"""PartitionSpec text and sdy shardings, and the JAX line a what-if edit asks for.

JAX users write shardings as ``PartitionSpec`` (``P('data', None)``) and put
them in ``in_shardings`` or ``with_sharding_constraint``; the module JAX lowers
holds them as sdy shardings.  :func:`spec_to_sdy` reads the one as the other
(as JAX lowers it), :func:`sdy_to_spec` goes back where a ``P(...)`` can say
it, and :func:`edit_line` phrases an applied what-if edit as the change to
make in the JAX program.  Nothing here imports JAX.
"""

from __future__ import annotations

import ast

from sdy_dl.errors import SdyError
from sdy_dl.sharding import quote_string

_UNCONSTRAINED = object()


def _spec_entry(node) -> object:
    """One entry of a ``P(...)``: None, an axis name, a tuple of them, or UNCONSTRAINED."""
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, str)):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return tuple(e.value for e in node.elts)
    if isinstance(node, ast.Attribute) and node.attr == "UNCONSTRAINED":
        return _UNCONSTRAINED
    raise ValueError(ast.unparse(node))


def spec_to_sdy(text: str, rank: int, mesh: str) -> str:
    """``P('data', None)`` (or ``PartitionSpec(...)``) for a rank-``rank`` value, as the
    sdy sharding JAX lowers it to on mesh ``@mesh``: a named dim is closed on its
    axes, ``None`` closed and empty, ``P.UNCONSTRAINED`` open; missing trailing
    entries are ``None``."""
    try:
        call = ast.parse(text.strip(), mode="eval").body
        if not (isinstance(call, ast.Call) and not call.keywords
                and ast.unparse(call.func) in ("P", "PartitionSpec", "jax.sharding.PartitionSpec")):
            raise ValueError(text)
        entries = [_spec_entry(a) for a in call.args]
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        why = "nested too deeply" if isinstance(e, (RecursionError, MemoryError)) else e
        raise SdyError(f"cannot read {text!r} as a PartitionSpec (entries: 'axis', None, "
                       f"('a', 'b'), P.UNCONSTRAINED): {why}") from None
    if len(entries) > rank:
        raise SdyError(f"{text} has {len(entries)} entries but the value has rank {rank}")
    dims = []
    for entry in entries + [None] * (rank - len(entries)):
        if entry is _UNCONSTRAINED:
            dims.append("{?}")
        elif entry is None:
            dims.append("{}")
        else:
            names = (entry,) if isinstance(entry, str) else entry
            dims.append("{" + ", ".join(quote_string(n) for n in names) + "}")
    return f"<@{mesh}, [{', '.join(dims)}]>"


def sdy_to_spec(text: str) -> str | None:
    """The ``P(...)`` JAX lowers to the sdy sharding ``text`` (None: none does, e.g.
    sub-axes, priorities, open dims with axes, replicated or unreduced axes)."""
    from sdy_dl.sharding import parse_tensor_sharding

    s = parse_tensor_sharding(text)
    if s.replicated or s.unreduced:
        return None
    entries = []
    for d in s.dims:
        if d.priority is not None or any(a.is_sub_axis for a in d.axes):
            return None
        if not d.is_closed:
            if d.axes:
                return None
            entries.append("P.UNCONSTRAINED")
        elif not d.axes:
            entries.append("None")
        elif len(d.axes) == 1:
            entries.append(repr(d.axes[0].name))
        else:
            entries.append("(" + ", ".join(repr(a.name) for a in d.axes) + ")")
    return f"P({', '.join(entries)})"


def _named(text: str | None) -> str:
    if text is None:
        return "None"
    spec = sdy_to_spec(text)
    return f"NamedSharding(mesh, {spec})" if spec else f"(no PartitionSpec says {text})"


def edit_line(applied) -> str | None:
    """The change to make in the JAX program for a what-if edit
    (:class:`sdy_dl.audit.whatif.Applied`), when the module says where: an argument
    path (``in_shardings``), a main result (``out_shardings``) or a Python source
    line (``with_sharding_constraint``)."""
    edit, source = applied.edit, applied.source
    if applied.place == "arg" and source.startswith("argument "):
        return f"in_shardings entry for {source[len('argument '):]}: {_named(applied.after)}"
    if applied.place == "result":   # (JAX's name of the result, if it has one)
        return (None if source.startswith("main result ") else
                f"out_shardings entry for {source}: {_named(applied.after)}")
    if not source.startswith("python "):
        return None
    at = source[len("python "):]
    constraint = applied.op_name == "sdy.sharding_constraint"
    if edit.kind == "drop":
        return f"at {at}: remove the jax.lax.with_sharding_constraint"
    if edit.kind == "set":
        what = "the jax.lax.with_sharding_constraint there becomes" if constraint else \
            f"constrain the result of {applied.op_name}:"
        return f"at {at}: {what} jax.lax.with_sharding_constraint(x, {_named(applied.after)})"
    return None
