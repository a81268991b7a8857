"""Two annotated modules compared value by value, aligned by dataflow.

Every value gets a *signature* from what computes it, not from where it is
printed: an op result is (op name, attributes other than shardings and
rules, result number, the signatures of its operands, the signature of the
region it is in); a function argument is (function, number); a block
argument is (its op's signature, region, number).  A ``sdy.reshard`` is
transparent (its result has its operand's signature), so a reshard one
module has and the other has not does not misalign the values after it; it
is reported on its own.  Values with equal signatures pair up in order.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

from sdy_dl.ir import Module
from sdy_dl.ir.mlir_ops import symbol_name
from sdy_dl.ir.storage import (per_value_of, read_func_attr, read_stored, results_attr,
                               sharding_of)

#: Attributes that hold shardings or rules (what a diff compares, not what it aligns by).
SHARDING_ATTRS = frozenset({"sdy.sharding", "sharding", "in_shardings", "out_shardings",
                            "sdy.sharding_rule", "arg_attrs", "res_attrs"})


@dataclass
class Difference:
    """One aligned value whose shardings differ, or a value only one module has."""

    kind: str                 # "different", "only in A", "only in B", "reshard in A", "reshard in B"
    a: str | None
    b: str | None
    a_sharding: str | None
    b_sharding: str | None

    def to_json(self) -> dict:
        return asdict(self)




class Signatures:
    """A module's values by signature, read straight from its MLIR by a
    :class:`~sdy_dl.audit.naming.ValueTable` (``table``: the module's, when one is
    at hand; its names are the values'):

    * ``groups``: signature -> its values in module order (a value is a
      ``ValueTable`` key, or a function result's name such as ``result:0``);
    * ``reshards``: [(value, its operand's signature)] in module order;
    * ``sites``: value -> (raw op, number, kind) where its sharding is stored
      (kind: ``arg`` a block argument, ``op`` a result, ``result`` a function
      result), read by :meth:`sharding`;
    * ``by_op``: op number (the table's pre-order) -> the values stored on it;
    * ``op_of``: value -> the number of the op it is stored on;
    * ``last_use``: value -> the number of the last op using it (none: unused);
    * ``top_level``: the numbers of the module's top-level ops (functions, meshes);
    * ``name(value)``: a value's name, read only for the values asked for
      (qualifying a name that sibling regions share reads the printed module's
      lines).

    A signature is a number: the place of its parts (op name, the texts of the
    attributes besides :data:`SHARDING_ATTRS`, operands' signatures, ...) in
    ``ids`` (parts -> number), which the signatures of the modules compared
    share: equal parts, equal numbers.

    ``like``: the signatures of another module this one is mostly equal to (a
    what-if's output and the first output), whose ``ids`` these share: an op
    with the signature of an op of ``like`` whose sharding attributes are the
    same attributes (uniqued: compared as objects) is that op's *twin*
    (``twins``: op number -> ``like``'s op number): the values stored on it
    have the twin's shardings."""

    def __init__(self, module: Module, table=None, like: "Signatures | None" = None,
                 ids: dict | None = None):
        from sdy_dl.audit.naming import ValueTable

        if table is None:
            table = ValueTable(module.mlir.operation, module.print)
        self.table = table
        self.groups: dict[int, list] = {}
        self.reshards: list[tuple] = []
        self.sites: dict = {}
        self.by_op: dict[int, list] = {}
        self.op_of: dict = {}
        self.twins: dict[int, int] = {}
        self.like = like
        self.last_use: dict = {}
        self.top_level: list[int] = []
        #: an op's number -> its attributes in :data:`SHARDING_ATTRS`, as sorted
        #: (name, attribute) pairs (ops other than functions and reshards;
        #: :func:`stored_in` reads a result's sharding there)
        self.stored: dict[int, tuple] = {}
        #: value key -> its signature; an op's own signature -> [(its number, its
        #: sharding attributes)] (what ``like`` reads)
        self.sig: dict[tuple, int] = {}
        self.by_own: dict[int, list] = {}
        self._texts: dict = {}
        self.ids = ids = like.ids if like is not None else ids if ids is not None else {}
        key_of = table.keys.__getitem__
        sig, by_own, twins = self.sig, self.by_own, self.twins
        region_sig: dict = {}             # op number -> its own signature (for nested values)
        groups, sites, op_of = self.groups, self.sites, self.op_of
        last_use, by_op, stored = self.last_use, self.by_op, self.stored
        known = like.by_own if like is not None else {}

        def add(key: int, value, n: int, mop, index: int, kind: str) -> None:
            groups.setdefault(key, []).append(value)
            sites[value] = (mop, index, kind)
            op_of[value] = n
            by_op.setdefault(n, []).append(value)

        def twin(n: int, own: int, shardings: tuple) -> None:
            for m, theirs in known.get(own, ()):
                if theirs == shardings:
                    twins[n] = m
                    break
            by_own.setdefault(own, []).append((n, shardings))

        # (each op's function, parent, results and blocks are the table's, read by
        # number: only operands and attributes are read through the bindings)
        op_names, functions_at, parents = table.op_names, table.functions_at, table.parents
        counts, blocks_of = table.result_counts, table.blocks
        for n, mop in enumerate(table.ops):
            func = functions_at[n]
            if func is mop or func is None:
                self.top_level.append(n)
            if func is mop and op_names[n] == "func.func":
                fname = symbol_name(mop)
                region_sig[n] = own = ids.setdefault(("func", fname), len(ids))
                twin(n, own, _attributes(mop, True))   # (its types are attributes too)
                body = blocks_of.get(n, ())
                args = body[0][2] if body and body[0][:2] == (0, 0) else ()
                for i, k in enumerate(args):
                    sig[k] = ids.setdefault(("arg", fname, i), len(ids))
                    add(sig[k], k, n, mop, i, "arg")
                prefix = "" if mop == table.main else f"@{fname}:"
                for i in range(len(mop.attributes["function_type"].value.results)):
                    add(ids.setdefault(("result", fname, i), len(ids)), f"{prefix}result:{i}",
                        n, mop, i, "result")
                continue
            if func is None:
                continue   # a top-level op other than a function (a mesh)
            parent = region_sig.get(parents[n], "")
            used = list(map(key_of, mop.operands))
            for k in used:
                last_use[k] = n
            operands = tuple([sig.get(k, "?") for k in used])
            name = op_names[n]
            tag = f"o{n}"
            if name == "sdy.reshard":
                k = (tag, 0)
                sig[k] = operands[0]
                self.reshards.append((k, operands[0]))
                sites[k] = (mop, 0, "op")
                op_of[k] = n
                by_op.setdefault(n, []).append(k)
                continue
            aligned, shardings = _attributes(mop, True)
            own = ids.setdefault((name, aligned, operands, parent), len(ids))
            twin(n, own, shardings)
            stored[n] = shardings
            count = counts[n]
            if count:
                values = by_op.setdefault(n, [])
                for i in range(count):
                    k = (tag, i)
                    s = sig[k] = ids.setdefault((own, i), len(ids))
                    groups.setdefault(s, []).append(k)
                    sites[k] = (mop, i, "op")
                    op_of[k] = n
                    values.append(k)
            blocks = blocks_of.get(n)
            if blocks is not None:   # (the ops nested in it read its signature)
                region_sig[n] = own
                for ri, bi, args in blocks:
                    for i, k in enumerate(args):
                        sig[k] = ids.setdefault((own, ri, bi, i), len(ids))
                        add(sig[k], k, n, mop, i, "arg")

    @functools.cached_property
    def count(self) -> int:
        """How many values the diff pairs (every value but reshards' results)."""
        return sum(map(len, self.groups.values()))

    def paired(self, value) -> bool:
        """Whether the diff pairs ``value`` (a value but a reshard's result)."""
        if isinstance(value, str):
            return value in self.op_of
        return value in self.sig and self.table.op_names[self.op_of[value]] != "sdy.reshard"

    def order(self, value) -> tuple:
        """Where paired ``value`` comes in the order the diff pairs values in: by
        signature, each signature where its first value is, then module order (the
        order ``groups`` lists them in, read for this value only)."""
        first = value if isinstance(value, str) else self.groups[self.sig[value]][0]
        return _place(first, self.op_of), _place(value, self.op_of)

    def name(self, value) -> str:
        """``value``'s name (a function result's is the value itself)."""
        if isinstance(value, str):
            return value
        ssa = self.table.names
        if value in ssa.pending:
            ssa.resolve()
        return ssa.names[value][0]

    def text(self, value) -> str | None:
        """The sharding stored for ``value``, as text (None: none)."""
        try:
            return self._texts[value]
        except KeyError:
            pass
        s = stored_at(*self.sites[value])
        text = self._texts[value] = None if s is None else sharding_text(s)
        return text


def _place(value, op_of: dict) -> tuple:
    """``value``'s place in module order, as :class:`Signatures` adds values: (its op's
    number, then 0 for a result, 1 for a block argument (its key's numbers grow
    block by block), 2 for a function result, then its number there)."""
    if isinstance(value, str):
        return op_of[value], 2, int(value.rsplit(":", 1)[1])
    tag, index = value
    if tag[0] == "o":
        return int(tag[1:]), 0, index
    n, k = tag[1:].split(".")
    return int(n), 1, int(k)


def aligned_attrs(mop) -> tuple:
    """The attributes of raw op ``mop`` that its signature holds (all but
    :data:`SHARDING_ATTRS`), as sorted (name, text) pairs."""
    return _attributes(mop, True)[0]


def _attributes(mop, aligned: bool = False):
    """Raw op ``mop``'s attributes in :data:`SHARDING_ATTRS`, as sorted (name,
    attribute) pairs; ``aligned``: (:func:`aligned_attrs`, those)."""
    attributes = mop.attributes
    if not len(attributes):
        return ((), ()) if aligned else ()
    texts = _ATTRIBUTE_TEXTS
    out, shardings = [], []
    for name, attr in attributes.items():
        if name in SHARDING_ATTRS:
            shardings.append((name, attr))
        elif aligned:
            text = texts.get(attr)
            if text is None:
                text = texts[attr] = str(attr)
            out.append((name, text))
    shardings = tuple(sorted(shardings, key=lambda x: x[0]))
    return (tuple(sorted(out)), shardings) if aligned else shardings


#: Attribute -> its text (attributes are uniqued and hash as the object they are:
#: many ops share one).  It lives as long as the process, on purpose: every module
#: is parsed in sdy-dl's one MLIR context (:func:`~sdy_dl.ir.context.mlir_context`,
#: itself process-wide), which keeps every attribute it uniqued until it ends, so
#: the table adds only each distinct attribute's text to what the context holds;
#: a key keeps its context alive, so no other attribute can be uniqued at its
#: place; and a what-if's modules repeat the first run's attributes, whose texts
#: the diffs and twins of every later run then take (a table per diff would print
#: them again).
_ATTRIBUTE_TEXTS: dict = {}


def stored_in(shardings: tuple, name: str, index: int):
    """The sharding stored for result ``index`` of an op named ``name`` (not a
    collective) whose attributes in :data:`SHARDING_ATTRS` are ``shardings``
    (:attr:`Signatures.stored`): what :func:`~sdy_dl.ir.storage.read_stored` reads
    there, without the bindings (None: none)."""
    if not shardings:
        return None
    wanted = results_attr(name)
    for attr_name, attr in shardings:
        if attr_name == wanted:
            if wanted == "sharding":
                return sharding_of(attr)
            entries = per_value_of(attr)
            return entries[index] if entries else None
    return None


def stored_at(mop, index: int, kind: str):
    """The sharding stored at a site of :attr:`Signatures.sites` (None: none)."""
    if kind == "result":
        return read_func_attr(mop, "res_attrs", index)
    return read_stored(mop, index, kind == "arg")


#: Sharding -> its text (shardings are interned and hashed once; many values share one).
_TEXTS: dict = {}


def sharding_text(sharding) -> str:
    """``sharding``'s text (``#sdy.sharding<...>``), made once per distinct sharding."""
    text = _TEXTS.get(sharding)
    if text is None:
        text = _TEXTS[sharding] = sharding.to_text()
    return text


def signatures(module: Module, table=None, like: Signatures | None = None,
               ids: dict | None = None) -> Signatures:
    """The :class:`Signatures` of ``module`` (``like``, ``ids``: see :class:`Signatures`)."""
    return Signatures(module, table, like, ids)


def diff_modules(a: Module, b: Module, signatures_a: Signatures | None = None, table_b=None,
                 signatures_b: Signatures | None = None) -> tuple[int, list[Difference]]:
    """(number of aligned values with equal shardings, the differences);
    ``signatures_a``, ``signatures_b``: :func:`signatures` of ``a`` and ``b`` when
    already known; ``table_b``: ``b``'s :class:`~sdy_dl.audit.naming.ValueTable`
    when one is at hand.  Two values stored at the same place of twin ops
    (``signatures_b.twins``, when made like ``signatures_a``) have the same
    sharding: their texts are not read."""
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        sa = signatures_a if signatures_a is not None else signatures(a)
        sb = signatures_b if signatures_b is not None else signatures(b, table_b, ids=sa.ids)
        if sb.ids is not sa.ids:
            raise ValueError("signatures compared must share their ids")
        twins = sb.twins if sb.like is sa else {}
        a_op, b_op = sa.op_of, sb.op_of
        a_sites, b_sites = sa.sites, sb.sites

        def stored_alike(va, vb) -> bool:
            return twins.get(b_op[vb], -1) == a_op[va] and a_sites[va][1:] == b_sites[vb][1:]

        equal, diffs = 0, []
        for key in list(sa.groups) + [k for k in sb.groups if k not in sa.groups]:
            same, found = pair_group(sa, sa.groups.get(key, []), sb, sb.groups.get(key, []),
                                     stored_alike if twins else None)
            equal += same
            diffs += found
        matched, more = match_reshards(sa, [(v, o, sa.text(v)) for v, o in sa.reshards],
                                       sb, [(v, o, sb.text(v)) for v, o in sb.reshards])
    return equal + matched, diffs + more


def pair_group(sa, xs: list, sb, ys: list, alike=None) -> tuple[int, list[Difference]]:
    """Pair the values of one signature in A (``xs``, named and read by ``sa``) and in
    B (``ys``, by ``sb``) in order: (how many pairs have equal shardings, the
    differences: the pairs that differ, then the values only in A, then those only
    in B).  ``alike(va, vb)``, when given: True for a pair known equal without
    reading its texts."""
    equal, diffs = 0, []
    for va, vb in zip(xs, ys):
        if alike is not None and alike(va, vb):
            equal += 1
            continue
        ta, tb = sa.text(va), sb.text(vb)
        if ta == tb:
            equal += 1
        else:
            diffs.append(Difference("different", sa.name(va), sb.name(vb), ta, tb))
    diffs += [Difference("only in A", sa.name(va), None, sa.text(va), None)
              for va in xs[len(ys):]]
    diffs += [Difference("only in B", None, sb.name(vb), None, sb.text(vb))
              for vb in ys[len(xs):]]
    return equal, diffs


def match_reshards(sa: Signatures, ra: list, sb: Signatures, rb: list) -> tuple[int, list]:
    """(how many reshards of A (``ra``: [(value, operand signature, text)]) a reshard
    of B (``rb``) matches, the differences of the others): each reshard of A
    takes the first one left of B with its operand signature and text."""
    matched, diffs = 0, []
    rest_b = list(rb)
    for value, operand, text in ra:
        match = next((r for r in rest_b if r[1] == operand and r[2] == text), None)
        if match is not None:
            rest_b.remove(match)
            matched += 1
        else:
            diffs.append(Difference("reshard in A", sa.name(value), None, text, None))
    diffs += [Difference("reshard in B", None, sb.name(value), None, text)
              for value, _, text in rest_b]
    return matched, diffs


def diff_edited(sa: Signatures, changes) -> tuple[int, list[Difference]]:
    """:func:`diff_modules` of ``a`` (``sa``: its signatures) and a module proven to be
    ``a`` with other shardings (``changes``: the
    :class:`~sdy_dl.audit.same_structure.ModuleShardingChanges` from ``a`` to it): every
    value pairs with itself, so the values that differ are those ``changes`` found,
    in the order the full comparison gives them, and a value keeps its name."""
    diffs = [Difference("different", sa.name(v), sa.name(v), *changes.texts[v])
             for v in sorted(filter(sa.paired, changes.texts), key=sa.order)]
    matched, more = match_reshards(sa, [(v, o, sa.text(v)) for v, o in sa.reshards],
                                   sa, [(v, o, changes.b_text(sa, v)) for v, o in sa.reshards])
    return sa.count - len(diffs) + matched, diffs + more
