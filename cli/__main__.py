"""``python -m sdy_dl.cli``: the ``sdy-dl`` command."""

from sdy_dl.cli import main

main(prog_name="sdy-dl")
