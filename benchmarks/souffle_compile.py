"""Benchmark: what a cold Soufflé binary cache costs, Soufflé's own build against sdy-dl's.

For every program of a binary cache filled by a run (``SDY_DL_CACHE=DIR
sdy-dl propagate --engine souffle --compiled --wait-for-compile M.mlir``),
compiles ``program.dl`` one program at a time, in child processes:

* ``souffle -o``: Soufflé's build (``-O3 -fopenmp``);
* ``sdy-dl``: ``souffle_build.compile_program`` (``souffle -g``, ``-O1``, no OpenMP,
  Soufflé's runtime headers precompiled once for all programs — the first
  program's time includes that — and with ``--jobs 2`` a large program cut
  into two translation units compiled at once, as ``--wait-for-compile`` does);

and prints wall and CPU seconds and the peak RSS of each (the compiler's:
``wait4`` of the child), then the totals.  With ``--facts DIR`` (a directory
per program digest holding fact directories ``facts*``), it also times each
pair of binaries on those facts, interleaved, the best of ``--runs`` per call.

    python benchmarks/souffle_compile.py ~/.cache/sdy-dl/souffle
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from sdy_dl.engines.souffle_build import program_name


def _measure(cmd: list[str]) -> tuple[float, float, int]:
    """Wall s, CPU s and peak RSS (MB) of ``cmd`` and the processes it waited for."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024


def _call_ms(exe: str, facts: str, name: list[str]) -> float:
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        subprocess.run([exe, "-F", facts, "-D", out, *name], check=True)
        return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cache", help="a binary cache directory (its program.dl files)")
    parser.add_argument("--souffle", default=shutil.which("souffle"))
    parser.add_argument("--facts", help="DIR/<digest>/facts*: time the binaries on these")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=1, help="compilers per program (1 or 2)")
    parser.add_argument("--no-souffle-o", action="store_true",
                        help="time sdy-dl's build only (no `souffle -o`, no call times)")
    args = parser.parse_args()
    helper = ("import sys; from sdy_dl.engines.souffle_build import compile_program; "
              "sys.exit(compile_program(*sys.argv[1:4], int(sys.argv[4]), sys.argv[5]) is not None)")
    headers = tempfile.mkdtemp(prefix="sdy-dl-runtime-")
    print("| program | Datalog lines | souffle -o s (CPU s) | peak MB | sdy-dl s (CPU s) | peak MB "
          "| ms/call -O3 | ms/call sdy-dl |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    totals = [0.0, 0.0, 0.0, 0.0]
    for digest in sorted(os.listdir(args.cache)):
        source = os.path.join(args.cache, digest, "program.dl")
        if not os.path.exists(source):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            old, new = os.path.join(tmp, "old"), os.path.join(tmp, "new")
            o = (0.0, 0.0, 0) if args.no_souffle_o else _measure([args.souffle, "-o", old, source])
            n = _measure([sys.executable, "-c", helper, args.souffle, source, new,
                          str(args.jobs), headers])
            calls = "- | -"
            facts = os.path.join(args.facts or "", digest)
            if args.facts and os.path.isdir(facts) and not args.no_souffle_o:
                dirs = sorted(os.path.join(facts, d) for d in os.listdir(facts)
                              if d.startswith("facts"))
                best = {old: [], new: []}
                # sdy-dl's binary runs the program named after its directory
                names = {old: [], new: [program_name(os.path.dirname(source))]}
                for d in dirs:
                    runs = {old: [], new: []}
                    for _ in range(args.runs):
                        for exe in (old, new):
                            runs[exe].append(_call_ms(exe, d, names[exe]))
                    for exe in best:
                        best[exe].append(min(runs[exe]))
                calls = " | ".join(f"{sum(v) / len(v):.1f}" for v in best.values())
        with open(source, encoding="utf-8") as f:
            lines = sum(1 for _ in f)
        totals = [t + x for t, x in zip(totals, (o[0], o[1], n[0], n[1]))]
        print(f"| {digest} | {lines} | {o[0]:.1f} ({o[1]:.1f}) | {o[2]} | {n[0]:.1f} ({n[1]:.1f}) "
              f"| {n[2]} | {calls} |")
    print(f"| total | | {totals[0]:.1f} ({totals[1]:.1f}) | | {totals[2]:.1f} ({totals[3]:.1f}) | | |")
    shutil.rmtree(headers, ignore_errors=True)


if __name__ == "__main__":
    main()
