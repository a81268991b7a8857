"""``sdy-dl emit MODULE --out-dir D``: the Datalog program and facts of a propagation.

``D/program.dl`` and ``D/<relation>.facts`` hold every propagation step the
pipeline evaluated; ``souffle -F D -D D D/program.dl`` derives their
relations standalone, and ``sdy-dl propagate MODULE --relations D`` rebuilds
the module from those relations instead of running an engine.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import click

from sdy_dl.cli import main
from sdy_dl.cli.options import (errors_in, make_pass_options, pass_options,
                                unregistered_dialect_option)
from sdy_dl.errors import SdyError, UsageError
from sdy_dl.ir import load_module
from sdy_dl.pipeline import propagate
from sdy_dl.propagation.trace import StepRecorder


@main.command("emit")
@click.argument("module", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--out-dir", required=True, type=click.Path(file_okay=False),
              help="Directory for program.dl and the .facts files.")
@unregistered_dialect_option
@pass_options
def emit(module: str, out_dir: str, **opts) -> None:
    """Write the Soufflé program and facts of MODULE's propagation to OUT_DIR."""
    recorder = StepRecorder()
    options = make_pass_options(**opts)
    with errors_in(module):
        loaded = load_module(module)
        result = propagate(loaded, options.with_context(recorder=recorder))
        if not recorder.steps:
            raise SdyError("nothing to emit: propagation evaluated no step "
                           "(no value of the module has a sharding)")
    write_dir(out_dir, lambda tmp: recorder.write(tmp, result.meshes))
    click.echo(f"wrote {len(recorder.steps)} steps to {out_dir}; "
               f"run: souffle -w -F {out_dir} -D {out_dir} {os.path.join(out_dir, 'program.dl')}", err=True)


def write_dir(out_dir: str, fill) -> None:
    """Let ``fill`` write files into a fresh directory next to ``out_dir``, then
    move them into ``out_dir`` (created if needed): nothing lands in ``out_dir``
    unless every file was written."""
    if not out_dir:
        raise UsageError("the output directory name is empty (--out-dir '')")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise SdyError("not a directory", file=out_dir)
    try:
        parent = os.path.dirname(os.path.abspath(out_dir))   # (fails in a removed directory)
        os.makedirs(parent, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".sdy-dl-emit-", dir=parent) as tmp:
            fill(tmp)
            os.makedirs(out_dir, exist_ok=True)
            for name in sorted(os.listdir(tmp)):
                shutil.move(os.path.join(tmp, name), os.path.join(out_dir, name))
    except OSError as e:
        raise SdyError(f"cannot write the output directory: {e.strerror or e}",
                       file=out_dir) from None
