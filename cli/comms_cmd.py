"""``sdy-dl comms MODULE``: every collective of the explicit-collectives output, its
bytes per device and its cause (the collective ledger, :mod:`sdy_dl.audit.collectives`)."""

from __future__ import annotations

import click

from sdy_dl.audit import Audit
from sdy_dl.cli import main
from sdy_dl.cli.options import (errors_in, format_option, make_pass_options, pass_options,
                                report_file_option, unregistered_dialect_option)
from sdy_dl.ir import load_module
from sdy_dl.output import write_report


def cost_model_option(fn):
    return click.option("--cost-model", "cost_model", type=click.Path(dir_okay=False),
                        help="YAML file of bandwidth and latency per mesh axis (default: the "
                             "shipped rules/cost/cost_model.yaml, placeholder numbers).")(fn)


@main.command("comms")
@click.argument("module", type=click.Path(dir_okay=False, allow_dash=True))
@format_option()
@report_file_option
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
    options = make_pass_options(explicit_collectives=True, **opts)
    with errors_in(module):
        ledger = Audit(load_module(module), options).collectives(model)
    write_report(output, fmt, ledger, lambda: str(ledger))
