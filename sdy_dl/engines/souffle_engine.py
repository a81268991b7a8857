"""The Soufflé engine: runs the emitted program by subprocess.

Interpreted: ``souffle -w -F facts -D out program.dl`` (no warnings: an error's
first line is the error).  Compiled: the program is
compiled once (:mod:`sdy_dl.engines.souffle_build`: Soufflé's C++ at ``-O1``)
into a binary cached by program digest and :func:`build_key` in
``$SDY_DL_CACHE`` (default ``~/.cache/sdy-dl/souffle``), which then serves
every call of the run as one process (:mod:`sdy_dl.engines.souffle_server`).
A binary that cannot be started is removed and built again; a server that
gives no answer in time leaves the run to the embedded engine (a warning).

Compiling one program takes 10-60 s of C++ compilation (up to ~2 GB).
By default a missing binary is compiled before the call (``wait``).  With
``background=True`` (the CLI's ``--compiled``) a missing binary is compiled by
a detached process (:mod:`sdy_dl.engines.souffle_build`, at most two
compilers at a time per cache, largest program first, the small ones
together into one binary) while this call, and
every call until the binary is there, runs on the embedded Python engine
instead; both engines give identical results, so only the time differs.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile

from sdy_dl.datalog.clauses import string_value
from sdy_dl.datalog.facts import (Facts, check_facts, escape_symbol, read_relation_file,
                                  write_facts_dir)
from sdy_dl.datalog.lexer import replace_strings
from sdy_dl.datalog.program import Program
from sdy_dl.engines.base import Relations
from sdy_dl.errors import SdyError
from sdy_dl.resources import cache_root, sha256


def cache_dir() -> str:
    """Where compiled Soufflé binaries are kept."""
    return str(cache_root() / "souffle")


@functools.cache
def build_key(souffle: str | None = None) -> str:
    """A digest of everything besides the program that shapes a binary: the
    Soufflé install (``souffle --version``, the build configuration it reports:
    compiler and flags), the compiler's identity (its ``--version``), the
    binaries' ``main`` and the code that generates, trims, splits and
    compiles the C++.  A binary built under another key is not reused."""
    from sdy_dl.engines import souffle_build, souffle_split, souffle_trim

    souffle = souffle or shutil.which("souffle")
    h = sha256()
    for path in (souffle_build.SERVER_SOURCE, souffle_build.__file__, souffle_split.__file__,
                 souffle_trim.__file__):
        with open(path, "rb") as f:
            h.update(f.read() + b"\0")
    if souffle:
        conf = souffle_build.compiler_config(souffle)
        h.update(_version([souffle, "--version"]) + b"\0")
        h.update(repr(sorted(conf.items()) if conf else None).encode() + b"\0")
        if conf:
            h.update(_version([conf["compiler"], "--version"]))
    return h.hexdigest()[:8]


def _version(cmd: list[str]) -> bytes:
    """What ``cmd`` prints (its version), or its failure."""
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=60)
        return proc.stdout + proc.stderr + str(proc.returncode).encode()
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"failed: {e}".encode()


def binary_path(program: Program) -> str:
    """Where the compiled binary of ``program`` is cached."""
    return os.path.join(cache_dir(), f"{program.digest}-{build_key()}", "program")


def warn(message: str) -> None:
    """One warning line on standard error."""
    print(f"sdy-dl: warning: {' '.join(message.split())}", file=sys.stderr)


def discard_broken(exe: str, error: SdyError) -> None:
    """Remove the broken binary ``exe`` from the cache (it is built again), with a warning."""
    try:
        os.remove(exe)
    except OSError:
        pass
    warn(f"{error}; removed it from the cache to be built again")


def cached_binary(program: Program) -> str | None:
    """The compiled binary of ``program`` if the cache has it."""
    exe = binary_path(program)
    return exe if os.path.exists(exe) else None


def pending_builds(root: str | None = None) -> list[str]:
    """Program directories of the binary cache ``root`` (default: this process's)
    whose compilation is running, or waiting for a builder that is running."""
    from sdy_dl.engines.souffle_build import held, slot_locks, waiting_programs

    root = root or cache_dir()
    busy = any(held(path) for path in slot_locks(root))
    return [d for d in waiting_programs(root) if busy or held(os.path.join(d, "build.lock"))]


#: Digests whose background compilation this process started.
_STARTED: set[str] = set()


class SouffleEngine:
    """Runs programs with the ``souffle`` binary on PATH."""

    name = "souffle"

    def __init__(self, compiled: bool = False, binary: str | None = None,
                 background: bool = False):
        self.binary = binary or shutil.which("souffle")
        if self.binary is None:
            raise SdyError("engine souffle: no 'souffle' on PATH")
        self.compiled = compiled
        self.background = background
        self._fallback = None

    def run(self, program: Program, facts: Facts) -> Relations:
        from sdy_dl.datalog.check import checked_clauses
        from sdy_dl.engines.souffle_server import BrokenBinary

        checked_clauses(program)   # the subset and its errors are the embedded engines'
        program = souffle_program(program)
        if self.compiled:
            for attempt in range(2):   # a broken binary is built again once
                exe = cached_binary(program)
                if exe is None and self.background:
                    self._start_build(program)
                    return self._embedded().run(program, facts)
                exe = exe or self._compile(program)
                try:
                    return run_binary(exe, program, facts)
                except BrokenBinary as e:
                    discard_broken(exe, e)
                    if attempt:
                        raise
        check_facts(program, facts)
        with tempfile.TemporaryDirectory(prefix="sdy-dl-", dir=scratch_dir()) as tmp:
            source = os.path.join(tmp, "program.dl")
            with open(source, "w", encoding="utf-8") as f:
                f.write(program.text)
            return _run_with_facts([self.binary, "-w"], source, program, facts, tmp)

    def grounds(self, program: Program) -> bool:
        return False

    def compiles(self) -> bool:
        return self.compiled

    def _embedded(self):
        if self._fallback is None:
            from sdy_dl.engines.python_engine import PythonEngine
            self._fallback = PythonEngine()
        return self._fallback

    def _compile(self, program: Program) -> str:
        """The cached binary of ``program``, compiled now (after any build of it or of
        another program that is running)."""
        from sdy_dl.engines.souffle_build import build

        exe = binary_path(program)
        error = build(self.binary, _cached_source(program), exe, wait=True)
        if error is not None or not os.path.exists(exe):
            lines = (error or "no binary was built").splitlines()
            raise SdyError(f"souffle failed: {lines[0]}")
        return exe

    def _start_build(self, program: Program) -> None:
        """Start a detached compilation of ``program`` (once per process)."""
        from sdy_dl.engines.souffle_build import retry_due

        if program.digest in _STARTED:
            return
        _STARTED.add(program.digest)
        exe = binary_path(program)
        directory = os.path.dirname(exe)
        if not retry_due(directory):
            return   # compiling it failed lately (see build.log there): the embedded engine runs it
        source = _cached_source(program)
        with open(os.path.join(directory, "build.log"), "ab") as log:
            subprocess.Popen([sys.executable, "-m", "sdy_dl.engines.souffle_build",
                              self.binary, source, exe],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             start_new_session=True)
        if len(_STARTED) == 1:
            print(f"sdy-dl: compiling Soufflé programs in the background into {cache_dir()}; "
                  "until they are ready, their calls run on the embedded engine",
                  file=sys.stderr)


def souffle_program(program: Program) -> Program:
    """``program`` as Soufflé runs it: its ``.input``/``.output`` directives written
    plainly, one relation each, at its end (the engine reads every output
    relation from ``-D``'s directory, which ``IO=stdout`` would bypass), and its
    string constants written as fact files write symbols (``"q\\"t"`` as
    ``"q%22t"``, :func:`~sdy_dl.datalog.facts.escape_symbol`), so that a constant
    equals the fact symbol of its value and reads back as it; ``program`` itself
    when neither changes it."""
    found = _SOUFFLE_PROGRAMS.get(program.text)
    if found is None:
        found = _SOUFFLE_PROGRAMS[program.text] = _as_souffle_runs_it(program)
    return program if found is True else found


_SOUFFLE_PROGRAMS: dict[str, object] = {}


def _as_souffle_runs_it(program: Program):
    """:func:`souffle_program`'s program, or True when it is ``program`` itself."""
    text = replace_strings(program.text,
                           lambda s: '"' + escape_symbol(string_value(s)) + '"')
    io = [line for line in text.splitlines() if line.lstrip().startswith((".input", ".output"))]
    if any("(" in line or "," in line for line in io):
        lines = [line for line in text.splitlines()
                 if not line.lstrip().startswith((".input", ".output"))]
        lines += [f".input {d.name}" for d in program.inputs]
        lines += [f".output {d.name}" for d in program.outputs]
        text = "\n".join(lines) + "\n"
    return True if text == program.text else Program(text, program.decls)


def _cached_source(program: Program) -> str:
    """``program``'s text saved next to its binary's place (written once, atomically);
    a cache that cannot be written (``$SDY_DL_CACHE`` a file, a read-only disk) is
    an error: a compiled run has nowhere to build."""
    directory = os.path.dirname(binary_path(program))
    source = os.path.join(directory, "program.dl")
    try:
        os.makedirs(directory, exist_ok=True)
        if not os.path.exists(source):
            fd, tmp = tempfile.mkstemp(prefix="program-", suffix=".dl", dir=directory)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(program.text)
            os.replace(tmp, source)
    except OSError as e:
        raise SdyError(f"cannot write the cache of compiled programs: {e.strerror or e}",
                       file=directory) from None
    return source


def scratch_dir() -> str | None:
    """Where a call's fact and output files go: a RAM file system when the
    machine has one (creating and removing a call's dozen files on a disk file
    system costs ~10 ms, a sixth of a step call), else the default temp dir."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


#: Binaries whose server gave no answer in time: their calls run on the embedded engine.
_GAVE_UP: set[str] = set()


def give_up(exe: str, error: SdyError) -> None:
    """Run the calls of binary ``exe`` on the embedded engine from now on (a warning)."""
    _GAVE_UP.add(exe)
    warn(f"{error}; this run continues on the embedded engine")


def gave_up(exe: str) -> bool:
    """Whether this process runs the calls of binary ``exe`` on the embedded engine."""
    return exe in _GAVE_UP


def _embedded_run(program: Program, facts: Facts) -> Relations:
    from sdy_dl.engines.python_engine import PythonEngine

    return PythonEngine().run(program, facts)


def run_binary(exe: str, program: Program, facts: Facts) -> Relations:
    """``program``'s output relations from its compiled binary ``exe`` (its server
    process, :mod:`sdy_dl.engines.souffle_server`, when it can serve).  A server
    that gives no answer in time (``$SDY_DL_SOUFFLE_TIMEOUT``) is ended with a
    warning, and this call and the binary's later ones run on the embedded
    engine; a broken binary raises BrokenBinary."""
    from sdy_dl.engines.souffle_server import ServerTimeout, server

    if exe in _GAVE_UP:
        return _embedded_run(program, facts)
    try:
        running = server(exe)
        if running is not None:
            return running.call(program, facts)
    except ServerTimeout as e:
        give_up(exe, e)
        return _embedded_run(program, facts)
    check_facts(program, facts)
    with tempfile.TemporaryDirectory(prefix="sdy-dl-", dir=scratch_dir()) as tmp:
        return _run_with_facts([exe], None, program, facts, tmp)


def _run_with_facts(cmd: list[str], source: str | None, program: Program, facts: Facts,
                    tmp: str) -> Relations:
    fact_dir, out_dir = os.path.join(tmp, "facts"), os.path.join(tmp, "out")
    os.makedirs(out_dir)
    write_facts_dir(program, facts, fact_dir)
    _run(cmd + ["-F", fact_dir, "-D", out_dir] + ([source] if source else []))
    return {d.name: read_relation_file(d, os.path.join(out_dir, f"{d.name}.csv"))
            for d in program.outputs}


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        detail = _without_warnings((proc.stderr or proc.stdout).strip().splitlines())
        raise SdyError(f"souffle failed: {detail[0] if detail else proc.returncode}")


def _without_warnings(lines: list[str]) -> list[str]:
    """Soufflé's error output without its warnings (a ``Warning:`` line, then the
    source line and a ``---^---`` marker under it), which it prints before the
    error although ``-w`` asks for none (Soufflé 2.5)."""
    out, skip = [], 0
    for line in lines:
        if line.startswith("Warning: "):
            skip = 2
        elif skip:
            skip -= 1
            if re.fullmatch(r"-*\^-*", line):
                skip = 0
        else:
            out.append(line)
    return out
