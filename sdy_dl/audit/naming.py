"""Names of values as the printed modules show them, across the whole pipeline.

**Every value of the output module has exactly one name** — op results, block
arguments and function results in any region of any function, the reshards
and collectives the export passes create — and every command (``explain``,
``conflicts``, ``report``, ``diff``, ``--format json``) and the Python API print
and accept that name:

* ``%29`` as the output prints it, when no other value of its function prints
  so (``@func:%29`` outside main; ``%3#1`` for a result of a multi-result op);
* ``%29@L16`` when several values print as ``%29`` (MLIR's printer reuses
  numbers in sibling regions: a while's ``cond`` and ``do``, two loops, a
  case's branches): qualified by the output line defining it (a block
  argument: its region op's line), and a block argument of one of an op's
  several regions says which, ``%iterArg@L5:do`` (``cond``/``do`` for a
  while, ``r0``, ``r1``, ... otherwise).  The lines are those of the output
  as printed, so the name is the same on every run;
* aliases are accepted too: ``arg:N`` and ``result:N`` (``@func:arg:N``,
  ``@func:result:N``), JAX's argument paths and result names (``params[0]``),
  a bare ``29`` or ``arg0``, and ``%29@16`` for ``%29@L16``.

To get a name: :attr:`OutputValue.name` (``Audit.outputs.values`` lists every
value in module order; ``OutputIndex.name_of(mlir_value)`` names an MLIR value
of the output module; :attr:`OutputValue.line` is its output line).  To
resolve one: ``OutputIndex.find(name)`` (``Audit.value(name)``): a name that
is unknown, or that several values print (``%29`` above), or that reads as
several values' names (JAX's argument path ``arg0`` of one value, the bare
``arg0`` of ``%arg0``; a JAX result name that is another result's
``result:N``), is an :class:`~sdy_dl.errors.SdyError` of one line listing the
candidates with their op and output line — a value is never picked silently.

Values of the input module (annotations, values the pipeline erased) are
named as the input prints them and always shown with their input place.

How values are followed through the pipeline: the pipeline edits one MLIR
module in place (the import passes add edges, clone called functions and
turn calls into named computations; the export passes remove the edges, turn
named computations back into calls, replace constraints by reshards and
merge constants).  Every op and block argument gets a *tag*: a name location
wrapped around its location (never printed, as the output module is printed
without locations).  Passes copy locations when they replace or move ops, so
a tag survives wherever Shardy's passes keep the op's identity.

* ``in:`` tags are set on the module as read (:class:`InputIndex`): the names
  and annotations of the input module.
* ``px:`` tags are set right before propagation (:class:`PropagationIndex`):
  the values the provenance tracer sees, with their tracer keys (the
  sharding slot: a data-flow edge's owner and targets share the edge's).
* :class:`OutputIndex` reads the ``px:`` tags of the printed module: every
  output value's names, its printed sharding and its tracer key.
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass, field

from sdy_dl.errors import SdyError
from sdy_dl.ir import Module, Value
from sdy_dl.ir.mlir_ops import main_of, symbol_name
from sdy_dl.ir.walk import BLOCK, OP, key as pointer_of, walk_numbered
from sdy_dl.sharding import TensorSharding

#: The tags of each prefix in a printed location.
_TAG_RES = {prefix: re.compile(rf'loc\("sdy-dl\.{prefix}:([ao]\d+(?:\.\d+)?)"')
            for prefix in ("in", "px")}

#: Op renames the export passes make while keeping the op's location (and tag).
EXPORT_RENAMES = {("sdy.named_computation", "func.call"),
                  ("sdy.sharding_constraint", "sdy.reshard")}
#: Op renames the import passes make while keeping the op's location (and tag): a
#: call propagates as a named computation.
IMPORT_RENAMES = {("func.call", "sdy.named_computation")}


def tags(loc, prefix: str) -> list[str]:
    """The ``prefix`` tags of a location, outermost first."""
    return _TAG_RES[prefix].findall(str(loc))


def first_tag(loc, prefix: str) -> str | None:
    """The outermost ``prefix`` tag of a location (:func:`tags`' first; None: none),
    found without reading the rest of its text."""
    found = _TAG_RES[prefix].search(str(loc))
    return found.group(1) if found is not None else None


def _tag_all(module: Module, prefix: str, ops: list | None = None) -> dict[int, str]:
    """Tag every op (``PREFIX:oN``) and block argument (``PREFIX:aN``) of ``module``;
    the tag of each location made, by the location's pointer (locations are
    uniqued and never freed: a value whose location is still the one made here
    has that tag, without printing the location).  ``ops``: a list given each
    op's (tag, name, location before tagging), in module order."""
    from jaxlib.mlir import ir

    name = ir.Location.name
    made = {}
    for op in module.ops:
        tag = f"o{op.oid}"
        old = op.mlir.location
        op.mlir.location = loc = name(f"sdy-dl.{prefix}:{tag}", old)
        made[pointer_of(loc)] = tag
        op.location_changed()
        if ops is not None:
            ops.append((tag, op.name, old))
    for v in module.values:
        if v.is_block_arg:
            tag = f"a{v.vid}"
            v.mlir.set_location(loc := name(f"sdy-dl.{prefix}:{tag}", v.mlir.location))
            made[pointer_of(loc)] = tag
    return made


def place_in(loc) -> str:
    """Where an op whose location is ``loc`` (or prints as it) comes from, saying
    whose line it is: ``python FILE.py:LINE`` (JAX debug info), ``input line
    LINE`` (a line of the module read, where its parser located the op),
    ``location FILE:LINE`` (a foreign location the module's text gives, see
    :mod:`~sdy_dl.ir.locations`: even naming the module's own file, it is not
    known to be a line of the module), else ``input (no line)``."""
    return place_of(*located(loc))


def place_of(line: int | None, python: str | None, foreign: str | None) -> str:
    """:func:`place_in` of a location :func:`located` read."""
    if python is not None:
        return f"python {python}"
    if line is not None:
        return f"input line {line}"
    return f"location {foreign}" if foreign is not None else "input (no line)"


def located(loc) -> tuple[int | None, str | None, str | None]:
    """(the line of the module read, the first Python place ``FILE.py:LINE``, the
    first other foreign place ``FILE:LINE``) of the location ``loc`` (or its
    printed form); None where it has none."""
    from sdy_dl.ir.locations import file_places

    at, foreign = file_places(loc)
    python = other = None
    for f, line in foreign:
        if f.endswith(".py"):
            if python is None:
                python = f"{f}:{line}"
        elif other is None:
            other = f"{f}:{line}"
    return (at[0] if at is not None else None), python, other


