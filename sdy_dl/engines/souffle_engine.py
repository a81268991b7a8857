"""The Soufflé engine: runs the emitted program by subprocess.

Interpreted: ``souffle -F facts -D out program.dl``.  Compiled: the program is
compiled once with ``souffle -o`` into a binary cached by program digest in
``$SDY_DL_CACHE`` (default ``~/.cache/sdy-dl/souffle``), then run with
``-F``/``-D``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from sdy_dl.datalog.facts import Facts, check_facts, read_relation_file, write_facts_dir
from sdy_dl.datalog.program import Program
from sdy_dl.engines.base import Relations
from sdy_dl.errors import SdyError


def cache_dir() -> str:
    """Where compiled Soufflé binaries are kept."""
    base = os.environ.get("SDY_DL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sdy-dl")
    return os.path.join(base, "souffle")


class SouffleEngine:
    """Runs programs with the ``souffle`` binary on PATH."""

    name = "souffle"

    def __init__(self, compiled: bool = False, binary: str | None = None):
        self.binary = binary or shutil.which("souffle")
        if self.binary is None:
            raise SdyError("engine souffle: no 'souffle' on PATH")
        self.compiled = compiled

    def run(self, program: Program, facts: Facts) -> Relations:
        check_facts(program, facts)
        with tempfile.TemporaryDirectory(prefix="sdy-dl-") as tmp:
            fact_dir, out_dir = os.path.join(tmp, "facts"), os.path.join(tmp, "out")
            os.makedirs(out_dir)
            write_facts_dir(program, facts, fact_dir)
            if self.compiled:
                cmd = [self._compiled_binary(program), "-F", fact_dir, "-D", out_dir]
            else:
                source = os.path.join(tmp, "program.dl")
                with open(source, "w", encoding="utf-8") as f:
                    f.write(program.text)
                cmd = [self.binary, "-F", fact_dir, "-D", out_dir, source]
            _run(cmd)
            return {d.name: read_relation_file(d, os.path.join(out_dir, f"{d.name}.csv"))
                    for d in program.outputs}

    def _compiled_binary(self, program: Program) -> str:
        """The cached binary of ``program``, compiled on first use."""
        directory = os.path.join(cache_dir(), program.digest)
        exe = os.path.join(directory, "program")
        if os.path.exists(exe):
            return exe
        os.makedirs(directory, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="sdy-dl-build-", dir=directory) as tmp:
            source = os.path.join(tmp, "program.dl")
            with open(source, "w", encoding="utf-8") as f:
                f.write(program.text)
            built = os.path.join(tmp, "program")
            _run([self.binary, "-o", built, source])
            os.replace(built, exe)
        return exe


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise SdyError(f"souffle failed: {detail[0] if detail else proc.returncode}")
