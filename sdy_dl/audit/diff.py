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

    * ``sig``: value -> its signature, every value in module order (a value is a
      ``ValueTable`` key, or a function result's name such as ``result:0``);
    * ``groups``: signature -> its values in module order, reshards' results
      left out (made when first asked for; :meth:`group`: one signature's;
      ``first``: signature -> its first value);
    * ``reshards``: [(value, its operand's signature)] in module order;
    * :meth:`site`: where a value's sharding is stored, read by :meth:`text`;
    * :meth:`values_on`: the values stored on an op (by its number, the
      table's pre-order); :meth:`op_number`: the op a value is stored on;
    * ``last_use``: value -> the number of the last op using it (none: unused);
    * ``top_level``: the numbers of the module's top-level ops (functions, meshes);
    * ``name(value)``: a value's name, read only for the values asked for
      (qualifying a name that sibling regions share reads the printed module's
      lines).

    A signature is a number: the place of its parts in ``ids`` (parts ->
    number), which the signatures of the modules compared share: equal parts,
    equal numbers.  An op's own signature's parts are its name, the texts of
    its attributes besides :data:`SHARDING_ATTRS`, the signature of the region
    it is in and its operands' signatures; its first result's signature is its
    own, result ``i``'s the place of (own, ``i``).

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
        self.sig: dict = {}
        self.first: dict[int, object] = {}
        self._more: dict[int, list] = {}   # signature -> its values after the first
        self.reshards: list[tuple] = []
        self.twins: dict[int, int] = {}
        self.like = like
        self.last_use: dict = {}
        self.top_level: list[int] = []
        #: an op's number -> its attributes in :data:`SHARDING_ATTRS`, as sorted
        #: (name, attribute) pairs (ops other than functions and reshards;
        #: :func:`stored_in` reads a result's sharding there)
        self.stored: dict[int, tuple] = {}
        #: an op's number -> its own signature (functions and ops but reshards;
        #: ``by_own`` reads it)
        self.own: dict[int, int] = {}
        self._functions: dict[int, tuple] = {}   # a function's number -> its attributes
        #: the sites of the values not op results: value -> (raw op, number, kind,
        #: the op's number)
        self._sites: dict = {}
        self._on: dict[int, list] = {}   # op number -> the values of ``_sites`` on it
        self._texts: dict = {}
        self.ids = ids = like.ids if like is not None else ids if ids is not None else {}
        key_of = table.keys.__getitem__
        sig, first, twins, own_of, more = self.sig, self.first, self.twins, self.own, self._more
        region_sig: dict = {}             # op number -> its own signature (for nested values)
        sites, on, last_use, stored = self._sites, self._on, self.last_use, self.stored
        known = like.by_own if like is not None else None
        new_id, sig_of, top_level = ids.setdefault, sig.__getitem__, self.top_level

        def add(key: int, value, n: int, mop, index: int, kind: str) -> None:
            sig[value] = key
            if first.setdefault(key, value) is not value:
                more.setdefault(key, []).append(value)
            sites[value] = (mop, index, kind, n)
            on.setdefault(n, []).append(value)

        def twin(n: int, own: int, shardings: tuple) -> None:
            for m, theirs in known.get(own, ()):
                if theirs == shardings:
                    twins[n] = m
                    break

        # (each op's function, parent, results and blocks are the table's, read by
        # number: only operands and attributes are read through the bindings)
        op_names, functions_at, parents = table.op_names, table.functions_at, table.parents
        counts, blocks_of = table.result_counts, table.blocks
        for n, mop in enumerate(table.ops):
            func = functions_at[n]
            if func is mop:   # a function (top-level ops are functions and meshes)
                top_level.append(n)
                fname = symbol_name(mop)
                region_sig[n] = own = own_of[n] = new_id(("func", fname), len(ids))
                attributes = self._functions[n] = _attributes(mop, True)   # (types too)
                if known:
                    twin(n, own, attributes)
                body = blocks_of.get(n, ())
                args = body[0][2] if body and body[0][:2] == (0, 0) else ()
                for i, k in enumerate(args):
                    add(new_id(("arg", fname, i), len(ids)), k, n, mop, i, "arg")
                prefix = "" if mop == table.main else f"@{fname}:"
                for i in range(len(mop.attributes["function_type"].value.results)):
                    add(new_id(("result", fname, i), len(ids)), f"{prefix}result:{i}",
                        n, mop, i, "result")
                continue
            if func is None:
                top_level.append(n)
                continue   # a top-level op other than a function (a mesh)
            used = list(map(key_of, mop.operands))
            for k in used:
                last_use[k] = n
            name = op_names[n]
            if name == "sdy.reshard":
                k = (f"o{n}", 0)
                sig[k] = operand = sig.get(used[0], "?")
                self.reshards.append((k, operand))
                continue
            attributes = mop.attributes
            aligned, shardings = _split(attributes) if len(attributes) else ((), ())
            parent = region_sig.get(parents[n], "")
            try:
                own = new_id((name, aligned, parent, *map(sig_of, used)), len(ids))
            except KeyError:   # (an operand defined after its use)
                own = new_id((name, aligned, parent, *[sig.get(k, "?") for k in used]),
                             len(ids))
            own_of[n] = own
            stored[n] = shardings
            if known:
                twin(n, own, shardings)
            count = counts[n]
            if count:
                tag = f"o{n}"
                k = (tag, 0)
                sig[k] = own
                if first.setdefault(own, k) is not k:
                    more.setdefault(own, []).append(k)
                for i in range(1, count):
                    k = (tag, i)
                    s = sig[k] = new_id((own, i), len(ids))
                    if first.setdefault(s, k) is not k:
                        more.setdefault(s, []).append(k)
            blocks = blocks_of.get(n)
            if blocks is not None:   # (the ops nested in it read its signature)
                region_sig[n] = own
                for ri, bi, args in blocks:
                    for i, k in enumerate(args):
                        add(new_id((own, ri, bi, i), len(ids)), k, n, mop, i, "arg")

    @functools.cached_property
    def groups(self) -> dict[int, list]:
        """Signature -> its values in module order (reshards' results left out)."""
        return {s: self.group(s) for s in self.first}

    def group(self, s: int) -> list:
        """The values of signature ``s`` in module order (none: no value but a
        reshard's result has it)."""
        first = self.first.get(s)
        return [] if first is None else [first, *self._more.get(s, ())]

    @functools.cached_property
    def by_own(self) -> dict[int, list]:
        """An op's own signature -> [(its number, its sharding attributes)] (a
        function's: all its attributes), in module order: what the signatures made
        ``like`` these read."""
        out: dict[int, list] = {}
        stored, functions = self.stored, self._functions
        for n, own in self.own.items():
            out.setdefault(own, []).append((n, stored[n] if n in stored else functions[n]))
        return out

    @functools.cached_property
    def count(self) -> int:
        """How many values the diff pairs (every value but reshards' results)."""
        return len(self.sig) - len(self.reshards)

    def paired(self, value) -> bool:
        """Whether the diff pairs ``value`` (a value but a reshard's result)."""
        if isinstance(value, str):
            return value in self._sites
        return value in self.sig and self.table.op_names[self.op_number(value)] != "sdy.reshard"

    def op_number(self, value) -> int:
        """The number of the op ``value`` is stored on (a function result's: its
        function's; a block argument's: its region op's)."""
        site = self._sites.get(value)
        return site[3] if site is not None else int(value[0][1:])

    def site(self, value) -> tuple:
        """(raw op, number, kind) where ``value``'s sharding is stored (kind: ``arg``
        a block argument, ``op`` a result, ``result`` a function result)."""
        site = self._sites.get(value)
        if site is not None:
            return site[:3]
        return self.table.ops[int(value[0][1:])], value[1], "op"

    def values_on(self, n: int) -> list:
        """The values stored on op ``n`` in module order: a function's arguments and
        results, another op's results and its blocks' arguments (none: an op not
        in a function)."""
        table = self.table
        if table.functions_at[n] is None:
            return []
        tag = f"o{n}"
        return [(tag, i) for i in range(table.result_counts[n])] + self._on.get(n, [])

    def order(self, value) -> tuple:
        """Where paired ``value`` comes in the order the diff pairs values in: by
        signature, each signature where its first value is, then module order (the
        order ``groups`` lists them in, read for this value only)."""
        first = value if isinstance(value, str) else self.first[self.sig[value]]
        return _place(first, self), _place(value, self)

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
        s = stored_at(*self.site(value))
        text = self._texts[value] = None if s is None else sharding_text(s)
        return text


def _place(value, signatures: Signatures) -> tuple:
    """``value``'s place in module order, as :class:`Signatures` adds values: (its op's
    number, then 0 for a result, 1 for a block argument (its key's numbers grow
    block by block), 2 for a function result, then its number there)."""
    if isinstance(value, str):
        return signatures.op_number(value), 2, int(value.rsplit(":", 1)[1])
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
    both = _split(attributes) if len(attributes) else ((), ())
    return both if aligned else both[1]


def _split(attributes) -> tuple:
    """(:func:`aligned_attrs`, the attributes in :data:`SHARDING_ATTRS`) of an op's
    attributes (``Operation.attributes``, not empty)."""
    texts = _ATTRIBUTE_TEXTS
    out, shardings = [], []
    for name, attr in attributes.items():
        if name in SHARDING_ATTRS:
            shardings.append((name, attr))
        else:
            text = texts.get(attr)
            if text is None:
                text = texts[attr] = str(attr)
            out.append((name, text))
    if len(out) > 1:
        out.sort()
    if len(shardings) > 1:
        shardings.sort(key=_first)
    return tuple(out), tuple(shardings)


def _first(pair: tuple):
    return pair[0]


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
    """The sharding stored at a site (:meth:`Signatures.site`; None: none)."""
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

        def stored_alike(va, vb) -> bool:
            return twins.get(sb.op_number(vb), -1) == sa.op_number(va) \
                and sa.site(va)[1:] == sb.site(vb)[1:]

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
