"""``sdy-dl diff A B``: two annotated modules compared value by value; as diff(1), exit
status 0 when they are the same, 1 when they differ (also when the reader of the
differences goes away: the answer is known before they are printed), 2 on an error."""

from __future__ import annotations

import json
import sys

import click

from sdy_dl.audit.diff import diff_modules
from sdy_dl.cli import main, set_broken_pipe_status, set_error_status
from sdy_dl.cli.options import format_option
from sdy_dl.ir import load_module


@main.command("diff")
@click.argument("a", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("b", type=click.Path(dir_okay=False, allow_dash=True))
@format_option()
def diff(a: str, b: str, fmt: str) -> None:
    """Compare the shardings of modules A and B value by value, aligned by dataflow
    (an inserted reshard does not misalign the rest).  Exit status, as diff's: 0 when
    they are the same, 1 when they differ, 2 on an error."""
    set_error_status(2)
    if a == b == "-":
        raise click.UsageError("A and B cannot both be standard input (-)")
    equal, diffs = diff_modules(load_module(a), load_module(b))
    set_broken_pipe_status(1 if diffs else 0)
    if fmt == "json":
        click.echo(json.dumps({"equal": equal, "differences": [d.to_json() for d in diffs]},
                              indent=2))
    else:   # (written at once: a signal while it is made writes nothing)
        click.echo("".join(f"{_line(d)}\n" for d in diffs)
                   + f"{equal} values equal, {len(diffs)} different")
    sys.stdout.flush()   # (a write that fails is an error, exit status 2, not 1 at exit)
    if diffs:
        sys.exit(1)


def _line(d) -> str:
    """One difference as a line of text."""
    if d.kind == "different":
        return f"{d.a} (A) / {d.b} (B): {d.a_sharding or '(none)'} != {d.b_sharding or '(none)'}"
    if d.a is not None:
        return f"{d.kind}: {d.a} = {d.a_sharding or '(none)'}"
    return f"{d.kind}: {d.b} = {d.b_sharding or '(none)'}"
