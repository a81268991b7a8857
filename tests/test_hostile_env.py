"""A hostile environment never changes an answer: damaged cache entries are made
again (each case runs the ``sdy-dl`` process, as the cache is read from disk
only in a fresh process, and compares its output with a run on a sound cache);
an interrupt and a group given no command are one error line.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest
from signal_dispositions import DEFAULTS

MODULE = """sdy.mesh @mesh = <["data"=2, "model"=4]>
func.func @main(%arg0: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>},
                %arg1: tensor<32x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>})
    -> tensor<16x64xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<16x32xf32>, tensor<32x64xf32>) -> tensor<16x64xf32>
  %1 = stablehlo.negate %0 : tensor<16x64xf32>
  return %1 : tensor<16x64xf32>
}
"""

COMMANDS = [["propagate", "{m}", "--engine", "python"], ["explain", "{m}", "%1", "--proof"],
            ["conflicts", "{m}", "--format", "json"]]


#: the installed console script (``python -m sdy_dl.cli`` from the source root would
#: import the source tree's sdy_dl, which has no cli package: cli/ maps into it only
#: when installed)
SDY_DL = shutil.which("sdy-dl", path=os.path.dirname(sys.executable)) or shutil.which("sdy-dl")


def sdy_dl(args, cache, module, env=None, text=True, **kwargs):
    env = {**os.environ, **(env or {}), "SDY_DL_CACHE": str(cache)}
    return subprocess.run([SDY_DL,
                           *[a.format(m=module) for a in args], "--quiet"],
                          env=env, capture_output=True, text=text, timeout=300, **kwargs)


def damage(path, how: str) -> None:
    data = path.read_bytes()
    if how == "cut":
        path.write_bytes(data[:len(data) // 2])
    elif how == "emptied":
        path.write_bytes(b"")
    elif how == "one-byte":
        i = len(data) // 3
        path.write_bytes(data[:i] + bytes([data[i] ^ 0x20]) + data[i + 1:])
    else:
        path.write_bytes(os.urandom(200))


@pytest.fixture(scope="module")
def sound(tmp_path_factory):
    """A cache every command of COMMANDS filled, and their outputs."""
    tmp = tmp_path_factory.mktemp("cache")
    module = tmp / "m.mlir"
    module.write_text(MODULE)
    outputs = []
    for args in COMMANDS:
        done = sdy_dl(args, tmp / "cache", module)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    return module, tmp / "cache", outputs


@pytest.mark.parametrize("how", ["cut", "emptied", "one-byte", "junk"])
def test_damaged_cache_entries_are_made_again(sound, tmp_path, how):
    module, cache, outputs = sound
    shutil.copytree(cache, tmp_path / "cache")
    files = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert len(files) > 10
    for path in files:
        damage(path, how)
    for args, expected in zip(COMMANDS, outputs):
        done = sdy_dl(args, tmp_path / "cache", module)
        assert (done.returncode, done.stderr) == (0, ""), args
        assert done.stdout == expected, args


def test_interrupt_is_one_line_and_leaves_no_file(tmp_path, monkeypatch):
    """Ctrl-C while the output is being written: one line, exit 130, no output file
    and no temporary file."""
    from click.testing import CliRunner

    from sdy_dl.cli import main, propagate_cmd

    class Interrupted:
        def print(self, binary=False):
            yield "module {\n"
            raise KeyboardInterrupt

    monkeypatch.setattr(propagate_cmd, "propagate", lambda module, options: Interrupted())
    module = tmp_path / "m.mlir"
    module.write_text(MODULE)
    result = CliRunner().invoke(main, ["propagate", str(module), "-o", str(tmp_path / "out.mlir"),
                                       "--quiet"])
    assert (result.exit_code, result.stderr) == (130, "sdy-dl: error: interrupted\n")
    assert sorted(os.listdir(tmp_path)) == ["m.mlir"]


@pytest.mark.parametrize("args, commands", [
    ([], "cache, comms, conflicts, diff, emit, explain, memory, pass, passes, propagate, report, "
         "rules, show, suggest, whatif"),
    (["rules"], "annotate, check, list, show"), (["cache"], "clear, list, verify")])
def test_a_group_without_its_command_lists_the_commands_in_one_line(args, commands):
    from click.testing import CliRunner

    from sdy_dl.cli import main

    result = CliRunner().invoke(main, args, prog_name="sdy-dl")
    path = " ".join(["sdy-dl", *args])
    assert (result.exit_code, result.stdout, result.stderr) == (
        2, "", f"sdy-dl: error: missing command (one of: {commands}) (see '{path} --help')\n")


@pytest.mark.parametrize("args", [["propagate", "/dev/zero"], ["explain", "-", "%0"]])
def test_an_endless_device_is_refused_at_once(tmp_path, args):
    """/dev/zero (as a file or as standard input) is refused at its first NUL byte,
    not read until the process is killed."""
    with open("/dev/zero", "rb") as zero:
        done = sdy_dl(args, tmp_path / "cache", "", stdin=zero)
    name = "<stdin>" if "-" in args else "/dev/zero"
    assert (done.returncode, done.stdout, done.stderr) == (
        1, "", f"sdy-dl: error: {name}:1:1: a NUL byte (inputs are text)\n")


def test_standard_input_that_is_a_directory_stops_python_itself(tmp_path):
    """As the README says: Python stops before sdy-dl runs (no output, exit 1); were
    this to change, the CLI would have to give its one error line."""
    directory = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        done = sdy_dl(["propagate", "-"], tmp_path / "cache", "", stdin=directory)
    finally:
        os.close(directory)
    assert (done.returncode, done.stdout) == (1, "")
    assert "<stdin> is a directory" in done.stderr


@pytest.mark.parametrize("depth, stack, limit", [(4000, None, 2000), (1000, 2048, 512)])
def test_nesting_that_would_overflow_the_stack_is_refused(tmp_path, depth, stack, limit):
    """Nested deeper than the stack allows (MLIR's parser recurses per level: 4000
    nested loops overflow an 8 MiB stack, 1000 a 2 MiB one, ``stack`` KiB): one located line, not a
    segmentation fault; the limit follows the process's stack limit."""
    from test_bad_input import nested_whiles

    module = tmp_path / "m.mlir"
    module.write_text(nested_whiles(depth, False))
    if stack is None:
        done = sdy_dl(["propagate", "{m}"], tmp_path / "cache", module)
    else:   # (a shell sets the limit: a preexec_fn would fork this threaded process)
        done = subprocess.run(["sh", "-c", f'ulimit -s {stack} && exec "$@"', "sh", SDY_DL,
                               "propagate", str(module), "--quiet"],
                              env={**os.environ, "SDY_DL_CACHE": str(tmp_path / "cache")},
                              capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith(f"sdy-dl: error: {module}:")
    assert done.stderr.endswith(f": nested more than {limit} brackets deep (the parser would "
                                "overflow the stack)\n")


@pytest.mark.parametrize("make, code, out, err", [
    (lambda root: None, 0, "{root}/souffle: no cache to remove\n", ""),
    (lambda root: root.write_text("a file"), 0, "{root}/souffle: no cache to remove\n", ""),
    (lambda root: (root.mkdir(), (root / "souffle").write_text("a file")), 1, "",
     "sdy-dl: error: {root}/souffle: cannot remove it: Not a directory\n"),
    (lambda root: (root.mkdir(), (root / "souffle").mkdir(), (root / "souffle" / "x").mkdir()),
     0, "removed {root}/souffle (0.0 MB)\n", ""),
])
def test_cache_clear_says_what_it_did(tmp_path, monkeypatch, make, code, out, err):
    """'cache clear' says it removed the cache only when it did: no cache (SDY_DL_CACHE
    missing or a file) is said so, a cache it cannot remove is an error."""
    from click.testing import CliRunner

    from sdy_dl.cli import main

    root = tmp_path / "cache"
    make(root)
    monkeypatch.setenv("SDY_DL_CACHE", str(root))
    result = CliRunner().invoke(main, ["cache", "clear"])
    assert (result.exit_code, result.stdout, result.stderr) == (
        code, out.format(root=root), err.format(root=root))
    assert not (root / "souffle").is_dir()


@pytest.mark.parametrize("target", ["elsewhere", "missing"])
def test_cache_clear_removes_a_link_not_what_it_points_to(tmp_path, monkeypatch, target):
    """$SDY_DL_CACHE/souffle a symbolic link (to a directory, or dangling): 'cache
    clear' removes the link and says so, as rm does; what it points to stays."""
    from click.testing import CliRunner

    from sdy_dl.cli import main

    root, kept = tmp_path / "cache", tmp_path / target
    root.mkdir()
    if target == "elsewhere":
        kept.mkdir()
        (kept / "program").write_text("a binary")
    (root / "souffle").symlink_to(kept)
    monkeypatch.setenv("SDY_DL_CACHE", str(root))
    result = CliRunner().invoke(main, ["cache", "clear"])
    assert (result.exit_code, result.stdout, result.stderr) == (
        0, f"removed the link {root}/souffle (to {kept}, which is kept)\n", "")
    assert not os.path.lexists(root / "souffle")
    assert target == "missing" or (kept / "program").read_text() == "a binary"


@pytest.mark.skipif(shutil.which("souffle") is None, reason="needs souffle on PATH")
@pytest.mark.parametrize("wait", [[], ["--wait-for-compile"]])
def test_a_compiled_run_with_a_cache_it_cannot_write(tmp_path, wait):
    """--compiled with $SDY_DL_CACHE a file: one line naming the cache, no traceback."""
    module, cache = tmp_path / "m.mlir", tmp_path / "cache"
    module.write_text(MODULE)
    cache.write_text("a file")
    done = sdy_dl(["propagate", "{m}", "--engine", "souffle", "--compiled", *wait], cache, module)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith(f"sdy-dl: error: {cache}/souffle/")
    assert done.stderr.endswith(": cannot write the cache of compiled programs: Not a directory\n")


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_standard_output_is_utf8_whatever_python_is_told(sound, tmp_path, encoding):
    """PYTHONIOENCODING (or a locale) naming another encoding: standard output is
    still the UTF-8 the same command writes by default (explain draws its tree
    with non-ASCII characters)."""
    module, cache, outputs = sound
    args = COMMANDS[1]
    assert not outputs[1].isascii()
    done = sdy_dl(args, cache, module, env={"PYTHONIOENCODING": encoding}, text=False)
    assert (done.returncode, done.stderr) == (0, b"")
    assert done.stdout.decode("utf-8") == outputs[1]


#: ``sdy-dl propagate`` that gets signal sys.argv[1] while writing its output.
SIGNALLED_WHILE_WRITING = """
import os, signal, sys
from sdy_dl.cli import propagate_cmd, run

class Signalled:
    def print(self, binary=False):
        yield "module {\\n"
        os.kill(os.getpid(), getattr(signal, sys.argv[1]))
        yield "}\\n"

propagate_cmd.propagate = lambda module, options: Signalled()
run(args=sys.argv[2:])
"""


@pytest.mark.parametrize("how, code", [("SIGTERM", 143), ("SIGHUP", 129), ("SIGINT", 130)])
def test_a_signal_while_writing_leaves_no_file(tmp_path, how, code):
    """kill, a closed terminal or Ctrl-C while the output is being written: one line,
    exit 128 + the signal, no output file and no temporary file."""
    module = tmp_path / "m.mlir"
    module.write_text(MODULE)
    done = subprocess.run([sys.executable, "-c", DEFAULTS + SIGNALLED_WHILE_WRITING, how, "propagate",
                           str(module), "-o", str(tmp_path / "out.mlir"), "--quiet"],
                          capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)   # (the installed sdy_dl, not the source tree's)
    message = "interrupted" if how == "SIGINT" else f"terminated ({how})"
    assert (done.returncode, done.stdout, done.stderr) == (code, "", f"sdy-dl: error: {message}\n")
    assert sorted(os.listdir(tmp_path)) == ["m.mlir"]


#: ``sdy-dl`` that gets SIGTERM after each piece of text it prints (rich's or click's).
SIGNALLED_WHILE_PRINTING = """
import os, signal, sys
import click
from rich.console import Console
from sdy_dl.cli import run

def signalling(printing):
    def printed(*args, **kwargs):
        printing(*args, **kwargs)
        if not kwargs.get("err"):
            os.kill(os.getpid(), signal.SIGTERM)
    return printed

Console.print, click.echo = signalling(Console.print), signalling(click.echo)
run(args=sys.argv[1:])
"""


@pytest.mark.parametrize("command", [["show", "{m}"], ["diff", "{m}", "{other}"]])
def test_a_signal_while_printing_leaves_no_partial_output(tmp_path, command):
    """Text a command prints (show's tables, diff's differences) is made whole before
    it is written: a signal while it is made writes nothing; once it is written,
    all of it."""
    module, other = tmp_path / "m.mlir", tmp_path / "other.mlir"
    module.write_text(MODULE)
    other.write_text(MODULE.replace('{"data"}', "{}").replace('{"model"}', "{}"))
    args = [a.format(m=module, other=other) for a in command]
    whole = subprocess.run([SDY_DL, *args], capture_output=True, text=True, timeout=300)
    assert whole.stdout.count("\n") >= 3
    done = subprocess.run([sys.executable, "-c", DEFAULTS + SIGNALLED_WHILE_PRINTING, *args],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (143, "sdy-dl: error: terminated (SIGTERM)\n")
    assert done.stdout in ("", whole.stdout)


@pytest.mark.parametrize("how", ["SIGTERM", "SIGHUP"])
def test_a_signal_ignored_at_the_start_stays_ignored(tmp_path, how):
    """A command started with the signal ignored (``nohup``, which ignores SIGHUP)
    keeps ignoring it: the signal while writing changes nothing."""
    module = tmp_path / "m.mlir"
    module.write_text(MODULE)
    ignoring = f"import signal; signal.signal(signal.{how}, signal.SIG_IGN)\n"
    done = subprocess.run([sys.executable, "-c", ignoring + SIGNALLED_WHILE_WRITING, how,
                           "propagate", str(module), "-o", str(tmp_path / "out.mlir"), "--quiet"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert (tmp_path / "out.mlir").read_text() == "module {\n}\n"


#: ``sdy-dl`` that gets signal sys.argv[1] while jaxlib's MLIR bindings are imported.
SIGNALLED_AT_THE_START = """
import os, signal, sys
from sdy_dl import cli

import_bindings = cli._import_mlir_without_numpy

def signalled():
    os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    import_bindings()

cli._import_mlir_without_numpy = signalled
cli.run(args=sys.argv[2:])
"""


@pytest.mark.parametrize("how", ["SIGTERM", "SIGHUP"])
def test_a_signal_while_the_bindings_load_ends_the_process_as_by_default(tmp_path, how):
    """A signal before the bindings are loaded kills the process as the signal does
    by default (no line; raised inside their import it could abort the process)."""
    module = tmp_path / "m.mlir"
    module.write_text(MODULE)
    done = subprocess.run([sys.executable, "-c", DEFAULTS + SIGNALLED_AT_THE_START, how, "propagate",
                           str(module), "-o", str(tmp_path / "out.mlir"), "--quiet"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (-getattr(signal, how), "", "")
    assert sorted(os.listdir(tmp_path)) == ["m.mlir"]


#: ``sdy-dl`` that gets signal sys.argv[1] in the visitor of its first MLIR walk (Python
#: code that jaxlib's C++ calls back).
SIGNALLED_IN_A_WALK = """
import os, signal, sys
from jaxlib.mlir import ir
from sdy_dl.cli import run

walk, sent = ir.Operation.walk, []

def signalling_walk(op, visit, order=ir.WalkOrder.POST_ORDER):
    def signalling_visit(o):
        if not sent:
            sent.append(o)
            os.kill(os.getpid(), getattr(signal, sys.argv[1]))
        return visit(o)
    return walk(op, signalling_visit, order)

ir.Operation.walk = signalling_walk
run(args=sys.argv[2:])
"""


@pytest.mark.parametrize("how, code", [("SIGTERM", 143), ("SIGHUP", 129)])
def test_a_signal_inside_an_mlir_walk_ends_the_command(tmp_path, how, code):
    """A signal while MLIR's walk calls back into Python ends the command as anywhere
    else (raised inside the visitor, the bindings made it an internal error)."""
    module = tmp_path / "m.mlir"
    module.write_text(MODULE)
    done = subprocess.run([sys.executable, "-c", DEFAULTS + SIGNALLED_IN_A_WALK, how, "propagate",
                           str(module), "-o", str(tmp_path / "out.mlir"), "--quiet"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (
        code, "", f"sdy-dl: error: terminated ({how})\n")
    assert sorted(os.listdir(tmp_path)) == ["m.mlir"]


#: A process with sdy-dl's SIGTERM handler that runs the statement sys.argv[2] and gets
#: SIGTERM when module sys.argv[1] is imported; prints whether module sys.argv[3] was
#: imported whole before the signal was raised.
SIGNALLED_WHILE_IMPORTING = """
import os, signal, sys, time
from sdy_dl import signals

class Signalling:
    def find_spec(self, name, path, target=None):
        if name == sys.argv[1]:
            os.kill(os.getpid(), signal.SIGTERM)

signal.signal(signal.SIGTERM, signals.terminate)
sys.meta_path.insert(0, Signalling())
try:
    exec(sys.argv[2])
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:   # (asleep: the retry's SIGALRM wakes it)
        time.sleep(0.05)
    print("not raised")
except signals.Terminated:
    print(sys.argv[3] in sys.modules)
"""


@pytest.mark.parametrize("signalled_at, statement, imported", [
    ("colorsys", "import colorsys", "colorsys"),
    ("jaxlib.mlir.dialects._stablehlo_ops_gen",
     "from sdy_dl.ir.context import mlir_context; mlir_context()",
     "jaxlib.mlir.dialects.stablehlo")])
def test_a_signal_during_an_import_is_raised_once_it_is_done(tmp_path, signalled_at,
                                                             statement, imported):
    """Python's compiler runs the handler while it makes a module's code and drops
    what it raises, and jaxlib's bindings run Python code from C++ while they are
    imported: a signal during an import is raised once the import is done."""
    done = subprocess.run([sys.executable, "-c", SIGNALLED_WHILE_IMPORTING, signalled_at,
                           statement, imported],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "True\n", "")


def test_a_deferred_signal_is_raised_on_leaving_the_outermost_region():
    from sdy_dl.signals import Terminated, deferred, terminate

    with pytest.raises(Terminated) as raised:
        with deferred:
            with deferred:
                terminate(signal.SIGHUP, None)
            left_inner = True
    assert left_inner and raised.value.signum == signal.SIGHUP
    with deferred:
        pass                      # (nothing pending any more)
    with pytest.raises(Terminated):
        terminate(signal.SIGTERM, None)


@pytest.mark.parametrize("script, said", [
    ("#!/bin/sh\necho 'Error: bad graph' >&2\nexit 3\n", "failed: Error: bad graph"),
    ("#!/bin/sh\nexit 3\n", "failed: exit status 3"),
    ("#!/bin/sh\nkill -9 $$\n", "failed: killed by signal 9"),
    ("#!/bin/sh\nprintf '<svg>\\377</svg>'\n", "wrote an SVG that is not UTF-8 text"),
    ("no interpreter line\n", "cannot run"),
])
def test_a_broken_dot_is_one_error_line(tmp_path, monkeypatch, script, said):
    """explain --format svg runs Graphviz's dot: one that fails, is killed, writes
    bytes that are not UTF-8 or cannot be run is one error line naming it."""
    from click.testing import CliRunner

    from sdy_dl.cli import main

    dot = tmp_path / "bin" / "dot"
    dot.parent.mkdir()
    dot.write_text(script)
    dot.chmod(0o755)
    module = tmp_path / "m.mlir"
    module.write_text(MODULE)
    monkeypatch.setenv("PATH", f"{dot.parent}{os.pathsep}{os.environ['PATH']}")
    result = CliRunner().invoke(main, ["explain", str(module), "%1", "--format", "svg",
                                       "--quiet", "-o", str(tmp_path / "out.svg")])
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr.startswith(f"sdy-dl: error: {module}: ")
    assert f"{dot} {said}" in result.stderr or f"{said} {dot}" in result.stderr
    assert result.stderr.count("\n") == 1 and not (tmp_path / "out.svg").exists()


def test_out_of_memory_is_one_line_and_leaves_no_file(tmp_path, monkeypatch):
    """Running out of memory (a ``ulimit -v``) is one line, exit 1, no output file;
    not an internal error to report."""
    from click.testing import CliRunner

    from sdy_dl.cli import main, propagate_cmd

    def propagate(module, options):
        raise MemoryError

    monkeypatch.setattr(propagate_cmd, "propagate", propagate)
    module = tmp_path / "m.mlir"
    module.write_text(MODULE)
    result = CliRunner().invoke(main, ["propagate", str(module), "-o", str(tmp_path / "out.mlir"),
                                       "--quiet"])
    assert (result.exit_code, result.stderr) == (1, "sdy-dl: error: out of memory\n")
    assert sorted(os.listdir(tmp_path)) == ["m.mlir"]


def test_mlir_bindings_that_do_not_load_are_one_line(tmp_path):
    """jaxlib broken (or too little memory to map it): one line, exit 1, no traceback."""
    fake = tmp_path / "fake" / "jaxlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('libjax_common.so: cannot map it')\n")
    done = sdy_dl(["propagate", "-"], tmp_path / "cache", "",
                  env={"PYTHONPATH": str(fake.parent)}, input=MODULE)
    assert (done.returncode, done.stdout, done.stderr) == (
        1, "", "sdy-dl: error: cannot load jaxlib's MLIR bindings (ImportError: "
               "libjax_common.so: cannot map it)\n")


@pytest.mark.parametrize("columns", ["0", "1", "12"])
def test_show_in_a_narrow_terminal_keeps_every_cell(tmp_path, monkeypatch, columns):
    """$COLUMNS of 0 or a few: show's tables are drawn 40 wide, cells folded, never
    cut (0 drew nothing, a few cut every name to nothing)."""
    from click.testing import CliRunner

    from sdy_dl.cli import main

    module = tmp_path / "m.mlir"
    module.write_text(MODULE)
    monkeypatch.setenv("COLUMNS", "40")
    wide = CliRunner().invoke(main, ["show", str(module)])
    monkeypatch.setenv("COLUMNS", columns)
    narrow = CliRunner().invoke(main, ["show", str(module)])
    assert (narrow.exit_code, narrow.stdout) == (0, wide.stdout)
    for name in ("stablehlo.dot_general", "stablehlo.negate", '<["data"=2, "model"=4]>'):
        assert name in narrow.stdout


def test_standard_output_that_takes_part_of_a_write_is_an_error(tmp_path):
    """PYTHONUNBUFFERED and a non-blocking pipe that fills (its reader slow): the
    output is whole or the command fails with one line; never cut short with exit
    status 0 (Python's unbuffered standard output dropped what the pipe did not take)."""
    import fcntl

    chain = "\n".join(f"  %{i + 1} = stablehlo.negate %{i} : tensor<8xf32>" for i in range(3000))
    module = tmp_path / "m.mlir"
    module.write_text("func.func @main(%0: tensor<8xf32>) -> tensor<8xf32> {\n"
                      f"{chain}\n  return %3000 : tensor<8xf32>\n}}\n")
    read, write = os.pipe()
    fcntl.fcntl(write, fcntl.F_SETFL, fcntl.fcntl(write, fcntl.F_GETFL) | os.O_NONBLOCK)
    try:
        done = subprocess.run([SDY_DL, "propagate", str(module), "--quiet"], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=300,
                              env={**os.environ, "PYTHONUNBUFFERED": "1",
                                   "SDY_DL_CACHE": str(tmp_path / "cache")})
        os.close(write)
        with os.fdopen(read, "rb") as f:
            got = f.read()
    finally:
        for fd in (read, write):
            try:
                os.close(fd)
            except OSError:
                pass
    assert len(got) < 3000 * 40   # (the pipe took part of it)
    assert done.returncode == 1
    assert done.stderr.startswith("sdy-dl: error: <stdout>: cannot write output: ")
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize("args, name", [(["propagate", "{m}", "-o", "out.mlir"], "out.mlir"),
                                        (["emit", "{m}", "--out-dir", "emitted"], "emitted")])
def test_an_output_named_in_a_removed_working_directory(tmp_path, args, name):
    """The working directory was removed: an output named relative to it is one line
    naming it (it was an internal error)."""
    module, gone = tmp_path / "m.mlir", tmp_path / "gone"
    module.write_text(MODULE)
    gone.mkdir()
    done = subprocess.run(["sh", "-c", 'cd "$0" && rmdir "$0" && exec "$@"', str(gone), SDY_DL,
                           *[a.format(m=module) for a in args], "--quiet"],
                          env={**os.environ, "SDY_DL_CACHE": str(tmp_path / "cache")},
                          capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith(f"sdy-dl: error: {name}: cannot write ")
    assert done.stderr.endswith(": No such file or directory\n") and done.stderr.count("\n") == 1


def test_an_interrupt_while_the_bindings_load_is_one_line(tmp_path):
    """Ctrl-C while jaxlib's MLIR bindings load (before the command runs): one line,
    exit 130, no traceback."""
    fake = tmp_path / "fake" / "jaxlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise KeyboardInterrupt\n")
    done = sdy_dl(["propagate", "-"], tmp_path / "cache", "",
                  env={"PYTHONPATH": str(fake.parent)}, input=MODULE)
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "sdy-dl: error: interrupted\n")
