"""The ``sdy-dl`` command line (installed as ``sdy_dl.cli``).

Commands are thin: parse options, call the library, format, exit.  A user
error is one line ``sdy-dl: error: <file>:<line>:<col>: <what>`` and exit
status 1; usage errors exit 2 (click's convention).
"""

from __future__ import annotations

import sys

import click

from sdy_dl import __version__
from sdy_dl.errors import SdyError


class SdyGroup(click.Group):
    """A click group that turns :class:`SdyError` into a one-line error and exit 1
    (2 for a usage error)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except SdyError as e:
            click.echo(f"sdy-dl: error: {e}", err=True)
            sys.exit(getattr(e, "exit_code", 1))


@click.group(cls=SdyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="sdy-dl")
def main():
    """sdy-dl: Shardy's sharding propagation as YAML rules and Datalog inference."""


def _register() -> None:
    from sdy_dl.cli import show  # noqa: F401  (commands register themselves on `main`)
    for name in ("rules_cmd", "passes_cmd", "propagate_cmd", "emit_cmd", "explain_cmd"):
        try:
            __import__(f"sdy_dl.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"sdy_dl.cli.{name}":
                raise


_register()
