"""``sdy-dl suggest`` / ``result.suggest``: candidate edits verified by what-ifs.

* A constraint that forces an all-to-all (hand-written): the first suggestion
  edits that constraint, and it saves exactly the ledger's bytes of that
  all-to-all (a what-if of the suggested edit has no collective left); with a
  result annotation that makes the constraint force two, it saves both.
* The replicated lm_head weight: the first suggestion shards it, saving at
  least three quarters of its bytes per device.
* ``--jobs 1`` and ``--jobs 2`` print the same bytes.
* Bad input is one line and no output file.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest

import comms_programs
from signal_dispositions import DEFAULTS
import lowering
import sdy_dl
from sdy_dl.errors import SdyError, UsageError

#: %0 has a user before the constraint (so the constraint is not folded into %0 on
#: import); the constraint moves "x" from dim 0 to dim 1: an all-to-all.
CONSTRAINED = """sdy.mesh @mesh = <["x"=4]>
func.func @main(%arg0: tensor<16x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<16x16xf32>, tensor<16x16xf32>%RESULT1%) {
  %0 = stablehlo.sine %arg0 : tensor<16x16xf32>
  %1 = stablehlo.negate %0 : tensor<16x16xf32>
  %2 = sdy.sharding_constraint %0 <@mesh, [{}, {"x"}]> : tensor<16x16xf32>
  %3 = stablehlo.cosine %2 : tensor<16x16xf32>
  return %3, %1 : tensor<16x16xf32>, tensor<16x16xf32>
}
"""
#: ... and result:1 wants "x" on dim 0 (the constraint's sharding reaches %1 too:
#: a second all-to-all).
PINNED = CONSTRAINED.replace("%RESULT1%",
                             ' {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}')
CONSTRAINED = CONSTRAINED.replace("%RESULT1%", "")


@pytest.mark.parametrize("text, count", [(CONSTRAINED, 1), (PINNED, 2)])
def test_the_constraint_forcing_all_to_alls_comes_first(text, count):
    result = sdy_dl.propagate(text, explicit_collectives=True)
    ledger = result.collectives()
    a2a = [c for c in ledger.entries if c.kind == "all_to_all"]
    assert len(a2a) == count == len(ledger.entries)
    found = result.suggest(top=3, jobs=1)
    first = found[0]
    (edit,) = first.candidate.edits
    assert first.candidate.kind == "constraint"
    assert (edit.kind, edit.value) == ("set", "input %2")
    assert edit.sharding == '#sdy.sharding<@mesh, [{"x"}, {}]>'     # what the producer had
    assert first.communication_saved == sum(c.bytes for c in a2a) == 192 * count
    assert first.memory_saved == 0 and first.score == 192 * count
    assert [line.split()[:2] for line in first.removed] == [["all_to_all", c.name] for c in a2a]
    assert first.added == []
    # verified: the what-if of the suggested edit has no collective left
    after, changes = result.whatif([edit])
    assert len(after.collectives()) == 0
    assert changes.collective_bytes == (192 * count, 0)
    # as the command line types it
    assert ("whatif: sdy-dl whatif MODULE --explicit-collectives "
            "--set 'input %2=#sdy.sharding<@mesh, [{\"x\"}, {}]>'") in str(found)
    assert [s.score for s in found] == sorted((s.score for s in found), reverse=True)


def test_the_replicated_weight_gets_an_axis():
    result = sdy_dl.propagate(_lm_head(), explicit_collectives=True)
    weight = result.memory(top=1).top[0].value
    assert weight.name == "%arg2" and weight.replicated
    found = result.suggest(top=2, jobs=1)
    assert not found.refused     # every edit fits its value (the rank of the sharding set)
    first = found[0]
    (edit,) = first.candidate.edits
    assert first.candidate.kind == "memory" and edit.value == "%arg2"
    assert first.memory_saved >= weight.bytes_per_device * 3 // 4
    assert first.score == first.memory_saved + first.communication_saved
    # the JAX line to write: the weight's in_shardings entry
    assert first.applied[0]["jax"].startswith("in_shardings entry for w_out: NamedSharding(")
    assert "jax: in_shardings entry for w_out" in str(found)
    after, _ = result.whatif([edit])
    assert after.sharding("%arg2") == edit.sharding
    assert after.memory(top=1).top[0].value.name != "%arg2"


#: the installed console script (``python -m sdy_dl.cli`` from the source root would
#: import the source tree's sdy_dl, which a non-editable install does not map cli/ into)
SDY_DL = shutil.which("sdy-dl", path=os.path.dirname(sys.executable)) or shutil.which("sdy-dl")


def _run(*args):
    return subprocess.run([SDY_DL, *args], capture_output=True,
                          text=True, env={**os.environ, "SDY_DL_TRACEBACK": ""})


def _lm_head() -> str:
    return lowering.once("suggest", "lm_head", lambda: comms_programs.PROGRAMS["lm_head"]()
                         .as_text(debug_info=True))


@pytest.mark.parametrize("program", ["constrained", "lm_head", "example"])
def test_jobs_do_not_change_the_output(tmp_path, program):
    module = tmp_path / "m.mlir"
    module.write_text({"constrained": lambda: CONSTRAINED, "lm_head": _lm_head,
                       "example": lambda: open(EXAMPLE).read()}[program]())
    outs = []
    for jobs, fmt in (("1", "text"), ("2", "text"), ("1", "json"), ("2", "json")):
        done = _run("suggest", str(module), "--jobs", jobs, "--format", fmt, "--quiet")
        assert done.returncode == 0, done.stderr
        outs.append(done.stdout)
    assert outs[0] == outs[1] and outs[2] == outs[3]
    data = json.loads(outs[2])
    assert data["candidates"] >= 6 and data["suggestions"]
    if program == "constrained":
        assert data["suggestions"][0]["edits"] == [
            "--set input %2=#sdy.sharding<@mesh, [{\"x\"}, {}]>"]
        assert data["suggestions"][0]["communication_saved"] == 192
    if program == "example":       # some edits are folded into another with the same effect
        assert any(s["equivalent"] for s in data["suggestions"])


def test_the_printed_command_repeats_the_run_options(tmp_path):
    """The whatif command a suggestion prints propagates as the suggest run did
    (rule files and Shardy's options), so running it shows the saving suggest found."""
    module = tmp_path / "m.mlir"
    module.write_text(CONSTRAINED)
    rules = tmp_path / "extra.yaml"
    rules.write_text("description: a rule this module does not use\ncustom_calls:\n"
                     "  my_matmul:\n    doc: unused.\n    einsum: ([i, j], [j, k]) -> ([i, k])\n")
    done = _run("suggest", str(module), "--top", "1", "--quiet", "--conservative",
                "--rules", str(rules), "--pass-option", "dedup-functions-fully=true")
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.strip().startswith("whatif: ")]
    command = shlex.split(line.strip()[len("whatif: "):])
    assert command[:2] == ["sdy-dl", "whatif"]
    assert command[2:10] == [str(module), "--explicit-collectives", "--rules", str(rules),
                             "--pass-option", "conservative-propagation=true",
                             "--pass-option", "dedup-functions-fully=true"]
    again = _run(*command[1:], "--quiet")
    assert again.returncode == 0, again.stderr
    assert "collectives: 192 -> 0 bytes per device in all" in again.stdout


