"""The Soufflé engine: runs the emitted program by subprocess.

Interpreted: ``souffle -F facts -D out program.dl``.  Compiled: the program is
compiled once (:mod:`sdy_dl.engines.souffle_build`: Soufflé's C++ at ``-O1``)
into a binary cached by program digest in ``$SDY_DL_CACHE`` (default
``~/.cache/sdy-dl/souffle``), which then serves every call of the run as one
process (:mod:`sdy_dl.engines.souffle_server`).

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
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

from sdy_dl.datalog.facts import Facts, check_facts, read_relation_file, write_facts_dir
from sdy_dl.datalog.program import Program
from sdy_dl.engines.base import Relations
from sdy_dl.errors import SdyError
from sdy_dl.resources import cache_root


def cache_dir() -> str:
    """Where compiled Soufflé binaries are kept."""
    return str(cache_root() / "souffle")


@functools.cache
def _main_digest() -> str:
    """A digest of the binaries' ``main`` (a binary built with another one is not reused)."""
    from sdy_dl.engines.souffle_build import SERVER_SOURCE

    with open(SERVER_SOURCE, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:8]


def binary_path(program: Program) -> str:
    """Where the compiled binary of ``program`` is cached."""
    return os.path.join(cache_dir(), f"{program.digest}-{_main_digest()}", "program")


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
        if self.compiled:
            exe = cached_binary(program)
            if exe is None and self.background:
                self._start_build(program)
                return self._embedded().run(program, facts)
            return run_binary(exe or self._compile(program), program, facts)
        check_facts(program, facts)
        with tempfile.TemporaryDirectory(prefix="sdy-dl-", dir=scratch_dir()) as tmp:
            source = os.path.join(tmp, "program.dl")
            with open(source, "w", encoding="utf-8") as f:
                f.write(program.text)
            return _run_with_facts([self.binary], source, program, facts, tmp)

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
        from sdy_dl.engines.souffle_build import FAILED

        if program.digest in _STARTED:
            return
        _STARTED.add(program.digest)
        exe = binary_path(program)
        directory = os.path.dirname(exe)
        if os.path.exists(os.path.join(directory, FAILED)):
            return   # compiling it failed before (see build.log there): the embedded engine runs it
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


def _cached_source(program: Program) -> str:
    """``program``'s text saved next to its binary's place (written once, atomically)."""
    directory = os.path.dirname(binary_path(program))
    os.makedirs(directory, exist_ok=True)
    source = os.path.join(directory, "program.dl")
    if not os.path.exists(source):
        fd, tmp = tempfile.mkstemp(prefix="program-", suffix=".dl", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(program.text)
        os.replace(tmp, source)
    return source


def scratch_dir() -> str | None:
    """Where a call's fact and output files go: a RAM file system when the
    machine has one (creating and removing a call's dozen files on a disk file
    system costs ~10 ms, a sixth of a step call), else the default temp dir."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


def run_binary(exe: str, program: Program, facts: Facts) -> Relations:
    """``program``'s output relations from its compiled binary ``exe`` (its server
    process, :mod:`sdy_dl.engines.souffle_server`, when it can serve)."""
    from sdy_dl.engines.souffle_server import server

    running = server(exe)
    if running is not None:
        return running.call(program, facts)
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
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise SdyError(f"souffle failed: {detail[0] if detail else proc.returncode}")
