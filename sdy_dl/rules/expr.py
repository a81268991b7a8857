"""The expression language of rule templates: a small, safe subset of Python.

Rule files compute dims, sizes, kinds and conditions with expressions such as
``lhs.shape[d]``, ``d != attr.all_gather_dim`` or
``[i for i in range(lhs.rank) if i not in dn.lhs_contracting_dimensions]``.
They are parsed with :mod:`ast`, checked against a whitelist of node types at
load time, and evaluated by the small interpreter below; nothing is passed to
``eval``.

Allowed: integer/string/bool/None literals, names, tuples and lists,
``+ - * // %``, unary ``- not``, comparisons (``== != < <= > >= in not in is
is not``), ``and``/``or``, ``x if c else y``, indexing and slicing, list
comprehensions and generator expressions, calls of the builtin functions in
:data:`BUILTINS`, reading fields of values that expose them (tensors, the op's
``attr`` namespace, structured attributes), and calling the methods tensors
expose.  Names starting with ``_`` are never accessible.

Evaluation is bounded: no value (list, tuple, string, range) longer than
:data:`MAX_ITEMS`, at most :data:`MAX_STEPS` comprehension steps per
evaluation, and nesting deeper than Python's recursion limit is an error.
"""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass
from typing import Any, Callable

from sdy_dl.errors import SdyError
from sdy_dl.rules.attrs import Record
from sdy_dl.rules.instance import FACTOR_KINDS


def _index_of(seq, x):
    """Position of ``x`` in ``seq``, or None."""
    seq = tuple(seq)
    return seq.index(x) if x in seq else None


#: The longest list, tuple, string or range an expression may build.
MAX_ITEMS = 1 << 16
#: Comprehension steps one evaluation may take (a runaway expression fails
#: within seconds).
MAX_STEPS = 1 << 18


def _bounded(value: Any) -> Any:
    """``value``, or an error if it is a sequence longer than :data:`MAX_ITEMS`."""
    if isinstance(value, (list, tuple, str, range, frozenset)) and len(value) > MAX_ITEMS:
        raise SdyError(f"result has {len(value)} items (at most {MAX_ITEMS})")
    return value


def _range(*args) -> range:
    return _bounded(range(*args))


def _mul(a: Any, b: Any) -> Any:
    """``a * b``, refusing a repeated sequence longer than :data:`MAX_ITEMS`."""
    for seq, n in ((a, b), (b, a)):
        if isinstance(seq, (list, tuple, str)) and isinstance(n, int) \
                and len(seq) * n > MAX_ITEMS:
            raise SdyError(f"result has {len(seq) * n} items (at most {MAX_ITEMS})")
    return a * b


#: Functions expressions may call.
BUILTINS: dict[str, Callable] = {
    "len": len, "range": _range, "min": min, "max": max, "abs": abs,
    "all": all, "any": any, "sum": sum, "sorted": sorted, "int": int, "bool": bool,
    "list": list, "tuple": tuple, "set": frozenset,
    "enumerate": lambda xs, start=0: list(enumerate(xs, start)),
    "zip": lambda *xs: list(zip(*xs)),
    "reversed": lambda xs: list(reversed(list(xs))),
    "prod": math.prod, "gcd": math.gcd, "index_of": _index_of,
}

#: Constant names every expression sees: the factor kinds.
CONSTANTS: dict[str, Any] = {k: k for k in FACTOR_KINDS}

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: _mul,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
           ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
           ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
           ast.Is: operator.is_, ast.IsNot: operator.is_not}
_ALLOWED = (ast.Expression, ast.Constant, ast.Name, ast.Load, ast.Store, ast.Tuple, ast.List,
            ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Subscript,
            ast.Slice, ast.Call, ast.Attribute, ast.ListComp, ast.GeneratorExp,
            ast.comprehension, ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd,
            *_BINOPS, *_CMPOPS)


class Scope:
    """Names visible to an expression; ``let`` bindings are evaluated lazily."""

    def __init__(self, parent: "Scope | None" = None, values: dict | None = None,
                 lazy: dict[str, "Expr"] | None = None):
        self.parent = parent
        self.values = dict(values or {})
        self.lazy = dict(lazy or {})
        self._busy: set[str] = set()

    def child(self, values: dict | None = None, lazy: dict | None = None) -> "Scope":
        return Scope(self, values, lazy)

    def lookup(self, name: str) -> Any:
        scope = self
        while scope is not None:
            if name in scope.values:
                return scope.values[name]
            if name in scope.lazy:
                return scope._force(name)
            scope = scope.parent
        if name in CONSTANTS:
            return CONSTANTS[name]
        raise SdyError(f"unknown name '{name}'")

    def _force(self, name: str) -> Any:
        if name in self._busy:
            raise SdyError(f"'let' binding '{name}' refers to itself")
        self._busy.add(name)
        try:
            value = self.lazy[name].eval(self)
        finally:
            self._busy.discard(name)
        self.values[name] = value
        return value


