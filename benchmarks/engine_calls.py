"""Benchmark: the embedded engine's calls of one propagation, replayed alone.

Propagates MODULE once on the python engine, recording every engine call
(program, facts and output relations), then replays the calls in their order
``--runs`` times, each run with fresh plans (the compiled rule code read from
the cache, as a new process reads it), and checks every replayed output
against the recorded one.  Reports the median and fastest run, the calls, and
per size of a step-program call (its steps) the calls and the median time of
one.  Deterministic enough to run under ``valgrind --tool=callgrind`` (with
``PYTHONHASHSEED=0``) for an instruction count of the engine alone: the A/B
measure of a change to ``engines/python_engine.py`` or to the programs.

    python benchmarks/engine_calls.py /tmp/sdy-dl-bench/gpt_1l.mlir --runs 20
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict

from sdy_dl.engines import python_engine
from sdy_dl.engines.python_engine import PythonEngine
from sdy_dl.ir import load_module
from sdy_dl.pipeline import make_options, propagate


def record(path: str) -> list[tuple]:
    """(program, facts, outputs) of every python-engine call propagating ``path``."""
    calls = []
    run = PythonEngine.run

    def recording(self, program, facts):
        facts = {name: list(rows) for name, rows in facts.items()}
        out = run(self, program, facts)
        calls.append((program, facts, {name: set(rows) for name, rows in out.items()}))
        return out

    PythonEngine.run = recording
    try:
        propagate(load_module(path), make_options({}, engine="python"))
    finally:
        PythonEngine.run = run
    return calls


def replay(calls: list[tuple], times: list[float] | None = None) -> float:
    """Seconds to evaluate ``calls`` in order with fresh plans (each call's time
    added to ``times``); raises if an output differs from the recorded one."""
    python_engine._PLANS.clear()
    engine = PythonEngine()
    total = 0.0
    for k, (program, facts, expected) in enumerate(calls):
        start = time.perf_counter()
        out = engine.run(program, facts)
        elapsed = time.perf_counter() - start
        total += elapsed
        if times is not None:
            times[k] += elapsed
        if {name: set(rows) for name, rows in out.items()} != expected:
            raise SystemExit(f"call {k}: the replayed output differs from the recorded one")
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    calls = record(args.module)
    replay(calls)   # (the plans' cache filled)
    per_call = [0.0] * len(calls)
    runs = sorted(replay(calls, per_call) for _ in range(args.runs))
    print(f"{len(calls)} calls, replayed {args.runs} times: median {1000 * statistics.median(runs):.1f} ms, "
          f"fastest {1000 * runs[0]:.1f} ms")
    by_steps = defaultdict(list)
    for (program, facts, _), seconds in zip(calls, per_call):
        steps = len(facts.get("in_step", ())) if "in_step" in program.decls else None
        by_steps[steps].append(seconds / args.runs)
    for steps in sorted(by_steps, key=lambda s: (s is None, s or 0)):
        label = "other programs" if steps is None else f"{steps} step{'s' if steps != 1 else ''}"
        times = by_steps[steps]
        print(f"  {label:>16}: {len(times):4d} call{'s' if len(times) != 1 else ' '}, "
              f"{1e6 * statistics.median(times):7.0f} µs each")


if __name__ == "__main__":
    main()
