"""Rich rendering of summaries for the terminal."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table


#: The narrowest tables are drawn (a terminal, or $COLUMNS, narrower than this, or
#: 0, would fold every cell to nothing): cells fold, never cut.
MIN_WIDTH = 40


def render_summary(summary: dict) -> None:
    """Print a module summary as tables, every cell whole (folded, never cut), drawn
    whole before the first byte is written (a signal while drawing writes nothing)."""
    console = Console(highlight=False, soft_wrap=True)
    if console.width < MIN_WIDTH:
        console = Console(highlight=False, soft_wrap=True, width=MIN_WIDTH)
    with console.capture() as drawn:
        console.print(f"[bold]{summary['file']}[/bold]")
        meshes = Table(title="meshes", title_justify="left")
        meshes.add_column("name", overflow="fold")
        meshes.add_column("mesh", overflow="fold")
        for name, text in summary["meshes"].items():
            meshes.add_row(f"@{name}", text)
        console.print(meshes)
        ops = Table(title="ops", title_justify="left")
        ops.add_column("op", overflow="fold")
        ops.add_column("count", justify="right", overflow="fold")
        for name, n in summary["op_counts"].items():
            ops.add_row(name, str(n))
        console.print(ops)
        shard = Table(title="shardings", title_justify="left")
        for col in ("function", "value", "place", "sharding"):
            shard.add_column(col, overflow="fold")
        for row in summary["shardings"]:
            shard.add_row(row["function"], row["value"], row["place"], row["sharding"])
        console.print(shard)
    click.echo(drawn.get(), nl=False)
