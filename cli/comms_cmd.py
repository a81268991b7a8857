"""``sdy-dl comms MODULE``: every collective of the explicit-collectives output, its
bytes per device and its cause (the collective ledger, :mod:`sdy_dl.audit.collectives`)."""

from __future__ import annotations

import json

import click

from sdy_dl.audit import Audit
from sdy_dl.audit.cost_model import human_bytes, human_seconds
from sdy_dl.cli import main
from sdy_dl.cli.options import (errors_in, make_pass_options, pass_options,
                                unregistered_dialect_option)
from sdy_dl.ir import load_module
from sdy_dl.output import write_atomic
from sdy_dl.pipeline import ENABLE_INSERT_EXPLICIT_COLLECTIVES


def cost_model_option(fn):
    return click.option("--cost-model", "cost_model", type=click.Path(dir_okay=False),
                        help="YAML file of bandwidth and latency per mesh axis (default: the "
                             "shipped rules/cost/cost_model.yaml, placeholder numbers).")(fn)


def ledger_lines(ledger) -> list[str]:
    """The ledger as text: totals, then one block per group of one pattern."""
    from sdy_dl.audit.collectives import _inner

    totals = ledger.totals()
    groups = ledger.groups()
    timed = ledger.cost_model is not None
    head = (f"{len(ledger)} collective{'s' * (len(ledger) != 1)} in {len(groups)} "
            f"group{'s' * (len(groups) != 1)}; "
            f"{human_bytes(totals['all']['bytes_per_device'])} per device in all")
    if timed:
        head += (f", estimated {human_seconds(totals['all'].get('estimated_seconds', 0.0))} "
                 f"(cost model {ledger.cost_model.file})")
    lines = [f"{ledger.file}: {head}"]
    if "not_lowered_reshards" in totals:
        lines.append(f"  {totals['not_lowered_reshards']} sdy.reshard ops were not lowered to "
                     "collectives: their bytes are unknown")
    for what in ("kind", "axis", "function"):
        if totals[what]:
            cells = [f"{k} {row['count']}x {human_bytes(row['bytes_per_device'])}"
                     + (f" ~{human_seconds(row.get('estimated_seconds'))}" if timed else "")
                     for k, row in totals[what].items()]
            lines.append(f"  per {what}: " + "; ".join(cells))
    for i, g in enumerate(groups, 1):
        e = g.first
        each = human_bytes(e.bytes)
        count = f" x{len(g.members)}" if len(g.members) > 1 else ""
        time = f", ~{human_seconds(e.seconds)} each" if timed and e.seconds is not None else ""
        axes = ", ".join(e.axes) or "(no axes)"
        lines.append("")
        lines.append(f"[{i}] {e.kind}{count} over {axes} ({e.devices} devices) in {e.function}: "
                     f"{each} per device each, {human_bytes(g.bytes)} in all{time}")
        where = f"output line {e.output_line}" if e.output_line else "output"
        src = f"; {e.input_place}" + (f"; python {e.python}" if e.python else "")
        lines.append(f"    {e.name} at {where}{src}: {e.type_text} {_inner(e.in_sharding)} -> "
                     f"{_inner(e.out_sharding)}")
        what = "reduced over the axes: " if e.reduction else ""
        lines.append(f"    had:    {what}{e.had.text()}")
        lines.append(f"    needed: {e.needed.text()}")
        if len(g.members) > 1:
            names = [m.name for m in g.members]
            shown = ", ".join(names[:12]) + (f", ... ({len(names) - 12} more)" if len(names) > 12 else "")
            lines.append(f"    all: {shown}")
    return lines


@main.command("comms")
@click.argument("module", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("-o", "--output", default="-", show_default=True,
              type=click.Path(dir_okay=False, allow_dash=True), help="Output file (- for stdout).")
@cost_model_option
@unregistered_dialect_option
@pass_options
def comms(module: str, fmt: str, output: str, cost_model: str | None, **opts) -> None:
    """Where MODULE communicates, how many bytes per device and why: one propagation
    with explicit collectives (as 'propagate --explicit-collectives'), then every
    collective with its kind, place, type, mesh axes, bytes per device and cause
    (the sharding its operand had and the sharding its user needed, each with the
    input annotations it derives from), grouped by pattern and sorted by bytes."""
    from sdy_dl.audit.cost_model import load_cost_model

    model = load_cost_model(cost_model)
    options = make_pass_options(**opts).with_values(
        {ENABLE_INSERT_EXPLICIT_COLLECTIVES.name: True})
    with errors_in(module):
        ledger = Audit(load_module(module), options).collectives(model)
    if fmt == "json":
        write_atomic(output, json.dumps(ledger.to_json(), indent=2) + "\n")
    else:
        write_atomic(output, "\n".join(ledger_lines(ledger)) + "\n")
