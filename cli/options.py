"""Options shared by the commands that read a module and run passes."""

from __future__ import annotations

import contextlib
import functools

import click

from sdy_dl.engines import ENGINE_NAMES
from sdy_dl.errors import SdyError, UsageError
from sdy_dl.passes import PassOptions


def _set_allow_unregistered(ctx, param, value):
    from sdy_dl.ir.context import allow_unregistered_dialects

    allow_unregistered_dialects(bool(value))
    return value


def unregistered_dialect_option(fn):
    """``--allow-unregistered-dialect`` (as Shardy's ``sdy_opt`` flag): ops of
    unknown dialects parse (and, having no sharding rule, are left alone)."""
    return click.option("--allow-unregistered-dialect", is_flag=True, expose_value=False,
                        callback=_set_allow_unregistered, is_eager=True,
                        help="Accept ops of dialects that are not registered.")(fn)


def format_option(help: str | None = None):
    """``--format text|json`` (as ``fmt``) of a command that prints a report."""
    return click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
                        show_default=True, help=help)


def report_file_option(fn):
    """``-o/--output``: the file a report is written to (default stdout)."""
    return click.option("-o", "--output", default="-", show_default=True,
                        type=click.Path(dir_okay=False, allow_dash=True),
                        help="Output file (- for stdout).")(fn)


def module_io_options(fn):
    """MODULE argument, ``-o/--output`` (default stdout) and ``--allow-unregistered-dialect``."""
    fn = unregistered_dialect_option(fn)
    fn = click.option("-o", "--output", default="-", show_default=True,
                      type=click.Path(dir_okay=False, allow_dash=True),
                      help="Output module file (- for stdout).")(fn)
    return click.argument("module", type=click.Path(dir_okay=False, allow_dash=True))(fn)


def pass_options(fn):
    """Engine, rule files and propagation flags."""
    opts = [
        click.option("--engine", type=click.Choice(ENGINE_NAMES), default="auto", show_default=True,
                     help="Datalog engine (auto: cached compiled Soufflé binaries when souffle "
                          "is on PATH, the embedded Python engine for the rest; python: "
                          "rules compiled to Python; clingo: clingo grounds a translation)."),
        click.option("--compiled", is_flag=True,
                     help="souffle engine: run compiled, cached binaries; missing ones compile "
                          "in the background while the embedded Python engine runs their programs."),
        click.option("--wait-for-compile", is_flag=True,
                     help="souffle --compiled: compile missing binaries before running them."),
        click.option("--conservative", is_flag=True, help="Conservative propagation (Shardy's option)."),
        click.option("--keep-sharding-rules", is_flag=True, help="Keep sdy.sharding_rule attributes."),
        click.option("--rules", "rule_files", multiple=True, type=click.Path(dir_okay=False),
                     help="Extra YAML rule file (repeatable)."),
        click.option("--relations", "replay_dir", type=click.Path(file_okay=False, exists=True),
                     help="Take propagation steps from relations Soufflé derived "
                          "from 'sdy-dl emit' output instead of running an engine."),
        click.option("--pass-option", "pass_option", multiple=True, metavar="KEY=VALUE",
                     help="A Shardy pass option, e.g. dedup-functions-fully=true (repeatable; "
                          "'sdy-dl passes' lists them)."),
        click.option("--quiet", is_flag=True, help="No progress bar."),
    ]
    return functools.reduce(lambda f, o: o(f), reversed(opts), fn)


def make_pass_options(pass_name: str | None = None, *, explicit_collectives: bool = False,
                      **opts) -> PassOptions:
    """PassOptions from the click options above for pass ``pass_name`` (None:
    the whole pipeline, :func:`sdy_dl.pipeline.make_options`); ``--pass-option``
    values are checked against the options it reads, and ``--conservative`` /
    ``--keep-sharding-rules`` are those options set to true.  ``explicit_collectives``
    (the pipeline only): enable-insert-explicit-collectives set to true, whatever
    was given (the commands that audit collectives, and ``--explicit-collectives``).
    ``--compiled`` without ``--engine souffle``, and ``--wait-for-compile``
    without ``--compiled``, would change nothing: usage errors."""
    from sdy_dl.pipeline import ENABLE_INSERT_EXPLICIT_COLLECTIVES, make_options

    if opts["compiled"] and opts["engine"] != "souffle":
        raise UsageError(f"--compiled applies to --engine souffle, not {opts['engine']} (auto "
                         "runs the binaries a compiled run left in the cache)")
    if opts["wait_for_compile"] and not opts["compiled"]:
        raise UsageError("--wait-for-compile applies with --compiled")
    given = list(opts["pass_option"])
    given += [f"{name}=true" for name, flag in (("conservative-propagation", "conservative"),
                                                ("keep-sharding-rules", "keep_sharding_rules"))
              if opts[flag]]
    context = dict(engine=opts["engine"], compiled=opts["compiled"],
                   compile_in_background=opts["compiled"] and not opts["wait_for_compile"],
                   rule_files=tuple(opts["rule_files"]), quiet=opts["quiet"],
                   replay_dir=opts["replay_dir"])
    if pass_name is not None:
        return PassOptions.create(pass_name, given, **context)
    options = make_options(given, **context)
    if explicit_collectives:
        options = options.with_values({ENABLE_INSERT_EXPLICIT_COLLECTIVES.name: True})
    return options


@contextlib.contextmanager
def errors_in(module: str):
    """Errors that name no file are about the module read from ``module``
    (usage errors are about the command line)."""
    try:
        yield
    except UsageError:
        raise
    except SdyError as e:
        raise e.located(file="<stdin>" if module == "-" else module) from None
