"""``sdy-dl memory MODULE``: bytes per device of every value, per-function totals and
the largest replicated or partly sharded tensors with why (:mod:`sdy_dl.audit.memory`)."""

from __future__ import annotations

import click

from sdy_dl.audit import Audit
from sdy_dl.audit.memory import text_lines
from sdy_dl.cli import main
from sdy_dl.cli.options import (errors_in, format_option, make_pass_options, pass_options,
                                report_file_option, unregistered_dialect_option)
from sdy_dl.ir import load_module
from sdy_dl.output import write_report


@main.command("memory")
@click.argument("module", type=click.Path(dir_okay=False, allow_dash=True))
@format_option("json lists every value.")
@click.option("--top", default=10, show_default=True, type=click.IntRange(0, None),
              help="How many of the largest replicated or partly sharded values to explain.")
@click.option("--all", "all_values", is_flag=True, help="Text: list every value too.")
@report_file_option
@unregistered_dialect_option
@pass_options
def memory(module: str, fmt: str, top: int, all_values: bool, output: str, **opts) -> None:
    """Bytes per device of every value of MODULE after 'propagate --explicit-collectives'
    (the collectives' results included): per function the arguments, the results and
    an estimated peak of live intermediates; the largest replicated or partly sharded
    values, why, and which mesh axes could shard them."""
    options = make_pass_options(explicit_collectives=True, **opts)
    with errors_in(module):
        table = Audit(load_module(module), options).memory(top)
    write_report(output, fmt, table, lambda: "\n".join(text_lines(table, all_values)))
