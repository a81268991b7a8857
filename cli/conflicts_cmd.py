"""``sdy-dl conflicts MODULE``: every place propagation could not agree, grouped by pattern."""

from __future__ import annotations

import json

import click

from sdy_dl.audit import Audit
from sdy_dl.audit.conflicts import groups_text
from sdy_dl.cli import main
from sdy_dl.cli.options import format_option, make_pass_options, pass_options
from sdy_dl.ir import load_module


@main.command("conflicts")
@click.argument("module", type=click.Path(dir_okay=False, allow_dash=True))
@format_option()
@pass_options
def conflicts(module: str, fmt: str, **opts) -> None:
    """List the conflicts of propagating MODULE, one entry per pattern (same op kind,
    rule, factor roles and annotations up to the layer) with its count and members:
    the competing axes with the values and annotations each axis came from, what was
    kept and what decided, and what the output does at the op (reshards,
    collectives, or nothing)."""
    groups = Audit(load_module(module), make_pass_options(**opts)).conflict_groups()
    if fmt == "json":
        click.echo(json.dumps([g.to_json() for g in groups], indent=2))
        return
    click.echo(groups_text(groups))
