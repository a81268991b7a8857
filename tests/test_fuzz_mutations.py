"""A mutation fuzzer over real JAX modules: bad input never crashes.

Seeded random mutations of lowered JAX programs (sharding attributes, mesh
sizes, priorities, names, types and structure) go through ``sdy-dl
propagate`` (and now and then a single pass) in-process through the CLI.
Every run must end in exit 0 with a whole output file, or in one
``sdy-dl: error:`` line with exit 1 and no output file: no traceback, no
"internal error", no timeout.  Where jaxlib's ``sdy-propagation-pipeline``
(run in a separate process, since it crashes on some inputs) and sdy-dl both
accept a mutant, the outputs are compared and the counts printed.  The default
run is small; the ``slow`` run does 10,000 mutants.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import random
import re
import signal
import tempfile
from collections import Counter
from dataclasses import dataclass, field

import pytest
from click.testing import CliRunner

from sdy_dl.cli import main

#: Seconds one sdy-dl run may take.
TIME_LIMIT = 120

SEED_PROGRAMS = ["mlp", "while_loop", "shard_map", "sharding_constraint", "attention",
                 "gather_scatter", "reductions_reshapes"]

PASSES = ["import-pipeline", "flatten-call-graph", "constant-or-scalar-splitter", "symbol-dce",
          "add-data-flow-edges", "apply-sharding-constraints", "sharding-group-import",
          "aggressive-propagate", "basic-propagate", "export-named-computations",
          "close-shardings", "insert-explicit-reshards"]

#: Names for axes, meshes and functions; the ones with a quote, a backslash or an
#: escape must reach the Datalog engines as data (``quoting_names``).
PLAIN_NAMES = ["日本", "x).", ":- foo.", "a b", "", "model", "data", "q"]
QUOTING_NAMES = ['a"b', "a\\\\b", "a\\tb", "a\\nb"]


def _mesh_size(rng):
    return rng.choice(["0", "1", "3", "16", "-1", str(2**31 - 1), str(2**31), str(2**33),
                       "99999999999999999999", "2"])


def _sharding_dims(rng, rank: int) -> str:
    axes = ['"data"', '"model"', '"q"', '"data":(1)2', '"model":(2)2', '"model":(1)3']
    dims = []
    for _ in range(rank):
        chosen = rng.sample(axes, rng.randint(0, 2))
        dims.append("{" + ", ".join(chosen) + (", ?" if rng.random() < 0.2 else "") + "}"
                    + (f"p{rng.choice([0, 1, 3, 99999999999])}" if rng.random() < 0.15 else ""))
    return ", ".join(dims)


def mutate(text: str, rng: random.Random, names: list[str]) -> tuple[str, str]:
    """One to three random mutations of ``text``; returns (mutant, what was done)."""
    done = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        kind = rng.choice(["sharding", "sharding", "mesh", "priority", "name", "type",
                           "structure", "structure", "bytes"])
        if kind == "name":
            text, what = _mutate_name(text, rng, names)
        else:
            text, what = MUTATIONS[kind](text, rng)
        done.append(what)
    return text, "; ".join(done)


def _sub_one(pattern: str, text: str, rng, repl) -> tuple[str, bool]:
    matches = list(re.finditer(pattern, text))
    if not matches:
        return text, False
    m = rng.choice(matches)
    new = repl(m) if callable(repl) else repl
    return text[:m.start()] + new + text[m.end():], True


def _mutate_sharding(text, rng):
    def repl(m):
        rank = len(re.findall(r"\{[^{}]*\}", m.group(2))) or rng.randint(0, 3)
        rank += rng.choice([0, 0, 0, 1, -1])
        extra = rng.choice(["", "", ', replicated={"model"}', ', unreduced={"data"}',
                            ', replicated={"data"}'])
        return f"<{m.group(1)}, [{_sharding_dims(rng, max(rank, 0))}]{extra}>"
    new, ok = _sub_one(r'<(@\w+), \[((?:[^\[\]]|\[[^\]]*\])*)\][^>]*>', text, rng, repl)
    if not ok:
        new, ok = _sub_one(r"\) -> \(tensor", text, rng,
                           ') -> (tensor')  # nothing to mutate: leave as is
    return new, "sharding"


def _mutate_mesh(text, rng):
    new, _ = _sub_one(r'"(data|model)"=\d+', text, rng,
                      lambda m: f'"{m.group(1)}"={_mesh_size(rng)}')
    return new, "mesh size"


def _mutate_priority(text, rng):
    new, ok = _sub_one(r'\{("data"|"model"|)\}', text, rng,
                       lambda m: "{" + m.group(1) + "}p" + str(rng.choice([0, 1, 2, 7, 2**31])))
    return new, "priority"


def _mutate_name(text, rng, names):
    name = rng.choice(names)
    what = rng.choice(["axis", "mesh", "func"])
    if what == "axis":
        old = rng.choice(['"data"', '"model"'])
        new = text.replace(old, f'"{name}"') if rng.random() < 0.5 else \
            _sub_one(re.escape(old), text, rng, f'"{name}"')[0]
    elif what == "mesh":
        new = text.replace("@mesh", f'@"{name}"' if name else "@mesh2")
    else:
        funcs = re.findall(r"func\.func (?:private |public )?@(\w+)", text)
        victim = rng.choice(funcs) if funcs else "main"
        new = re.sub(rf"@{victim}\b", f'@"{name or "f"}"', text)
    return new, f"name {what} -> {name!r}"


def _mutate_type(text, rng):
    def repl(m):
        dims = m.group(1).split("x")
        i = rng.randrange(len(dims))
        dims[i] = rng.choice(["1", "3", "0", "?", "7", "4294967296", dims[i]])
        return "tensor<" + "x".join(dims) + "x" + rng.choice([m.group(2), m.group(2), "bf16",
                                                            "complex<f32>", "i1"]) + ">"
    new, _ = _sub_one(r"tensor<((?:\d+x)*\d+)x(f32|i32|i1)>", text, rng, repl)
    return new, "type"


def _mutate_structure(text, rng):
    lines = text.splitlines()
    if len(lines) < 3:
        return text, "structure (too short)"
    op = rng.choice(["delete", "duplicate", "swap", "truncate", "nest"])
    i = rng.randrange(1, len(lines) - 1)
    if op == "delete":
        del lines[i]
    elif op == "duplicate":
        lines.insert(i, lines[i])
    elif op == "swap":
        j = rng.randrange(1, len(lines) - 1)
        lines[i], lines[j] = lines[j], lines[i]
    elif op == "truncate":
        return text[:rng.randrange(len(text))], "structure truncate"
    else:
        lines.insert(i, "  %nest = stablehlo.constant dense<1.0> : tensor<f32>")
    return "\n".join(lines) + "\n", f"structure {op}"


def _mutate_bytes(text, rng):
    data = bytearray(text.encode("utf-8", "surrogateescape"))
    for _ in range(rng.randint(1, 3)):
        data[rng.randrange(len(data))] = rng.choice(b'{}[]<>"\\@%:,=0123456789\n\xff ')
    return data.decode("utf-8", "surrogateescape"), "bytes"


MUTATIONS = {"sharding": _mutate_sharding, "mesh": _mutate_mesh, "priority": _mutate_priority,
             "type": _mutate_type, "structure": _mutate_structure,
             "bytes": _mutate_bytes}


# -- running --------------------------------------------------------------------------------------

class _Timeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _Timeout()


@dataclass
class Outcome:
    kind: str              # ok, error, traceback, timeout, partial
    detail: str = ""
    output: str | None = None


def run_sdy_dl(data: bytes, args: list[str], directory: str) -> Outcome:
    """``sdy-dl ARGS`` on the module ``data``: how it ended."""
    src, out = os.path.join(directory, "in.mlir"), os.path.join(directory, "out.mlir")
    with open(src, "wb") as f:
        f.write(data)
    if os.path.exists(out):
        os.unlink(out)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIME_LIMIT)
    try:
        result = CliRunner().invoke(main, [args[0], *args[1:], src, "-o", out, "--quiet",
                                           "--engine", "clingo"])
    except _Timeout:
        return Outcome("timeout")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return Outcome("traceback", f"{type(result.exception).__name__}: {result.exception}")
    if "internal error" in stderr or "Traceback" in stderr:
        return Outcome("traceback", stderr.strip()[:300])
    lines = stderr.strip().splitlines()
    if result.exit_code == 0:
        if not os.path.exists(out):
            return Outcome("partial", "exit 0 without an output file")
        with open(out, encoding="utf-8") as f:
            return Outcome("ok", output=f.read())
    if os.path.exists(out):
        return Outcome("partial", f"exit {result.exit_code} left {out}")
    if result.exit_code != 1 or len(lines) != 1 or not lines[0].startswith("sdy-dl: error: "):
        return Outcome("traceback", f"exit {result.exit_code}: {stderr.strip()[:300]}")
    return Outcome("error", lines[0])


def _shardy_pipeline(text: str) -> str | None:
    """jaxlib's pipeline on ``text`` (in the worker process): the printed module, or
    None when jaxlib rejects it."""
    from oracle import shardy
    try:
        return shardy(text, "sdy-propagation-pipeline")
    except Exception:  # noqa: BLE001  (whatever jaxlib refuses counts as not accepted)
        return None


class Oracle:
    """jaxlib's pipeline in a separate process, restarted when jaxlib crashes."""

    def __init__(self):
        self.pool = None

    def __call__(self, text: str) -> str | None:
        if self.pool is None:
            self.pool = concurrent.futures.ProcessPoolExecutor(
                1, mp_context=multiprocessing.get_context("spawn"))
        try:
            return self.pool.submit(_shardy_pipeline, text).result(timeout=300)
        except (concurrent.futures.process.BrokenProcessPool,
                concurrent.futures.TimeoutError):
            self.close()
            return None

    def close(self):
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None


