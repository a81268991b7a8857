"""Compile one Soufflé program into the binary cache, detached from sdy-dl.

``python -m sdy_dl.engines.souffle_build SOUFFLE SOURCE EXE`` compiles
``SOURCE`` with ``SOUFFLE -o`` and moves the result to ``EXE``.  A lock next
to ``EXE`` makes a second builder of the same program exit at once, and a
lock on the cache directory lets only one compilation (~2 GB of C++
compiler) run at a time.  Started by the Soufflé engine when it runs with
``background=True``.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
import time


def build(souffle: str, source: str, exe: str) -> int:
    directory = os.path.dirname(exe)
    with open(os.path.join(directory, "build.lock"), "w") as mine:
        try:
            fcntl.flock(mine, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # another builder has this program
        with open(os.path.join(os.path.dirname(directory), "build.lock"), "w") as shared:
            fcntl.flock(shared, fcntl.LOCK_EX)
            if os.path.exists(exe):
                return 0
            start = time.monotonic()
            with tempfile.TemporaryDirectory(prefix="sdy-dl-build-", dir=directory) as tmp:
                built = os.path.join(tmp, "program")
                proc = subprocess.run([souffle, "-o", built, source], capture_output=True, text=True)
                if proc.returncode != 0:
                    print((proc.stderr or proc.stdout).strip(), file=sys.stderr)
                    return 1
                os.replace(built, exe)
            print(f"compiled {source} in {time.monotonic() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(build(*sys.argv[1:4]))
