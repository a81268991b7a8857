"""``sdy-dl diff A B``: two annotated modules compared value by value (exit 1 when they differ)."""

from __future__ import annotations

import json
import sys

import click

from sdy_dl.audit.diff import diff_modules
from sdy_dl.cli import main
from sdy_dl.cli.options import format_option
from sdy_dl.ir import load_module


@main.command("diff")
@click.argument("a", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("b", type=click.Path(dir_okay=False, allow_dash=True))
@format_option()
def diff(a: str, b: str, fmt: str) -> None:
    """Compare the shardings of modules A and B value by value, aligned by dataflow
    (an inserted reshard does not misalign the rest).  Exit status 1 when they differ."""
    if a == b == "-":
        raise click.UsageError("A and B cannot both be standard input (-)")
    equal, diffs = diff_modules(load_module(a), load_module(b))
    if fmt == "json":
        click.echo(json.dumps({"equal": equal, "differences": [d.to_json() for d in diffs]},
                              indent=2))
    else:
        for d in diffs:
            if d.kind == "different":
                click.echo(f"{d.a} (A) / {d.b} (B): {d.a_sharding or '(none)'} != {d.b_sharding or '(none)'}")
            elif d.a is not None:
                click.echo(f"{d.kind}: {d.a} = {d.a_sharding or '(none)'}")
            else:
                click.echo(f"{d.kind}: {d.b} = {d.b_sharding or '(none)'}")
        click.echo(f"{equal} values equal, {len(diffs)} different")
    if diffs:
        sys.exit(1)
