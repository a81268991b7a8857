"""``sdy-dl report MODULE -o report.html``: the whole audit as one HTML page."""

from __future__ import annotations

import click

from sdy_dl.audit import Audit
from sdy_dl.audit.report import html_chunks
from sdy_dl.cli import main
from sdy_dl.cli.options import make_pass_options, pass_options
from sdy_dl.ir import load_module
from sdy_dl.output import write_atomic


@main.command("report")
@click.argument("module", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("-o", "--output", default="-", show_default=True,
              type=click.Path(dir_okay=False, allow_dash=True), help="The HTML file (- for stdout).")
@pass_options
def report(module: str, output: str, **opts) -> None:
    """One self-contained HTML page on the propagated MODULE: a summary (meshes, how
    many values are sharded, partially sharded, replicated; conflict groups), the
    conflicts, and a table of every value, searchable and filterable by name, op,
    function, sharding and source, whose derivation opens on demand."""
    audit = Audit(load_module(module), make_pass_options(**opts))
    write_atomic(output, html_chunks(audit))