def input_position(where) -> tuple[int, int] | None:
    """(line, column) in the module read of a place given as a location, as its
    parser located it; None for a place given as text or located elsewhere (a JAX
    program's Python lines)."""
    from sdy_dl.ir.locations import text_position

    return None if isinstance(where, str) else text_position(where)


def op_of_key(key: tuple) -> int:
    """The pre-order number of the op a value key belongs to: the op of a result
    ``(oN, i)``, the region op of a block argument ``(aN.K, -1)``."""
    return int(key[0][1:].split(".")[0])


def region_label(op_name: str, region: int) -> str:
    """How a qualified name says which region of its op holds a block argument:
    ``cond`` and ``do`` for a while (as it prints them), else ``r0``, ``r1``, ..."""
    if op_name == "stablehlo.while" and region < 2:
        return ("cond", "do")[region]
    return f"r{region}"


class SsaNames:
    """key -> names, for every value of a module, as :class:`ValueTable` reads them:
    ``%x`` in main, ``@f:%x`` in function ``f``, plus ``arg:N`` (``@f:arg:N``) for
    a function's arguments.  The first name is the value's own (*canonical*) name.

    The printer reuses numbers in sibling regions (a while's ``cond`` and
    ``do`` both start at the same ``%N``, two loops in one function both name
    their arguments ``%iterArg``): a name held by several values of one
    function is made unique by the printed line that defines it, ``%2@L7``
    (a block argument's line is its region op's); block arguments of one op's
    sibling regions say their region too, ``%iterArg@L5:do`` (see
    :func:`region_label`).  The lines are read by parsing the printed module
    again (:func:`printed_op_lines`), so they are the lines of that text.
    Those values are *pending* until :meth:`resolve` reads the lines (``text``:
    the module as printed, or a function giving it, called only then; None:
    names are never qualified).
    """

    def __init__(self, names: dict, op_names: list, regions: dict, text, top=None):
        """``names``: key -> names; ``op_names``: the name of each op in pre-order;
        ``regions``: block argument key -> the number of the region holding it."""
        count: dict[str, int] = {}
        for ns in names.values():
            count[ns[0]] = count.get(ns[0], 0) + 1
        self.names = names
        #: the values whose printed name another value prints too (their names are
        #: qualified, or pending)
        self.shared = {k for k, ns in names.items() if count[ns[0]] > 1} \
            if len(count) < len(names) else set()
        self.pending = set(self.shared) if text is not None else set()
        #: the printed names the values of ``shared`` share (unqualified)
        self.shared_names = {names[k][0] for k in self.shared}
        self._text = text
        self._op_names = op_names
        self._regions = regions
        self._lines: list[int] | None = None

    @property
    def op_lines(self) -> list[int]:
        """The printed line of every op in pre-order (0: unknown), read when first asked for."""
        if self._lines is None:
            text = self._text() if callable(self._text) else self._text
            self._lines = printed_op_lines(text, self._op_names) if text is not None else None
            if self._lines is None:
                self._lines = [0] * len(self._op_names)
        return self._lines

    def line_of(self, key: tuple) -> int:
        """The printed line defining the value ``key`` (0: unknown)."""
        return self.op_lines[op_of_key(key)]

    def resolve(self) -> None:
        """Give every pending name its qualification (in place; once)."""
        if not self.pending:
            return
        lines = self.op_lines
        qualified: dict[tuple, str] = {}
        for key in self.pending:
            n = op_of_key(key)
            qualified[key] = f"{self.names[key][0]}@L{lines[n]}" if lines[n] else \
                f"{self.names[key][0]}@op{n}"
        count: dict[str, int] = {}
        for q in qualified.values():
            count[q] = count.get(q, 0) + 1
        for key, q in qualified.items():
            if count[q] > 1 and key in self._regions:
                qualified[key] = f"{q}:{region_label(self._op_names[op_of_key(key)], self._regions[key])}"
        for key, q in qualified.items():
            self.names[key][0] = q
        self.pending = set()


def printed_op_lines(text: str, op_names: list[str]) -> list[int] | None:
    """The (1-based) line of ``text`` at which each op below its top level starts, in
    pre-order, ``text`` being a module printed whose ops in pre-order are called
    ``op_names``: read from the locations of ``text`` parsed again (the parser
    locates every op in the text it reads, regions printed in short form such as
    a reduce's ``applies`` included).  None when ``text`` does not parse into
    those ops."""
    from jaxlib.mlir import ir

    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        try:
            reparsed = ir.Module.parse(text)
        except ir.MLIRError:
            return None
        ops = [e[1] for e in walk_numbered(reparsed.body.operations) if e[0] == OP]
        if len(ops) != len(op_names) or any(op.name != n for op, n in zip(ops, op_names)):
            return None
        lines = []
        for op in ops:
            loc = op.location   # (a file location, the text having none of its own)
            lines.append(getattr(loc, "start_line", 0))
        return lines


class _Named:
    """``names``: ``_names``, once ``ssa`` (set while the first name is pending) resolved it."""

    @property
    def names(self) -> list[str]:
        if self.ssa is not None:
            self.ssa.resolve()
            self.ssa = None
        return self._names


@dataclass
class InputValue(_Named):
    """A value of the input module: its names and its annotation as written."""

    _names: list[str]
    sharding: str | None
    op: str               # defining op name, or the owner of the block argument
    where: object = field(repr=False)   # its place, or the owner's location
    ssa: "SsaNames | None" = field(default=None, repr=False)   # set while the name is pending
    index: "InputIndex | None" = field(default=None, repr=False)
    key: tuple | None = field(default=None, repr=False)        # its key in the index

    @functools.cached_property
    def place(self) -> str:
        return _place(self.where)

    @property
    def related(self) -> list["InputValue"]:
        """Annotations of the input that the import passes move onto this value: the
        constraints on it, the in_shardings of computations it enters, its sharding group."""
        return self.index.related(self.key) if self.index is not None else []


def _place(where) -> str:
    """A place given as text, or as a location: read from the location when asked
    (locations are never freed, so this is safe after the op is erased)."""
    return where if isinstance(where, str) else place_in(where)


