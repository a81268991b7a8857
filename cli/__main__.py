"""``python -m sdy_dl.cli``: the ``sdy-dl`` command."""

from sdy_dl.cli import run

run(prog_name="sdy-dl")
