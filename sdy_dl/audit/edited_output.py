"""A what-if's output made by difference, read only where it differs from the first.

The export by difference (:mod:`sdy_dl.passes.export.by_difference`) makes a
what-if's output from a copy of the first output: it writes the shardings of
a few ops and, where the merger's groups of scalar broadcasts move, makes,
erases and redirects broadcasts of main's top-level block; it hands over what
it did (:class:`~sdy_dl.passes.export.by_difference.OutputEdits`).  Every other
op is the first output's.  So the diff against the first output
(:func:`~sdy_dl.audit.diff.diff_modules`) and the edited output's memory
totals follow from the first output's signatures and memory layouts and those
edits (:func:`edited_output`), without reading the rest of the edited output:

* **values and signatures**: the first's values less the erased broadcasts'
  results, plus the made broadcasts' (whose signatures are computed as
  :class:`~sdy_dl.audit.diff.Signatures` computes them: all their parts are
  the first's).  A redirected use reads a value of the signature it read
  before (checked), so no other value's signature changes, and a value keeps
  its place in its signature's group; a group that gains or loses a value is
  paired again in module order, as the full diff pairs it;
* **names**: a made or erased op renumbers the values of main printed after
  it (MLIR numbers a function's top-level results in order, one number per op
  whose results have no name of their own, and the values in its regions after
  them), so a numbered name of main (``%12``, ``%12#1``) moves by the made ops
  before its op less the erased ones (a nested value's: by all of them), and a
  made op's result takes the number of the next numbered top-level op, less
  the erased ops before that op, plus the made ops before it; names of their own
  (``%arg3``, ``%cst_2``) and the other functions' values keep the first's
  names.  The edited output's own ``AsmState`` names them only when a made or
  erased op has a name of its own or no numbered op follows a made one.
  Top-level results are numbered before nested values and nested values shift
  together, so a value whose name no other value printed in the first output
  prints a name of its own; a value whose name is qualified by its line (which
  made ops shift) is not named here: the diff or the totals that would name one
  are computed in full;
* **memory**: main's layout with the positions after a made or erased op
  shifted, the made ops' rows added and the erased ones' dropped, and the last
  use of every value whose users changed read again from its uses.

:func:`edited_output` is None (the caller computes in full) when a check fails.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right

BROADCAST = "stablehlo.broadcast_in_dim"


def edited_output(sa, edits, top) -> "EditedOutput | None":
    """The :class:`EditedOutput` of the what-if output ``top`` (raw
    ``builtin.module``), made from the first output (``sa``: its
    :class:`~sdy_dl.audit.diff.Signatures`) by ``edits``; None where not proven."""
    from sdy_dl.audit.same_structure import changes_at
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        changes = changes_at(sa, edits.written)
        if changes is None:
            return None
        out = EditedOutput(sa, edits, changes, top)
        return out if out.checked() else None


class EditedOutput:
    """The first output (``sa``) with ``edits``: the values whose shardings differ
    (``changes``, a :class:`~sdy_dl.audit.same_structure.ModuleShardingChanges`), the
    made values (keyed ``("made", k)``, ``k`` their place in ``edits.made``) and the
    erased ones."""

    def __init__(self, sa, edits, changes, top):
        from sdy_dl.ir.mlir_ops import symbol_name

        table = sa.table
        self.sa, self.edits, self.changes, self.top = sa, edits, changes, top
        self.shardings = changes.shardings
        self.main_number = next((n for n in sa.top_level if table.ops[n] == table.main), None)
        self.main_sig = sa.ids.get(("func", symbol_name(table.main)))
        self.erased = {(f"o{n}", 0) for n in edits.erased}
        self.made_sig: list = []       # each made value's signature
        self.made_text: list = []      # ... its sharding's text
        self._state = None             # the edited output's AsmState, if made
        self._numbered = None          # whether the made and erased ops are numbered
        self._places = None            # the made ops' places and the erased ones', if sorted

    def checked(self) -> bool:
        """Whether the edits are what the module docstring reads them as: broadcasts
        of main's top level made and erased, of signatures the first output has,
        and every redirected use reading a value of the signature it read."""
        from sdy_dl.audit.diff import aligned_attrs, sharding_text, stored_at

        sa, table, ids = self.sa, self.sa.table, self.sa.ids
        if self.main_number is None or self.main_sig is None:
            return False
        for n in self.edits.erased:
            if table.op_names[n] != BROADCAST or sa.values_on(n) != [(f"o{n}", 0)] \
                    or not self._top_level(table.ops[n]):
                return False
        for before, like, op in self.edits.made:
            if op.name != BROADCAST or table.op_names[like] != BROADCAST \
                    or len(op.results) != 1 or not self.main_number < before < len(table.ops) \
                    or not self._top_level(table.ops[before]):
                return False
            operand = sa.sig.get(table.keys.get(table.ops[like].operands[0]))
            aligned = aligned_attrs(op)
            sig = ids.get((BROADCAST, aligned, self.main_sig, operand))   # (its result's)
            if sig is None or sig not in sa.first:
                return False
            s = stored_at(op, 0, "op")
            self.made_sig.append(sig)
            self.made_text.append(None if s is None else sharding_text(s))
        for _, _, old, (kind, now) in self.edits.redirected:
            was = sa.sig.get((f"o{old}", 0))
            reads = self.made_sig[now] if kind == "made" else sa.sig.get((f"o{now}", 0))
            if was is None or was != reads:
                return False
        return True

    # -- the values of the edited output ------------------------------------------

    def text(self, value) -> str | None:
        """``value``'s sharding text in the edited output."""
        if isinstance(value, tuple) and value[0] == "made":
            return self.made_text[value[1]]
        return self.changes.b_text(self.sa, value)

    def name(self, value) -> str:
        """``value``'s name in the edited output (see the module docstring; raises
        :class:`Shared` for a value whose name the first output qualifies)."""
        sa, table = self.sa, self.sa.table
        if isinstance(value, str):
            return value   # a function result
        if value in table.names.shared:
            raise Shared
        if value[0] == "made":
            found = self._made_name(value[1])
            return found if found is not None else \
                self._printed_name(self.edits.made[value[1]][2].results[0])
        n = sa.op_number(value)
        if table.functions_at[n] != table.main:
            return sa.name(value)
        mop = table.ops[n]
        own = sa.name(value)
        number = _number(own)
        if number is None:
            return own   # ``%argN`` or a name its op gave it: numbered on their own
        if value[0].startswith("o") and self._top_level(mop):
            shift = self._shift(n)
        else:   # (main's nested values are numbered after its top-level results)
            shift = self._shift(None)
        if shift is None:   # (a made or erased op not numbered as the others)
            if not value[0].startswith("o"):
                raise Shared
            return self._printed_name(self.edits.ops[n].results[value[1]])
        return f"%{number[0] + shift}{number[1]}"

    def _printed_name(self, raw) -> str:
        """The raw value ``raw``'s name as the edited output's own ``AsmState`` prints
        it (made when first asked for: it walks the whole output)."""
        from sdy_dl.audit.naming import value_names
        from sdy_dl.ir.context import mlir_context

        with mlir_context():
            if self._state is None:
                from jaxlib.mlir import ir

                self._state = ir.AsmState(self.top)
            return value_names(raw, "", self._state, False)[0]

    def _top_level(self, mop) -> bool:
        """Whether raw op ``mop`` (of main) is in main's own block."""
        from sdy_dl.ir.walk import key

        with_parent = mop.parent
        return with_parent is not None and key(with_parent) == key(self.sa.table.main)

    def _edit_places(self) -> tuple[list, list]:
        """The numbers of the ops the made ops precede and the erased ops' own
        numbers, each sorted (made when first asked for)."""
        if self._places is None:
            self._places = (sorted(before for before, _, _ in self.edits.made),
                            sorted(self.edits.erased))
        return self._places

    def _moved(self, n: int | None) -> int:
        """How far main's op ``n`` moves in the edited output, in place and so in
        number: the made ops at or before it less the erased ops before it (``n``
        None: past every op of main: all made less all erased)."""
        made_at, erased_at = self._edit_places()
        if n is None:
            return len(made_at) - len(erased_at)
        return _moves_by(made_at, erased_at, n)

    def _erased_before(self, n: int) -> int:
        """How many erased ops come before main's op ``n``."""
        return bisect_left(self._edit_places()[1], n)

    def _shift(self, n: int | None) -> int | None:
        """How far the number MLIR gives main's top-level op ``n``'s results moves in
        the edited output (:meth:`_moved`; ``n`` None: a value nested in main,
        numbered after every top-level result).  None when a made or erased op's
        results are not numbered (a name of its own: it takes no number)."""
        if self._numbered is None:
            sa = self.sa
            self._numbered = (
                all(_number(sa.name((f"o{m}", 0))) is not None for m in self.edits.erased)
                and all(_number(sa.name((f"o{like}", 0))) is not None
                        for _, like, _ in self.edits.made))
        return self._moved(n) if self._numbered else None

    def _made_name(self, k: int) -> str | None:
        """The name of made op ``k``'s result: the number of the next numbered top-level
        op of main at or after its place in the first output, less the erased ops
        before that op, plus the ``k`` made ops before it (None: no such op, or one
        numbered otherwise)."""
        sa, table = self.sa, self.sa.table
        if self._shift(None) is None:
            return None
        before = self.edits.made[k][0]
        erased = set(self.edits.erased)
        for n in range(before, len(table.ops)):
            if table.functions_at[n] != table.main:
                return None   # (past main)
            mop = table.ops[n]
            if n in erased or not self._top_level(mop):
                continue
            values = [v for v in sa.values_on(n) if v[0] == f"o{n}"]
            if not values:
                continue
            if any(v in table.names.shared for v in values):
                return None
            numbers = {(_number(sa.name(v)) or (None,))[0] for v in values}
            if numbers == {None}:
                continue   # (names of their own)
            if len(numbers) != 1:
                return None
            # (the numbered ops before made op k: those before op n but the erased
            # ones, and the k made ones before it)
            return f"%{numbers.pop() + k - self._erased_before(n)}"
        return None

    def _group(self, sig) -> list:
        """The values of signature ``sig`` in the edited output, in module order."""
        sa = self.sa
        out = [v for v in sa.group(sig) if v not in self.erased]
        for k, (before, _, _) in reversed(list(enumerate(self.edits.made))):
            if self.made_sig[k] == sig:   # (before the made values after it, inserted already)
                at = next((i for i, v in enumerate(out) if v[0] == "made"
                           or sa.op_number(v) >= before), len(out))
                out.insert(at, ("made", k))
        return out

    # -- the diff -----------------------------------------------------------------

    def diff(self) -> tuple[int, list] | None:
        """:func:`~sdy_dl.audit.diff.diff_modules` of the first output and this one
        (None: it names a value :meth:`name` does not)."""
        try:
            return self._diff()
        except Shared:
            return None

    def _diff(self) -> tuple[int, list]:
        from sdy_dl.audit.diff import Difference, match_reshards, pair_group

        sa = self.sa
        touched = {sa.sig[v] for v in self.erased} | set(self.made_sig)
        entries, equal = [], sa.count
        for v, (ta, tb) in self.changes.texts.items():
            if sa.paired(v) and (isinstance(v, str) or sa.sig[v] not in touched):
                entries.append(((sa.order(v), 0), Difference("different", sa.name(v),
                                                             self.name(v), ta, tb)))
                equal -= 1
        for sig in touched:
            xs, ys = sa.group(sig), self._group(sig)
            start = sa.order(xs[0])
            same, found = pair_group(sa, xs, self, ys)
            equal += same - len(xs)
            entries += [((start, k + 1), d) for k, d in enumerate(found)]
        entries.sort(key=lambda e: e[0])
        matched, more = match_reshards(sa, [(v, o, sa.text(v)) for v, o in sa.reshards],
                                       self, [(v, o, self.text(v)) for v, o in sa.reshards])
        return equal + matched, [d for _, d in entries] + more

    # -- memory -------------------------------------------------------------------

    def functions(self, audit, layouts: list, totals: list) -> list | None:
        """The per-function memory rows of the edited output (``audit``: the first's
        :class:`~sdy_dl.audit.Audit`; ``layouts``: its memory layouts, ``totals``:
        their rows, which a function without a changed value keeps); None when a
        peak is at a value :meth:`name` does not name."""
        from sdy_dl.audit.memory import _Layout, functions_with_shardings

        def edit_main(x, rows):
            return _Layout(x.function, x.arguments, self._main(x.intermediates, rows),
                           x.results, names=self.name)
        try:
            return functions_with_shardings(audit, layouts, self.shardings, totals, edit_main)
        except Shared:
            return None

    def _main(self, intermediates: list, rows) -> list:
        """Main's layout entries (position, last use, value, type, row) in the edited
        output: positions shifted, made rows added, erased ones dropped, the last
        uses of the values whose users changed read again."""
        from sdy_dl.ir.storage import read_stored

        sa, table, edits = self.sa, self.sa.table, self.edits
        start = self.main_number
        made_at, erased_at = self._edit_places()

        def place(n: int) -> int:
            """Op ``n``'s position in the edited output's main."""
            return n - start - 1 + _moves_by(made_at, erased_at, n)

        def made_place(k: int) -> int:
            """Made op ``k``'s: before the op it precedes, after the ``k`` made before it."""
            before = edits.made[k][0]
            return before + k - self._erased_before(before) - start - 1

        # the uses that changed: (value, user) removed and added (users by place)
        removed, added = {}, {}
        keys = table.keys
        for k, (_, like, _) in enumerate(edits.made):
            added.setdefault(keys[table.ops[like].operands[0]], []).append(made_place(k))
        for n in edits.erased:
            removed.setdefault(keys[table.ops[n].operands[0]], []).append((n, 0))
        for user, operand, old, (kind, now) in edits.redirected:
            removed.setdefault((f"o{old}", 0), []).append((user, operand))
            added.setdefault(("made", now) if kind == "made" else (f"o{now}", 0),
                             []).append(place(user))
        last = {}
        for value in set(removed) | set(added):
            if value in self.erased:
                continue
            users = list(added.get(value, ()))
            if value[0] != "made":
                gone = removed.get(value, ())
                used = sa.last_use.get(value)
                if used is not None and all(n != used for n, _ in gone):
                    users.append(place(used))   # (its last user still is; places keep order)
                elif used is not None:
                    for use in table.places[value][1].uses:
                        n = table.number_of(use.owner)
                        if (n, use.operand_number) not in gone:
                            users.append(place(n))
            last[value] = max(users) if users else None
        # (an entry's op is main's op i + start + 1, and its end the place of its last
        # user, or i when it has none)
        entries = []
        gone = self.erased
        last_use = sa.last_use
        for i, end, value, value_type, r in intermediates:
            if value in gone:
                continue
            j = place(i + start + 1)
            if value in last:
                end = j if last[value] is None else max(j, last[value])
            else:
                used = end + start + 1 if end != i else last_use.get(value)
                end = j if used is None else max(j, place(used))
            entries.append((j, end, value, value_type, r))
        for k, (_, _, op) in enumerate(edits.made):
            value_type = op.results[0].type
            r = rows.row(None, value_type, read_stored(op, 0, False), BROADCAST, "main")
            if r is None:
                continue
            j, used = made_place(k), last.get(("made", k))
            entries.append((j, j if used is None else max(j, used), ("made", k), value_type, r))
        entries.sort(key=lambda e: e[0])
        return entries


def _moves_by(made_at: list, erased_at: list, n: int) -> int:
    """How far main's op ``n`` moves (:meth:`EditedOutput._moved`; ``made_at``,
    ``erased_at``: :meth:`EditedOutput._edit_places`)."""
    return bisect_right(made_at, n) - bisect_left(erased_at, n)


#: A name MLIR numbers (``%12``, ``%12#1``): the number, the result's suffix.
_NUMBERED = re.compile(r"^%(\d+)(#\d+)?$")


def _number(name: str) -> tuple[int, str] | None:
    """(number, ``#k`` or "") of a numbered name; None for a name of its own
    (``%arg3``, ``%cst_2``)."""
    found = _NUMBERED.match(name)
    return None if found is None else (int(found.group(1)), found.group(2) or "")


class Shared(Exception):
    """A value whose name the first output qualifies (:attr:`SsaNames.shared
    <sdy_dl.audit.naming.SsaNames.shared>`) was to be named."""