def _tag_input(top) -> tuple[dict[int, int], set[str]]:
    """Tag the ops (``in:oN``) and block arguments (``in:aN.K``) nested in the module
    op ``top`` by their keys (see :func:`_keyed_walk`); (the place of each top-level
    op among them, by its number; the functions its ``func.call`` ops call)."""
    from jaxlib.mlir import ir

    from sdy_dl.passes.call_graph import callee_name

    name = ir.Location.name
    tops, calls = {}, set()
    for event in _keyed_walk([op.operation for op in top.regions[0].blocks[0].operations]):
        if event[0] == OP:
            mop = event[2]
            mop.location = name(f"sdy-dl.in:o{event[1]}", mop.location)
            if event[3]:
                tops[event[1]] = len(tops)
            elif mop.name == "func.call":
                calls.add(callee_name(mop))
        else:
            for key, arg in event[3]:
                arg.set_location(name(f"sdy-dl.in:{key[0]}", arg.location))
    return tops, calls


def _keyed_walk(tops):
    """The ops ``tops`` and every op nested in them, with the keys of their block
    arguments, numbered by the walk that numbers the model's ops and values
    (:func:`~sdy_dl.ir.loader.walk_numbered`): ``(OP, n, op, whether top-level, the
    number of the op whose region holds it (-1: none))``, then for each block of an
    op with regions ``(BLOCK, n, region number, [(key, argument)])``, the key of the
    K-th argument of op N's blocks being ``(aN.K, -1)`` (op N's results are
    ``(oN, i)``)."""
    first: dict[int, int] = {}   # op number -> the value number of its blocks' first argument
    open_ops = [-1]              # the numbers of the ops whose regions are open
    for event in walk_numbered(tops):
        kind = event[0]
        if kind == OP:
            mop, n = event[1], event[2]
            yield OP, n, mop, len(open_ops) == 1, open_ops[-1]
            if len(mop.regions):
                open_ops.append(n)
        elif kind == BLOCK:
            _, region, block, v, n = event
            k = v - first.setdefault(n, v)
            yield BLOCK, n, region, [((f"a{n}.{k + i}", -1), arg)
                                     for i, arg in enumerate(block.arguments)]
        else:
            open_ops.pop()


def name_prefix(func, main) -> str:
    """How the names of the values in top-level op ``func`` start: ``@f:`` in function
    ``f``, nothing in ``main`` (``func`` None: outside any function)."""
    return "" if func is None or func == main else f"@{symbol_name(func)}:"


def value_names(value, prefix: str, state, func_argument: bool) -> list[str]:
    """The names of the raw MLIR ``value``, ``prefix`` (:func:`name_prefix`) first: as
    ``state`` (an ``AsmState``) prints it, and ``arg:N`` for a function's argument
    (``func_argument``)."""
    names = [prefix + value.get_name(state)]
    if func_argument:
        names.append(f"{prefix}arg:{value.arg_number}")
    return names


class ValueTable:
    """The values of a module read straight from its MLIR, in one pass: its ops in
    pre-order (``ops``; op N is tagged ``oN``), every value's place by key
    (``places``: ``(oN, result)`` or ``(aN.K, -1)``, the K-th argument of op N's
    regions' blocks -> (owner op, value, result or argument number, whether a
    block argument)), the function holding each op (``functions_at``: by op
    number), the top-level functions (``functions``, ``main``), each op's place
    and values by number (``parents``, ``result_counts``, ``blocks``), and the
    values' names (``names``, an :class:`SsaNames`; ``text``: the module as
    printed, or a function giving it).  Ops and values are numbered by the walk
    that numbers the model's (:func:`~sdy_dl.ir.loader.walk_numbered`): op N is
    the model's op ``oid`` N and the K-th key of ``places`` its value ``vid`` K.
    The audit's indexes read it in place of a model of the module (building one
    costs several times more)."""

    def __init__(self, top, text):
        from sdy_dl.ir.context import mlir_context
        from sdy_dl.ir.model import AsmNames

        self.ops: list = []
        #: op number -> the function holding it (None: none)
        self.functions_at: list = []
        #: op number -> the number of the op whose region holds it (-1: a top-level op)
        self.parents: list[int] = []
        #: op number -> how many results it has
        self.result_counts: list[int] = []
        #: op number (of an op with blocks) -> its blocks in order, each (region number,
        #: block number in the region, its arguments' keys)
        self.blocks: dict[int, list[tuple]] = {}
        self.places: dict[tuple, tuple] = {}
        names: dict[tuple, list[str]] = {}
        regions: dict[tuple, int] = {}   # block argument key -> its region's number
        with mlir_context():
            state = AsmNames(top).get()
            tops = [op.operation for op in top.regions[0].blocks[0].operations]
            funcs = [op for op in tops if op.name == "func.func"]
            self.functions = funcs
            self.main = main_of(funcs)
            ops, places = self.ops, self.places
            functions_at, parents, counts = self.functions_at, self.parents, self.result_counts
            blocks = self.blocks
            prefix, func = "", None   # the names' prefix and the function there
            for event in _keyed_walk(tops):
                if event[0] == OP:
                    _, n, mop, top_level, parent = event
                    ops.append(mop)
                    if top_level:
                        func = mop if mop.name == "func.func" else None
                        prefix = name_prefix(func, self.main)
                    functions_at.append(func)
                    parents.append(parent)
                    results = mop.results
                    counts.append(len(results))
                    if len(results):
                        tag = f"o{n}"
                        for i, r in enumerate(results):
                            key = (tag, i)
                            names[key] = value_names(r, prefix, state, False)
                            places[key] = (mop, r, i, False)
                else:   # a block of op n: its arguments
                    _, n, region, args = event
                    mop = ops[n]
                    is_func = mop.name == "func.func"
                    found = blocks.setdefault(n, [])
                    number = found[-1][1] + 1 if found and found[-1][0] == region else 0
                    found.append((region, number, [key for key, _ in args]))
                    for key, arg in args:
                        names[key] = value_names(arg, prefix, state, is_func)
                        places[key] = (mop, arg, arg.arg_number, True)
                        regions[key] = region
        #: the name of each op in ``ops``
        self.op_names = [op.name for op in ops]
        self.names = SsaNames(names, self.op_names, regions, text)

    def key_of(self, value) -> tuple:
        """The key of an MLIR value of the module (``places`` read backwards)."""
        return self.keys[value]

    @functools.cached_property
    def keys(self) -> dict:
        """MLIR value -> its key (``places`` read backwards)."""
        return {place[1]: key for key, place in self.places.items()}

    @functools.cached_property
    def op_numbers(self) -> dict:
        """An op's identity (:func:`~sdy_dl.ir.walk.key`) -> its number (``ops`` read
        backwards)."""
        return {pointer_of(op): n for n, op in enumerate(self.ops)}

    def number_of(self, op) -> int:
        """The number of raw op ``op`` of the module: its first result's key's, when it
        has results (no :attr:`op_numbers` is made for it)."""
        op = getattr(op, "operation", op)
        results = op.results
        if len(results):
            return int(self.keys[results[0]][0][1:])
        return self.op_numbers[pointer_of(op)]

    def relations(self) -> dict[tuple, list[tuple]]:
        """value key -> the keys of the annotations moved onto it (see
        :attr:`InputValue.related`), in the order the import passes meet them."""
        from sdy_dl.ir.context import mlir_context

        related: dict[tuple, list[tuple]] = {}
        groups: dict[str, list[tuple]] = {}
        key_of = self.key_of
        with mlir_context():
            for mop in self.ops:
                name = mop.name
                if name == "sdy.sharding_constraint":
                    related.setdefault(key_of(mop.operands[0]), []).append(key_of(mop.results[0]))
                elif name in ("sdy.manual_computation", "sdy.named_computation") and len(mop.regions):
                    blocks = mop.regions[0].blocks
                    args = list(blocks[0].arguments) if len(blocks) else []
                    for operand, arg in zip(mop.operands, args):
                        related.setdefault(key_of(operand), []).append(key_of(arg))
                elif name == "sdy.sharding_group":
                    group = str(mop.attributes["group_id"]) if "group_id" in mop.attributes else ""
                    groups.setdefault(group, []).append(key_of(mop.operands[0]))
        for members in groups.values():
            for m in members:
                related.setdefault(m, []).extend(x for x in members if x != m)
        return related


