"""``sdy-dl propagate MODULE -o OUT``: the propagation pipeline."""

from __future__ import annotations

import click

from sdy_dl.cli import main
from sdy_dl.cli.options import errors_in, make_pass_options, module_io_options, pass_options
from sdy_dl.ir import load_module
from sdy_dl.output import write_atomic
from sdy_dl.pipeline import propagate


@main.command("propagate")
@module_io_options
@pass_options
@click.option("--explicit-collectives", is_flag=True,
              help="End with insert-explicit-reshards{enable-full-version=true} and "
                   "reshard-to-collectives: every sharding change becomes a collective "
                   "(same as --pass-option enable-insert-explicit-collectives=true).")
def propagate_cmd(module: str, output: str, explicit_collectives: bool, **opts) -> None:
    """Infer the sharding of every value of MODULE and write the annotated module."""
    options = make_pass_options(explicit_collectives=explicit_collectives, **opts)
    with errors_in(module):
        result = propagate(load_module(module), options)
        text = result.print(binary=True)   # (verified by propagate: not again)
    write_atomic(output, text)