class Exposed:
    """Base of values whose listed fields/methods expressions may use."""

    RULE_FIELDS: frozenset[str] = frozenset()
    OPEN_FIELDS = False  # True: every field not starting with '_' is readable


@dataclass(frozen=True)
class Expr:
    """A compiled expression."""

    source: str
    tree: ast.AST

    @property
    def free_names(self) -> set[str]:
        """Names the expression reads from its scope (not bound inside it)."""
        try:
            return _free_names(self.tree.body, set())
        except RecursionError:
            raise SdyError(f"`{self.source[:80]}` is nested too deeply") from None

    @property
    def attr_refs(self) -> set[str]:
        """Field names ``X`` of every ``attr.X`` in the expression."""
        return {n.attr for n in ast.walk(self.tree)
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                and n.value.id == "attr"}

    def eval(self, scope: Scope) -> Any:
        outermost = _steps.left is None
        if outermost:
            _steps.left = MAX_STEPS
        try:
            return _eval(self.tree.body, scope)
        except RecursionError:
            raise SdyError(f"`{self.source[:80]}` is nested too deeply") from None
        except MemoryError:
            raise SdyError(f"`{self.source[:80]}` needs too much memory") from None
        except SdyError as e:
            if "`" in e.message:
                raise
            raise SdyError(f"in `{self.source}`: {e.message}") from None
        except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError) as e:
            raise SdyError(f"cannot evaluate `{self.source}`: "
                           f"{type(e).__name__}: {e}") from None
        finally:
            if outermost:
                _steps.left = None


class _Steps:
    """Comprehension steps left in the current (outermost) evaluation."""

    left: int | None = None


_steps = _Steps()


def compile_expr(source: Any) -> Expr:
    """Compile a YAML scalar (string, int, bool or None) to an :class:`Expr`."""
    if source is None or isinstance(source, (bool, int)):
        text = repr(source)
    elif isinstance(source, str):
        text = source.strip()
    else:
        raise SdyError(f"expected an expression, got {type(source).__name__}")
    try:
        tree = ast.parse(text, mode="eval")
        _check(tree, text)
    except SyntaxError as e:
        raise SdyError(f"malformed expression `{text[:80]}`: {e.msg}") from None
    except (RecursionError, MemoryError):
        raise SdyError(f"expression `{text[:80]}` is nested too deeply") from None
    return Expr(text, tree)


def compile_for(source: Any) -> tuple[ast.AST, Expr]:
    """Compile a loop header ``TARGETS in ITERABLE``."""
    if not isinstance(source, str):
        raise SdyError("'for' must be a string 'NAME in EXPRESSION'")
    text = source.strip()
    try:
        stmt = ast.parse(f"for {text}:\n    pass").body[0]
    except SyntaxError:
        raise SdyError(f"malformed loop `{text}` (expected 'NAME in EXPRESSION')") from None
    _check_target(stmt.target, text)
    iter_src = ast.get_source_segment(f"for {text}:\n    pass", stmt.iter) or ""
    return stmt.target, compile_expr(iter_src)


def target_names(target: ast.AST) -> set[str]:
    """Names a loop target binds."""
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def bind(target: ast.AST, value: Any, out: dict) -> None:
    """Bind ``value`` to a loop target (a name or nested tuple of names)."""
    if isinstance(target, ast.Name):
        out[target.id] = value
        return
    items = list(value)
    if len(items) != len(target.elts):
        raise SdyError(f"cannot unpack {len(items)} value(s) into {len(target.elts)} names")
    for t, v in zip(target.elts, items):
        bind(t, v, out)


def _check_target(target: ast.AST, text: str) -> None:
    if isinstance(target, ast.Name):
        if target.id.startswith("_"):
            raise SdyError(f"name '{target.id}' in `{text}` may not start with '_'")
        return
    if isinstance(target, ast.Tuple):
        for t in target.elts:
            _check_target(t, text)
        return
    raise SdyError(f"loop target in `{text}` must be a name or a tuple of names")


