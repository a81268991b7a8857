"""Benchmark: the whole `sdy-dl propagate` process against a whole Shardy pipeline process.

Lowers GPT-style training steps with JAX in this script (token embedding,
pre-LayerNorm blocks with causal multi-head attention and a GELU MLP, tied
output projection, cross-entropy loss, one Adam update; batch on "data",
Megatron-style model sharding on "model", 2x4 CPU mesh) at the layer
counts of ``SIZES``, then times whole processes on each module file:

* ``sdy-dl propagate --engine python``, the embedded default (on a fresh
  cache: the first, untimed run, which compiles the programs' rules into the
  cache, is reported);
* ``sdy-dl propagate --engine clingo`` with ``--clingo``;
* ``sdy-dl propagate --engine souffle --compiled`` when ``souffle`` is on PATH
  (on a fresh binary cache: the first, untimed run's time is reported, and
  how long until the binaries it started compiling in the background are
  ready; the timed runs then use them);
* a Python process that imports jaxlib, parses the module, runs Shardy's
  ``sdy-propagation-pipeline`` and prints the module (the reference);
* with ``--explain``, ``sdy-dl explain MODULE result:0 --engine python``, timed
  against the python engine's ``propagate`` (issue 9's explain target); its
  output must be the same in every run;
* with ``--comms``, ``sdy-dl comms`` and ``sdy-dl memory`` (``--format json``,
  python engine), timed against ``propagate --explicit-collectives`` (the
  ``explicit`` row; target: at most 1.5x); their outputs must be the same in
  every run;
* with ``--xla``, JAX compiles each step on the 8 CPU devices and sdy-dl's
  collective totals per kind (from ``comms``) are printed beside the
  collectives of XLA's compiled module (``compiled.as_text()``, read as
  ``tests/comms_programs.xla_collectives`` reads it), and sdy-dl's argument
  bytes per device beside ``memory_analysis()``'s;
* with ``--audit``, the audit commands on the python engine, timed against its
  ``propagate``: ``sdy-dl report MODULE -o FILE`` (with the page's size and, when
  ``/usr/bin/chromium`` exists, the time until headless Chromium shows its first
  content and until the table of values is shown, medians over the runs), ``sdy-dl
  conflicts`` and ``sdy-dl explain --all``; each output must be the same in every run;
* with ``--suggest``, ``sdy-dl suggest MODULE --format json`` (python engine,
  ``--jobs`` as ``--suggest-jobs`` says, default 2), timed against Shardy's
  whole process on the same module; its output must be the same in every run;
* with ``--whatif``, in one process per round and edit (python engine): the
  module propagated with its audit (``sdy_dl.propagate``), then a what-if that
  gives one main argument another sharding (``result.whatif``, reusing the first
  propagation, and the lines ``sdy-dl whatif`` prints, with the conflicts and
  memory), then a full ``propagate`` pipeline of the edited input in the same
  process, without cycle collection as the ``sdy-dl`` process runs
  (``--whatif-gc`` keeps Python's default collection, which re-scans the first
  result's objects and costs the what-if more than the propagate); the what-if's time over the full propagate's is the ``whatif /
  propagate`` ratio (wall and CPU), and the two outputs must be identical; then a
  later what-if of the same session (the next such argument edited alike) against
  a full propagate of its edited input (CPU), outputs identical too.  Two
  edits: the first main argument sharded ``[{"model"}, {}]`` moved to ``[{},
  {"model"}]`` (a weight: a near-global change), and the same for the last such
  argument (an optimizer moment: a few values change); each with the steps the
  what-if evaluated, whether it started from the imported module and how many
  of its fixpoint visits it replayed from the first run's and ran
  (``sdy_dl.propagation.replay``).

Runs are interleaved (every tool once per round, ``--runs`` rounds); the table
gives medians of wall time and of CPU time (user + system, which a busy
machine inflates less than wall time), the ratios to Shardy's process (of the
medians, and the median of the rounds' own ratios: a round runs the tools
back to back, so its ratio compares them under the same load), peak RSS of
the process and ms (wall) per op.  Every output is compared byte for byte with Shardy's.
sdy-dl's sources are byte-compiled first, as ``pip install`` leaves them.

    python benchmarks/pipeline.py                 # sizes 1k and 13k, 3 runs
    python benchmarks/pipeline.py --sizes 1k 13k 51k 100k 200k --runs 3
    python benchmarks/pipeline.py --sizes 51k --runs 7 --explain
    python benchmarks/pipeline.py --sizes 1k 13k --runs 3 --comms --xla
    python benchmarks/pipeline.py --sizes 13k 51k --runs 3 --audit --no-souffle
    python benchmarks/pipeline.py --sizes 13k 51k --runs 3 --whatif
    python benchmarks/pipeline.py --sizes 1k 13k --runs 3 --suggest --no-souffle
    git archive <commit> | tar -x -C /tmp/old    # then compare with an older commit:
    python benchmarks/pipeline.py --compare-tree /tmp/old

Run on demand, never in CI.
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
from dataclasses import dataclass, field

#: Size label -> layer count of the GPT training step (chosen to hit the op count).
SIZES = {"1k": 1, "13k": 18, "51k": 72, "100k": 141, "200k": 283}
DEFAULT_SIZES = ("1k", "13k")

VOCAB, D_MODEL, D_FF, HEADS, SEQ, BATCH = 256, 64, 256, 4, 32, 8

SHARDY_SCRIPT = """
import sys
from jaxlib.mlir import ir, passmanager
from jaxlib.mlir._mlir_libs import _jax_mlir_ext
from jaxlib.mlir.dialects import chlo, sdy, stablehlo
registry = ir.DialectRegistry()
_jax_mlir_ext.register_dialects(registry)
ctx = ir.Context()
ctx.append_dialect_registry(registry)
sdy.register_dialect(ctx)
stablehlo.register_dialect(ctx)
chlo.register_dialect(ctx)
ctx.load_all_available_dialects()
with ctx:
    with open(sys.argv[1], encoding="utf-8") as f:
        module = ir.Module.parse(f.read())
    passmanager.PassManager.parse("builtin.module(sdy-propagation-pipeline)").run(module.operation)
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write(str(module))
"""

#: Runs ``sdy-dl`` from the source tree argv[1]: the tree first on sys.path, the
#: editable install's finder (which maps sdy_dl's data packages) removed, so the
#: tree's own rules/ and datalog/ are used; through ``cli.run`` where the tree has
#: it, as the ``sdy-dl`` script runs it (no teardown, no cycle collection).
TREE_SCRIPT = """
import sys
tree = sys.argv.pop(1)
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
sys.path.insert(0, tree)
import sdy_dl
sdy_dl.__path__.append(tree)   # sdy_dl.cli is the tree's cli/ folder
from sdy_dl import cli
sys.exit(getattr(cli, "run", cli.main)())
"""


#: One what-if round (argv: module path, edit, "on"/"off" for cycle collection): the audit, a one-argument what-if, a full
#: propagate of the edited input; prints their times and whether the outputs agree.
WHATIF_SCRIPT = """
import gc, json, sys, time
if sys.argv[3] == "off":
    gc.disable()   # as the sdy-dl process runs (cli.run)
