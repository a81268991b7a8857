"""``sdy-dl whatif MODULE --set VALUE=SHARDING ...``: re-propagate with edited annotations."""

from __future__ import annotations

import json

import click

from sdy_dl.audit import Audit
from sdy_dl.audit.whatif import Edit, print_input, whatif
from sdy_dl.cli import main
from sdy_dl.cli.options import (errors_in, format_option, make_pass_options, pass_options,
                                unregistered_dialect_option)
from sdy_dl.ir import load_module
from sdy_dl.output import write_all


@main.command("whatif")
@click.argument("module", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--set", "sets", multiple=True, metavar="VALUE=SHARDING",
              help="Give VALUE's input annotation this sharding (sdy syntax, "
                   "<@mesh, [{\"data\"}, {}]>, or P('data', None)); repeatable.")
@click.option("--unset", "unsets", multiple=True, metavar="VALUE",
              help="Remove VALUE's input annotation; repeatable.")
@click.option("--drop-constraint", "drops", multiple=True, metavar="VALUE",
              help="Remove the sharding constraint defining VALUE; repeatable.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True),
              help="Write the propagated edited module here.")
@click.option("--save-input", type=click.Path(dir_okay=False, allow_dash=True),
              help="Write the edited input module here.")
@format_option()
@click.option("--explicit-collectives", is_flag=True,
              help="Propagate with explicit collectives and list the collectives the edits "
                   "add and remove, with their bytes per device.")
@unregistered_dialect_option
@pass_options
def whatif_cmd(module: str, sets, unsets, drops, output, save_input, fmt, explicit_collectives,
               **opts) -> None:
    """Propagate MODULE, apply the edits to its input annotations, propagate again
    and print what changed: the values whose sharding changed (aligned as 'sdy-dl
    diff' aligns them), the conflicts that appeared or disappeared, bytes per device
    per function before and after, and with --explicit-collectives the collectives
    added and removed.  VALUE is
    named as 'sdy-dl propagate MODULE' prints it (%3, %arg0, arg:0, result:0,
    @func:%2, or a JAX argument path)."""
    edits = ([Edit.parse_set(s) for s in sets] + [Edit("unset", v) for v in unsets]
             + [Edit("drop", v) for v in drops])
    if not edits:
        raise click.UsageError("no edit given (--set VALUE=SHARDING, --unset VALUE, "
                               "--drop-constraint VALUE)")
    with errors_in(module):
        options = make_pass_options(explicit_collectives=explicit_collectives, **opts)
        before = Audit(load_module(module), options, step_memo={}, stage_memo={})
        after, changes = whatif(before, edits)
        outputs = [(save_input, print_input(after.edited_input))] if save_input is not None else []
        outputs += [(output, after.text)] if output is not None else []
    write_all(outputs)
    if fmt == "json":
        click.echo(json.dumps(changes.to_json(), indent=2))
    else:
        click.echo("\n".join(changes.lines()))
