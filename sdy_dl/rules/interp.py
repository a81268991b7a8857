"""Instantiate a rule entry for one op: run its statements on a RuleBuilder."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sdy_dl.errors import SdyError
from sdy_dl.rules.builder import RuleBuilder, empty_factor_problem, factor_size_problem
from sdy_dl.rules.expr import Expr, Scope, bind
from sdy_dl.rules.instance import FACTOR_KINDS, RuleInstance
from sdy_dl.rules.schema import (Body, Entry, FactorAction, GenerateAction, Selector, Stmt,
                                 Template, UseAction)
from sdy_dl.rules.view import group_indices, op_scope
from sdy_dl.rules.yamlsrc import Loc


class NoRule(Exception):
    """Raised by ``no_rule_if``: the op gets no rule."""


@dataclass
class Context:
    """Everything a running rule needs besides its scope."""

    op: Any                      # sdy_dl.ir.Op
    templates: dict[str, Template]
    generators: dict
    builder: RuleBuilder
    groups: dict[str, tuple[int, ...]]


def instantiate(entry: Entry, op, conservative: bool, templates: dict[str, Template],
                generators: dict) -> RuleInstance | None:
    """The rule ``entry`` gives ``op`` (None when the entry says there is none)."""
    if entry.no_rule:
        return None
    try:
        if entry.einsum is not None:
            return _einsum(entry, op)
        groups = group_indices(op)
        scope = op_scope(op, conservative, groups)
        if entry.shared_lets:
            scope = scope.child(lazy=entry.shared_lets)
        builder = RuleBuilder([len(v.shape or ()) for v in op.operands],
                              [len(v.shape or ()) for v in op.results])
        ctx = Context(op, templates, generators, builder, groups)
        try:
            run_body(entry.body, scope, ctx)
        except NoRule:
            return None
        return builder.build()
    except SdyError as e:
        where = f"{op.name}" + (f" at line {op.line}" if op.line is not None else "")
        if "while building" not in e.message:
            e.message = f"{e.message} (while building the rule of {where})"
            e.args = (e.message,)
        raise entry.loc.locate(e) from None


def _einsum(entry: Entry, op) -> RuleInstance:
    """The compact form: sizes inferred from the op's shapes."""
    operands = [v.shape for v in op.operands]
    results = [v.shape for v in op.results]
    note = entry.einsum.for_ranks([len(s or ()) for s in operands], [len(s or ()) for s in results])
    sizes = note.infer_sizes(operands, results)
    note.check_declared()
    return note.to_instance(sizes)


def _eval(expr: Expr, scope: Scope, loc: Loc) -> Any:
    try:
        return expr.eval(scope)
    except SdyError as e:
        raise loc.locate(e) from None


def run_body(body: Body, scope: Scope, ctx: Context) -> None:
    """Run a rule body (its ``let`` bindings are lazy)."""
    scope = scope.child(lazy=body.lets) if body.lets else scope
    if body.no_rule_if is not None and _eval(body.no_rule_if, scope,
                                             body.locs.get("no_rule_if", body.loc)):
        raise NoRule()
    for stmt in body.stmts:
        run_stmt(stmt, scope, ctx)


def run_stmt(stmt: Stmt, scope: Scope, ctx: Context) -> None:
    """Run one statement: for every loop item whose condition holds, its action."""
    if stmt.loop is None:
        scopes = [scope]
    else:
        target, it = stmt.loop
        items = _eval(it, scope, stmt.locs["for"])
        scopes = []
        for item in items:
            values: dict = {}
            try:
                bind(target, item, values)
            except SdyError as e:
                raise stmt.locs["for"].locate(e) from None
            scopes.append(scope.child(values))
    for s in scopes:
        if stmt.lets:
            s = s.child(lazy=stmt.lets)
        if stmt.cond is not None and not _eval(stmt.cond, s, stmt.locs["if"]):
            continue
        action = stmt.action
        if isinstance(action, list):
            for inner in action:
                run_stmt(inner, s, ctx)
        elif isinstance(action, FactorAction):
            _add_factor(action, s, ctx)
        elif isinstance(action, UseAction):
            _use(action, s, ctx)
        else:
            _generate(action, s, ctx)