import sdy_dl
from sdy_dl.ir import parse_module_text
from sdy_dl.pipeline import make_options, propagate
start = time.perf_counter()
result = sdy_dl.propagate(sys.argv[1], engine="python")
audit_s = time.perf_counter() - start
names = [v.name for v in result.audit.outputs.values   # main arguments sharded on "model" in dim 0
         if v.names[0].startswith("%arg") and (s := v.sharding) is not None and s.rank == 2
         and [a.name for a in s.dims[0].axes] == ["model"] and not s.dims[1].axes]
name, new = names[0 if sys.argv[2] == "first" else -1], '<@mesh, [{}, {"model"}]>'
memo = result.audit.step_memo
steps = sum(map(len, memo.values()))
stage_cpu = {}               # CPU of each pass (and of printing) inside the what-if
def timed(name, fn):
    def run(*args):
        begin = time.process_time()
        try:
            return fn(*args)
        finally:
            stage_cpu[name] = stage_cpu.get(name, 0.0) + time.process_time() - begin
    return run
import dataclasses, sdy_dl.passes.all
from sdy_dl.ir.model import Module
from sdy_dl.passes import PASSES
passes, printer = dict(PASSES), Module.print
def with_run(p, run):        # (a pass spec: a named tuple, or a dataclass in older trees)
    return p._replace(run=run) if hasattr(p, "_replace") else dataclasses.replace(p, run=run)
