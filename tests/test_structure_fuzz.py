"""The structure fuzzer (``tests/structure_fuzz.py``): generated meshes, shardings,
groups, manual computations, rule files, pass options, streams and replay
directories through the CLI, each case its own process, compared with Shardy
where the input is valid.  Tracebacks, aborts, hangs, partial outputs and
differences from Shardy must all be 0.

The default run takes a fixed seed and a few hundred cases; the slow run
thousands (``SDY_DL_FUZZ_SEED`` picks another seed, ``SDY_DL_FUZZ_CASES``
another count)."""

from __future__ import annotations

import os
import resource
import time

import pytest

from structure_fuzz import KINDS, run_cases

SEED = int(os.environ.get("SDY_DL_FUZZ_SEED", "37"))


def check(n: int, seed: int) -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    tally = run_cases(n, seed)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(f"\nstructure fuzz, seed {seed}, {time.perf_counter() - start:.0f} s wall, "
          f"{cpu:.0f} s CPU: {tally.cases} processes, {tally.ran} ran, "
          f"{tally.errors} clean errors, {tally.compared} outputs compared, "
          f"{tally.shardy_crashed} inputs Shardy crashes on; " +
          ", ".join(f"{k} {tally.counts[k]}" for k in KINDS))
    found = "\n".join(f"{kind}: {what}: {argv}\n{err}\n{module}"
                      for kind, what, argv, err, module in tally.found)
    assert all(tally.counts[k] == 0 for k in KINDS), f"{tally.counts}\n{found}"


def test_structure_fuzz():
    check(int(os.environ.get("SDY_DL_FUZZ_CASES", "200")), SEED)


@pytest.mark.slow
def test_structure_fuzz_thousands():
    check(int(os.environ.get("SDY_DL_FUZZ_CASES", "3000")), SEED + 1)