class InputIndex:
    """The input module's values, tagged ``in:`` (call before running passes).

    The passes edit the module, so the values are read from a snapshot of it
    (a copy taken now, never edited), when first asked for: making the index
    costs a copy and one walk that tags the module, and an explanation reads a
    few input values only.  Ops are tagged ``in:oN`` by their place in
    pre-order, block arguments ``in:aN.K`` (the K-th of op N's regions' blocks'
    arguments); the snapshot's walk in the same order finds them again.
    """

    def __init__(self, module: Module, tag: bool = True):
        """``tag``: False when ``module`` will not run through the passes (a what-if
        that starts from the imported module, which has its tags already): then it
        is its own snapshot."""
        from sdy_dl.ir.context import mlir_context

        self.file = module.file
        self._records: dict[tuple, InputValue | None] = {}
        self._table: ValueTable | None = None
        self._related: dict[tuple, list[tuple]] | None = None
        #: each top-level op's place among them, by its number (None: not known)
        self._top_level: dict[int, int] | None = None
        with mlir_context():
            top = module.mlir.operation
            self._snapshot = top.clone() if tag else top   # (untagged: never edited)
            if tag:
                self._top_level, self._calls = _tag_input(top)

    def copy(self):
        """A new copy of the input module as read (a raw ``builtin.module`` op), to edit."""
        return self._snapshot.clone()

    @functools.cached_property
    def results(self) -> dict[int, str | None]:
        """The main function's result annotations (sdy text; None: none) by result
        number, read from the snapshot when first asked for."""
        from sdy_dl.ir.context import mlir_context
        from sdy_dl.ir.storage import read_func_attr

        main, out = self.main, {}
        if main is not None:
            with mlir_context():
                for i in range(len(main.attributes["function_type"].value.results)):
                    s = read_func_attr(main, "res_attrs", i)
                    out[i] = s.to_text() if s is not None else None
        return out

    @property
    def annotations(self) -> set[str]:
        """Every annotation of the input: the shardings of its values and main results."""
        records = [self.get(k) for k in self.table.names.names]
        return ({r.sharding for r in records if r.sharding is not None}
                | {s for s in self.results.values() if s is not None})

    @property
    def table(self) -> ValueTable:
        """The input module's :class:`ValueTable` (read when first asked for)."""
        if self._table is None:
            snapshot = self._snapshot
            self._table = ValueTable(snapshot, None)   # (input names are not qualified)
        return self._table

    def get(self, key: tuple) -> InputValue | None:
        """The input value tagged ``key`` (``(oN, result)`` or ``(aN.K, -1)``), if any."""
        try:
            return self._records[key]
        except KeyError:
            pass
        from sdy_dl.ir.context import mlir_context
        from sdy_dl.ir.storage import read_stored

        record = None
        with mlir_context():
            place = self.place(key)
            if place is not None:
                owner, value, index, is_arg = place
                stored = read_stored(owner, index, is_arg)
                paths = _arg_paths(value.location) if is_arg and owner == self.main else []
                where = f"argument {paths[0]}" if paths else owner.location
                record = InputValue(self._names_of(key, place),
                                    stored.to_text() if stored is not None else None,
                                    owner.name, where, index=self, key=key)
        self._records[key] = record
        return record

    @property
    def main(self):
        """The input's main function (raw op; None: none)."""
        if self._table is not None:
            return self._table.main
        if not hasattr(self, "_main"):
            from sdy_dl.ir.context import mlir_context

            with mlir_context():
                self._main = main_of([op.operation for op in
                                      self._snapshot.regions[0].blocks[0].operations
                                      if op.operation.name == "func.func"])
        return self._main

    def place(self, key: tuple) -> tuple | None:
        """The place of the input value ``key`` (:attr:`ValueTable.places`): read from the
        table when it is made, else from the op the key numbers alone (a what-if's
        edit looks up one value; the table names every value)."""
        if self._table is None:
            found = self._place_alone(key)
            if found is not None:
                return found
        return self.table.places.get(key)

    @property
    def ops(self) -> list:
        """The snapshot's ops in pre-order (the order that numbers them; raw ops)."""
        if self._table is not None:
            return self._table.ops
        if not hasattr(self, "_ops"):
            from sdy_dl.ir.walk import walk_pre

            self._ops = walk_pre(self._snapshot)[1:]
        return self._ops

    def top_level_position(self, n: int) -> int | None:
        """The place of op ``n`` among the module's top-level ops (None: a nested op):
        where a copy (:meth:`copy`) has it, without walking the copy."""
        from sdy_dl.ir.context import mlir_context

        if self._top_level is not None:
            return self._top_level.get(n)
        with mlir_context():
            mop = self.ops[n]
            parent = mop.parent
            if parent is None or parent.name != "builtin.module":
                return None
            for i, top in enumerate(self._snapshot.regions[0].blocks[0].operations):
                if top.operation == mop:
                    return i
        return None

    def calls(self, symbol: str) -> bool:
        """Whether an op of the input calls function ``symbol`` (``func.call``; the
        callees found when the input was tagged, else read once)."""
        if not hasattr(self, "_calls"):
            from sdy_dl.ir.context import mlir_context
            from sdy_dl.passes.call_graph import callee_name

            with mlir_context():
                self._calls = {callee_name(op) for op in self.ops if op.name == "func.call"}
        return symbol in self._calls

    def _place_alone(self, key: tuple) -> tuple | None:
        """:meth:`place` read from op N alone (None: not so read)."""
        tag, index = key
        head, _, k = tag[1:].partition(".")
        n = int(head)
        place = self.top_level_position(n) if self._top_level is not None else None
        if place is not None:   # (a top-level op: found without walking the snapshot)
            mop = self._snapshot.regions[0].blocks[0].operations[place].operation
        elif not 0 <= n < len(self.ops):
            return None
        else:
            mop = self.ops[n]
        if tag.startswith("o"):
            results = mop.results
            return (mop, results[index], index, False) if 0 <= index < len(results) else None
        k, regions = int(k), mop.regions
        if len(regions) and len(regions[0].blocks):
            args = regions[0].blocks[0].arguments
            if k < len(args):   # (keys of later blocks count the values before them too)
                return mop, args[k], args[k].arg_number, True
        return None

    def _names_of(self, key: tuple, place: tuple) -> list[str]:
        """The names :class:`ValueTable` gives the value ``key`` at ``place`` (the input's
        names are never qualified: no line is read)."""
        if self._table is not None:
            return self._table.names.names[key]
        from sdy_dl.ir.model import AsmNames

        owner, value, _, is_arg = place
        top = owner
        while top.parent is not None and top.parent.name != "builtin.module":
            top = top.parent
        if is_arg and top == owner and owner.name == "func.func":
            # (MLIR names a function's arguments %arg0, %arg1, ... in order: no
            # AsmState, which would walk the whole module, is needed for them)
            prefix = name_prefix(owner, self.main)
            return [f"{prefix}%arg{value.arg_number}", f"{prefix}arg:{value.arg_number}"]
        if not hasattr(self, "_asm"):
            self._asm = AsmNames(self._snapshot)
        return value_names(value, name_prefix(top if top.name == "func.func" else None,
                                              self.main),
                           self._asm.get(), is_arg and owner.name == "func.func")

    def related(self, key: tuple) -> list[InputValue]:
        """:attr:`InputValue.related` of the value ``key``."""
        if self._related is None:
            self._related = self.table.relations()
        return [self.get(k) for k in self._related.get(key, ())]

    def origin(self, value: Value) -> InputValue | None:
        """The input value ``value`` descends from (same op kind, or the call a named
        computation was imported from), if any."""
        return self.origin_at(*_tag_site(value))

    def made_at(self, loc, index: int) -> InputValue | None:
        """The input value at ``_tag_site``'s (``loc``, ``index``) whatever its op: where
        the import passes made a value of another op kind from it."""
        return _tagged_record(loc, index, None, self, "in", lambda recorded, name: True)

    def origin_at(self, loc, index: int, op_name: str) -> InputValue | None:
        """:meth:`origin` of the value at ``_tag_site``'s (``loc``, ``index``, ``op_name``)."""
        return _tagged_record(loc, index, op_name, self, "in", lambda recorded, name: (
            recorded == name or (recorded, name) in IMPORT_RENAMES))


