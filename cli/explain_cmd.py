"""``sdy-dl explain MODULE VALUE``: why VALUE has its printed sharding, as a derivation tree."""

from __future__ import annotations

import json

import click

from sdy_dl.audit import Audit, Node
from sdy_dl.cli import main
from sdy_dl.cli.options import make_pass_options, pass_options
from sdy_dl.errors import SdyError
from sdy_dl.ir import load_module


@main.command("explain")
@click.argument("module", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("value", required=False)
@click.option("--all", "all_values", is_flag=True, help="Explain every value of the output module.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--depth", default=8, show_default=True, type=click.IntRange(1, 100),
              help="How many derivation steps to show below the value.")
@pass_options
def explain(module: str, value: str | None, all_values: bool, fmt: str, depth: int, **opts) -> None:
    """Explain the sharding VALUE has in the output of 'sdy-dl propagate MODULE'
    (named as that output prints it: %3 or %arg0 in main, @func:%2 elsewhere,
    arg:N, result:N, @func:arg:N)."""
    if (value is None) == (not all_values):
        raise click.UsageError("give either VALUE or --all")
    audit = Audit(load_module(module), make_pass_options(**opts))
    trees = audit.explain_all(depth) if all_values else [audit.explain(value, depth)]
    if fmt == "json":
        data = [t.to_json() for t in trees]
        click.echo(json.dumps(data if all_values else data[0], indent=2))
    else:
        click.echo("\n\n".join("\n".join(text_lines(t)) for t in trees))


def text_lines(node: Node, prefix: str = "", last: bool = True, top: bool = True) -> list[str]:
    """The tree as indented text lines."""
    head = "" if top else prefix + ("└─ " if last else "├─ ")
    lines = [f"{head}{node.what} = {node.sharding}"]
    inner = "" if top else prefix + ("   " if last else "│  ")
    lines.append(f"{inner}   because: {node.because}")
    for f in node.factors:
        sources = ", ".join(f"{s['value']} ({s['tensor']} dim {s['dim']})" for s in f["from"])
        lines.append(f"{inner}   factor {f['factor']} ({f['kind']}) of {f['tensor']} dim {f['dim']}"
                     f" gets {', '.join(f['axes'])}" + (f" from {sources}" if sources else ""))
    for reason in node.reasons:
        if reason != node.because:
            lines.append(f"{inner}   why not more: {reason}")
    for i, child in enumerate(node.children):
        lines += text_lines(child, inner, i == len(node.children) - 1, top=False)
    return lines


__all__ = ["explain", "SdyError"]
