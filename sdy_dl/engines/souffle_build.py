"""Compile one Soufflé program into the binary cache, detached from sdy-dl.

``python -m sdy_dl.engines.souffle_build SOUFFLE SOURCE EXE`` compiles
``SOURCE`` and moves the result to ``EXE``.  A lock next to ``EXE`` makes a
second builder of the same program exit at once, and a lock on the cache
directory lets only one compilation (up to ~2 GB of C++ compiler) run at a
time.  Started by the Soufflé engine when it runs with ``background=True``.

How: ``SOUFFLE -g`` writes the program's C++, which is compiled with the
compiler, include directories, definitions and link options the Soufflé
install reports (the JSON in the ``souffle-compile.py`` next to the
``souffle`` binary, which ``souffle -o`` itself runs) but at ``-O1`` and
without OpenMP instead of ``-O3 -fopenmp``: a step program compiles in half
the CPU time with ~10% less memory, and the binaries (one thread: sdy-dl
never passes ``-j``) run as fast (within a few percent).  An install that
reports no such configuration, or a compilation that fails this way, falls
back to ``SOUFFLE -o``.  Measurements: ``docs/performance.md``.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

#: Left next to the binary's place when compiling failed: no further attempts.
FAILED = "failed"

#: The optimisation level of the generated C++ (Soufflé's own is ``-O3``).
OPTIMIZATION = "-O1"

_CONFIG_KEYS = ("compiler", "compiler_id", "definitions", "compile_options", "includes",
                "std_flag", "cxx_flags", "link_options", "rpaths", "rpath_fmt",
                "path_delimiter", "outname_fmt")
_JSON_RE = re.compile(r'^JSON_DATA_TEXT\s*=\s*"""(.*?)"""', re.DOTALL | re.MULTILINE)


def compiler_config(souffle: str) -> dict | None:
    """The C++ build configuration of the Soufflé install of binary ``souffle``
    (the JSON in its ``souffle-compile.py``), or None when there is none we can use."""
    dirs = dict.fromkeys([os.path.dirname(souffle), os.path.dirname(os.path.realpath(souffle))])
    for directory in dirs:
        try:
            with open(os.path.join(directory, "souffle-compile.py"), encoding="utf-8") as f:
                match = _JSON_RE.search(f.read())
            conf = json.loads(match.group(1)) if match else None
        except (OSError, ValueError):
            continue
        if (isinstance(conf, dict) and all(isinstance(conf.get(k), str) for k in _CONFIG_KEYS)
                and conf["compiler_id"] in ("GNU", "Clang", "AppleClang")
                and conf["outname_fmt"] == "-o {}"):
            return conf
    return None


def compile_command(conf: dict, cpp: str, exe: str) -> list[str]:
    """The command compiling the generated C++ ``cpp`` into ``exe``: what
    ``souffle-compile.py`` runs, at :data:`OPTIMIZATION` and without OpenMP."""
    def flags(key: str) -> list[str]:
        return [f for f in shlex.split(conf[key]) if f != "-fopenmp"]

    rpaths = [conf["rpath_fmt"].format(p)
              for p in conf["rpaths"].split(conf["path_delimiter"]) if p]
    return [conf["compiler"], *flags("definitions"), *flags("compile_options"),
            *flags("includes"), *flags("std_flag"), *flags("cxx_flags"), OPTIMIZATION,
            "-o", exe, cpp, *flags("link_options"), *rpaths]


def _run(cmd: list[str]) -> str | None:
    """None when ``cmd`` succeeds, else its message."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode == 0:
        return None
    return (proc.stderr or proc.stdout).strip() or f"exit status {proc.returncode}"


def compile_program(souffle: str, source: str, built: str) -> str | None:
    """Compile the Soufflé program ``source`` into the binary ``built``; None
    when done, else the compiler's message."""
    conf = compiler_config(souffle)
    if conf is not None:
        cpp = os.path.splitext(built)[0] + ".cpp"
        error = _run([souffle, "-w", "-g", cpp, source])
        if error is not None:
            return error   # the Datalog program itself is at fault: `souffle -o` would fail too
        error = _run(compile_command(conf, cpp, built))
        if error is None:
            return None
        print(f"compiling {cpp} failed ({error.splitlines()[0]}); trying `souffle -o`",
              file=sys.stderr)
    return _run([souffle, "-o", built, source])


def build(souffle: str, source: str, exe: str, wait: bool = False) -> str | None:
    """Compile ``source`` into ``exe`` unless it is there; None when done (or, without
    ``wait``, when another builder has this program), else the compiler's message."""
    directory = os.path.dirname(exe)
    with open(os.path.join(directory, "build.lock"), "w") as mine:
        try:
            fcntl.flock(mine, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            return None  # another builder has this program
        with open(os.path.join(os.path.dirname(directory), "build.lock"), "w") as shared:
            fcntl.flock(shared, fcntl.LOCK_EX)
            if os.path.exists(exe):
                return None
            start = time.monotonic()
            with tempfile.TemporaryDirectory(prefix="sdy-dl-build-", dir=directory) as tmp:
                built = os.path.join(tmp, "program")
                message = compile_program(souffle, source, built)
                if message is not None:
                    with open(os.path.join(directory, FAILED), "w") as f:
                        f.write(message[-4000:])
                    return message
                os.replace(built, exe)
            print(f"compiled {source} in {time.monotonic() - start:.1f} s", file=sys.stderr)
    return None


if __name__ == "__main__":
    error = build(*sys.argv[1:4])
    if error is not None:
        print(error, file=sys.stderr)
    sys.exit(0 if error is None else 1)