def _tag_site(value: Value) -> tuple:
    """Where ``value``'s tags are: (the location that carries them, the result index
    or -1 for a block argument, the defining op's name or None)."""
    if value.is_block_arg:
        return value.mlir.location, -1, None
    op = value.defining_op
    return op.mlir.location, value.index, op.name


def _record_at(propagated, loc, op_name: str, value, index: int, is_arg: bool):
    """The record of ``propagated`` (a :class:`PropagationIndex`) for the output value
    ``value``: result ``index`` of an op at ``loc`` called ``op_name``, or a block
    argument (``is_arg``)."""
    return (propagated.lookup_at(value.location, -1, None) if is_arg
            else propagated.lookup_at(loc, index, op_name))


def _tagged_record(loc, index: int, op_name: str | None, by_tag: dict, prefix: str, same_op,
                   made: dict | None = None):
    """The record ``by_tag`` holds for a value under the tags ``prefix`` of ``loc``
    (see :func:`_tag_site`): a block argument's own tag, or an op result's tag and
    index whose recorded op name ``same_op(recorded, op_name)`` accepts.  ``made``:
    the tags by location that :func:`_tag_all` gave."""
    found = made.get(pointer_of(loc)) if made is not None else None
    found = [found] if found is not None else tags(loc, prefix)
    if index < 0:
        return by_tag.get((found[0], -1)) if found else None
    for tag in found:
        record = by_tag.get((tag, index))
        if record is not None and same_op(record.op, op_name):
            return record
    return None


@dataclass
class PropagatedValue:
    """A value the propagation sees: its tracer key and where it came from (its
    origin and place are read from its locations when first asked for)."""

    key: int
    op: str
    is_edge: bool                      # a data-flow edge's result (internal)
    owner: bool                        # the value holds its own slot (not an edge target)
    inputs: InputIndex = field(repr=False)
    tag_site: tuple = field(repr=False)          # see _tag_site
    where: object = field(repr=False)            # see _place

    @functools.cached_property
    def origin(self) -> InputValue | None:
        return self.inputs.origin_at(*self.tag_site)

    @functools.cached_property
    def place(self) -> str:
        return _place(self.where)