def _check(tree: ast.AST, text: str) -> None:
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            what = type(node).__name__
            hint = " (use // for integer division)" if isinstance(node, ast.Div) else ""
            raise SdyError(f"malformed expression `{text}`: {what} is not allowed{hint}")
        if isinstance(node, ast.Name) and node.id.startswith("_"):
            raise SdyError(f"malformed expression `{text}`: name '{node.id}' is not allowed")
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise SdyError(f"malformed expression `{text}`: field '{node.attr}' is not allowed")
        if isinstance(node, ast.Call):
            if node.keywords:
                raise SdyError(f"malformed expression `{text}`: keyword arguments are not "
                               "allowed")
            if isinstance(node.func, ast.Name) and node.func.id not in BUILTINS:
                raise SdyError(f"malformed expression `{text}`: unknown function "
                               f"'{node.func.id}'")
            if not isinstance(node.func, (ast.Name, ast.Attribute)):
                raise SdyError(f"malformed expression `{text}`: only named functions can be "
                               "called")
        if isinstance(node, ast.comprehension):
            if node.is_async:
                raise SdyError(f"malformed expression `{text}`: async is not allowed")
            _check_target(node.target, text)
        if isinstance(node, ast.Constant) and not (
                node.value is None or isinstance(node.value, (bool, int, str))):
            raise SdyError(f"malformed expression `{text}`: only integer, string, bool and "
                           "None literals are allowed")


def _free_names(node: ast.AST, bound: set[str]) -> set[str]:
    if isinstance(node, ast.Name):
        return set() if node.id in bound else {node.id}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        out: set[str] = set()
        for a in node.args:
            out |= _free_names(a, bound)
        return out
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        out = set()
        inner = set(bound)
        for gen in node.generators:
            out |= _free_names(gen.iter, inner)
            inner |= target_names(gen.target)
            for cond in gen.ifs:
                out |= _free_names(cond, inner)
        return out | _free_names(node.elt, inner)
    out = set()
    for child in ast.iter_child_nodes(node):
        out |= _free_names(child, bound)
    return out


def _get_field(obj: Any, name: str) -> Any:
    if isinstance(obj, Record):
        return getattr(obj, name)
    if isinstance(obj, Exposed) and (type(obj).OPEN_FIELDS or name in type(obj).RULE_FIELDS):
        return getattr(obj, name)
    raise SdyError(f"{type(obj).__name__} value has no field '{name}'")


def _eval(node: ast.AST, scope: Scope) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return scope.lookup(node.id)
    if isinstance(node, ast.Tuple):
        return tuple(_eval(e, scope) for e in node.elts)
    if isinstance(node, ast.List):
        return [_eval(e, scope) for e in node.elts]
    if isinstance(node, ast.BinOp):
        return _bounded(_BINOPS[type(node.op)](_eval(node.left, scope), _eval(node.right, scope)))
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, scope)
        if isinstance(node.op, ast.Not):
            return not v
        return -v if isinstance(node.op, ast.USub) else +v
    if isinstance(node, ast.BoolOp):
        is_and = isinstance(node.op, ast.And)
        v = None
        for e in node.values:
            v = _eval(e, scope)
            if bool(v) != is_and:
                return v
        return v
    if isinstance(node, ast.Compare):
        left = _eval(node.left, scope)
        for op, comp in zip(node.ops, node.comparators):
            right = _eval(comp, scope)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body if _eval(node.test, scope) else node.orelse, scope)
    if isinstance(node, ast.Subscript):
        return _eval(node.value, scope)[_eval(node.slice, scope)]
    if isinstance(node, ast.Slice):
        return slice(*(None if p is None else _eval(p, scope)
                       for p in (node.lower, node.upper, node.step)))
    if isinstance(node, ast.Attribute):
        return _get_field(_eval(node.value, scope), node.attr)
    if isinstance(node, ast.Call):
        args = [_eval(a, scope) for a in node.args]
        if isinstance(node.func, ast.Name):
            return _bounded(BUILTINS[node.func.id](*args))
        return _get_field(_eval(node.func.value, scope), node.func.attr)(*args)
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        out: list = []
        _comprehend(node, node.generators, scope, out)
        return out
    raise SdyError(f"unsupported expression node {type(node).__name__}")


def _comprehend(node, generators, scope: Scope, out: list) -> None:
    if not generators:
        out.append(_eval(node.elt, scope))
        return
    gen = generators[0]
    for item in _eval(gen.iter, scope):
        if _steps.left is not None:
            _steps.left -= 1
            if _steps.left < 0:
                raise SdyError(f"more than {MAX_STEPS} comprehension steps")
        values: dict = {}
        bind(gen.target, item, values)
        inner = scope.child(values)
        if all(_eval(cond, inner) for cond in gen.ifs):
            _comprehend(node, generators[1:], inner, out)
            _bounded(out)