def _use(u: UseAction, scope: Scope, ctx: Context) -> None:
    template = ctx.templates[u.name]
    args = {name: _eval(e, scope, u.arg_locs[name]) for name, e in u.args.items()}
    base = _root(scope).child(args)
    defaults = {k: v for k, v in template.params.items() if k not in args}
    run_body(template.body, base.child(lazy=defaults) if defaults else base, ctx)


def _root(scope: Scope) -> Scope:
    while scope.parent is not None:
        scope = scope.parent
    return scope


def _generate(g: GenerateAction, scope: Scope, ctx: Context) -> None:
    gen = ctx.generators[g.name]
    params = dict(gen.params)
    params.update({name: _eval(e, scope, g.arg_locs[name]) for name, e in g.args.items()})
    try:
        gen.run(ctx.op, _root(scope), ctx.builder, params)
    except SdyError as e:
        raise g.loc.locate(e) from None


def _add_factor(f: FactorAction, scope: Scope, ctx: Context) -> None:
    size = _eval(f.size, scope, f.locs["size"])
    kind = _eval(f.kind, scope, f.locs["kind"])
    blocked = _eval(f.blocked, scope, f.locs["blocked"])
    if kind not in FACTOR_KINDS:
        raise f.locs["kind"].error(f"bad kind {kind!r} (expected one of: "
                                   f"{', '.join(FACTOR_KINDS)})")
    problem = factor_size_problem(size)
    if problem:
        raise f.locs["size"].error(problem)
    builder = ctx.builder
    dims = [(sel, _eval(e, scope, f.locs.get(f"dims.{sel.name}", sel.loc)))
            for sel, e in f.dims]
    try:
        if dims[0][0].all_mode:
            operand_dim = result_dim = None
            for sel, dim in dims:
                if sel.kind in ("all", "all_operands"):
                    operand_dim = dim
                if sel.kind in ("all", "all_results"):
                    result_dim = dim
            index = builder.add_on_all(operand_dim, result_dim, size, kind, bool(blocked))
        else:
            operand_dims = [None] * len(builder.operands)
            result_dims = [None] * len(builder.results)
            for sel, dim in dims:
                side, indices = _select(sel, scope, ctx)
                target = operand_dims if side == "operands" else result_dims
                for i in indices:
                    if target[i] is not None and dim is not None and target[i] != dim:
                        raise sel.loc.error(f"{side[:-1]} {i} is given two dims ({target[i]} "
                                            f"and {dim}) for one factor")
                    if dim is not None:
                        target[i] = dim
            index = builder.add(operand_dims, result_dims, size, kind, bool(blocked))
    except SdyError as e:
        raise f.locs["dims"].locate(e) from None
    if size == 0:
        problem = empty_factor_problem(builder, index, [v.shape for v in ctx.op.operands],
                                       [v.shape for v in ctx.op.results])
        if problem:
            raise f.locs["size"].error(problem)


def _select(sel: Selector, scope: Scope, ctx: Context) -> tuple[str, list[int]]:
    """The side and tensor indices a non-``all`` selector names."""
    if sel.kind == "group":
        return "operands", list(ctx.groups.get(sel.name, ()))
    count = len(ctx.builder.operands if sel.side == "operands" else ctx.builder.results)
    if sel.kind == "index":
        i = _eval(sel.exprs[0], scope, sel.loc)
        if not isinstance(i, int) or not -count <= i < count:
            raise sel.loc.error(f"{sel.name}: index {i!r} out of range ({count} {sel.side})")
        return sel.side, [i % count]
    lo, hi = (None if e is None else _eval(e, scope, sel.loc) for e in sel.exprs)
    return sel.side, list(range(count))[slice(lo, hi)]
