"""``sdy-dl conflicts MODULE``: every place propagation could not agree, grouped by pattern."""

from __future__ import annotations

import json

import click

from sdy_dl.audit import Audit
from sdy_dl.audit.conflicts import ConflictGroup
from sdy_dl.cli import main
from sdy_dl.cli.options import make_pass_options, pass_options
from sdy_dl.ir import load_module

#: Members listed per group in text (``--format json`` lists all).
SHOWN_MEMBERS = 8


def group_lines(g: ConflictGroup) -> list[str]:
    """One group of conflicts as text lines."""
    c = g.example
    on = f"axis {c.axis} on factors {c.factor}" if c.kind == "across-factor" else (
        f"factor {c.factor}" + (f", axis {c.axis}" if c.axis else ""))
    times = f" x{g.count}" if g.count > 1 else ""
    lines = [f"{c.op} ({c.rule}): {on} ({c.kind} conflict){times}"]
    for comp in c.competitors:
        rep = f", replicated {', '.join(comp['replicated'])}" if comp["replicated"] else ""
        won = " [kept]" if comp["won"] else ""
        lines.append(f"  {comp['value']} ({comp['tensor']} dim {comp['dim']}, factor "
                     f"{comp['factor']}): [{', '.join(comp['axes'])}]{rep}{won}")
        for o in comp["origins"]:
            lines.append(f"      {o['axis']} <- {'; '.join(o['from'])}")
    kept = "; ".join(f"{f}: [{', '.join(a)}]" for f, a in c.kept.items())
    lines.append(f"  kept: {kept}")
    lines.append(f"  decided by: {c.decided_text}")
    lines.append(f"  output: {c.output_text}")
    shown = g.members[:SHOWN_MEMBERS]
    more = f", ... ({g.count - len(shown)} more; --format json lists all)" if g.count > len(shown) else ""
    at = ", ".join(f"{m['value']} ({m['place']})" for m in shown)
    lines.append(f"  at: {at}{more}")
    return lines


@main.command("conflicts")
@click.argument("module", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
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
    if not groups:
        click.echo("no conflicts")
        return
    total = sum(g.count for g in groups)
    click.echo(f"{total} conflicts in {len(groups)} patterns")
    for g in groups:
        click.echo("\n".join(group_lines(g)))