PASSES.update({n: with_run(p, timed(n, p.run)) for n, p in passes.items()})
Module.print = timed("print", printer)
import sdy_dl.passes.export.by_difference as by_difference
exporter = by_difference.export_by_difference
by_difference.export_by_difference = timed("export by difference", exporter)
start, cpu = time.perf_counter(), time.process_time()
after, changes = result.whatif(set={name: new})
lines = changes.lines()      # what `sdy-dl whatif` prints: conflicts and memory too
whatif_s, whatif_cpu = time.perf_counter() - start, time.process_time() - cpu
PASSES.update(passes)
Module.print = printer
by_difference.export_by_difference = exporter
new_steps = sum(map(len, memo.values())) - steps
edited = after.edited_input
start, cpu = time.perf_counter(), time.process_time()
full = propagate(parse_module_text(edited, sys.argv[1]), make_options({}, engine="python")).print()
full_s, full_cpu = time.perf_counter() - start, time.process_time() - cpu
# a later what-if of the same session: the next such argument edited alike
later_name = names[1 if sys.argv[2] == "first" else -2]
start, cpu = time.perf_counter(), time.process_time()
later, later_changes = result.whatif(set={later_name: new})
later_changes.lines()
later_s, later_cpu = time.perf_counter() - start, time.process_time() - cpu
start, cpu = time.perf_counter(), time.process_time()
later_full = propagate(parse_module_text(later.edited_input, sys.argv[1]),
                       make_options({}, engine="python")).print()
later_full_s, later_full_cpu = time.perf_counter() - start, time.process_time() - cpu
print(json.dumps({"audit": audit_s, "whatif": whatif_s, "propagate": full_s,
                  "later_whatif": later_s, "later_whatif_cpu": later_cpu,
                  "later_propagate": later_full_s, "later_propagate_cpu": later_full_cpu,
                  "later_value": later_name, "later_changed": len(later_changes.changed),
                  "later_same": later_full == later.text,
                  "whatif_cpu": whatif_cpu, "propagate_cpu": full_cpu, "value": name,
                  "changed": len(changes.changed), "same": full == after.text,
                  "new_steps": new_steps, "steps": steps,
                  "imported": getattr(after.audit, "import_reused", False),
                  "replayed": getattr(getattr(after.audit, "replay", None), "replayed", 0),
                  "run": getattr(getattr(after.audit, "replay", None), "run", 0),
                  "stage_cpu": stage_cpu}))
