"""``sdy-dl conflicts MODULE``: every place propagation could not agree."""

from __future__ import annotations

import json

import click

from sdy_dl.audit import Audit
from sdy_dl.cli import main
from sdy_dl.cli.options import make_pass_options, pass_options
from sdy_dl.ir import load_module


@main.command("conflicts")
@click.argument("module", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@pass_options
def conflicts(module: str, fmt: str, **opts) -> None:
    """List the conflicts of propagating MODULE: the op, the factor, the competing
    axes with the values and annotations they came from, and what decided."""
    found = Audit(load_module(module), make_pass_options(**opts)).conflicts()
    if fmt == "json":
        click.echo(json.dumps([c.to_json() for c in found], indent=2))
        return
    if not found:
        click.echo("no conflicts")
    for c in found:
        click.echo(f"{c.op} at {c.place}: factor {c.factor} ({c.kind} conflict)")
        for comp in c.competitors:
            rep = f", replicated {', '.join(comp['replicated'])}" if comp["replicated"] else ""
            came = f" <- {'; '.join(comp['annotations'])}" if comp["annotations"] else ""
            click.echo(f"  {comp['value']} ({comp['tensor']} dim {comp['dim']}): "
                       f"[{', '.join(comp['axes'])}]{rep}{came}")
        click.echo(f"  kept: [{', '.join(c.kept)}]; decided by: {c.decided}; "
                   f"{'a reshard in the output' if c.reshard else 'no reshard in the output'}")