@pytest.mark.parametrize("args, text, code", [
    (["suggest", "{missing}"], "cannot read module", 1),
    (["suggest", "{bad}"], "bad.mlir:1:17: expected non-function type", 1),
    (["suggest", "{good}", "--jobs", "0"], "--jobs", 2),
    (["suggest", "{good}", "--top", "0"], "--top", 2),
])
def test_bad_input_is_one_line(tmp_path, args, text, code):
    paths = {"missing": str(tmp_path / "missing.mlir"), "bad": str(tmp_path / "bad.mlir"),
             "good": str(tmp_path / "good.mlir")}
    (tmp_path / "bad.mlir").write_text("func.func @main( {\n")
    (tmp_path / "good.mlir").write_text(CONSTRAINED)
    out = tmp_path / "out.txt"
    done = _run(*[a.format(**paths) for a in args], "-o", str(out))
    assert done.returncode == code
    assert done.stderr.startswith("sdy-dl: error: ") and done.stderr.count("\n") == 1
    assert text in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == "" and not out.exists()


#: ``sdy-dl suggest`` whose candidate-evaluating children end by signal sys.argv[1].
DYING_WORKER = """
import os, signal, sys
from sdy_dl.audit import suggest
from sdy_dl.cli import run

parent, evaluate = os.getpid(), suggest.evaluate

def dying(audit, candidate):
    if os.getpid() != parent:
        os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    return evaluate(audit, candidate)

suggest.evaluate = dying
suggest.usable_cpus = lambda: 2   # (a child even where one CPU is usable)
run(args=sys.argv[2:])
"""