class PropagationIndex:
    """The values of the module propagation runs on, tagged ``px:`` and keyed as the
    tracer keys them (call right before the propagation pass): ``by_tag``, ``by_key``
    and ``links`` (the data flow between tracer keys, :mod:`~sdy_dl.audit.dataflow`).

    ``first``: the index of another propagation whose module, as tagged, ``module``
    is a copy of with other shardings (a what-if's, started from the first
    propagation's imported module, :mod:`~sdy_dl.audit.whatif_import`): the same
    values with the same tags, places and tracer keys (``module``'s values are given
    the first's keys, ``Value.pointer``: a key names a value, not a pointer into this
    module).  Then nothing is tagged, the links are the first's and the records the
    first's remade with this module's inputs when first asked for, and ``module``'s
    model index is made from the first's (:func:`~sdy_dl.ir.model.index_like`)."""

    def __init__(self, module: Module, inputs: InputIndex, first: "PropagationIndex | None" = None):
        from sdy_dl.ir.context import mlir_context
        from sdy_dl.audit.dataflow import flow_links
        from sdy_dl.ir.model import index_like
        from sdy_dl.propagation.edges import find_edges, slot_map
        from sdy_dl.propagation.state import value_key

        with mlir_context():
            if (first is not None and not module.is_indexed()
                    and not index_like(module, first.index_model, module.cloned)):
                first = None    # (not a copy of the first's: indexed as any module)
            #: ``module``'s model index as it stood (a what-if's is made from it; its
            #: op N is the op tagged ``oN``)
            self.index_model = module.index_fields()
        self.meshes = dict(module.meshes)
        self._inputs = inputs
        self._first = None
        #: per value, in the model's order: (its tag, its record in the index the
        #: records were first made for, its slot's vid)
        self._values: list[tuple] = []
        self._by_tag: dict[tuple[str, int], PropagatedValue] | None = None
        self._by_key: dict[int, list[PropagatedValue]] | None = None
        self._links: list | None = None
        self._copies: dict | None = None     # id(record) -> call_copy's answer
        with mlir_context():
            values = module.values
            if first is not None and len(values) == len(first._values):
                self._made, self._values, self._first = first._made, first._values, first
                self.op_locations = first.op_locations
                #: each value's tracer key here, in the order of ``_values``: the
                #: first's (the same key names the same value in both propagations,
                #: so a replayed visit's record can be the first's)
                self.keys = first.keys
                for (_, _, slot), k in zip(first._values, self.keys):
                    values[slot].pointer = k
                return
            self._by_tag, self._by_key = {}, {}
            edges = find_edges(module)
            slots = slot_map(module, edges)
            self._links = flow_links(module, edges, slots)
            for v in values:
                owner = v.block.region.owner if v.is_block_arg else v.defining_op
                slot = slots.get(v.vid, v)
                record = PropagatedValue(value_key(slot), owner.name,
                                         owner.name == "sdy.data_flow_edge", slot is v, inputs,
                                         _tag_site(v), owner.mlir.location)
                self._by_key.setdefault(record.key, []).append(record)
                tag = (f"a{v.vid}", -1) if v.is_block_arg else (f"o{owner.oid}", v.index)
                self._by_tag[tag] = record
                self._values.append((tag, record, slot.vid))
            self.keys = [record.key for _, record, _ in self._values]
            #: each op's (tag, name, location as read), in module order (the tags' order)
            self.op_locations: list[tuple] = []
            self._made = _tag_all(module, "px", self.op_locations)

    @property
    def by_tag(self) -> dict:
        """Tag (``(oN, result)`` or ``(aN.K, -1)``) -> the value's record."""
        if self._by_tag is None:
            self._remake()
        return self._by_tag

    @property
    def by_key(self) -> dict:
        """Tracer key -> the records of the values holding it."""
        if self._by_key is None:
            self._remake()
        return self._by_key

    @property
    def links(self) -> list:
        """The data flow between tracer keys (of an index made from a first one: the
        first's, whose keys are this one's)."""
        if self._links is None:
            self._links = self._first.links
        return self._links

    def _remake(self) -> None:
        """``by_tag`` and ``by_key`` of an index made from a first one: the first's
        records with this module's inputs."""
        self._by_tag, self._by_key = {}, {}
        inputs = self._inputs
        for (tag, r, _), key in zip(self._values, self.keys):
            record = PropagatedValue(key, r.op, r.is_edge, r.owner, inputs, r.tag_site, r.where)
            self._by_key.setdefault(key, []).append(record)
            self._by_tag[tag] = record

    def call_copy(self, record: PropagatedValue) -> int | None:
        """The op number of the ``sdy.named_computation`` (a call's copy of its
        function) innermost around ``record``'s value, or None: in none."""
        if self._copies is None:
            ops, values = self.index_model["ops"], self.index_model["values"]
            around: dict = {}   # op number -> its innermost named computation's (or None)

            def innermost(op):   # (``op`` or the op around it nearest, inclusive)
                seen, found = [], None
                while op is not None:
                    if op.oid in around:
                        found = around[op.oid]
                        break
                    seen.append(op.oid)
                    if op.name == "sdy.named_computation":
                        found = op.oid
                        break
                    op = op.parent
                for oid in seen:
                    around[oid] = found
                return found

            self._copies = {}
            for (tag, index), rec in self.by_tag.items():
                if index < 0:
                    self._copies[id(rec)] = innermost(values[int(tag[1:])].block.region.owner)
                else:
                    self._copies[id(rec)] = innermost(ops[int(tag[1:])].parent)
        return self._copies.get(id(record))

    @property
    def tags_made(self) -> dict:
        """The tag (``oN``, ``aN.K``) of each location tagging made, by the location's
        pointer (an index made from a first one: the first's, its module being a copy
        of the first's as tagged: a tag names the same op or value in both)."""
        return self._made

    def lookup(self, value: Value) -> PropagatedValue | None:
        """The propagated value an output value is (None: created by the export passes)."""
        return self.lookup_at(*_tag_site(value))

    def lookup_at(self, loc, index: int, op_name: str | None) -> PropagatedValue | None:
        """:meth:`lookup` of the value at ``_tag_site``'s (``loc``, ``index``, ``op_name``)."""
        return _tagged_record(loc, index, op_name, self.by_tag, "px", lambda recorded, name: (
            recorded == name or (recorded, name) in EXPORT_RENAMES), self._made)


def first_values(table: "ValueTable", propagated: PropagationIndex) -> dict:
    """Each tracer key -> the first value of the output (``table``: its
    :class:`ValueTable`) that holds it, by its table key: the value
    :class:`OutputIndex` names a key by (``by_key[key][0]``), found without
    indexing the output."""
    from sdy_dl.ir.context import mlir_context

    first: dict = {}
    last = loc = name = None
    with mlir_context():
        for key, (mop, value, index, is_arg) in table.places.items():
            if mop is not last:
                last, loc, name = mop, mop.location, mop.name
            record = _record_at(propagated, loc, name, value, index, is_arg)
            if record is not None:
                first.setdefault(record.key, key)
    return first


