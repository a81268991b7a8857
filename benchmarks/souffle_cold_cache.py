"""Benchmark: what a cold Soufflé binary cache costs a run of ``sdy-dl propagate``.

For each of ``--runs`` runs, on a fresh private cache (``SDY_DL_CACHE``):

* ``--compiled``: the run's own wall time (the embedded engine stands in while
  detached builders compile), then the wall time from the run's start until
  every program's binary exists and no builder runs;
* ``--compiled --wait-for-compile`` (unless ``--no-wait``): the run's wall
  time, every binary compiled before its first call.

Prints each run and the medians, with the CPU seconds of the compilations
(all, and the busiest builder's: what the wall time comes to on an idle
machine, where the two builders do not wait for a core); with ``--expect FILE`` checks every output
against it byte for byte.  Needs ``souffle`` on PATH; compiles at most two
programs at once (the builders' limit), so run it on an otherwise idle machine.

    python benchmarks/souffle_cold_cache.py /tmp/speed-bench/gpt_1l.mlir --runs 3
"""

from __future__ import annotations

import argparse
import os
import re
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


_CPU_RE = re.compile(r"^compiled .* \(([0-9.]+) s CPU", re.MULTILINE)


def compile_cpu(binaries: str) -> tuple[float, float]:
    """(CPU s of all compilations, CPU s of the busiest builder) from the builders'
    logs in ``binaries`` (each builder writes to the log of the program it was
    started for): on an idle machine the busiest builder's CPU bounds the wall time."""
    per_log = []
    for name in os.listdir(binaries):
        try:
            with open(os.path.join(binaries, name, "build.log"), encoding="utf-8") as f:
                per_log.append(sum(float(x) for x in _CPU_RE.findall(f.read())))
        except OSError:
            continue
    return sum(per_log), max(per_log, default=0.0)


def cold_run(module: str, wait: bool, expect: str | None) -> tuple[float, float, float, float]:
    """(the run's wall s, s from its start until every binary is there, compile
    CPU s, the busiest builder's CPU s) on a fresh cache."""
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
        ready = time.perf_counter() - start
        return (run, ready, *compile_cpu(binaries))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module", help="the .mlir module to propagate")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--expect", help="the output every run must give, byte for byte")
    parser.add_argument("--no-wait", action="store_true", help="skip --wait-for-compile runs")
    args = parser.parse_args()
    if shutil.which("souffle") is None:
        raise SystemExit("souffle is not on PATH")
    results: dict[str, list[tuple]] = {"background": [], "wait": []}
    for i in range(args.runs):
        for mode in results:
            if mode == "wait" and args.no_wait:
                continue
            row = cold_run(args.module, mode == "wait", args.expect)
            results[mode].append(row)
            print(f"run {i + 1} {mode}: " + _describe(row), flush=True)
    for mode, rows in results.items():
        if rows:
            median = tuple(statistics.median(r[k] for r in rows) for k in range(4))
            print(f"median {mode} ({len(rows)} runs): " + _describe(median))


def _describe(row: tuple) -> str:
    run, ready, cpu, busiest = row
    return (f"run {run:.1f} s, every binary ready after {ready:.1f} s; compiling took "
            f"{cpu:.1f} s of CPU, {busiest:.1f} s on the busiest builder")


if __name__ == "__main__":
    main()
