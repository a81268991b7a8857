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

#: Left next to the binary's place when compiling failed: no further attempts.
FAILED = "failed"


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
                proc = subprocess.run([souffle, "-o", built, source], capture_output=True, text=True)
                if proc.returncode != 0:
                    message = (proc.stderr or proc.stdout).strip() or f"exit status {proc.returncode}"
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
