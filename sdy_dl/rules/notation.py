"""The textual rule notation shared by Shardy's attribute and user einsums.

Grammar (whitespace is free)::

    rule     := '(' tensors ')' '->' '(' tensors ')' [sizes] {kinds} [',' 'custom']
    tensors  := [tensor {',' tensor}]
    tensor   := '[' [dim {',' dim}] ']'
    dim      := name {name}                 -- juxtaposed names: a compound dim
    name     := letter ['_' digits]         -- e.g. i, z_1, b
    sizes    := '{' [name '=' int {',' name '=' int}] '}'
    kinds    := ('reduction' | 'need_replication' | 'permutation'
                 | 'blocked_propagation') '=' '{' [name {',' name}] '}'

This is exactly what Shardy prints inside ``#sdy.op_sharding_rule<...>``.  The
compact form of user rules is the same text with the ``{sizes}`` optional
(sizes are then inferred from the op's shapes) and any single-letter names.

User rules may also be written as JAX's ``custom_partitioning`` writes a
``sharding_rule`` (:func:`parse_custom_partitioning`)::

    rule     := values '->' values [sizes] {kinds} [',' 'custom']
    values   := value {',' value}              -- an empty side is one scalar
    value    := ['...' [digits]] {dim}         -- '...': leading batch dims
    dim      := ident | '(' ident ident {ident} ')'   -- '(i j)': a compound dim
    ident    := letter {letter | digit | '_'}

e.g. ``"... i j, ... j k -> ... i k" reduction={j}``.  The dims an ellipsis
stands for (one factor each, shared by the values of one group ``...N``) are
known only from the op's ranks: :meth:`Notation.for_ranks`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from sdy_dl.errors import SdyError
from sdy_dl.rules.instance import FACTOR_KINDS, Factor, RuleInstance

_TOKEN_RE = re.compile(r"\s*(?:(->)|([A-Za-z](?:_\d+)?)|(\d+)|([()\[\]{},=]))")
#: Tokens of the custom_partitioning form: identifiers, and ``...`` with its group.
_JAX_TOKEN_RE = re.compile(r"\s*(?:(->)|(\.\.\.\d*)|([A-Za-z][A-Za-z0-9_]*)|(\d+)|([()\[\]{},=]))")
#: The factor name of batch dim ``j`` of ellipsis group ``g`` (never an identifier).
_BATCH = "...{group}#{dim}"
_KIND_WORDS = ("reduction", "need_replication", "permutation", "blocked_propagation")
_WORD_RE = re.compile(r"\s*(reduction|need_replication|permutation|blocked_propagation|custom)\b")


@dataclass
class Notation:
    """A parsed rule text, with factors still named."""

    operands: list[list[list[str]]]
    results: list[list[list[str]]]
    sizes: dict[str, int] | None               # None: no size block
    kinds: dict[str, list[str]] = field(default_factory=dict)  # kind list name -> names
    custom: bool = False

    def for_ranks(self, operand_ranks, result_ranks) -> "Notation":
        """The notation with every ellipsis replaced by the batch dims it stands
        for on tensors of these ranks (itself when it has none): a group's
        rank is fixed by its first value, as JAX's ``sdy_sharding_rule_to_mlir``
        does."""
        tensors = self.operands + self.results
        if not any(dims and dims[0][0].startswith("...") for dims in tensors):
            return self
        ranks = list(operand_ranks) + list(result_ranks)
        if len(ranks) != len(tensors):
            return self   # (infer_sizes reports the count)
        group_rank: dict[str, int] = {}
        out = []
        for t, (dims, rank) in enumerate(zip(tensors, ranks)):
            if not dims or not dims[0][0].startswith("..."):
                out.append(dims)
                continue
            group = str(int(dims[0][0][3:] or "0"))
            batch = max(rank - (len(dims) - 1), 0)
            if group_rank.setdefault(group, batch) != batch:
                raise SdyError(f"'...{group}' stands for {group_rank[group]} dim(s) in one "
                               f"value and {batch} in another")
            out.append([[_BATCH.format(group=group, dim=j)] for j in range(batch)] + dims[1:])
        n = len(self.operands)
        return Notation(out[:n], out[n:], self.sizes, self.kinds, self.custom)

    @property
    def factor_order(self) -> list[str]:
        """Factor names in order of first appearance (operands, then results)."""
        seen: dict[str, None] = {}
        for tensor in self.operands + self.results:
            for dim in tensor:
                for name in dim:
                    seen.setdefault(name)
        return list(seen)

    def check_declared(self) -> None:
        """Every factor named in sizes or kind lists must appear in a mapping
        (the einsum form declares factors by using them in tensor mappings)."""
        declared = set(self.factor_order)
        used = [("the size list", n) for n in (self.sizes or {})]
        used += [(f"{k}={{...}}", n) for k, names in self.kinds.items() for n in names]
        for where, name in used:
            if name not in declared:
                raise SdyError(f"factor '{name}' is used in {where} but not declared "
                               "in any tensor mapping")
        self.check_kinds()

    def check_kinds(self) -> None:
        """Each factor has at most one kind."""
        typed: dict[str, str] = {}
        for kind in ("reduction", "need_replication", "permutation"):
            for name in self.kinds.get(kind, []):
                if name in typed:
                    raise SdyError(f"factor '{name}' has two kinds: {typed[name]} and {kind}")
                typed[name] = kind

    def order(self) -> list[str]:
        """Factor numbering: the size block's order when it names every factor,
        otherwise order of first appearance."""
        names = self.factor_order
        if self.sizes is not None and set(self.sizes) == set(names):
            return list(self.sizes)
        return names

    def to_instance(self, sizes: dict[str, int], order: list[str] | None = None) -> RuleInstance:
        """The rule with the given size of every factor, numbered by ``order``
        (default: :meth:`order`)."""
        self.check_kinds()
        order = self.order() if order is None else order
        unknown = [n for n in self.factor_order
                   + [n for names in self.kinds.values() for n in names] if n not in order]
        if unknown:
            raise SdyError(f"factor '{unknown[0]}' is used but not declared in the size list")
        missing = [n for n in order if n not in sizes]
        if missing:
            raise SdyError(f"no size for factor '{missing[0]}'")
        index = {n: i for i, n in enumerate(order)}
        kind_of = {n: k for k in ("reduction", "need_replication", "permutation")
                   for n in self.kinds.get(k, [])}
        blocked = set(self.kinds.get("blocked_propagation", []))
        factors = tuple(Factor(sizes[n], kind_of.get(n, "pass_through"), n in blocked)
                        for n in order)

        def mapping(tensors):
            return tuple(tuple(tuple(index[n] for n in dim) for dim in t) for t in tensors)

        return RuleInstance(factors, mapping(self.operands), mapping(self.results),
                            self.custom)

    def infer_sizes(self, operand_shapes, result_shapes) -> dict[str, int]:
        """Factor sizes from the op's shapes (checked against given sizes).

        ``*_shapes`` are per tensor: a tuple of dim sizes, or None for a
        non-tensor (which must have the mapping ``[]``).
        """
        sizes = dict(self.sizes or {})
        dims = []  # (tensor label, dim, size, names)
        for label, maps, shapes in (("operand", self.operands, operand_shapes),
                                    ("result", self.results, result_shapes)):
            if len(maps) != len(shapes):
                raise SdyError(f"the rule has {len(maps)} {label} mapping(s) but the op has "
                               f"{len(shapes)} {label}(s)")
            for t, (dims_of, shape) in enumerate(zip(maps, shapes)):
                shape = () if shape is None else tuple(shape)
                if len(dims_of) != len(shape):
                    raise SdyError(f"{label} {t} has rank {len(shape)} but the rule maps "
                                   f"{len(dims_of)} dim(s)")
                dims += [(f"{label} {t}", d, size, names)
                         for d, (names, size) in enumerate(zip(dims_of, shape))]
        changed = True
        while changed:
            changed = False
            for where, d, size, names in dims:
                unknown = [n for n in dict.fromkeys(names) if n not in sizes]
                known = math.prod(sizes[n] for n in names if n in sizes)
                if len(unknown) == 1 and names.count(unknown[0]) == 1 and known and \
                        size % known == 0:
                    sizes[unknown[0]] = size // known
                    changed = True
                elif not unknown and known != size:
                    raise SdyError(f"size mismatch: dim {d} of {where} has size {size} but "
                                   f"its factors [{''.join(names)}] have size {known}")
        for where, d, size, names in dims:
            unknown = [n for n in names if n not in sizes]
            if unknown:
                raise SdyError(f"cannot infer the size of factor '{unknown[0]}' from dim {d} "
                               f"of {where} (size {size}); give it in {{...}}")
        return sizes


class _Tokens:
    def __init__(self, text: str, token_re: re.Pattern = _TOKEN_RE):
        self.text = text
        self.pos = 0
        self.token_re = token_re

    def error(self, what: str) -> SdyError:
        return SdyError(f"malformed rule {self.text.strip()!r}: {what} at column {self.pos + 1}")

    def peek(self) -> str | None:
        m = self.token_re.match(self.text, self.pos)
        return m.group(m.lastindex) if m else None

    def next(self) -> str:
        m = self.token_re.match(self.text, self.pos)
        if not m:
            raise self.error("unexpected text" if self.text[self.pos:].strip() else
                             "unexpected end")
        self.pos = m.end()
        return m.group(m.lastindex)

    def expect(self, token: str) -> None:
        got = self.peek()
        if got != token:
            raise self.error(f"expected '{token}'")
        self.next()

    def word(self) -> str | None:
        m = _WORD_RE.match(self.text, self.pos)
        if not m:
            return None
        self.pos = m.end()
        return m.group(1)

    def at_end(self) -> bool:
        return not self.text[self.pos:].strip()


def _list(tok: _Tokens, open_: str, close: str, item) -> list:
    tok.expect(open_)
    items = []
    if tok.peek() == close:
        tok.next()
        return items
    while True:
        items.append(item(tok))
        sep = tok.next() if tok.peek() in (",", close) else None
        if sep == close:
            return items
        if sep != ",":
            raise tok.error(f"expected ',' or '{close}'")


def _name(tok: _Tokens) -> str:
    t = tok.peek()
    if t is None or not t[0].isalpha():
        raise tok.error("expected a factor name")
    return tok.next()


def _dim(tok: _Tokens) -> list[str]:
    names = [_name(tok)]
    while (t := tok.peek()) is not None and t[0].isalpha():
        names.append(tok.next())
    return names


def _tensor(tok: _Tokens) -> list[list[str]]:
    return _list(tok, "[", "]", _dim)


def _size(tok: _Tokens) -> tuple[str, int]:
    name = _name(tok)
    tok.expect("=")
    t = tok.peek()
    if t is None or not t.isdigit():
        raise tok.error("expected a size")
    return name, int(tok.next())


def parse_notation(text: str) -> Notation:
    """Parse the rule notation; raises :class:`SdyError` when malformed."""
    tok = _Tokens(text)
    operands = _list(tok, "(", ")", _tensor)
    tok.expect("->")
    results = _list(tok, "(", ")", _tensor)
    return _sizes_and_kinds(tok, text, operands, results)


def _sizes_and_kinds(tok: _Tokens, text: str, operands, results) -> Notation:
    """The rest of a rule after its mappings: ``{sizes}``, kind lists, ``, custom``."""
    sizes = None
    if tok.peek() == "{":
        pairs = _list(tok, "{", "}", _size)
        sizes = {}
        for name, size in pairs:
            if name in sizes:
                raise SdyError(f"factor '{name}' has two sizes in {text.strip()!r}")
            sizes[name] = size
    kinds: dict[str, list[str]] = {}
    custom = False
    while not tok.at_end():
        if tok.peek() == ",":
            tok.next()
            if tok.word() != "custom":
                raise tok.error("expected 'custom'")
            custom = True
            continue
        word = tok.word()
        if word not in _KIND_WORDS:
            raise tok.error("expected a factor kind list such as reduction={...}")
        if word in kinds:
            raise tok.error(f"second {word} list")
        tok.expect("=")
        kinds[word] = _list(tok, "{", "}", _name)
    assert set(FACTOR_KINDS[1:]) <= set(_KIND_WORDS)
    return Notation(operands, results, sizes, kinds, custom)


#: Where a custom_partitioning rule's mappings end: a size block, a kind list or
#: ``, custom`` at the end.
_JAX_TAIL_RE = re.compile(r"\s*(?:\{|(?:reduction|need_replication|permutation|"
                          r"blocked_propagation)\s*=|,\s*custom\s*(?:$|\{|[a-z_]+\s*=))")


def _jax_values(tok: _Tokens, stop) -> list[list[list[str]]]:
    """One side of a custom_partitioning rule: values separated by ``,``."""
    values: list[list[list[str]]] = [[]]
    while not stop():
        t = tok.peek()
        if t is None:
            raise tok.error("expected '->'" if tok.at_end() else "unexpected text")
        if t == ",":
            tok.next()
            values.append([])
        elif t.startswith("..."):
            if values[-1]:
                raise tok.error("'...' must come first in a value")
            values[-1].append([tok.next()])
        elif t == "(":
            tok.next()
            names = []
            while tok.peek() not in (")", None):
                names.append(_name(tok))
            tok.expect(")")
            if len(names) < 2:
                raise tok.error("a compound dim '(...)' needs at least two factors")
            values[-1].append(names)
        elif t[0].isalpha():
            values[-1].append([tok.next()])
        else:
            raise tok.error("expected a factor name, '(', '...' or ','")
    return values


def parse_custom_partitioning(text: str) -> Notation:
    """Parse a rule written as JAX's ``custom_partitioning`` ``sharding_rule``
    (``"i j, j k -> i k"``, see the module docstring), optionally followed by
    the sizes, kind lists and ``, custom`` of Shardy's form; raises
    :class:`SdyError` when malformed."""
    tok = _Tokens(text, _JAX_TOKEN_RE)
    operands = _jax_values(tok, lambda: tok.peek() == "->")
    tok.expect("->")
    results = _jax_values(tok, lambda: tok.at_end()
                          or _JAX_TAIL_RE.match(tok.text, tok.pos) is not None)
    return _sizes_and_kinds(tok, text, operands, results)


def parse_einsum(text: str) -> Notation:
    """A user rule in either form: Shardy's printed ``([i, j]) -> ([i, j])``
    (it starts with ``(`` followed by ``[`` or ``)``), else JAX's
    ``custom_partitioning`` string."""
    if re.match(r"\s*\(\s*[\[)]", text):
        return parse_notation(text)
    return parse_custom_partitioning(text)


