"""``sdy-dl explain MODULE VALUE``: why VALUE has its sharding, as a derivation tree."""

from __future__ import annotations

import json

import click

from sdy_dl.cli import main
from sdy_dl.cli.options import make_pass_options, pass_options, unregistered_dialect_option
from sdy_dl.explain import Node, explain_value
from sdy_dl.ir import load_module


@main.command("explain")
@click.argument("module", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("value")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--depth", default=8, show_default=True, type=click.IntRange(1, 100),
              help="How many derivation steps to show below the value.")
@unregistered_dialect_option
@pass_options
def explain(module: str, value: str, fmt: str, depth: int, **opts) -> None:
    """Explain the propagated sharding of VALUE (an SSA name of the propagated
    module such as %3 or %arg0, or result:N for a function result)."""
    tree = explain_value(load_module(module), value, make_pass_options(**opts), depth)
    if fmt == "json":
        click.echo(json.dumps(tree.to_json(), indent=2))
    else:
        click.echo("\n".join(_lines(tree, "", True, top=True)))


def _lines(node: Node, prefix: str, last: bool, top: bool = False) -> list[str]:
    head = "" if top else prefix + ("└─ " if last else "├─ ")
    lines = [f"{head}{node.what} = {node.sharding}"]
    inner = "" if top else prefix + ("   " if last else "│  ")
    lines.append(f"{inner}   because: {node.because}")
    for i, child in enumerate(node.children):
        lines += _lines(child, inner, i == len(node.children) - 1)
    return lines
