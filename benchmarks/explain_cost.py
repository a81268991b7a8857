"""Benchmark: what an audit costs next to a plain propagation (issue: explaining ≤ 1.5x propagate).

For N-layer transformer training steps (``transformer.py``), times in one
process, interleaved, several runs each (medians):

* ``propagate``: the whole pipeline, module text -> printed module;
* ``explain``: the same pipeline with provenance, output names and the
  factor-level tree of one value (the main function's first result);
* ``explain --all``: every value's tree, with the step records of every
  op step evaluated once more (what ``sdy-dl report`` and ``conflicts`` need).

    python benchmarks/explain_cost.py --layers 1 4 --runs 3 --engine clingo
"""

from __future__ import annotations

import argparse
import statistics
import time

from transformer import transformer_step

from sdy_dl.audit import Audit
from sdy_dl.ir import parse_module_text
from sdy_dl.pipeline import make_options
from sdy_dl.pipeline import propagate


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--engine", default="clingo")
    args = parser.parse_args()
    options = make_options(engine=args.engine)
    print("| layers | ops | propagate s | explain one s | ratio | explain --all s | ratio |")
    print("|---|---|---|---|---|---|---|")
    for layers in args.layers:
        text = transformer_step(layers)
        ops = len(parse_module_text(text).ops)
        plain, one, every = [], [], []
        for _ in range(args.runs):
            plain.append(_time(lambda: propagate(parse_module_text(text), options).print()))
            one.append(_time(lambda: Audit(parse_module_text(text), options).explain("result:0")))
            every.append(_time(lambda: Audit(parse_module_text(text), options).explain_all()))
        p, o, e = (statistics.median(x) for x in (plain, one, every))
        print(f"| {layers} | {ops} | {p:.2f} | {o:.2f} | {o / p:.2f} | {e:.2f} | {e / p:.2f} |")


if __name__ == "__main__":
    main()
