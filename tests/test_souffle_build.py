"""The binary cache's builders: which programs they compile, in which order, with
how many compilers; the generated C++ cut into translation units."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import threading
import time

import pytest

from sdy_dl.engines import souffle_build, souffle_engine
from sdy_dl.engines.souffle_split import split
from test_engines import FACTS, GRAPH, program

needs_souffle = pytest.mark.skipif(shutil.which("souffle") is None, reason="souffle is not on PATH")


def queue(cache, sizes: dict[str, int]) -> None:
    """Program directories of ``cache`` waiting for their binaries, with program texts of ``sizes``."""
    for name, size in sizes.items():
        (cache / name).mkdir(parents=True)
        (cache / name / "program.dl").write_text("x" * size)


def fake_compiler(monkeypatch, log: list):
    """Builders that record (program, compilers), or (programs, compilers) for a
    group, leave an empty binary, and do not wait for the queue to settle."""
    def build_locked(souffle, directories, jobs):
        names = tuple(os.path.basename(d) for d in directories)
        log.append((names[0] if len(names) == 1 else names, jobs))
        for directory in directories:
            open(os.path.join(directory, "program"), "w").close()
    monkeypatch.setattr(souffle_build, "_build_locked", build_locked)
    monkeypatch.setattr(souffle_build, "SETTLE_SECONDS", 0)


def hold(path):
    f = open(path, "w")
    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return f


def test_a_background_builder_compiles_every_waiting_program_largest_first(tmp_path, monkeypatch):
    log = []
    fake_compiler(monkeypatch, log)
    monkeypatch.setattr(souffle_build, "GROUP_BYTES", 0)
    queue(tmp_path, {"small": 10, "large": 300, "medium": 50, "done": 500, "broken": 400})
    (tmp_path / "done" / "program").write_text("")
    (tmp_path / "broken" / souffle_build.FAILED).write_text("error")
    assert souffle_build.build("souffle", str(tmp_path / "small" / "program.dl"),
                               str(tmp_path / "small" / "program")) is None
    assert log == [("large", 1), ("medium", 1), ("small", 1)]
    assert souffle_build.waiting_programs(str(tmp_path)) == []


def test_small_programs_are_compiled_together_as_many_as_fit(tmp_path, monkeypatch):
    log = []
    fake_compiler(monkeypatch, log)
    monkeypatch.setattr(souffle_build, "GROUP_BYTES", 100)
    queue(tmp_path, {"step": 500, "a": 60, "b": 30, "c": 20, "d": 5, "e": 50})
    with hold(str(tmp_path / "b" / "build.lock")):   # another builder has b
        souffle_build.build("souffle", str(tmp_path / "a" / "program.dl"),
                            str(tmp_path / "a" / "program"))
    assert log == [("step", 1), (("a", "c", "d"), 1), ("e", 1)]
    assert souffle_build.waiting_programs(str(tmp_path)) == [str(tmp_path / "b")]


def test_a_builder_waits_for_the_queue_to_settle(tmp_path, monkeypatch):
    log = []
    fake_compiler(monkeypatch, log)
    monkeypatch.setattr(souffle_build, "SETTLE_SECONDS", 0.3)
    queue(tmp_path, {"a": 10})
    joined, real_sleep, builder = [], time.sleep, threading.get_ident()

    def sleep(seconds):   # a run queues program b while the builder waits
        # time.sleep is patched process-wide: other threads (the test runner's)
        # sleep too, and only the builder's first wait may queue b.
        if threading.get_ident() == builder and not joined:
            joined.append(seconds)
            queue(tmp_path, {"b": 10})
        real_sleep(seconds)
    monkeypatch.setattr(souffle_build.time, "sleep", sleep)
    souffle_build.build("souffle", str(tmp_path / "a" / "program.dl"), str(tmp_path / "a" / "program"))
    assert log == [(("a", "b"), 1)]   # one group: the builder saw b before it started


def test_builders_leave_programs_to_the_builders_holding_the_slots(tmp_path, monkeypatch):
    log = []
    fake_compiler(monkeypatch, log)
    queue(tmp_path, {"a": 10, "b": 20})
    slots = [hold(path) for path in souffle_build.slot_locks(str(tmp_path))]
    assert len(slots) == souffle_build.SLOTS == 2
    assert souffle_build.build("souffle", str(tmp_path / "a" / "program.dl"),
                               str(tmp_path / "a" / "program")) is None
    assert log == []   # both compilers busy: the slot holders will compile them
    assert souffle_engine.pending_builds(str(tmp_path)) == [str(tmp_path / "b"), str(tmp_path / "a")]
    slots[0].close()
    # One slot free, and another builder has program b: this one compiles a only.
    with hold(str(tmp_path / "b" / "build.lock")):
        souffle_build.build("souffle", str(tmp_path / "a" / "program.dl"), str(tmp_path / "a" / "program"))
        assert log == [("a", 1)]
        assert souffle_engine.pending_builds(str(tmp_path)) == [str(tmp_path / "b")]
    slots[1].close()
    assert souffle_engine.pending_builds(str(tmp_path)) == []   # b waits, but no builder runs


def test_a_waiting_build_takes_every_free_slot(tmp_path, monkeypatch):
    log = []
    fake_compiler(monkeypatch, log)
    queue(tmp_path, {"a": 10, "b": 10, "c": 10})
    build = souffle_build.build
    build("souffle", str(tmp_path / "a" / "program.dl"), str(tmp_path / "a" / "program"), wait=True)
    with hold(souffle_build.slot_locks(str(tmp_path))[0]):
        build("souffle", str(tmp_path / "b" / "program.dl"), str(tmp_path / "b" / "program"), wait=True)
    build("souffle", str(tmp_path / "b" / "program.dl"), str(tmp_path / "b" / "program"), wait=True)
    assert log == [("a", 2), ("b", 1)]   # the third call found b's binary


def generated_cxx(tmp_path) -> str:
    source = tmp_path / "graph.dl"
    source.write_text(GRAPH)
    subprocess.run([shutil.which("souffle"), "-w", "-g", str(tmp_path / "graph.cpp"), str(source)],
                   check=True, capture_output=True)
    return (tmp_path / "graph.cpp").read_text()


@pytest.mark.souffle
@needs_souffle
def test_split_keeps_every_definition_once_and_declarations_apart(tmp_path):
    text = generated_cxx(tmp_path)
    whole, three = split(text, 1), split(text, 3)
    assert whole.runtime == three.runtime and "#include" in whole.runtime
    assert whole.declarations == three.declarations
    assert "struct Type {" in whole.declarations and "class Stratum_" in whole.declarations
    assert "::run(" not in whole.declarations   # no definition outside a class body
    assert 1 < len(three.pieces) <= 3 and len(whole.pieces) == 1
    assert "".join(three.pieces) == whole.pieces[0].replace("\ninline ", "\n")
    assert "int main(" in "".join(three.pieces)
    assert "\ninline " in whole.pieces[0] and "\ninline " not in "".join(three.pieces)
    assert split("int main() {}\n", 2) is None
    assert split(text.replace("} // namespace", "}"), 2) is None


@pytest.mark.souffle
@pytest.mark.slow
@needs_souffle
@pytest.mark.parametrize("jobs", [1, 2])
def test_programs_compiled_in_units_with_the_precompiled_runtime_give_the_same_relations(
        tmp_path, monkeypatch, jobs):
    from sdy_dl.engines import get_engine

    souffle, cache = shutil.which("souffle"), tmp_path / "cache"
    for name in ("large", "small", "later"):
        (cache / name).mkdir(parents=True)
        (cache / name / "program.dl").write_text(GRAPH)

    def compile_(name: str) -> None:
        assert souffle_build.compile_program(souffle, str(cache / name / "program.dl"),
                                             str(cache / name / "program"), jobs, str(cache)) is None
        assert souffle_engine.run_binary(str(cache / name / "program"), program(), FACTS) == \
            get_engine("clingo").run(program(), FACTS)

    monkeypatch.setattr(souffle_build, "SPLIT_BYTES", 0)   # every program is large: cut in units
    compile_("large")   # a large program does not wait for the runtime to be precompiled ...
    assert len(list((cache / "large").glob("unit*.o"))) == jobs
    assert not list(cache.glob("runtime-*/runtime.h.gch"))
    assert (cache / "large" / "unit0.cpp").read_text().startswith("#define")   # the runtime inline
    monkeypatch.setattr(souffle_build, "SPLIT_BYTES", 10**9)
    compile_("small")   # ... a small one precompiles it ...
    [header] = cache.glob("runtime-*/runtime.h")
    assert header.with_suffix(".h.gch").exists()
    assert set(souffle_build.SHARED_INCLUDES) <= set(header.read_text().splitlines(keepends=True))
    monkeypatch.setattr(souffle_build, "SPLIT_BYTES", 0)
    compile_("later")   # ... and a large one uses it once it is there
    assert len(list((cache / "later").glob("unit*.o"))) == jobs
    assert (cache / "later" / "unit0.cpp").read_text().startswith('#include "program.h"')
