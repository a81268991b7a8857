"""Benchmark: odd big inputs, the whole `sdy-dl propagate` process against a whole
Shardy pipeline process.

Generated modules (one sharded argument on a 2x4 mesh, 8x8 tensors):

* ``groups:N`` -- N sharding groups of two values each (a negate and an abs of
  the previous value, then their sum);
* ``big-group:N`` -- one sharding group of N values;
* ``constants:N`` -- N constants, each added to a running sum;
* ``mesh:N`` -- a mesh of N devices with explicit (reversed) ``device_ids``;
* ``axis:N`` -- a chain of 60 dots, negates and adds on a mesh whose axis ``a``
  has N devices, the arguments sharded on sub-axes of ``a`` (every step call
  meets the tables of the refs of ``a``, quadratic in its size's divisors).

Each is timed as whole processes, interleaved (``--runs`` rounds): ``sdy-dl
propagate --engine python`` (after one untimed run that fills the cache) and a
Python process running Shardy's ``sdy-propagation-pipeline`` (the script of
``benchmarks/pipeline.py``).  The table gives medians of wall and CPU time
(user + system of the process and its children) and the ratio of the medians;
the two outputs must be byte for byte equal.

    python benchmarks/big_inputs.py                                  # the default cases
    python benchmarks/big_inputs.py --cases groups:3000 mesh:1048576 --runs 5

Run on demand, never in CI.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pipeline import SHARDY_SCRIPT  # noqa: E402

DEFAULT_CASES = ("groups:3000", "big-group:3000", "constants:20000", "mesh:1048576")
T = "tensor<8x8xf32>"
HEAD = ('sdy.mesh @mesh = <["a"=2, "b"=4]>\n'
        f'func.func @main(%arg0: {T} {{sdy.sharding = #sdy.sharding<@mesh, [{{"a"}}, {{}}]>}})'
        f" -> {T} {{\n")


def groups(n: int) -> str:
    lines, prev = [], "%arg0"
    for i in range(n):
        lines += [f"  %x{i} = stablehlo.negate {prev} : {T}",
                  f"  %y{i} = stablehlo.abs {prev} : {T}",
                  f"  sdy.sharding_group %x{i} group_id={i} : {T}",
                  f"  sdy.sharding_group %y{i} group_id={i} : {T}",
                  f"  %z{i} = stablehlo.add %x{i}, %y{i} : {T}"]
        prev = f"%z{i}"
    return HEAD + "\n".join(lines) + f"\n  return {prev} : {T}\n}}\n"


def big_group(n: int) -> str:
    lines, prev = [], "%arg0"
    for i in range(n):
        lines += [f"  %x{i} = stablehlo.negate {prev} : {T}",
                  f"  sdy.sharding_group %x{i} group_id=7 : {T}"]
        prev = f"%x{i}"
    return HEAD + "\n".join(lines) + f"\n  return {prev} : {T}\n}}\n"


def constants(n: int) -> str:
    lines, prev = [], "%arg0"
    for i in range(n):
        lines += [f"  %c{i} = stablehlo.constant dense<{float(i)}> : {T}",
                  f"  %z{i} = stablehlo.add {prev}, %c{i} : {T}"]
        prev = f"%z{i}"
    return HEAD + "\n".join(lines) + f"\n  return {prev} : {T}\n}}\n"


def mesh(n: int) -> str:
    ids = ", ".join(str(i) for i in reversed(range(n)))
    return (HEAD.replace('<["a"=2, "b"=4]>', f'<["a"={n // 4}, "b"=4], device_ids=[{ids}]>')
            + f"  %0 = stablehlo.negate %arg0 : {T}\n  return %0 : {T}\n}}\n")


def axis(n: int) -> str:
    head = (f'sdy.mesh @mesh = <["a"={n}, "b"=2]>\n'
            f'func.func @main(%arg0: {T} {{sdy.sharding = #sdy.sharding<@mesh, [{{"a":(1)2}}, {{}}]>}},'
            f' %arg1: {T} {{sdy.sharding = #sdy.sharding<@mesh, [{{}}, {{"a":(2)2, "b"}}]>}})'
            f" -> {T} {{\n")
    lines, prev = [], "%arg0"
    for i in range(20):
        lines += [f"  %d{i} = stablehlo.dot_general {prev}, %arg1, contracting_dims = [1] x [0]"
                  f" : ({T}, {T}) -> {T}",
                  f"  %n{i} = stablehlo.negate %d{i} : {T}",
                  f"  %s{i} = stablehlo.add %n{i}, {prev} : {T}"]
        prev = f"%s{i}"
    return head + "\n".join(lines) + f"\n  return {prev} : {T}\n}}\n"


GENERATORS = {"groups": groups, "big-group": big_group, "constants": constants, "mesh": mesh,
              "axis": axis}


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of a process (CPU: user + system, children included)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {err}")
    return wall, usage.ru_utime + usage.ru_stime


def bench(case: str, workdir: str, runs: int) -> dict:
    kind, _, n = case.partition(":")
    path = os.path.join(workdir, case.replace(":", "_") + ".mlir")
    with open(path, "w", encoding="utf-8") as f:
        f.write(GENERATORS[kind](int(n)))
    ours_out, shardy_out = path + ".sdy-dl", path + ".shardy"
    script = os.path.join(workdir, "shardy.py")
    with open(script, "w", encoding="utf-8") as f:
        f.write(SHARDY_SCRIPT)
    sdy_dl = os.path.join(os.path.dirname(sys.executable), "sdy-dl")
    ours = [sdy_dl, "propagate", path, "--engine", "python", "--quiet", "-o", ours_out]
    ref = [sys.executable, script, path, shardy_out]
    timed(ours)   # fills the cache
    times = {"sdy-dl": [], "shardy": []}
    for _ in range(runs):
        times["sdy-dl"].append(timed(ours))
        times["shardy"].append(timed(ref))
    with open(ours_out, encoding="utf-8") as a, open(shardy_out, encoding="utf-8") as b:
        same = a.read() == b.read()
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for k, v in times.items()}
    return {"case": case, "same": same, **{f"{k}_{x}": med[k][i] for k in med
                                             for i, x in enumerate(("wall", "cpu"))}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(DEFAULT_CASES))
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    print("| case | sdy-dl wall s | sdy-dl CPU s | Shardy wall s | Shardy CPU s "
          "| wall ratio | CPU ratio | output equal |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as workdir:
        for case in args.cases:
            r = bench(case, workdir, args.runs)
            print(f"| {r['case']} | {r['sdy-dl_wall']:.2f} | {r['sdy-dl_cpu']:.2f} "
                  f"| {r['shardy_wall']:.2f} | {r['shardy_cpu']:.2f} "
                  f"| {r['sdy-dl_wall'] / r['shardy_wall']:.1f} "
                  f"| {r['sdy-dl_cpu'] / r['shardy_cpu']:.1f} | {r['same']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
