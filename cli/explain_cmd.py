"""``sdy-dl explain MODULE VALUE [-o FILE]``: why VALUE has its printed sharding, as a derivation tree."""

from __future__ import annotations

import json

import click

from sdy_dl.audit import Audit
from sdy_dl.audit.render import dot_to_svg, text_lines, to_dot
from sdy_dl.cli import main
from sdy_dl.cli.options import (errors_in, make_pass_options, pass_options,
                                unregistered_dialect_option)
from sdy_dl.ir import load_module
from sdy_dl.output import write_atomic, write_report


@main.command("explain")
@click.argument("module", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("value", required=False)
@click.option("--all", "all_values", is_flag=True, help="Explain every value of the output module.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "dot", "svg"]), default="text",
              show_default=True, help="dot: Graphviz text; svg: rendered by Graphviz's dot.")
@click.option("--depth", default=8, show_default=True, type=click.IntRange(1, 100),
              help="How many derivation steps to show below the value.")
@click.option("-o", "--output", default="-", show_default=True,
              type=click.Path(dir_okay=False, allow_dash=True),
              help="Output file (- for stdout), written whole or not at all.")
@unregistered_dialect_option
@click.option("--proof", is_flag=True, help="Expand each step into its Datalog derivation.")
@click.option("--why-not", "why_not_axis", metavar="AXIS",
              help="Why VALUE has no AXIS: where each annotation's AXIS stopped on its way "
                   "to VALUE, and the step program's rule and body literal that did not hold.")
@click.option("--dim", type=click.IntRange(0), help="With --why-not: the dim of VALUE.")
@pass_options
def explain(module: str, value: str | None, all_values: bool, fmt: str, depth: int, output: str,
            proof: bool, why_not_axis: str | None, dim: int | None, **opts) -> None:
    """Explain the sharding VALUE has in the output of 'sdy-dl propagate MODULE'
    (named as that output prints it: %3 or %arg0 in main, @func:%2 elsewhere,
    arg:N, result:N, @func:arg:N; %2@L7 when several values print as %2, by the output line
    defining it; %iterArg@L5:do for a block argument of one of its op's regions)."""
    if (value is None) == (not all_values):
        raise click.UsageError("give either VALUE or --all")
    if dim is not None and why_not_axis is None:
        raise click.UsageError("--dim goes with --why-not")
    if why_not_axis is not None:
        if all_values or fmt not in ("text", "json"):
            raise click.UsageError("--why-not takes one VALUE and --format text or json")
        from sdy_dl.audit.why_not import why_not

        with errors_in(module):
            audit = Audit(load_module(module), make_pass_options(**opts))
            answer = why_not(audit, value, why_not_axis, dim)
        write_report(output, fmt, answer, lambda: "\n".join(answer.lines(proof)))
        return
    with errors_in(module):
        audit = Audit(load_module(module), make_pass_options(**opts))
        if all_values and not proof and fmt in ("json", "text"):
            trees = audit.iter_explain_all(depth)   # written as they come
        else:
            trees = audit.explain_all(depth) if all_values else [audit.explain(value, depth)]
        if proof:
            audit.attach_proofs(trees)
        if fmt == "json" and all_values:
            pieces = _json_list(trees)
        elif fmt == "json":
            pieces = [json.dumps(trees[0].to_json(), indent=2) + "\n"]
        elif fmt in ("dot", "svg"):
            dot = to_dot(trees)
            pieces = [dot_to_svg(dot) if fmt == "svg" else dot]
        else:
            pieces = _text(trees)
        write_atomic(output, pieces)


def _text(trees):
    """The trees (any iterable) as text, tree by tree (see :func:`_json_list`)."""
    for i, tree in enumerate(trees):
        yield ("\n\n" if i else "") + "\n".join(text_lines(tree))
    yield "\n"


def _json_list(trees):
    """The trees (any iterable) as one JSON list, exactly as ``json.dumps(list,
    indent=2)`` prints it, made tree by tree (every value's tree of a large
    module is hundreds of MB of JSON: it is never held whole)."""
    opened = False
    for tree in trees:
        text = json.dumps(tree.to_json(), indent=2)
        yield (",\n  " if opened else "[\n  ") + text.replace("\n", "\n  ")
        opened = True
    yield "\n]\n" if opened else "[]\n"
