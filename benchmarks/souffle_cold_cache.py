"""Benchmark: what a cold Soufflé binary cache costs a run of ``sdy-dl propagate``.

For each of ``--runs`` runs, on a fresh private cache (``SDY_DL_CACHE``):

* ``--compiled``: the run's own wall time (the embedded engine stands in while
  detached builders compile), then the wall time from the run's start until
  every program's binary exists and no builder runs;
* ``--compiled --wait-for-compile`` (unless ``--no-wait``): the run's wall
  time, every binary compiled before its first call.

Prints each run and the medians; with ``--expect FILE`` checks every output
against it byte for byte.  Needs ``souffle`` on PATH; compiles at most two
programs at once (the builders' limit), so run it on an otherwise idle machine.

    python benchmarks/souffle_cold_cache.py /tmp/speed-bench/gpt_1l.mlir --runs 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from sdy_dl.engines.souffle_build import waiting_programs
from sdy_dl.engines.souffle_engine import pending_builds


def _sdy_dl() -> list[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "sdy-dl")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "sdy_dl.cli"]


def cold_run(module: str, wait: bool, expect: str | None) -> tuple[float, float]:
    """(the run's wall s, s from its start until every binary is there) on a fresh cache."""
    with tempfile.TemporaryDirectory(prefix="sdy-dl-cold-") as cache:
        out = os.path.join(cache, "out.mlir")
        argv = [*_sdy_dl(), "propagate", module, "--engine", "souffle", "--compiled",
                *(["--wait-for-compile"] if wait else []), "-o", out]
        env = dict(os.environ, SDY_DL_CACHE=cache)
        start = time.perf_counter()
        proc = subprocess.run(argv, env=env, capture_output=True, text=True)
        run = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed:\n{proc.stderr[-2000:]}")
        if expect is not None:
            with open(out, "rb") as a, open(expect, "rb") as b:
                if a.read() != b.read():
                    raise SystemExit(f"output differs from {expect}")
        binaries = os.path.join(cache, "souffle")
        idle_since = time.perf_counter()
        while waiting_programs(binaries) or pending_builds(binaries):
            if pending_builds(binaries):
                idle_since = time.perf_counter()
            elif time.perf_counter() - idle_since > 5:
                raise SystemExit(f"no builder for {waiting_programs(binaries)}")
            time.sleep(0.2)
        return run, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module", help="the .mlir module to propagate")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--expect", help="the output every run must give, byte for byte")
    parser.add_argument("--no-wait", action="store_true", help="skip --wait-for-compile runs")
    args = parser.parse_args()
    if shutil.which("souffle") is None:
        raise SystemExit("souffle is not on PATH")
    results: dict[str, list[tuple[float, float]]] = {"background": [], "wait": []}
    for i in range(args.runs):
        for mode in results:
            if mode == "wait" and args.no_wait:
                continue
            run, ready = cold_run(args.module, mode == "wait", args.expect)
            results[mode].append((run, ready))
            print(f"run {i + 1} {mode}: run {run:.1f} s, every binary ready after {ready:.1f} s",
                  flush=True)
    for mode, rows in results.items():
        if rows:
            print(f"median {mode}: run {statistics.median(r for r, _ in rows):.1f} s, "
                  f"ready after {statistics.median(b for _, b in rows):.1f} s ({len(rows)} runs)")


if __name__ == "__main__":
    main()
