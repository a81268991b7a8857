"""Rule files: parse the YAML into rule entries and validate them.

The format is documented in ``rules/SCHEMA.md``.  Parsing checks the shape of
every node (known keys, required keys, types) and compiles expressions;
:func:`validate_entry` then checks every entry against the op it is for
(names in scope, the op's attributes and operand groups, templates,
generators, kinds, einsum factors).  Every error names file, line and column.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Union

from sdy_dl.errors import SdyError
from sdy_dl.ir.traits import CUSTOM_CALL_OP
from sdy_dl.rules.attrs import OpSignature, op_signature
from sdy_dl.rules.expr import CONSTANTS, Expr, compile_expr, compile_for, target_names
from sdy_dl.rules.instance import FACTOR_KINDS
from sdy_dl.rules.notation import Notation, parse_einsum
from sdy_dl.rules.view import OP_NAMES, group_names
from sdy_dl.rules.yamlsrc import Loc, YList, YMap, load_yaml

# --------------------------------------------------------------------------- the model


@dataclass
class Selector:
    """Which tensors a factor goes to (a key of ``dims``)."""

    kind: str                # 'all' | 'all_operands' | 'all_results' | 'index' | 'slice' | 'group'
    side: str = ""           # 'operands' | 'results' for index/slice
    exprs: tuple = ()        # index: (Expr,), slice: (Expr|None, Expr|None)
    name: str = ""           # group name, or the key text
    loc: Loc | None = None

    @property
    def all_mode(self) -> bool:
        return self.kind.startswith("all")


@dataclass
class FactorAction:
    """Add one factor."""

    size: Expr
    kind: Expr
    blocked: Expr
    dims: list[tuple[Selector, Expr]]
    locs: dict[str, Loc]


@dataclass
class UseAction:
    """Run a template (``use: NAME``, arguments in ``with``)."""

    name: str
    args: dict[str, Expr]
    loc: Loc
    arg_locs: dict[str, Loc]


@dataclass
class GenerateAction:
    """Run a named Python generator (``generator: NAME``)."""

    name: str
    args: dict[str, Expr]
    loc: Loc
    arg_locs: dict[str, Loc]


@dataclass
class Stmt:
    """One item of a ``factors`` list, with its optional loop, bindings and condition."""

    loc: Loc
    action: Union[FactorAction, UseAction, GenerateAction, list]
    loop: tuple[ast.AST, Expr] | None = None
    cond: Expr | None = None
    lets: dict[str, Expr] = field(default_factory=dict)
    locs: dict[str, Loc] = field(default_factory=dict)


@dataclass
class Body:
    """A rule body: bindings, a no-rule condition and factor statements."""

    loc: Loc
    stmts: list[Stmt]
    lets: dict[str, Expr] = field(default_factory=dict)
    no_rule_if: Expr | None = None
    locs: dict[str, Loc] = field(default_factory=dict)


@dataclass
class Template:
    """A named, parameterised rule body shared by entries (``templates:``)."""

    name: str
    doc: str
    params: dict[str, Expr]
    body: Body
    loc: Loc
    source: str


@dataclass
class Entry:
    """The rule of one op (``ops:``) or one custom-call target (``custom_calls:``)."""

    key: str
    section: str             # 'ops' | 'custom_calls'
    doc: str
    loc: Loc
    source: str
    body: Body | None = None
    einsum: Notation | None = None
    no_rule: bool = False
    shared_lets: dict[str, Expr] = field(default_factory=dict)   # the file's 'let'
    shared_let_locs: dict[str, Loc] = field(default_factory=dict)

    @property
    def op_name(self) -> str:
        return CUSTOM_CALL_OP if self.section == "custom_calls" else self.key

    @property
    def label(self) -> str:
        return f"custom_call @{self.key}" if self.section == "custom_calls" else self.key


@dataclass
class RuleFile:
    """One parsed rule file."""

    path: str
    description: str
    templates: dict[str, Template]
    entries: list[Entry]
    lets: dict[str, Expr] = field(default_factory=dict)


# --------------------------------------------------------------------------- parsing

_FILE_KEYS = {"description", "let", "templates", "ops", "custom_calls"}
_ENTRY_FORMS = ("factors", "use", "generator", "einsum", "no_rule")
_ENTRY_KEYS = {"doc", "let", "no_rule_if", "with", *_ENTRY_FORMS}
_TEMPLATE_KEYS = {"doc", "params", "let", "no_rule_if", "factors"}
_STMT_ACTIONS = ("size", "factors", "use", "generator")
_FACTOR_KEYS = {"size", "kind", "blocked", "dims"}
_STMT_KEYS = {"for", "if", "let", "with", *_FACTOR_KEYS, *_STMT_ACTIONS}
_ALL_SELECTORS = ("all", "all_operands", "all_results")


def parse_rule_file(text: str, path: str) -> RuleFile:
    """Parse and shape-check one rule file (see ``rules/SCHEMA.md``)."""
    doc = load_yaml(text, path)
    if doc is None:
        raise SdyError("empty rule file", path)
    if not isinstance(doc, YMap):
        raise SdyError("a rule file must be a mapping with 'description' and 'ops', "
                       "'custom_calls' or 'templates'", path, 1, 1)
    _known_keys(doc, _FILE_KEYS, "rule file")
    description = _one_line(doc, "description", "rule file")
    shared, shared_locs = _lets(doc)
    templates = {}
    for name, node in _section(doc, "templates").items():
        templates[name] = _parse_template(name, node, doc["templates"].at(name),
                                          doc["templates"].key_sources[name])
    entries = []
    for section in ("ops", "custom_calls"):
        for key, node in _section(doc, section).items():
            entry = _parse_entry(key, section, node, doc[section].at(key),
                                 doc[section].key_sources[key])
            entry.shared_lets, entry.shared_let_locs = shared, shared_locs
            entries.append(entry)
    if not templates and not entries:
        raise doc.loc.error("rule file defines no 'ops', 'custom_calls' or 'templates'")
    return RuleFile(path, description, templates, entries, shared)


def _section(doc: YMap, key: str) -> YMap:
    node = doc.get(key)
    if node is None:
        return YMap()
    if not isinstance(node, YMap):
        raise doc.value_at(key).error(f"'{key}' must be a mapping")
    return node


def _known_keys(node: YMap, allowed: set[str], what: str) -> None:
    for key in node:
        if key not in allowed:
            raise node.at(key).error(f"unknown field '{key}' in {what} "
                                     f"(expected one of: {', '.join(sorted(allowed))})")


def _one_line(node: YMap, key: str, what: str, where: Loc | None = None) -> str:
    value = node.get(key)
    if not isinstance(value, str) or not value.strip():
        loc = node.at(key) if key in node or where is None else where
        raise loc.error(f"{what} needs a one-line '{key}' string")
    if "\n" in value.strip():
        raise node.value_at(key).error(f"'{key}' of {what} must be one line")
    return value.strip()


def _expr(node: YMap, key: str, default: Any = None) -> Expr | None:
    if key not in node:
        return None if default is None else compile_expr(default)
    value = node[key]
    if isinstance(value, (YMap, YList)):
        raise node.value_at(key).error(f"'{key}' must be an expression, not a "
                                       f"{'mapping' if isinstance(value, YMap) else 'list'}")
    try:
        return compile_expr(value)
    except SdyError as e:
        raise node.value_at(key).locate(e) from None


def _lets(node: YMap, key: str = "let") -> tuple[dict[str, Expr], dict[str, Loc]]:
    value = node.get(key)
    if value is None:
        return {}, {}
    if not isinstance(value, YMap):
        raise node.value_at(key).error(f"'{key}' must be a mapping of names to expressions")
    out, locs = {}, {}
    for name in value:
        if not name.isidentifier() or name.startswith("_"):
            raise value.at(name).error(f"'{name}' is not a valid name")
        out[name] = _expr(value, name)
        locs[name] = value.value_at(name)
    return out, locs


def _parse_template(name: str, node, loc: Loc, source: str) -> Template:
    if not isinstance(node, YMap):
        raise loc.error(f"template '{name}' must be a mapping")
    _known_keys(node, _TEMPLATE_KEYS, f"template '{name}'")
    doc = _one_line(node, "doc", f"template '{name}'", loc)
    params, _ = _lets(node, "params")
    if "factors" not in node:
        raise node.loc.error(f"template '{name}' needs 'factors'")
    return Template(name, doc, params, _parse_body(node, node.loc), loc, source)


def _parse_body(node: YMap, loc: Loc) -> Body:
    lets, locs = _lets(node)
    body = Body(loc, [], lets, _expr(node, "no_rule_if"), locs)
    body.locs["no_rule_if"] = node.value_at("no_rule_if")
    if "factors" in node:
        body.stmts = _parse_stmts(node, "factors")
    return body


def _parse_entry(key: str, section: str, node, loc: Loc, source: str) -> Entry:
    what = f"custom_call @{key}" if section == "custom_calls" else f"op '{key}'"
    if not isinstance(node, YMap):
        raise loc.error(f"the entry of {what} must be a mapping with 'doc' and a rule")
    _known_keys(node, _ENTRY_KEYS, what)
    doc = _one_line(node, "doc", what, loc)
    forms = [f for f in _ENTRY_FORMS if f in node]
    if len(forms) != 1:
        raise node.loc.error(f"{what} needs exactly one of: {', '.join(_ENTRY_FORMS)}"
                             + (f" (got {', '.join(forms)})" if forms else ""))
    form = forms[0]
    if "with" in node and form not in ("use", "generator"):
        raise node.at("with").error("'with' goes with 'use' or 'generator'")
    entry = Entry(key, section, doc, loc, source)
    if form == "no_rule":
        if node["no_rule"] is not True:
            raise node.value_at("no_rule").error("'no_rule' must be true")
        extra = [k for k in ("let", "no_rule_if") if k in node]
        if extra:
            raise node.at(extra[0]).error(f"'{extra[0]}' has no meaning with 'no_rule'")
        entry.no_rule = True
    elif form == "einsum":
        text = node["einsum"]
        if not isinstance(text, str):
            raise node.value_at("einsum").error("'einsum' must be a string such as "
                                                "'([b, h], [h, f]) -> ([b, f]) reduction={h}' "
                                                "or 'b h, h f -> b f reduction={h}'")
        extra = [k for k in ("let", "no_rule_if") if k in node]
        if extra:
            raise node.at(extra[0]).error(f"'{extra[0]}' has no meaning with 'einsum'")
        try:
            entry.einsum = parse_einsum(text)
            entry.einsum.check_declared()
        except SdyError as e:
            raise node.value_at("einsum").locate(e) from None
    else:
        body = _parse_body(node, node.loc)
        if form in ("use", "generator"):
            body.stmts = [Stmt(node.at(form), _parse_call(node, form))]
        entry.body = body
    return entry


def _parse_stmts(node: YMap, key: str) -> list[Stmt]:
    items = node[key]
    if not isinstance(items, YList):
        raise node.value_at(key).error(f"'{key}' must be a list of factor statements")
    return [_parse_stmt(item, loc) for item, loc in zip(items, items.item_locs)]


def _parse_stmt(node, loc: Loc) -> Stmt:
    if not isinstance(node, YMap):
        raise loc.error("a factor statement must be a mapping (size/kind/blocked/dims, "
                        "factors, use or generator)")
    _known_keys(node, _STMT_KEYS, "factor statement")
    actions = [a for a in _STMT_ACTIONS if a in node]
    if len(actions) != 1:
        raise node.loc.error("a factor statement needs exactly one of: 'size' (with 'dims'), "
                             "'factors', 'use', 'generator'"
                             + (f" (got {', '.join(actions)})" if actions else ""))
    action_key = actions[0]
    stray = [k for k in node if k in _FACTOR_KEYS and action_key != "size"]
    if stray:
        raise node.at(stray[0]).error(f"'{stray[0]}' belongs to a factor (with 'size')")
    if "with" in node and action_key not in ("use", "generator"):
        raise node.at("with").error("'with' goes with 'use' or 'generator'")
    stmt = Stmt(node.loc, None)
    if "for" in node:
        try:
            stmt.loop = compile_for(node["for"])
        except SdyError as e:
            raise node.value_at("for").locate(e) from None
        stmt.locs["for"] = node.value_at("for")
    stmt.cond = _expr(node, "if")
    stmt.locs["if"] = node.value_at("if")
    stmt.lets, let_locs = _lets(node)
    stmt.locs.update({f"let.{k}": v for k, v in let_locs.items()})
    if action_key == "size":
        stmt.action = _parse_factor(node)
    elif action_key == "factors":
        stmt.action = _parse_stmts(node, "factors")
    else:
        stmt.action = _parse_call(node, action_key)
    return stmt


def _parse_call(node: YMap, key: str) -> UseAction | GenerateAction:
    name = node[key]
    if not isinstance(name, str) or not name.strip():
        raise node.value_at(key).error(f"'{key}' must name a "
                                       f"{'template' if key == 'use' else 'generator'}")
    args, arg_locs = _lets(node, "with")
    cls = UseAction if key == "use" else GenerateAction
    return cls(name.strip(), args, node.value_at(key), arg_locs)


def _parse_factor(node: YMap) -> FactorAction:
    if "dims" not in node:
        raise node.loc.error("a factor needs 'dims' (which tensor dims it maps to)")
    dims_node = node["dims"]
    if not isinstance(dims_node, YMap) or not dims_node:
        raise node.value_at("dims").error("'dims' must be a non-empty mapping from tensors "
                                          "(all, all_operands, all_results, operands, results, "
                                          "operands[i], results[i], operands[a:b] or an "
                                          "operand group) to dims")
    dims = []
    for key in dims_node:
        selector = _parse_selector(key, dims_node.at(key))
        dims.append((selector, _expr(dims_node, key)))
    modes = {s.all_mode for s, _ in dims}
    if len(modes) > 1:
        raise dims_node.loc.error("'all', 'all_operands' and 'all_results' cannot be mixed "
                                  "with explicit tensors in one factor")
    locs = {k: node.value_at(k) for k in ("size", "kind", "blocked", "dims")}
    locs.update({f"dims.{k}": dims_node.value_at(k) for k in dims_node})
    return FactorAction(_expr(node, "size"), _expr(node, "kind", "pass_through"),
                        _expr(node, "blocked", False), dims, locs)


def _parse_selector(key: str, loc: Loc) -> Selector:
    if key in _ALL_SELECTORS:
        return Selector(key, name=key, loc=loc)
    if key in ("operands", "results"):
        return Selector("slice", key, (None, None), key, loc)
    if key.isidentifier():
        return Selector("group", name=key, loc=loc)
    try:
        tree = ast.parse(key, mode="eval").body
    except SyntaxError:
        tree = None
    if isinstance(tree, ast.Subscript) and isinstance(tree.value, ast.Name) \
            and tree.value.id in ("operands", "results"):
        if isinstance(tree.slice, ast.Slice) and tree.slice.step is not None:
            raise loc.error(f"tensor selector '{key}' may not have a step")
        bounds = ((tree.slice.lower, tree.slice.upper) if isinstance(tree.slice, ast.Slice)
                  else (tree.slice,))
        try:
            parts = tuple(None if p is None else compile_expr(ast.get_source_segment(key, p))
                          for p in bounds)
        except SdyError as e:
            raise loc.locate(e) from None
        kind = "slice" if isinstance(tree.slice, ast.Slice) else "index"
        return Selector(kind, tree.value.id, parts, key, loc)
    raise loc.error(f"bad tensor selector '{key}' (expected all, all_operands, all_results, "
                    "an operand group name, operands[i], results[i] or operands[a:b])")


# --------------------------------------------------------------------------- validation

BASE_NAMES = OP_NAMES | frozenset(CONSTANTS)


@dataclass
class _Checker:
    """Validates entries against an op signature, the templates and generators."""

    templates: dict[str, Template]
    generators: dict
    signature: OpSignature
    label: str
    stack: tuple[str, ...] = ()
    shared: dict[str, Expr] = field(default_factory=dict)
    shared_locs: dict[str, Loc] = field(default_factory=dict)
    checked: set[str] = field(default_factory=set)

    @property
    def base(self) -> set[str]:
        return set(BASE_NAMES) | set(group_names(self.signature))

    def expr(self, expr: Expr | None, names: set[str], loc: Loc) -> None:
        if expr is None:
            return
        free = expr.free_names
        for name in sorted(free - names):
            if name in self.shared and name not in self.checked:
                # A file-level binding: checked where it is used, once.
                self.checked.add(name)
                self.expr(self.shared[name], self.base | set(self.shared),
                          self.shared_locs[name])
        unknown = sorted(free - names - set(self.shared))
        if unknown:
            raise loc.error(f"unknown name '{unknown[0]}' in `{expr.source}`"
                            + self._context())
        if self.signature.known and "attr" not in names - BASE_NAMES:
            for name in sorted(expr.attr_refs):
                if not self.signature.has_attribute(name):
                    known = ", ".join(self.signature.attributes) or "none"
                    raise loc.error(f"unknown op attribute '{name}' of {self.signature.name} "
                                    f"(its attributes: {known})" + self._context())

    def _context(self) -> str:
        return f" (checking the rule of {self.label})" if self.stack else ""

    def body(self, body: Body, names: set[str]) -> None:
        names = names | set(body.lets)
        for name, e in body.lets.items():
            self.expr(e, names, body.locs.get(name, body.loc))
        self.expr(body.no_rule_if, names, body.locs.get("no_rule_if", body.loc))
        for stmt in body.stmts:
            self.stmt(stmt, names)

    def stmt(self, stmt: Stmt, names: set[str]) -> None:
        if stmt.loop is not None:
            target, it = stmt.loop
            self.expr(it, names, stmt.locs["for"])
            names = names | target_names(target)
        names = names | set(stmt.lets)
        for name, e in stmt.lets.items():
            self.expr(e, names, stmt.locs.get(f"let.{name}", stmt.loc))
        self.expr(stmt.cond, names, stmt.locs.get("if", stmt.loc))
        action = stmt.action
        if isinstance(action, list):
            for s in action:
                self.stmt(s, names)
        elif isinstance(action, FactorAction):
            self.factor(action, names)
        elif isinstance(action, UseAction):
            self.use(action, names)
        else:
            self.generate(action, names)

    def factor(self, f: FactorAction, names: set[str]) -> None:
        self.expr(f.size, names, f.locs["size"])
        kind_src = f.kind.source
        if isinstance(f.kind.tree.body, (ast.Name, ast.Constant)):
            literal = f.kind.tree.body
            value = literal.id if isinstance(literal, ast.Name) else literal.value
            if value not in FACTOR_KINDS and (isinstance(literal, ast.Constant)
                                              or value not in names):
                raise f.locs["kind"].error(f"bad kind '{kind_src}' (expected one of: "
                                           f"{', '.join(FACTOR_KINDS)})")
        self.expr(f.kind, names, f.locs["kind"])
        self.expr(f.blocked, names, f.locs["blocked"])
        groups = set(group_names(self.signature))
        for selector, dim in f.dims:
            if selector.kind == "group" and selector.name not in groups:
                known = ", ".join(sorted(groups)) or "none"
                raise selector.loc.error(f"unknown operand group '{selector.name}' of "
                                         f"{self.signature.name} (its groups: {known}; or use "
                                         "operands[i] / results[i])" + self._context())
            for e in selector.exprs:
                self.expr(e, names, selector.loc)
            self.expr(dim, names, f.locs.get(f"dims.{selector.name}", selector.loc))

    def use(self, u: UseAction, names: set[str]) -> None:
        template = self.templates.get(u.name)
        if template is None:
            raise u.loc.error(f"unknown template '{u.name}'"
                              + (f" (known: {', '.join(sorted(self.templates))})"
                                 if self.templates else ""))
        for name, e in u.args.items():
            if name not in template.params:
                raise u.arg_locs[name].error(f"template '{u.name}' has no parameter '{name}'"
                                             f" (its parameters: "
                                             f"{', '.join(template.params) or 'none'})")
            self.expr(e, names, u.arg_locs[name])
        if u.name in self.stack:
            raise u.loc.error(f"template '{u.name}' uses itself")
        inner = _Checker(self.templates, self.generators, self.signature, self.label,
                         self.stack + (u.name,))  # templates do not see file-level lets
        params = set(template.params)
        for name, e in template.params.items():
            inner.expr(e, inner.base | params, template.body.loc)
        inner.body(template.body, inner.base | params)

    def generate(self, g: GenerateAction, names: set[str]) -> None:
        gen = self.generators.get(g.name)
        if gen is None:
            raise g.loc.error(f"unknown generator '{g.name}' (known: "
                              f"{', '.join(sorted(self.generators))})")
        for name, e in g.args.items():
            if name not in gen.params:
                raise g.arg_locs[name].error(f"generator '{g.name}' has no parameter "
                                             f"'{name}' (its parameters: "
                                             f"{', '.join(gen.params) or 'none'})")
            self.expr(e, names, g.arg_locs[name])


def validate_entry(entry: Entry, templates: dict[str, Template], generators: dict) -> None:
    """Check one entry against its op, the templates and the generators."""
    if entry.body is None:
        return
    checker = _Checker(templates, generators, op_signature(entry.op_name), entry.label,
                       shared=entry.shared_lets, shared_locs=entry.shared_let_locs)
    checker.body(entry.body, checker.base)
