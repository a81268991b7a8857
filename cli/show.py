"""``sdy-dl show MODULE``: meshes, op counts and every annotated value."""

from __future__ import annotations

import json

import click

from sdy_dl.cli import main
from sdy_dl.cli.options import errors_in, format_option, unregistered_dialect_option
from sdy_dl.ir import load_module
from sdy_dl.summary import module_summary


@main.command()
@click.argument("module", type=click.Path(dir_okay=False, allow_dash=True))
@format_option("Output format (json for scripts).")
@unregistered_dialect_option
def show(module: str, fmt: str) -> None:
    """Print a readable summary of MODULE (use - for stdin)."""
    with errors_in(module):
        summary = module_summary(load_module(module))
    if fmt == "json":
        click.echo(json.dumps(summary, indent=2))
        return
    from sdy_dl.cli.render import render_summary
    render_summary(summary)