@pytest.mark.parametrize("how", ["SIGKILL", "SIGSEGV"])
def test_a_worker_that_dies_is_one_error_line(tmp_path, how):
    """A candidate-evaluating process killed or crashed: one line, exit 1, no output
    file (never a wait for the lost candidate)."""
    module, out = tmp_path / "m.mlir", tmp_path / "out.txt"
    module.write_text(CONSTRAINED)
    done = subprocess.run([sys.executable, "-c", DYING_WORKER, how, "suggest", str(module),
                           "--jobs", "2", "-o", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)   # (the installed sdy_dl, not the source tree's)
    assert (done.returncode, done.stdout, done.stderr) == (
        1, "", f"sdy-dl: error: {module}: a process evaluating the candidate edits ended "
               "abruptly (killed or crashed)\n")
    assert not out.exists()


#: ``sdy-dl suggest`` whose candidate-evaluating children each make a file named by
#: their process id in directory sys.argv[1] and then never finish.
STUCK_WORKER = """
import os, sys, time
from sdy_dl.audit import suggest
from sdy_dl.cli import run

parent, started = os.getpid(), sys.argv[1]

def stuck(audit, candidate):
    if os.getpid() != parent:
        open(os.path.join(started, str(os.getpid())), "w").close()
        time.sleep(3600)

suggest.evaluate = stuck
suggest.usable_cpus = lambda: 2   # (a child even where one CPU is usable)
run(args=sys.argv[2:])
"""


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("how, code, said", [("SIGTERM", 143, "terminated (SIGTERM)"),
                                             ("SIGHUP", 129, "terminated (SIGHUP)"),
                                             ("SIGINT", 130, "interrupted")])
def test_a_signal_to_the_parent_alone_ends_its_workers(tmp_path, how, code, said):
    """SIGTERM, SIGHUP or Ctrl-C sent to the ``sdy-dl`` process only (not its process
    group) while candidates are being evaluated: it ends at once, one line, no
    output file, and the candidate-evaluating processes with it (the pool waited
    for the candidates they were evaluating)."""
    import signal
    import time

    module, out, started = tmp_path / "m.mlir", tmp_path / "out.txt", tmp_path / "started"
    module.write_text(CONSTRAINED)
    started.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", DEFAULTS + STUCK_WORKER, str(started), "suggest",
                             str(module), "--jobs", "2", "-o", str(out), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not os.listdir(started):   # until a child evaluates a candidate
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(getattr(signal, how))
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert (proc.returncode, stdout, stderr) == (code, "", f"sdy-dl: error: {said}\n")
    assert not out.exists()
    workers = [int(name) for name in os.listdir(started)]
    deadline = time.monotonic() + 60
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(_alive, workers))


#: ``sdy-dl suggest`` started with SIGHUP ignored (``nohup``), whose candidate-evaluating
#: children write their SIGHUP and SIGTERM handlers to a file named by their process
#: id in directory sys.argv[1].
NOTING_WORKER = """
import os, signal, sys
from sdy_dl.audit import suggest
from sdy_dl.cli import run

signal.signal(signal.SIGHUP, signal.SIG_IGN)
parent, evaluate, seen = os.getpid(), suggest.evaluate, sys.argv[1]

def noting(audit, candidate):
    if os.getpid() != parent:
        with open(os.path.join(seen, str(os.getpid())), "w") as f:
            f.write(" ".join(signal.getsignal(s).name for s in (signal.SIGHUP, signal.SIGTERM)))
    return evaluate(audit, candidate)

suggest.evaluate = noting
suggest.usable_cpus = lambda: 2   # (a child even where one CPU is usable)
run(args=sys.argv[2:])
"""


