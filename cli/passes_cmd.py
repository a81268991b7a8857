"""``sdy-dl pass NAME MODULE -o OUT``: run one pass (names as in Shardy, no ``sdy-``)."""

from __future__ import annotations

import click

from sdy_dl.cli import main
from sdy_dl.cli.options import module_io_options, pass_options
from sdy_dl.errors import SdyError
from sdy_dl.ir import load_module
from sdy_dl.output import write_atomic
from sdy_dl.passes import get_pass


@main.command("pass")
@click.argument("name")
@module_io_options
@pass_options
def run_pass(name: str, module: str, output: str, **opts) -> None:
    """Run pass NAME on MODULE and write the result to OUT."""
    from sdy_dl.cli.options import errors_in, make_pass_options

    try:
        spec = get_pass(name)
    except SdyError as e:
        raise click.BadParameter(e.message, param_hint="'NAME'") from None
    with errors_in(module):
        result = spec.run(load_module(module), make_pass_options(**opts))
        text = result.print()
    write_atomic(output, text)


@main.command("passes")
def list_passes() -> None:
    """List the passes `sdy-dl pass` runs, with a line of help each."""
    import sdy_dl.passes.all  # noqa: F401  (registers every pass)
    from sdy_dl.passes import PASSES

    width = max(len(name) for name in PASSES)
    for name in sorted(PASSES):
        click.echo(f"{name:<{width}}  {PASSES[name].help}")
