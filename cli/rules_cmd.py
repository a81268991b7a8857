"""``sdy-dl rules``: list, show, check and annotate op sharding rules."""

from __future__ import annotations

import json

import click

from sdy_dl.cli import main
from sdy_dl.cli.options import format_option, unregistered_dialect_option

_RULES_HELP = "Extra YAML rule file or folder (repeatable; after $SDY_DL_RULES)."


def _rules_option(fn):
    return click.option("--rules", "rule_files", multiple=True, type=click.Path(),
                        help=_RULES_HELP)(fn)


@main.group()
def rules() -> None:
    """Op sharding rules: the YAML rule database and the rule of every op."""


@rules.command("list")
@_rules_option
@format_option("Output format (json for scripts).")
def list_rules(rule_files: tuple[str, ...], fmt: str) -> None:
    """List the ops and custom-call targets (@name) covered, with their rule file."""
    from sdy_dl.rules.db import load_rule_db

    covered = load_rule_db(rule_files).ops()
    if fmt == "json":
        click.echo(json.dumps([c._asdict() for c in covered], indent=2))
        return
    width = max(len(c.name) for c in covered)
    for c in covered:
        mark = " " if c.has_rule else "-"
        click.echo(f"{c.name:<{width}} {mark} {c.file}:{c.line}  {c.doc}")
    click.echo(f"{sum(c.has_rule for c in covered)} with a rule, "
               f"{sum(not c.has_rule for c in covered)} without (-)")


@rules.command()
@click.argument("op")
@click.option("--module", "-m", "module_path", type=click.Path(dir_okay=False, allow_dash=True),
              help="Also print the rule of every OP in this module.")
@click.option("--conservative", is_flag=True, help="Rules for conservative propagation.")
@_rules_option
@unregistered_dialect_option
def show(op: str, module_path: str | None, conservative: bool,
         rule_files: tuple[str, ...]) -> None:
    """Print the YAML rule of OP (an op name, or @target for a custom call)."""
    from sdy_dl.errors import SdyError
    from sdy_dl.rules.db import load_rule_db

    db = load_rule_db(rule_files, conservative)
    entry = db.lookup(op)
    if entry is None and module_path is None:
        raise SdyError(f"no rule entry for '{op}' (see 'sdy-dl rules list')")
    if entry is not None:
        click.echo(f"# {entry.loc.file}:{entry.loc.line}")
        click.echo(entry.source.rstrip())
        for name in _templates_used(entry.body, db.templates):
            t = db.templates[name]
            click.echo(f"# template {name}: {t.loc.file}:{t.loc.line}")
            click.echo(t.source.rstrip())
    if module_path is not None:
        from sdy_dl.ir import load_module
        from sdy_dl.rules.annotate import module_rules

        from sdy_dl.cli.options import errors_in

        with errors_in(module_path):
            module = load_module(module_path)
            items = module_rules(module, db, op)
        for item in items:
            where = f"{module.file}:{item.op.line}:{item.op.col}"
            text = "no rule" if item.rule is None else item.rule.to_text()
            click.echo(f"{where}: {item.op.name}: {text}" + (" (own attribute)" if item.own
                                                              else ""))


def _templates_used(body, templates, names=None) -> list[str]:
    """Templates a rule body uses, directly or through other templates."""
    from sdy_dl.rules.schema import UseAction

    names = [] if names is None else names

    def visit(stmts):
        for s in stmts:
            if isinstance(s.action, UseAction) and s.action.name not in names:
                names.append(s.action.name)
                if s.action.name in templates:
                    visit(templates[s.action.name].body.stmts)
            elif isinstance(s.action, list):
                visit(s.action)

    if body is not None:
        visit(body.stmts)
    return names


@rules.command()
@click.argument("files", nargs=-1, type=click.Path())
def check(files: tuple[str, ...]) -> None:
    """Validate the shipped rules, $SDY_DL_RULES and FILES (later ones override)."""
    from sdy_dl.rules.db import load_rule_db, rule_sources

    sources = rule_sources(files)
    db = load_rule_db(files)
    click.echo(f"ok: {len(sources)} rule file(s), {len(db.entries())} entries, "
               f"{len(db.templates)} templates")


@rules.command()
@click.argument("module", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("-o", "--output", default="-", show_default=True,
              type=click.Path(dir_okay=False, allow_dash=True),
              help="Output module file (- for stdout).")
@click.option("--conservative", is_flag=True, help="Rules for conservative propagation.")
@_rules_option
@unregistered_dialect_option
def annotate(module: str, output: str, conservative: bool, rule_files: tuple[str, ...]) -> None:
    """Attach sdy.sharding_rule to every op of MODULE that has a rule."""
    from sdy_dl.cli.options import errors_in
    from sdy_dl.ir import load_module
    from sdy_dl.output import write_atomic
    from sdy_dl.rules.annotate import annotate_module
    from sdy_dl.rules.db import load_rule_db

    db = load_rule_db(rule_files, conservative)
    with errors_in(module):
        model = load_module(module)
        annotate_module(model, db)
        text = model.print()
    write_atomic(output, text)
