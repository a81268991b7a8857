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
    from sdy_dl.ir.loader import verify_module

    try:
        spec = get_pass(name)
    except SdyError as e:
        raise click.BadParameter(e.message, param_hint="'NAME'") from None
    options = make_pass_options(name, **opts)
    with errors_in(module):
        result = spec.run(load_module(module), options)
        verify_module(result)
        text = result.print()
    write_atomic(output, text)


@main.command("passes")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown"]), default="text",
              show_default=True, help="markdown: the pass catalog of docs/passes.md.")
def list_passes(fmt: str) -> None:
    """List the passes `sdy-dl pass` runs with a line of help and the names of
    the options each reads, then every option (`--pass-option NAME=VALUE`)."""
    import sdy_dl.passes.all  # noqa: F401  (registers every pass)
    if fmt == "markdown":
        from sdy_dl.catalog import catalog_markdown

        click.echo(catalog_markdown(), nl=False)
        return
    from sdy_dl.passes import PASSES
    from sdy_dl.pipeline import PIPELINE, pipeline_options

    width = max(len(name) for name in PASSES)
    for name in sorted(PASSES):
        click.echo(f"{name:<{width}}  {PASSES[name].help}")
        names = [o.name for o in PASSES[name].options]
        if names:
            click.echo(f"{'':<{width}}    options: {', '.join(names)}")
    click.echo(f"pass options (--pass-option NAME=VALUE; '{PIPELINE}' takes those of its passes):")
    for option in pipeline_options():
        default = option.default_text() or '""'
        note = "" if option.implemented else " Only the default is implemented."
        click.echo(f"  {option.name}=<{option.type_text()}> (default {default})  "
                   f"{option.help}{note}")