"""

#: The what-if edits of ``--whatif`` (WHATIF_SCRIPT's second argument).
WHATIF_EDITS = ("first", "last")


def bench_whatif(label: str, workdir: str, runs: int, cache: str, edit: str,
                 gc_default: bool = False) -> dict:
    """``--whatif``: ``runs`` rounds of WHATIF_SCRIPT on the module of size ``label``
    with ``edit`` (one of :data:`WHATIF_EDITS`)."""
    import json

    module = module_file(workdir, label)
    env = dict(os.environ, SDY_DL_CACHE=cache)
    out = os.path.join(workdir, f"{label}.whatif.json")
    rounds = []
    for _ in range(runs):
        run_process([sys.executable, "-c", WHATIF_SCRIPT, module, edit,
                     "on" if gc_default else "off"], env, out)
        with open(out, encoding="utf-8") as f:
            rounds.append(json.loads(f.read()))
    med = {k: statistics.median(r[k] for r in rounds)
           for k in ("audit", "whatif", "propagate", "whatif_cpu", "propagate_cpu")}
    ratio = statistics.median(r["whatif"] / r["propagate"] for r in rounds)
    cpu_ratio = statistics.median(r["whatif_cpu"] / r["propagate_cpu"] for r in rounds)
    later_ratio = statistics.median(r["later_whatif_cpu"] / r["later_propagate_cpu"]
                                    for r in rounds)
    stages = {k: statistics.median(r["stage_cpu"].get(k, 0.0) for r in rounds)
              for k in rounds[0]["stage_cpu"]}
    return {"label": label, "rounds": rounds, "median": med, "ratio": ratio, "cpu_ratio": cpu_ratio,
            "stages": stages, "same": all(r["same"] and r["later_same"] for r in rounds),
            "value": rounds[0]["value"], "later_value": rounds[0]["later_value"],
            "later_changed": rounds[0]["later_changed"], "later_cpu_ratio": later_ratio,
            "changed": rounds[0]["changed"], "new_steps": rounds[0]["new_steps"],
            "steps": rounds[0]["steps"], "imported": rounds[0]["imported"],
            "replayed": rounds[0].get("replayed", 0), "run": rounds[0].get("run", 0)}


def stage_line(stages: dict) -> str:
    """The what-if's pipeline by pass (medians of CPU s): user-priority propagation, the
    export by difference (which, when it makes the output, stands for the passes after
    propagation), the export pipeline with its passes, the other passes, and printing
    the edited output."""
    from sdy_dl.passes.export.export_pipeline import pipeline_passes
    from sdy_dl.pipeline import split_stage

    export = {split_stage(p)[0] for p in pipeline_passes(False, True)}
    inside = sorted(((v, k) for k, v in stages.items() if k in export), reverse=True)
    other = sum(v for k, v in stages.items() if k not in export and k not in (
        "export-pipeline", "user-priority-propagate", "print", "export by difference"))
    return (f"what-if's pipeline, CPU s: user-priority-propagate "
            f"{stages.get('user-priority-propagate', 0):.3f}, export by difference "
            f"{stages.get('export by difference', 0):.3f}, export-pipeline "
            f"{stages.get('export-pipeline', 0):.3f} ("
            + ", ".join(f"{k} {v:.3f}" for v, k in inside if v >= 0.0005)
            + f"), other passes {other:.3f}; printing {stages.get('print', 0):.3f}")


# -- the modules ---------------------------------------------------------------------------

def gpt_train_step(layers: int) -> str:
    """The module text of one Adam step of a ``layers``-layer GPT, lowered by JAX."""
    return gpt_lowered(layers).as_text()


def gpt_lowered(layers: int):
    """One Adam step of a ``layers``-layer GPT, lowered by JAX (``jax.stages.Lowered``)."""
    os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = jax.sharding.Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))

    def ns(*spec):
        return NamedSharding(mesh, P(*spec))

    def layer_norm(x, g, b):
        mu = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
        return (x - mu) / jnp.sqrt(var + 1e-5) * g + b

    def block(x, p):
        h = layer_norm(x, p["ln1_g"], p["ln1_b"])
        q = (h @ p["wq"]).reshape(BATCH, SEQ, HEADS, -1)
        k = (h @ p["wk"]).reshape(BATCH, SEQ, HEADS, -1)
        v = (h @ p["wv"]).reshape(BATCH, SEQ, HEADS, -1)
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(D_MODEL // HEADS)
        mask = jnp.tril(jnp.ones((SEQ, SEQ), bool))
        a = jax.nn.softmax(jnp.where(mask, s, -1e9), axis=-1)
        o = jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(BATCH, SEQ, D_MODEL)
        x = x + o @ p["wo"] + p["bo"]
        h = layer_norm(x, p["ln2_g"], p["ln2_b"])
        return x + jax.nn.gelu(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]

    def loss(params, tokens, targets):
        x = params["embed"][tokens] + params["pos"]
        for p in params["blocks"]:
            x = block(x, p)
        x = layer_norm(x, params["lnf_g"], params["lnf_b"])
        logits = x @ params["embed"].T
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], axis=-1))

    def step(params, m, v, tokens, targets):
        grads = jax.grad(loss)(params, tokens, targets)
        m = jax.tree_util.tree_map(lambda a, g: 0.9 * a + 0.1 * g, m, grads)
        v = jax.tree_util.tree_map(lambda a, g: 0.999 * a + 0.001 * g * g, v, grads)
        params = jax.tree_util.tree_map(
            lambda p, a, b: p - 1e-3 * a / (jnp.sqrt(b) + 1e-8), params, m, v)
        return params, m, v

    def f32(*shape):
        return jax.ShapeDtypeStruct(shape, jnp.float32)

    col, row, rep = ns(None, "model"), ns("model", None), ns()
    block_shapes = {"wq": ((D_MODEL, D_MODEL), col), "wk": ((D_MODEL, D_MODEL), col),
                    "wv": ((D_MODEL, D_MODEL), col), "wo": ((D_MODEL, D_MODEL), row),
                    "bo": ((D_MODEL,), rep), "w1": ((D_MODEL, D_FF), col), "b1": ((D_FF,), ns("model")),
                    "w2": ((D_FF, D_MODEL), row), "b2": ((D_MODEL,), rep),
                    "ln1_g": ((D_MODEL,), rep), "ln1_b": ((D_MODEL,), rep),
                    "ln2_g": ((D_MODEL,), rep), "ln2_b": ((D_MODEL,), rep)}
    top_shapes = {"embed": ((VOCAB, D_MODEL), ns("model", None)), "pos": ((SEQ, D_MODEL), rep),
                  "lnf_g": ((D_MODEL,), rep), "lnf_b": ((D_MODEL,), rep)}

    def tree(pick):
        out = {k: pick(v) for k, v in top_shapes.items()}
        out["blocks"] = [{k: pick(v) for k, v in block_shapes.items()} for _ in range(layers)]
        return out

    params = tree(lambda sv: f32(*sv[0]))
    shardings = tree(lambda sv: sv[1])
    tokens = jax.ShapeDtypeStruct((BATCH, SEQ), jnp.int32)
    data = ns("data", None)
    jitted = jax.jit(step, in_shardings=(shardings, shardings, shardings, data, data))
    return jitted.lower(params, params, params, tokens, tokens)


def count_ops(text: str) -> int:
    """Operations in the module (nested ones included, the module itself not)."""
    from jaxlib.mlir import ir

    from sdy_dl.ir.context import mlir_context

    count = 0

    def visit(op):
        nonlocal count
        count += 1
        return ir.WalkResult.ADVANCE

    with mlir_context():
        ir.Module.parse(text).operation.walk(visit)
    return count - 1


def module_file(workdir: str, label: str) -> str:
    """The module of size ``label``, lowered once and kept in ``workdir``."""
    path = os.path.join(workdir, f"gpt_{SIZES[label]}l.mlir")
    if not os.path.exists(path):
        text = gpt_train_step(SIZES[label])
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    return path


# -- the processes -------------------------------------------------------------------------

@dataclass
class Tool:
    """One whole-process command: ``argv(module, output)``."""

    name: str
    argv: object
    env: dict | None = None
    stdout: bool = False   # its output is what it prints (not a file it writes)
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    rss_kb: list[int] = field(default_factory=list)


def sdy_dl_argv() -> list[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "sdy-dl")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "sdy_dl.cli"]


#: Tools timed against another tool than Shardy's process.
REFERENCE = {"explain": "python", "comms": "explicit", "memory": "explicit",
             "report": "python", "conflicts": "python", "explain-all": "python"}


def tools(souffle: bool, clingo: bool, trees: list[str], explain: bool = False,
          comms: bool = False, audit: bool = False, suggest_jobs: int = 0) -> list[Tool]:
    base = sdy_dl_argv()

    def engine(name: str, *flags: str):
        return lambda m, o: base + ["propagate", "--quiet", "--engine", name, *flags, m, "-o", o]

    out = [Tool("shardy", lambda m, o: [sys.executable, "-c", SHARDY_SCRIPT, m, o]),
           Tool("python", engine("python"))]
    if clingo:
        out.append(Tool("clingo", engine("clingo")))
    if souffle:
        out.append(Tool("souffle", engine("souffle", "--compiled")))
    if explain:
        out.append(Tool("explain", lambda m, o: base + ["explain", "--quiet", "--engine", "python",
                                                        m, "result:0"], stdout=True))
    if comms:
        out.append(Tool("explicit", lambda m, o: base + [
            "propagate", "--quiet", "--engine", "python", "--explicit-collectives", m],
            stdout=True))
        for name in ("comms", "memory"):
            out.append(Tool(name, lambda m, o, name=name: base + [
                name, "--quiet", "--engine", "python", "--format", "json", m], stdout=True))
    if audit:
        out += [Tool("report", lambda m, o: base + ["report", "--quiet", "--engine", "python", m,
                                                    "-o", o]),
                Tool("conflicts", lambda m, o: base + ["conflicts", "--quiet", "--engine", "python",
                                                       m], stdout=True),
                Tool("explain-all", lambda m, o: base + ["explain", "--quiet", "--engine", "python",
                                                         "--all", m], stdout=True)]
    if suggest_jobs:
        out.append(Tool("suggest", lambda m, o: base + [
            "suggest", "--quiet", "--engine", "python", "--format", "json", "--jobs",
            str(suggest_jobs), m], stdout=True))
    for tree in trees:   # another source tree of sdy-dl (e.g. an older commit), python engine
        run = [sys.executable, "-c", TREE_SCRIPT, os.path.abspath(tree)]
        out.append(Tool(f"python@{os.path.basename(os.path.normpath(tree))}",
                        lambda m, o, run=run: run + ["propagate", "--quiet", "--engine", "python",
                                                     m, "-o", o],
                        ))
    return out


def compile_bytecode(trees: list[str]) -> None:
    """Byte-compile the sdy-dl sources the timed processes import, as ``pip install``
    does for an installed package (jaxlib's bytecode comes with its wheel): an
    editable install or a source tree has none, and where Python may not write
    it (``PYTHONDONTWRITEBYTECODE``) every process would compile ~150 modules."""
    import compileall
    import importlib.util

    dirs = []
    for name in ("sdy_dl", "sdy_dl.cli"):
        spec = importlib.util.find_spec(name)
        if spec is not None:
            dirs += list(spec.submodule_search_locations or [])
    dirs += [os.path.join(tree, sub) for tree in trees for sub in ("sdy_dl", "cli")]
    for path in dict.fromkeys(dirs):
        if os.path.isdir(path):
            compileall.compile_dir(path, quiet=1)


def run_process(argv: list[str], env: dict | None = None,
                stdout: str | None = None) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, peak RSS in KiB) of one process run to completion;
    ``stdout``: the file its standard output goes to (else it is dropped)."""
    with open(stdout or os.devnull, "wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{err[-2000:]}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def cached_entries(cache: str) -> set[str]:
    """The entries (compiled programs, runtime, server) of the Soufflé binary cache
    in the sdy-dl cache ``cache``."""
    folder = os.path.join(cache, "souffle")
    return set(os.listdir(folder)) if os.path.isdir(folder) else set()


def wait_for_builds(cache: str) -> None:
    """Return when no background compilation runs in the cache ``cache``."""
    from sdy_dl.engines.souffle_engine import pending_builds

    time.sleep(1)   # let the detached builders take their locks
    while pending_builds(os.path.join(cache, "souffle")):
        time.sleep(1)


def page_times(path: str) -> tuple[float, float] | None:
    """(ms to the first contentful paint, ms until the table of values is shown) of the
    report ``path`` in headless Chromium (None: no ``/usr/bin/chromium``)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    from chromium import CHROMIUM, Browser

    if not os.path.exists(CHROMIUM):
        return None
    with Browser("file://" + os.path.abspath(path), timeout=600) as page:
        page.wait_for("performance.getEntriesByName('first-contentful-paint').length > 0 && "
                      "performance.getEntriesByName('values-shown').length > 0")
        return page.evaluate("[performance.getEntriesByName('first-contentful-paint')[0].startTime, "
                             "performance.getEntriesByName('values-shown')[0].startTime]")


def bench_size(label: str, workdir: str, runs: int, caches: dict, clingo: bool,
               trees: list[str], explain: bool = False, comms: bool = False,
               audit: bool = False, suggest_jobs: int = 0) -> dict:
    """One row of the table; ``caches``: the sdy-dl cache of the python runs and,
    when Soufflé runs, of the souffle runs (each fresh: the first size runs cold)."""
    module = module_file(workdir, label)
    with open(module, encoding="utf-8") as f:
        ops = count_ops(f.read())
    procs = tools("souffle" in caches, clingo, trees, explain, comms, audit, suggest_jobs)
    outputs = {t.name: os.path.join(workdir, f"{label}.{t.name}."
                                    f"{'html' if t.name == 'report' else 'out'}") for t in procs}
    cold = {}
    for tool in procs:   # the first run on its cache, untimed (souffle: until the builds end)
        other_tree = tool.name.startswith("python@")
        cache = caches.get("python" if tool.name in REFERENCE or tool.name in (
            "explicit", "suggest") or other_tree else tool.name)
        if cache is None:
            continue
        tool.env = dict(os.environ, SDY_DL_CACHE=cache)
        if tool.name not in caches and not other_tree:
            continue   # (explain, comms, ... use the cache the python engine's first run filled)
        before = cached_entries(cache)
        start = time.perf_counter()
        first, _, _ = run_process(tool.argv(module, outputs[tool.name]), tool.env,
                                  outputs[tool.name] if tool.stdout else None)
        if tool.name == "souffle":
            wait_for_builds(caches[tool.name])
        built = len(cached_entries(cache) - before)
        cold[tool.name] = (first, time.perf_counter() - start, built)
    same = {}
    printed: dict[str, set[str]] = {}   # tools not compared with Shardy: every run's output
    page = {"bytes": [], "paint_ms": [], "table_ms": []}
    for _ in range(runs):
        for tool in procs:
            elapsed, cpu, rss = run_process(tool.argv(module, outputs[tool.name]), tool.env,
                                            outputs[tool.name] if tool.stdout else None)
            tool.times.append(elapsed)
            tool.cpu.append(cpu)
            tool.rss_kb.append(rss)
            if tool.stdout or tool.name in REFERENCE:
                with open(outputs[tool.name], encoding="utf-8") as f:
                    printed.setdefault(tool.name, set()).add(f.read())
            if tool.name == "report":
                page["bytes"].append(os.path.getsize(outputs[tool.name]))
                times = page_times(outputs[tool.name])
                if times is not None:
                    page["paint_ms"].append(times[0])
                    page["table_ms"].append(times[1])
    with open(outputs["shardy"], encoding="utf-8") as f:
        expected = f.read()
    for tool in procs[1:]:
        if tool.stdout or tool.name in REFERENCE:   # the same (non-empty) output in every run
            same[tool.name] = len(printed[tool.name]) == 1 and "" not in printed[tool.name]
            continue
        with open(outputs[tool.name], encoding="utf-8") as f:
            same[tool.name] = f.read() == expected
    return {"label": label, "layers": SIZES[label], "ops": ops, "tools": procs,
            "same": same, "cold": cold, "page": page}


def ratios(tool: Tool, ref: Tool) -> tuple[float, float, float]:
    """``tool`` against ``ref``: (ratio of the median wall times, of the median CPU
    times, median of the rounds' wall-time ratios)."""
    return (statistics.median(tool.times) / statistics.median(ref.times),
            statistics.median(tool.cpu) / statistics.median(ref.cpu),
            statistics.median(t / r for t, r in zip(tool.times, ref.times)))


def table(rows: list[dict]) -> str:
    """The markdown table of ``rows``: ratios to Shardy's process (``explain``'s to the
    python engine's ``propagate``, ``comms``' and ``memory``'s to ``explicit``, the audit
    commands' to ``python``), then the report page's size and times."""
    names = [t.name for t in rows[0]["tools"]]
    head = ["module", "ops"]
    for name in names:
        head += [f"{name} s", f"{name} CPU s", f"{name} MB", f"{name} ms/op"]
        if name != "shardy":
            of = f" / {REFERENCE[name]}" if name in REFERENCE else ""
            head += [f"{name}{of} ratio", f"{name}{of} CPU ratio", f"{name}{of} ratio of rounds"]
    with_page = any(row["page"]["bytes"] for row in rows)
    if with_page:
        head += ["report MB", "report first paint ms", "report table shown ms"]
    head.append("identical")
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for row in rows:
        tools_ = {t.name: t for t in row["tools"]}
        cells = [f"{row['layers']}-layer GPT ({row['label']})", f"{row['ops']:,}"]
        for name in names:
            t, cpu = statistics.median(tools_[name].times), statistics.median(tools_[name].cpu)
            cells += [f"{t:.2f}", f"{cpu:.2f}", f"{statistics.median(tools_[name].rss_kb) / 1024:.0f}",
                      f"{1000 * t / row['ops']:.3f}"]
            if name != "shardy":
                ref = tools_[REFERENCE.get(name, "shardy")]
                cells += [f"{r:.2f}x" for r in ratios(tools_[name], ref)]
        if with_page:
            p = row["page"]
            cells.append(f"{statistics.median(p['bytes']) / 1e6:.1f}" if p["bytes"] else "")
            cells += [f"{statistics.median(p[k]):.0f}" if p[k] else "n/a"
                      for k in ("paint_ms", "table_ms")]
        cells.append(", ".join(f"{n}: {'yes' if s else 'NO'}" for n, s in row["same"].items()))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def beside_xla(label: str, workdir: str) -> str:
    """sdy-dl's collectives per kind and argument bytes beside XLA's compiled module's
    (from the ``comms`` and ``memory`` outputs of the last timed run)."""
    import json

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    from comms_programs import xla_collectives

    start = time.perf_counter()
    compiled = gpt_lowered(SIZES[label]).compile()
    seconds = time.perf_counter() - start
    xla = xla_collectives(compiled.as_text())
    with open(os.path.join(workdir, f"{label}.comms.out"), encoding="utf-8") as f:
        ledger = json.load(f)
    with open(os.path.join(workdir, f"{label}.memory.out"), encoding="utf-8") as f:
        memory = json.load(f)
    kinds = sorted({c["kind"] for c in xla} | set(ledger["totals"]["kind"]))
    lines = [f"  {label}: collectives, sdy-dl comms beside XLA's compiled module "
             f"(compiled in {seconds:.1f} s)",
             "  | kind | sdy-dl count | sdy-dl bytes/device | XLA count | XLA bytes/device |",
             "  |---|---:|---:|---:|---:|"]
    for kind in kinds:
        mine = ledger["totals"]["kind"].get(kind, {"count": 0, "bytes_per_device": 0})
        theirs = [c for c in xla if c["kind"] == kind]
        lines.append(f"  | {kind} | {mine['count']} | {mine['bytes_per_device']:,} | "
                     f"{len(theirs)} | {sum(c['bytes'] for c in theirs):,} |")
    total = ledger["totals"]["all"]
    lines.append(f"  | all | {total['count']} | {total['bytes_per_device']:,} | {len(xla)} | "
                 f"{sum(c['bytes'] for c in xla):,} |")
    args = sum(f["arguments"] for f in memory["functions"] if f["function"] == "main")
    analysis = compiled.memory_analysis()
    lines.append(f"  argument bytes per device: sdy-dl {args:,}, XLA "
                 f"{analysis.argument_size_in_bytes:,}; results: sdy-dl "
                 f"{sum(f['results'] for f in memory['functions'] if f['function'] == 'main'):,}"
                 f", XLA {analysis.output_size_in_bytes:,}; XLA temp {analysis.temp_size_in_bytes:,}"
                 f", sdy-dl peak estimate "
                 f"{sum(f['peak_intermediates_estimate'] for f in memory['functions'] if f['function'] == 'main'):,}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=list(DEFAULT_SIZES), choices=list(SIZES))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "sdy-dl-bench"),
                        help="where lowered modules (kept between runs) and outputs go")
    parser.add_argument("--no-souffle", action="store_true", help="skip Soufflé even if on PATH")
    parser.add_argument("--clingo", action="store_true", help="also time --engine clingo")
    parser.add_argument("--explain", action="store_true",
                        help="also time 'sdy-dl explain MODULE result:0' (python engine)")
    parser.add_argument("--comms", action="store_true",
                        help="also time 'sdy-dl comms' and 'sdy-dl memory' against "
                             "'propagate --explicit-collectives' (python engine)")
    parser.add_argument("--xla", action="store_true",
                        help="print sdy-dl's collective and argument totals beside XLA's "
                             "compiled module's (implies --comms)")
    parser.add_argument("--audit", action="store_true",
                        help="also time 'sdy-dl report', 'conflicts' and 'explain --all' (python "
                             "engine), with the report's size and its first paint in Chromium")
    parser.add_argument("--whatif", action="store_true",
                        help="also time a one-argument what-if against a full propagate "
                             "(python engine, in one process per round)")
    parser.add_argument("--whatif-gc", action="store_true",
                        help="run the what-if rounds with Python's default garbage "
                             "collection (default: none, as the sdy-dl process runs)")
    parser.add_argument("--suggest", action="store_true",
                        help="also time 'sdy-dl suggest' (python engine) against Shardy's process")
    parser.add_argument("--suggest-jobs", type=int, default=2, metavar="N",
                        help="--jobs of the timed 'sdy-dl suggest' (default 2)")
    parser.add_argument("--souffle-cache", metavar="DIR",
                        help="Soufflé binary cache to use (default: a fresh one, run cold first)")
    parser.add_argument("--compare-tree", action="append", default=[], metavar="DIR",
                        help="also time the sdy-dl source tree DIR (e.g. an older commit "
                             "extracted with git archive), python engine")
    args = parser.parse_args(argv)
    os.makedirs(args.workdir, exist_ok=True)
    compile_bytecode(args.compare_tree)
    # Fresh caches shared by the sizes: the first size runs cold.
    caches = {"python": tempfile.mkdtemp(prefix="python-cache-", dir=args.workdir)}
    if shutil.which("souffle") is not None and not args.no_souffle:
        caches["souffle"] = args.souffle_cache or tempfile.mkdtemp(prefix="souffle-cache-",
                                                                   dir=args.workdir)
    rows = []
    for label in args.sizes:
        row = bench_size(label, args.workdir, args.runs, caches, args.clingo, args.compare_tree,
                         args.explain, args.comms or args.xla, args.audit,
                         args.suggest_jobs if args.suggest else 0)
        rows.append(row)
        print(table([row]).splitlines()[-1], flush=True)
        if args.xla:
            print(beside_xla(label, args.workdir), flush=True)
        for edit in WHATIF_EDITS if args.whatif else ():
            w = bench_whatif(label, args.workdir, args.runs, caches["python"], edit,
                             args.whatif_gc)
            m = w["median"]
            print(f"  whatif ({edit}: {w['value']} edited, {w['changed']} values changed, "
                  f"{w['new_steps']} steps evaluated beside the first run's {w['steps']}, "
                  f"{'from the imported module' if w['imported'] else 'import stages run'}, "
                  f"{w['replayed']} fixpoint visits replayed and {w['run']} run): "
                  f"audit {m['audit']:.2f} s, what-if {m['whatif']:.2f} s, full propagate "
                  f"{m['propagate']:.2f} s; what-if / propagate {w['ratio']:.2f}x wall, "
                  f"{w['cpu_ratio']:.2f}x CPU (medians of the rounds' ratios); a later what-if "
                  f"of the session ({w['later_value']} edited alike, {w['later_changed']} values "
                  f"changed) {w['later_cpu_ratio']:.2f}x CPU; identical: "
                  f"{'yes' if w['same'] else 'NO'}", flush=True)
            print("    " + stage_line(w["stages"]), flush=True)
            row["same"][f"whatif {edit}"] = w["same"]
        if "python" in row["cold"]:
            print(f"  python, first (untimed) run on its cache: {row['cold']['python'][0]:.1f} s",
                  flush=True)
        if "souffle" in row["cold"]:
            first, ready, built = row["cold"]["souffle"]
            if built:
                print(f"  souffle, first (untimed) run on the cache: {first:.1f} s (programs not "
                      f"compiled yet run on the python engine); background compilation of {built} "
                      f"cache entries done after {ready:.1f} s", flush=True)
            else:
                print(f"  souffle, first (untimed) run on the cache: {first:.1f} s (every binary "
                      "was cached)", flush=True)
    print()
    print(f"medians of {args.runs} interleaved runs")
    print(table(rows))
    return 0 if all(all(r["same"].values()) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
