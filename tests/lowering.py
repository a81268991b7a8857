"""Lowered JAX programs, computed once per test run and shared by the xdist workers.

``once(namespace, name, lower)`` returns ``lower()``'s module text.  Within a
process it is memoised; across the workers of one pytest-xdist run (they
share ``PYTEST_XDIST_TESTRUNUID``) the first worker to need a program lowers
it under a file lock and writes it to a per-run folder, and the others read
it.  Without xdist the in-process memo alone applies.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

_memo: dict[tuple[str, str], str] = {}


def run_dir_path(run: str) -> Path:
    """The folder of run ``run`` (``conftest`` removes it when the run ends)."""
    return Path(tempfile.gettempdir()) / f"sdy-dl-lowered-{run}"


def _run_dir() -> Path | None:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run:
        return None
    path = run_dir_path(run)
    path.mkdir(exist_ok=True)
    return path


def once(namespace: str, name: str, lower: Callable[[], str]) -> str:
    """The module text of program ``namespace/name``, lowered at most once per run."""
    key = (namespace, name)
    if key not in _memo:
        _memo[key] = _shared(namespace, name, lower)
    return _memo[key]


def _shared(namespace: str, name: str, lower: Callable[[], str]) -> str:
    folder = _run_dir()
    if folder is None:
        return lower()
    target = folder / f"{namespace}.{name}.mlir"
    with open(folder / f"{namespace}.{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            return target.read_text(encoding="utf-8")
        text = lower()
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(text, encoding="utf-8")
        partial.replace(target)
        return text
