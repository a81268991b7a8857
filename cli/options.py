"""Options shared by the commands that read a module and run passes."""

from __future__ import annotations

import contextlib
import functools

import click

from sdy_dl.engines import ENGINE_NAMES
from sdy_dl.errors import SdyError
from sdy_dl.passes import PassOptions


def module_io_options(fn):
    """MODULE argument and ``-o/--output`` (default stdout)."""
    fn = click.option("-o", "--output", default="-", show_default=True,
                      type=click.Path(dir_okay=False, allow_dash=True),
                      help="Output module file (- for stdout).")(fn)
    return click.argument("module", type=click.Path(dir_okay=False, allow_dash=True))(fn)


def pass_options(fn):
    """Engine, rule files and propagation flags."""
    opts = [
        click.option("--engine", type=click.Choice(ENGINE_NAMES), default="auto", show_default=True,
                     help="Datalog engine (auto: souffle if on PATH, else clingo)."),
        click.option("--compiled", is_flag=True, help="souffle engine: compile the program (cached)."),
        click.option("--conservative", is_flag=True, help="Conservative propagation (Shardy's option)."),
        click.option("--keep-sharding-rules", is_flag=True, help="Keep sdy.sharding_rule attributes."),
        click.option("--rules", "rule_files", multiple=True, type=click.Path(dir_okay=False),
                     help="Extra YAML rule file (repeatable)."),
        click.option("--relations", "replay_dir", type=click.Path(file_okay=False, exists=True),
                     help="Take propagation steps from relations Soufflé derived "
                          "from 'sdy-dl emit' output instead of running an engine."),
        click.option("--pass-option", "pass_option", multiple=True, metavar="KEY=VALUE",
                     help="A pass-specific option, e.g. dedup-functions-fully=true (repeatable)."),
        click.option("--quiet", is_flag=True, help="No progress bar."),
    ]
    return functools.reduce(lambda f, o: o(f), reversed(opts), fn)


def make_pass_options(**opts) -> PassOptions:
    """PassOptions from the click options above."""
    return PassOptions(engine=opts["engine"], compiled=opts["compiled"],
                       conservative=opts["conservative"],
                       keep_sharding_rules=opts["keep_sharding_rules"],
                       rule_files=tuple(opts["rule_files"]), quiet=opts["quiet"],
                       replay_dir=opts["replay_dir"], extra=parse_pass_options(opts["pass_option"]))


def parse_pass_options(items) -> dict:
    """``KEY=VALUE`` strings as a dict (``-`` in keys becomes ``_``; true/false/ints parsed)."""
    extra = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--pass-option")
        lowered = value.lower()
        extra[key.replace("-", "_")] = (True if lowered == "true" else False if lowered == "false"
                                        else int(value) if value.lstrip("-").isdigit() else value)
    return extra


@contextlib.contextmanager
def errors_in(module: str):
    """Errors that name no file are about the module read from ``module``."""
    try:
        yield
    except SdyError as e:
        raise e.located(file="<stdin>" if module == "-" else module) from None
