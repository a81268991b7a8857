"""``sdy-dl suggest MODULE``: annotation edits that save communication or memory, each
verified by re-propagating the edited input (:mod:`sdy_dl.audit.suggest`)."""

from __future__ import annotations

import click

from sdy_dl.audit import Audit
from sdy_dl.audit.suggest import default_jobs, suggest
from sdy_dl.cli import main
from sdy_dl.cli.options import (errors_in, format_option, make_pass_options, pass_options,
                                report_file_option, unregistered_dialect_option)
from sdy_dl.ir import load_module
from sdy_dl.output import write_report


@main.command("suggest")
@click.argument("module", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--top", default=5, show_default=True, type=click.IntRange(1, None),
              help="How many suggestions to print (the best first; edits with the same effect "
                   "are one suggestion).")
@click.option("--jobs", default=None, type=click.IntRange(1, None),
              help="Processes that evaluate the candidates (default: the usable CPUs, at most 4; "
                   "never more than the usable CPUs); the output does not depend on it.")
@format_option()
@report_file_option
@unregistered_dialect_option
@pass_options
def suggest_cmd(module: str, top: int, jobs: int | None, fmt: str, output: str, **opts) -> None:
    """Propagate MODULE with explicit collectives, make candidate edits of its
    annotations for the costliest collectives (a sharding at the value the collective
    starts from; the constraints and annotations its shardings came from) and the
    largest replicated values (a mesh axis on a dim it divides), evaluate each by an
    exact what-if and print those that save bytes, best first: score = communication
    saved + memory saved (bytes per device), each edit as 'sdy-dl whatif' options;
    edits whose edited programs propagate to the same output are one suggestion
    (the others listed as 'same effect')."""
    options = make_pass_options(explicit_collectives=True, **opts)
    with errors_in(module):
        found = suggest(Audit(load_module(module), options, step_memo={}, stage_memo={}), top,
                        jobs or default_jobs())
    write_report(output, fmt, found, lambda: "\n".join(found.lines()))