@dataclass
class OutputValue(_Named):
    """A value (or function result) of the printed output module."""

    _names: list[str]
    sharding: TensorSharding | None      # as printed
    op: str
    where: object = field(repr=False)    # its place (see _place)
    key: object | None                   # tracer key (None: created by the export passes)
    value: object = field(default=None, repr=False)   # its MLIR value (None: a function result)
    func: str = ""
    result_of: "OutputValue | None" = field(default=None, repr=False)  # function results: the returned value
    ssa: "SsaNames | None" = field(default=None, repr=False)   # set while the name is pending
    table_key: tuple | None = field(default=None, repr=False)  # its ValueTable key (results: the function's op)
    lines: "SsaNames | None" = field(default=None, repr=False)  # where its output line is read
    held_by: "OutputValue | None" = field(default=None, repr=False)  # a while's block argument: its result

    @property
    def name(self) -> str:
        """Its one name: as the output prints it, qualified when that is not unique."""
        return self.names[0]

    @functools.cached_property
    def place(self) -> str:
        return _place(self.where)

    @property
    def line(self) -> int:
        """The line of the printed output that defines it (a block argument: its
        region op's; a function result: its function's; 0: unknown)."""
        if self.lines is None or self.table_key is None:
            return 0
        return self.lines.line_of(self.table_key)

    def describe(self) -> str:
        """``NAME (OP, output line N)``: how errors list it."""
        line = self.line
        return f"{self.name} ({self.op}" + (f", output line {line})" if line else ")")


class OutputIndex:
    """Every value of the output module with its names, printed sharding and tracer key.

    ``find(name)`` resolves a name (see the module docstring), ``values`` lists
    every value in module order, ``by_value`` maps an MLIR value of the output
    module to its :class:`OutputValue`."""

    def __init__(self, module: Module, propagated: PropagationIndex, text=None, table=None):
        """``text``: ``module`` as printed, or a function giving it (see :class:`SsaNames`).
        The module is read straight from its MLIR (``table``: its :class:`ValueTable`,
        when one is at hand)."""
        from sdy_dl.ir.context import mlir_context
        from sdy_dl.ir.storage import read_func_attr
        from sdy_dl.ir.value_sharding import local_sharding

        self.module = module
        self.values: list[OutputValue] = []
        self.by_name: dict[str, list[OutputValue]] = {}
        self.by_key: dict[object, list[OutputValue]] = {}
        self._ambiguous: dict[str, list[OutputValue]] | None = None
        self._pending: list[OutputValue] = []   # values whose first name is not in by_name yet
        self._own: dict[str, OutputValue] | None = None   # (see ``named``)
        if table is None:
            table = ValueTable(module.mlir.operation, text if text is not None else module.print)
        self._table = table
        self._propagated = propagated
        self._ssa = ssa = table.names
        names, pending, main = ssa.names, ssa.pending, table.main
        self.by_value: dict = {}   # MLIR value -> its OutputValue
        by_value = self.by_value
        op_number = {mop: n for n, mop in enumerate(table.ops)}
        with mlir_context():
            labels: dict = {}     # function -> its label
            last, loc = None, None
            for key, (mop, value, index, is_arg) in table.places.items():
                if mop is not last:
                    last, loc, name = mop, mop.location, mop.name
                    func = table.functions_at[op_number[mop]]
                    label = labels.get(func)
                    if label is None:
                        label = labels[func] = func_label(func, main)
                record = _record_at(propagated, loc, name, value, index, is_arg)
                held_by = by_value[mop.results[index]] if is_arg and name == "stablehlo.while" \
                    else None
                # (None: no place for one; a while's block argument: its result's, §1.5;
                # a manual computation's: its local view, §8.6)
                sharding = local_sharding(mop, index, is_arg and held_by is None)
                out = OutputValue(names[key], sharding, name, loc,
                                  record.key if record is not None else None, value,
                                  func=label, ssa=ssa if key in pending else None,
                                  table_key=key, lines=ssa, held_by=held_by)
                by_value[value] = out
                if is_arg and mop == main:
                    out._names += _arg_paths(value.location)
                self._add(out)
            for func in table.functions:
                body = func.regions[0].blocks
                last_ops = body[len(body) - 1].operations if len(body) else ()
                ret = last_ops[len(last_ops) - 1] if len(last_ops) else None
                is_main = func == main
                prefix = "" if is_main else f"@{symbol_name(func)}:"
                returned_values = list(ret.operands) if ret is not None else []
                for i in range(len(func.attributes["function_type"].value.results)):
                    returned = by_value.get(returned_values[i]) if i < len(returned_values) else None
                    key = ("result", i) if is_main else (returned.key if returned else None)
                    result_names = [f"{prefix}result:{i}"]
                    if is_main:
                        result_names += result_info(func, i)
                    out = OutputValue(result_names, read_func_attr(func, "res_attrs", i),
                                      "func.func", func.location, key,
                                      func=func_label(func, main), result_of=returned,
                                      table_key=(f"o{op_number[func]}", -2), lines=ssa)
                    self._add(out)

    @property
    def op_count(self) -> int:
        """How many ops the output module has."""
        return len(self._table.ops)

    @property
    def table(self) -> ValueTable:
        """The output module's :class:`ValueTable` (the values as the model numbers them)."""
        return self._table

    def record_of(self, out: OutputValue) -> PropagatedValue | None:
        """The propagated value the output value ``out`` is (None: a function result,
        or a value the export passes made).  Called in the MLIR context."""
        if out.value is None or out.table_key is None:
            return None
        mop, value, index, is_arg = self._table.places[out.table_key]
        return _record_at(self._propagated, mop.location, mop.name, value, index, is_arg)

    def callee_of_tag(self, tag: str) -> str | None:
        """The label (``@f``) of the function called by the output's call the named
        computation tagged ``tag`` (``px:oN``, a call's copy of a function) was
        printed as; None: no one such call."""
        from sdy_dl.ir.context import mlir_context
        from sdy_dl.passes.call_graph import callee_name

        ops = self._tagged(tag, "sdy.named_computation")
        if len(ops) != 1:
            return None
        with mlir_context():
            return "@" + callee_name(ops[0])

    def line_of_tag(self, tag: str | None, op_name: str | None) -> int:
        """The output line of the op tagged ``tag`` (``px:oN``) called ``op_name``
        (or as the export passes renamed it), the op a propagation step ran on; 0:
        the pipeline erased it, or several ops of that name carry its tag (ops the
        export passes make for it): which one is not known."""
        if tag is None or op_name is None:
            return 0
        ops = self._tagged(tag, op_name)
        return self._ssa.op_lines[self._op_number[ops[0]]] if len(ops) == 1 else 0

    def _tagged(self, tag: str, op_name: str) -> list:
        """The output's ops carrying the (outermost) ``px`` tag ``tag`` called
        ``op_name`` or as the export passes renamed it."""
        from sdy_dl.ir.context import mlir_context

        if not hasattr(self, "_op_by_tag"):
            self._op_by_tag: dict[str, list] = {}
            self._op_number: dict = {}
            with mlir_context():
                for n, mop in enumerate(self._table.ops):
                    t = first_tag(mop.location, "px")
                    if t is not None:
                        self._op_by_tag.setdefault(t, []).append(mop)
                        self._op_number[mop] = n
        return [mop for mop in self._op_by_tag.get(tag, ())
                if mop.name == op_name or (op_name, mop.name) in EXPORT_RENAMES]

    def _add(self, out: OutputValue) -> None:
        self.values.append(out)
        if out.ssa is not None:
            self._pending.append(out)
        for n in out._names[1:] if out.ssa is not None else out._names:
            self._name(n, out)
        if out.key is not None:
            self.by_key.setdefault(out.key, []).append(out)

    def _name(self, name: str, out: OutputValue) -> None:
        held = self.by_name.setdefault(name, [])
        if out not in held:
            held.append(out)

    def _resolve_pending(self) -> None:
        """Qualify the names sibling regions share and index them (reads the lines)."""
        if self._pending:
            for out in self._pending:
                self._name(out.names[0], out)
            self._pending = []

    def named(self, name: str) -> OutputValue | None:
        """The value whose own name (:attr:`OutputValue.name`, as :meth:`name_of` gives
        it) is ``name``, None: none.  For names the audit made (``result:N`` of a
        function's result, a value it named): no alias (a JAX name) or other
        spelling is read, so none can stand for another value."""
        if self._own is None:
            self._own = {out.name: out for out in self.values}
        return self._own.get(name)

    def name_of(self, value) -> str:
        """The name of the output module's MLIR ``value`` (an op result or block argument)."""
        return self.by_value[value].name

    @property
    def ambiguous(self) -> dict[str, list[OutputValue]]:
        """A printed name several values share -> those values (their names qualified)."""
        if self._ambiguous is None:
            self._ambiguous = {}
            self._resolve_pending()
            for out in self.values:
                name = out.name
                at = name.rfind("@L", 1)
                if at < 0:
                    at = name.rfind("@op", 1)
                if at > 0:
                    self._ambiguous.setdefault(name[:at], []).append(out)
        return self._ambiguous

    def _lookup(self, spellings: list[str]) -> list[OutputValue]:
        """The values holding a name read in any of its ``spellings`` (``arg0`` is a JAX
        argument path and ``%arg0`` may be another value's name: both are candidates),
        and those printing it as sibling regions' values do (``%c`` of two branches:
        see :attr:`ambiguous`), each once."""
        found: dict[int, OutputValue] = {}
        for n in spellings:
            for out in self.by_name.get(n, ()):
                found.setdefault(id(out), out)
        if any(n.partition("#")[0] in self._ssa.shared_names for n in spellings):
            for n in spellings:
                base, _, result = n.partition("#")
                for out in self.ambiguous.get(n) or [
                        o for o in self.ambiguous.get(base, ())
                        if result and o.name.startswith(n + "@")]:
                    found.setdefault(id(out), out)
        return list(found.values())

    def find(self, name: str) -> OutputValue:
        """The value called ``name``.  A name several values hold (in any of its
        spellings, as a printed name sibling regions share too), and an unknown
        name, are errors listing the candidates with their op and output line."""
        name = name.strip()
        spellings = _spellings(name)
        found = self._lookup(spellings)
        if not found and self._pending:
            self._resolve_pending()
            found = self._lookup(spellings)
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            shared = any(n.partition("#")[0] in self._ssa.shared_names for n in spellings)
            raise SdyError(f"{name!r} names {len(found)} values of the output"
                           + (" (sibling regions reuse printed names)" if shared else "")
                           + "; say which: " + ", ".join(o.describe() for o in found),
                           file=self.module.file)
        raise SdyError(f"no value {name!r} in the output; {self.choices(name)}",
                       file=self.module.file)

    def choices(self, name: str, count: int = 5) -> str:
        """The valid names closest to ``name`` (:func:`difflib.get_close_matches`, at
        most ``count`` values, each once, closest first; deterministic) and how many
        values there are: what an error about an unknown name lists."""
        self._resolve_pending()
        names = sorted(self.by_name)
        seen, listed = set(), []
        for cutoff in (0.5, 0.0):   # (the second pass reads every name: only when short)
            for c in difflib.get_close_matches(name, names, n=4 * count, cutoff=cutoff):
                held = self.by_name[c]
                if len(held) > 1:
                    if c not in seen:   # (a name several values share: said as typed)
                        seen.add(c)
                        listed.append(c)
                elif id(held[0]) not in seen:
                    seen.add(id(held[0]))
                    listed.append(held[0].describe())
                if len(listed) == count:
                    break
            if len(listed) == count:
                break
        return (f"close matches: {', '.join(listed) or 'none'} ({len(self.values)} values, "
                "named as the output of sdy-dl propagate prints them: %3, %arg0, @func:%2, "
                "arg:0, result:0; %2@L7 when several values print as %2)")


