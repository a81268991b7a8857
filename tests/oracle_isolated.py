"""Shardy's passes run in a child process, for inputs on which jaxlib may crash
(some of Shardy's lit inputs abort jaxlib's ``enable-full-version=true``
insert-explicit-reshards).

``python oracle_isolated.py PIPELINE`` reads a JSON list of module texts on
standard input and writes one JSON line per module: the printed result, or
null when jaxlib rejects it.  :func:`shardy_each` runs it and restarts it
after a crash, the crashing module counting as rejected.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def shardy_each(texts: list[str], pipeline: str) -> list[str | None]:
    """Each text after Shardy's ``pipeline`` (None: rejected or crashed)."""
    results: list[str | None] = []
    while len(results) < len(texts):
        rest = texts[len(results):]
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), pipeline],
                              input=json.dumps(rest), capture_output=True, text=True)
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        results.extend(lines)
        if proc.returncode != 0 and len(results) < len(texts):
            results.append(None)  # the module it crashed on
    return results


def _main(pipeline: str) -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from oracle import shardy

    for text in json.loads(sys.stdin.read()):
        try:
            out = shardy(text, pipeline)
        except Exception:  # noqa: BLE001  (jaxlib rejects the module)
            out = None
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _main(sys.argv[1])
