"""Two output modules that differ only in shardings, and the values whose shardings differ.

A what-if edits annotations only, so its output is usually the first output
with other shardings: the same ops, operands, types, regions and names.  When
that is proven, the two modules' values pair up one to one by their place, and
what changed is read at the few ops whose attributes differ, not by comparing
every value (:mod:`sdy_dl.audit.diff` aligns by signatures in general).

The proof (:func:`sharding_changes`): the two modules' ops in pre-order have
the same names, and their printed texts are equal once every sharding in them
is masked (:func:`masked`; :func:`equal_when_masked` masks only the lines that
differ), so
their ops, operands, types, regions, value names and printed lines are the
same; the ops are paired in pre-order and compared attribute by attribute
(attributes are uniqued: a comparison is a pointer's); an op whose attributes
differ must have the same attributes besides those holding shardings and
rules (:data:`~sdy_dl.audit.diff.SHARDING_ATTRS`, what the diff's signatures
leave out), else there is no proof.  Without a proof the caller falls back to
the full comparison.  A what-if's output made by difference from the first
output (:mod:`sdy_dl.passes.export.by_difference`) is its own proof: a copy of
it with a few ops written, read only there (:func:`written_changes`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: A sharding attribute as printed (``#sdy.sharding<@mesh, [{"data"}, {}]>``, or
#: ``#sdy.sharding_per_value<[<@mesh, [...]>, ...]>``).
_ATTR = r"#sdy\.sharding(?:_per_value)?<(?:[^<>]|<[^<>]*>)*>"

#: What :func:`masked` takes out: an ``sdy.sharding`` entry of an attribute dictionary
#: (with its separator, or the dictionary when it is the only entry), then any other
#: sharding as printed (``<@mesh, [...]>``: a constraint's, a computation's).
_MASKS = (re.compile(rf"(?: attributes)? \{{sdy\.sharding = {_ATTR}\}}|, sdy\.sharding = {_ATTR}"
                     rf"|sdy\.sharding = {_ATTR}, "),
          re.compile(r"<@[^<>]*>"))


def masked(text: str) -> str:
    """A printed module without its ``sdy.sharding`` attributes, every other sharding
    in it replaced by ``<@>``."""
    entries, shardings = _MASKS
    return shardings.sub("<@>", entries.sub("", text))


@dataclass
class ModuleShardingChanges:
    """What differs between two modules of the same structure (``a`` and ``b``), by
    the values of ``a``'s :class:`~sdy_dl.audit.diff.Signatures`."""

    ops: list[int]                         # the ops whose attributes differ (pre-order numbers)
    texts: dict = field(default_factory=dict)       # value -> (a's text, b's text), where they differ
    shardings: dict = field(default_factory=dict)   # value -> b's sharding, where the texts differ

    def b_text(self, sa, value) -> str | None:
        """``value``'s sharding text in ``b``."""
        found = self.texts.get(value)
        return found[1] if found is not None else sa.text(value)


def equal_when_masked(a: str, b: str) -> bool:
    """Whether two printed modules are equal once their shardings are masked
    (:func:`masked`), compared line by line (a sharding is printed on one line):
    only the lines that differ are masked."""
    if a == b:
        return True
    xs, ys = a.split("\n"), b.split("\n")
    return len(xs) == len(ys) and all(x == y or masked(x) == masked(y) for x, y in zip(xs, ys))


def sharding_changes(sa, a_text, b_module, b_text) -> ModuleShardingChanges | None:
    """The :class:`ModuleShardingChanges` from ``a`` (``sa``: its
    :class:`~sdy_dl.audit.diff.Signatures`; ``a_text``: it printed) to ``b_module``
    (printed ``b_text``), or None when they are not proven to differ in shardings
    only (see the module docstring).  ``a_text`` and ``b_text`` may be functions
    giving them: they are not called when the modules' ops in pre-order have other
    names."""
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.walk import walk_pre

    a_ops = sa.table.ops
    with mlir_context():
        b_ops = walk_pre(b_module.mlir.operation)[1:]
        if len(b_ops) != len(a_ops) or [op.name for op in b_ops] != sa.table.op_names:
            return None
    if not equal_when_masked(a_text() if callable(a_text) else a_text,
                             b_text() if callable(b_text) else b_text):
        return None
    with mlir_context():
        differ = {}
        for n, (x, y) in enumerate(zip(a_ops, b_ops)):
            xs, ys = x.attributes, y.attributes
            count = len(xs)
            if count != len(ys):
                differ[n] = y
                continue
            for i in range(count):
                p, q = xs[i], ys[i]
                if p.attr != q.attr or p.name != q.name:
                    differ[n] = y
                    break
        return changes_at(sa, differ)


def written_changes(sa, written: dict) -> ModuleShardingChanges | None:
    """The :class:`ModuleShardingChanges` from ``a`` (``sa``: its
    :class:`~sdy_dl.audit.diff.Signatures`) to a copy of ``a`` in which only the ops
    ``written`` (pre-order number -> raw op of the copy) may have other
    attributes (a what-if's output made by difference,
    :mod:`sdy_dl.passes.export.by_difference`): the proof is the copy, and only
    those ops are read; None when one of them has another name or attribute
    besides shardings and rules."""
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        return changes_at(sa, written)


def changes_at(sa, ops: dict) -> ModuleShardingChanges | None:
    """The :class:`ModuleShardingChanges` whose ops that may differ are ``ops`` (pre-order
    number -> raw op of ``b``), every other op being ``a``'s; None when one of them
    differs in more than shardings and rules."""
    from sdy_dl.audit.diff import aligned_attrs, sharding_text, stored_at

    a_ops = sa.table.ops
    changes = ModuleShardingChanges(sorted(ops))
    for n in changes.ops:
        x, y = a_ops[n], ops[n]
        if x.name != y.name or aligned_attrs(x) != aligned_attrs(y):
            return None
        same = _same_entries(x, y) if x.name == "func.func" else {}
        for value in sa.values_on(n):
            _, index, kind = sa.site(value)
            if index in same.get(kind, ()):
                continue
            s = stored_at(y, index, kind)
            text = None if s is None else sharding_text(s)
            if text != sa.text(value):
                changes.texts[value] = (sa.text(value), text)
                changes.shardings[value] = s
    return changes


def _same_entries(x, y) -> dict:
    """kind (``arg``, ``result``) -> the numbers of the arguments or results whose
    attribute dictionaries functions ``x`` and ``y`` share (attributes are uniqued:
    the same dictionary, the same sharding), which hold their shardings
    (:func:`~sdy_dl.audit.diff.stored_at`)."""
    from sdy_dl.ir.storage import func_attr_entries

    out = {}
    for kind, attr in (("arg", "arg_attrs"), ("result", "res_attrs")):
        a, b = func_attr_entries(x, attr), func_attr_entries(y, attr)
        if len(a) == len(b):
            out[kind] = {i for i, (p, q) in enumerate(zip(a, b)) if p == q}
    return out
