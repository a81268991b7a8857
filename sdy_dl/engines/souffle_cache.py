"""The binary cache of compiled Soufflé programs, entry by entry (``sdy-dl cache``).

Each program's directory ``<digest>-<build key>`` of the cache
(:func:`sdy_dl.engines.souffle_engine.cache_dir`) holds its ``program.dl``
and, once compiled, its binary ``program``; a compilation that failed leaves
``failed`` (attempts and message, retried after a back-off), one running
holds ``build.lock``.  :func:`entries` says what each is; :func:`verify`
starts each binary as a server and checks that it answers.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from sdy_dl.engines.souffle_build import failed_attempts, held, retry_in


@dataclass
class Entry:
    """One program directory of the binary cache."""

    directory: str
    state: str        # built, building, waiting, failed
    size: int         # bytes of the directory's files
    detail: str = ""  # for a failed one: attempts, next retry and the message's first line


def entries(cache: str) -> list[Entry]:
    """The program directories of ``cache``, sorted by name."""
    out = []
    for name in sorted(os.listdir(cache)) if os.path.isdir(cache) else []:
        directory = os.path.join(cache, name)
        if not os.path.isfile(os.path.join(directory, "program.dl")):
            continue
        size = sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory)
                   if os.path.isfile(os.path.join(directory, f)))
        detail = ""
        if os.path.exists(os.path.join(directory, "program")):
            state = "built"
        elif held(os.path.join(directory, "build.lock")):
            state = "building"
        elif failed_attempts(directory):
            state = "failed"
            with open(os.path.join(directory, "failed"), encoding="utf-8",
                      errors="replace") as f:
                message = (f.read().splitlines()[1:] or [""])[0]
            wait = retry_in(directory)
            detail = (f"{failed_attempts(directory)} attempt(s); "
                      f"{'retried by the next compiled run' if not wait else f'retried in {wait:.0f} s'}"
                      f": {message[:120]}")
        else:
            state = "waiting"
        out.append(Entry(directory, state, size, detail))
    return out


def verify(entry: Entry) -> str | None:
    """None when the built binary of ``entry`` starts and answers as a server (or
    runs at all, when it cannot serve); else what is wrong."""
    from sdy_dl.engines.souffle_server import BrokenBinary, ServerTimeout, Server

    exe = os.path.join(entry.directory, "program")
    try:
        server = Server(exe)
    except (BrokenBinary, ServerTimeout) as e:
        return str(e)
    server.close()
    return None


def remove(entry: Entry) -> None:
    """Remove the program directory of ``entry``."""
    shutil.rmtree(entry.directory, ignore_errors=True)