@dataclass
class Counts:
    total: int = 0
    kinds: Counter = field(default_factory=Counter)
    both_accepted: int = 0
    equal: int = 0
    failures: list = field(default_factory=list)
    differ: list = field(default_factory=list)

    def line(self) -> str:
        return (f"total {self.total}: tracebacks {self.kinds['traceback']}, timeouts "
                f"{self.kinds['timeout']}, partial outputs {self.kinds['partial']}, "
                f"ok {self.kinds['ok']}, clean errors {self.kinds['error']}; "
                f"jaxlib and sdy-dl both accept {self.both_accepted}, equal {self.equal}")


def fuzz(n: int, seed: int, compare: bool = True, quoting_names: bool = True) -> Counts:
    from jax_programs import lowered
    from oracle import normalize

    rng = random.Random(seed)
    seeds = {name: lowered(name) for name in SEED_PROGRAMS}
    counts, oracle = Counts(), Oracle()
    try:
        with tempfile.TemporaryDirectory() as directory:
            for case in range(n):
                name = rng.choice(SEED_PROGRAMS)
                text, what = mutate(seeds[name], rng,
                                    PLAIN_NAMES + (QUOTING_NAMES if quoting_names else []))
                data = text.encode("utf-8", "surrogateescape")
                single = rng.random() < 0.15
                args = ["pass", rng.choice(PASSES)] if single else ["propagate"]
                outcome = run_sdy_dl(data, args, directory)
                counts.total += 1
                counts.kinds[outcome.kind] += 1
                label = f"case {case} ({name}: {what}; {' '.join(args)})"
                if outcome.kind in ("traceback", "timeout", "partial"):
                    counts.failures.append(f"{label}: {outcome.kind} {outcome.detail}")
                    with open(os.path.join(os.environ.get("SDY_DL_FUZZ_DIR", directory),
                                           f"fail-{seed}-{case}.mlir"), "wb") as f:
                        f.write(data)
                if compare and outcome.kind == "ok" and not single:
                    expected = oracle(text)
                    if expected is not None:
                        counts.both_accepted += 1
                        if expected == normalize(outcome.output):
                            counts.equal += 1
                        else:
                            counts.differ.append(label)
    finally:
        oracle.close()
    return counts


def _report(counts: Counts) -> None:
    print("\nmutation fuzz:", counts.line())
    for f in counts.failures[:20]:
        print("  FAIL", f)
    for d in counts.differ[:20]:
        print("  differs from jaxlib:", d)


def test_mutants_never_crash():
    counts = fuzz(int(os.environ.get("SDY_DL_FUZZ_CASES", "200")), seed=1234)
    _report(counts)
    assert not counts.failures, "\n".join(counts.failures)
    assert counts.kinds["ok"] > 0 and counts.kinds["error"] > 0


@pytest.mark.slow
def test_ten_thousand_mutants_never_crash():
    counts = fuzz(10_000, seed=int(os.environ.get("SDY_DL_FUZZ_SEED", "20261123")))
    _report(counts)
    assert not counts.failures, "\n".join(counts.failures[:50])