def test_workers_keep_a_signal_ignored_at_the_start_ignored(tmp_path):
    """A command started with SIGHUP ignored (``nohup``): its candidate-evaluating
    processes ignore it too, and end on SIGTERM at once."""
    module, seen = tmp_path / "m.mlir", tmp_path / "seen"
    module.write_text(CONSTRAINED)
    seen.mkdir()
    done = subprocess.run([sys.executable, "-c", DEFAULTS + NOTING_WORKER, str(seen), "suggest",
                           str(module), "--jobs", "2", "-o", str(tmp_path / "out.txt"),
                           "--quiet"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    handlers = {(seen / name).read_text() for name in os.listdir(seen)}
    assert handlers == {"SIG_IGN SIG_DFL"}


def test_jobs_are_at_most_the_usable_cpus(monkeypatch):
    """--jobs beyond the usable CPUs forks no more processes than there are CPUs (one:
    none, the candidates evaluated in this process)."""
    from sdy_dl.audit import suggest as suggest_module

    monkeypatch.setattr(suggest_module, "usable_cpus", lambda: 1)
    monkeypatch.setattr(suggest_module.os, "fork", lambda: pytest.fail("forked"))
    found = sdy_dl.propagate(CONSTRAINED, explicit_collectives=True).suggest(top=1, jobs=1000)
    assert found.suggestions


def test_processes_that_cannot_be_forked_are_one_error_line(tmp_path, monkeypatch):
    """A process limit reached (fork fails): one line, exit 1, no output file."""
    import errno

    from click.testing import CliRunner

    from sdy_dl.audit import suggest as suggest_module
    from sdy_dl.cli import main

    def no_fork():
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(suggest_module, "usable_cpus", lambda: 2)
    monkeypatch.setattr(os, "fork", no_fork)
    module, out = tmp_path / "m.mlir", tmp_path / "out.txt"
    module.write_text(CONSTRAINED)
    result = CliRunner().invoke(main, ["suggest", str(module), "--jobs", "2", "-o", str(out),
                                       "--quiet"])
    assert (result.exit_code, result.stderr) == (
        1, f"sdy-dl: error: {module}: cannot start the processes evaluating the candidate "
           "edits: Resource temporarily unavailable\n")
    assert not out.exists()


def test_api_refusals():
    plain = sdy_dl.propagate(CONSTRAINED)
    with pytest.raises(SdyError, match="explicit collectives"):
        plain.suggest()
    result = sdy_dl.propagate(CONSTRAINED, explicit_collectives=True)
    for bad in ({"jobs": 0}, {"top": 0}, {"top": "3"}):
        with pytest.raises(UsageError):
            result.suggest(**bad)


def test_an_erased_constraint_is_named_as_explain_names_it():
    result = sdy_dl.propagate(CONSTRAINED, explicit_collectives=True)
    assert "input %2 (erased by the pipeline)" in str(result.explain("%3"))
    _, changes = result.whatif(drop_constraints=["input %2"])
    assert changes.collective_bytes == (192, 0)
    with pytest.raises(SdyError, match="no value of the input print as %9"):
        result.whatif(drop_constraints=["input %9"])


EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "training_step.mlir")


def test_edits_with_the_same_effect_are_one_entry():
    with open(EXAMPLE) as f:
        result = sdy_dl.propagate(f.read(), explicit_collectives=True)
    found = result.suggest(top=3, jobs=1)
    assert len(found) == 3                       # entries, not candidates
    folded = [s for s in found if s.equivalent]
    assert folded
    texts = {}
    for s in found:
        after, _ = result.whatif(list(s.candidate.edits))
        texts[id(s)] = after.text
        for e in s.equivalent:
            assert e.candidate.edits != s.candidate.edits
            assert (e.score, e.removed, e.added) == (s.score, s.removed, s.added)
            # verified: the other edit propagates to the very same output
            other, _ = result.whatif(list(e.candidate.edits))
            assert other.text == after.text
    # different effects stay separate, even at the same score
    assert len(set(texts.values())) == len(found)
    same_score = [(a, b) for a, b in zip(found, found[1:]) if a.score == b.score]
    assert same_score and all(a.added != b.added for a, b in same_score)
    e = folded[0].equivalent[0]
    assert f"    same effect: {e.edit_args()}  (" in str(found)
    data = found.to_json()["suggestions"]
    i = list(found).index(folded[0])
    assert data[i]["equivalent"][0]["whatif_args"] == e.edit_args()
    assert data[i]["equivalent"][0]["edits"] == [x.to_text() for x in e.candidate.edits]
