"""The ``sdy-dl`` command line (installed as ``sdy_dl.cli``).

Commands are thin: parse options, call the library, format, exit.  A user
error is one line ``sdy-dl: error: <file>:<line>:<col>: <what>`` and exit
status 1 (``diff``: 2, as diff(1)); usage errors exit 2 (click's convention).
A reader of standard output that goes away (a broken pipe, ``| head``) ends
the command quietly with exit status 1, as its output was not all read
(``diff``: its answer, 0 or 1).
"""

from __future__ import annotations

import gc
import os
import sys

import click

from sdy_dl import __version__
from sdy_dl.cli.streams import say_error
from sdy_dl.errors import SdyError, one_line
from sdy_dl.signals import Terminated, raise_pending, terminate


def _usage_error(e: click.UsageError):
    """A usage error as one line and exit status 2 (a group given no command: the
    commands it has, not its help)."""
    hint = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
    if isinstance(e, click.exceptions.NoArgsIsHelpError) and isinstance(e.ctx.command,
                                                                        click.Group):
        message = f"missing command (one of: {', '.join(e.ctx.command.list_commands(e.ctx))})"
    else:
        message = one_line(e.format_message())
    say_error(f"{message}{hint}")
    sys.exit(2)


class SdyGroup(click.Group):
    """A click group whose commands are imported when first asked for, and that
    turns :class:`SdyError` into a one-line error and exit 1,
    a usage error into a one-line error and exit 2, an interrupt (Ctrl-C) into a
    one-line error and exit 130, running out of memory into a one-line error
    and exit 1, and, as a last resort, any
    other exception (a bug) into a one-line "internal error" and exit 1
    (``SDY_DL_TRACEBACK=1`` re-raises it)."""

    def get_command(self, ctx, name):
        """The command ``name``, its module imported first (:data:`COMMANDS`)."""
        if name not in self.commands:
            _load_commands([name])
        return super().get_command(ctx, name)

    def list_commands(self, ctx):
        _load_commands([None])
        return super().list_commands(ctx)

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:
            _usage_error(e)
        except SdyError as e:   # --help or --version on a closed or full standard output
            say_error(str(e))
            sys.exit(getattr(e, "exit_code", 1))
        except BrokenPipeError:
            sys.stdout = open(os.devnull, "w")
            sys.exit(1)

    def invoke(self, ctx):
        try:
            result = super().invoke(ctx)
            sys.stdout.flush()   # (what is left to write fails here as it would earlier)
            return result
        except SdyError as e:
            say_error(str(e))
            sys.exit(getattr(e, "exit_code", _error_status(ctx)))
        except click.UsageError as e:
            _usage_error(e)
        except (click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:   # Ctrl-C: what was written so far is removed (``output``)
            say_error("interrupted")
            sys.exit(130)
        except BrokenPipeError:   # the reader went away (`sdy-dl ... | head`): stop quietly
            sys.stdout = open(os.devnull, "w")
            sys.exit(ctx.meta.get(_BROKEN_PIPE_STATUS, 1))
        except MemoryError:   # (a limit, `ulimit -v`, or the machine's: not a bug to report)
            say_error("out of memory")
            sys.exit(_error_status(ctx))
        except Exception as e:
            if os.environ.get("SDY_DL_TRACEBACK"):
                raise
            message = one_line(str(e))[:200]
            say_error(f"internal error ({type(e).__name__}: {message}); "
                      "please report it with the input")
            sys.exit(_error_status(ctx))


#: The key of a command's exit status for an error in the context's ``meta``.
_ERROR_STATUS = "sdy_dl.error_status"


def set_error_status(code: int) -> None:
    """The running command exits with ``code`` on an error (not a usage error, 2, nor an
    interrupt, 130), not 1: ``diff`` keeps 1 for "the modules differ"."""
    click.get_current_context().meta[_ERROR_STATUS] = code


#: The key of a command's exit status for a broken pipe in the context's ``meta``.
_BROKEN_PIPE_STATUS = "sdy_dl.broken_pipe_status"


def set_broken_pipe_status(code: int) -> None:
    """The running command exits with ``code`` when the reader of its standard output
    goes away (a broken pipe), not 1 (the output was not all read): ``diff`` keeps
    its answer, known before it prints."""
    click.get_current_context().meta[_BROKEN_PIPE_STATUS] = code


def _error_status(ctx) -> int:
    return ctx.meta.get(_ERROR_STATUS, 1)


@click.group(cls=SdyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="sdy-dl")
def main():
    """sdy-dl: Shardy's sharding propagation as YAML rules and Datalog inference."""
    # A command builds one large, long-lived object graph (the module index, the
    # rule DB) and allocates small objects by the million around it; the default
    # collection threshold re-scans that graph hundreds of times.  Collect young
    # objects every million net allocations and older ones rarely
    # (docs/performance.md, "Decisions taken").
    gc.set_threshold(1_000_000, 50, 1000)


def run(**click_options) -> None:
    """The ``sdy-dl`` command as a process: :func:`main`, then the exit without the
    interpreter's teardown.  Every file the command writes is closed by then;
    freeing the module index, the MLIR module and the caches object by object
    is measurable (compilers skip it the same way).

    The process collects no garbage cycles either: a collection only frees
    cycles, a command leaves few, and each young collection re-scans the
    million objects allocated since the last (docs/performance.md, "Decisions
    taken").  :func:`main` alone (in-process callers, the tests) keeps
    collecting.

    Closed, full or broken standard streams are plain outcomes (``streams``);
    SIGTERM and SIGHUP end the command as Ctrl-C does, one error line and exit
    status 128 + the signal (:class:`~sdy_dl.signals.Terminated`), unless the
    process started with the signal ignored (``nohup``), which it then keeps
    ignoring; before jaxlib's MLIR bindings are loaded they end the process
    as they do by default (the same status, no line)."""
    import signal

    from sdy_dl.cli import streams

    gc.disable()
    try:
        _import_mlir_without_numpy()
    except (ImportError, MemoryError) as e:   # (a broken install, or too little memory)
        say_error(f"cannot load jaxlib's MLIR bindings ({type(e).__name__}: "
                  f"{one_line(str(e))})")
        os._exit(1)
    except KeyboardInterrupt:   # (Ctrl-C while they load: before any command runs)
        say_error("interrupted")
        os._exit(130)
    streams.guard()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is not signal.SIG_IGN:   # (nohup's stays ignored)
            signal.signal(signum, terminate)
    try:
        try:
            main(**click_options)
            code = 0
        except SystemExit as e:
            code = e.code
        raise_pending()   # (one an import put off while the command ended)
    except Terminated as e:   # (what was being written is removed on the way, as on Ctrl-C)
        say_error(f"terminated ({e.name})")
        code = 128 + e.signum
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    os._exit(streams.finish(code or 0))


def _import_mlir_without_numpy() -> None:
    """Import jaxlib's MLIR bindings (``jaxlib.mlir.ir``) without numpy, which that
    module imports only to register four attribute builders of the generated op
    classes (``F64ElementsAttr`` and the like, skipped when numpy is missing);
    sdy-dl never builds ops through them, and numpy's import costs about a tenth
    of a whole 1k-op ``propagate``.  Only the ``sdy-dl`` process does so (a
    program importing sdy-dl may use those builders); a later ``import numpy``
    loads numpy as usual."""
    if "jaxlib.mlir.ir" in sys.modules or "numpy" in sys.modules:
        return
    sys.modules["numpy"] = None   # (importing numpy fails while this is set)
    try:
        import jaxlib.mlir.ir  # noqa: F401
    finally:
        del sys.modules["numpy"]


#: Command name -> the module of this package that defines it, imported only when
#: the command runs (a command's start pays for its own imports only).
COMMANDS = {"show": "show", "rules": "rules_cmd", "pass": "passes_cmd", "passes": "passes_cmd",
            "propagate": "propagate_cmd", "emit": "emit_cmd", "explain": "explain_cmd",
            "conflicts": "conflicts_cmd", "report": "report_cmd", "diff": "diff_cmd",
            "cache": "cache_cmd", "comms": "comms_cmd", "memory": "memory_cmd",
            "whatif": "whatif_cmd", "suggest": "suggest_cmd"}


def _load_commands(names) -> None:
    """Import the modules defining commands ``names`` (all modules of this package
    for a name no table entry has); the commands register themselves on `main`."""
    import importlib

    modules = {COMMANDS[n] for n in names if n in COMMANDS}
    if any(n not in COMMANDS for n in names):
        import pkgutil

        modules |= {m.name for m in pkgutil.iter_modules(__path__)}
    for module in sorted(m for m in modules - {"options", "render"} if not m.startswith("_")):
        importlib.import_module(f"{__name__}.{module}")