def _spellings(name: str) -> list[str]:
    """The ways of reading a name a user gives: as written, with a ``%`` added to a
    bare SSA name (``3``, ``arg0``), and ``@7`` read as ``@L7``."""
    out = [name]
    m = re.fullmatch(r"(.*)@(\d+)((?::\w+)?)", name)
    if m:
        out.append(f"{m.group(1)}@L{m.group(2)}{m.group(3)}")
    for n in list(out):
        head = n.split("@", 1)[0]
        if re.fullmatch(r"arg\d+|\d+(#\d+)?|[A-Za-z_][\w$.-]*", head) and not n.startswith("%"):
            out.append("%" + n)
    return out


_NAME_LOC_RE = re.compile(r'^(?:loc\()?"((?:[^"\\]|\\.)*)"(?!:)')


def _arg_paths(loc) -> list[str]:
    """The argument path JAX's debug info gives a main argument (``params[0]``), if
    any: from its location ``loc``."""
    text = str(loc)
    while True:
        m = _NAME_LOC_RE.match(text)
        if m is None:
            return []
        name = m.group(1)
        if not name.startswith("sdy-dl."):
            return [name] if name and "%" not in name else []
        text = text[m.end() + 1:]   # the child location


def result_info(func, index: int) -> list[str]:
    """JAX's name of main result ``index`` (``jax.result_info``) of the raw ``func``, if any."""
    from jaxlib.mlir import ir

    if "res_attrs" not in func.attributes:
        return []
    entry = ir.DictAttr(ir.ArrayAttr(func.attributes["res_attrs"])[index])
    if "jax.result_info" not in entry:
        return []
    return [ir.StringAttr(entry["jax.result_info"]).value]


def func_label(func, main) -> str:
    """``main``, ``@name`` or nothing: how the output index names the raw function ``func``."""
    if func is None:
        return ""
    return "main" if main is not None and func == main else "@" + symbol_name(func)
