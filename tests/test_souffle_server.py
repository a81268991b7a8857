"""Compiled Soufflé binaries serve every call of a run as one process: same
relations as the embedded engine, call after call, names as data, and a
stopped or non-serving binary handled."""

from __future__ import annotations

import os
import shutil
import stat

import pytest

from sdy_dl.datalog.facts import encoded_relations
from sdy_dl.engines import get_engine, souffle_build, souffle_engine, souffle_server
from sdy_dl.errors import SdyError
from test_engines import ECHO, FACTS, GRAPH, echo_facts, expected_echo, program

pytestmark = [pytest.mark.souffle,
              pytest.mark.skipif(shutil.which("souffle") is None, reason="souffle is not on PATH")]

#: GRAPH and ECHO in one program (one compilation), with an input no output
#: needs and an internal relation (no wrapper in the trimmed C++: the program
#: itself must empty it between calls).
BOTH = GRAPH + ECHO + '''
// unused(x): an input no output depends on (Soufflé drops it)
.decl unused(x: number)
.input unused
// hop2(x, z): z is two edges from x (neither input nor output)
.decl hop2(x: number, z: number)
hop2(X, Z) :- edge(X, Y), edge(Y, Z).
// hops2(x, n): n nodes are two edges from x
.decl hops2(x: number, n: number)
.output hops2
hops2(X, N) :- hop2(X, _), N = count : { hop2(X, _) }.
'''


@pytest.fixture(scope="module")
def binary(tmp_path_factory) -> str:
    """The binary of BOTH, compiled together with GRAPH (as a builder compiles
    small programs): one binary, linked into both programs' directories."""
    cache = tmp_path_factory.mktemp("cache")
    for name, text in (("both", BOTH), ("graph", GRAPH)):
        (cache / name).mkdir()
        (cache / name / "program.dl").write_text(text)
    assert souffle_build._build_locked(shutil.which("souffle"),
                                       [str(cache / "both"), str(cache / "graph")], 1) is None
    yield str(cache / "both" / "program")
    souffle_server.close_all()


def test_programs_compiled_together_each_serve_their_own_relations(binary):
    other = os.path.join(os.path.dirname(os.path.dirname(binary)), "graph", "program")
    assert os.path.samefile(binary, other)
    assert souffle_engine.run_binary(other, program(GRAPH), FACTS) == \
        get_engine("python").run(program(GRAPH), FACTS)
    assert souffle_engine.run_binary(binary, program(BOTH), FACTS) == \
        get_engine("python").run(program(BOTH), FACTS)
    assert souffle_server.server(other).proc.pid != souffle_server.server(binary).proc.pid


def test_one_process_serves_call_after_call_with_the_embedded_engines_relations(binary):
    both = program(BOTH)
    embedded = get_engine("python")
    first = souffle_engine.run_binary(binary, both, FACTS)
    pid = souffle_server.server(binary).proc.pid
    fewer = {"edge": [(1, 2), (2, 3)], "label": [(2, "two")]}
    second = souffle_engine.run_binary(binary, both, fewer)
    assert souffle_server.server(binary).proc.pid == pid
    assert first == embedded.run(both, FACTS)
    assert second == embedded.run(both, fewer)   # nothing left over from the first call
    assert second["path"] == {(1, 2), (1, 3), (2, 3)}


def test_names_travel_to_the_server_as_data(binary):
    out = souffle_engine.run_binary(binary, program(BOTH), echo_facts())
    assert (out["echo"], out["same"]) == expected_echo()


def test_rows_of_an_input_soufflé_dropped_are_skipped(binary):
    facts = dict(FACTS, unused=[(1,), (2,)])
    assert souffle_engine.run_binary(binary, program(BOTH), facts) == \
        get_engine("python").run(program(BOTH), facts)


def test_rows_travel_as_numbers_or_as_text(binary):
    both = program(BOTH)
    encoded = encoded_relations(both, FACTS)
    assert isinstance(encoded["edge"][1], bytes) and isinstance(encoded["label"][1], str)
    extremes = dict(FACTS, edge=[(-2**31, 2**31 - 1), (2**31 - 1, 0)])
    for facts in (FACTS, extremes):
        assert souffle_engine.run_binary(binary, both, facts) == \
            get_engine("python").run(both, facts)


def test_a_stopped_server_fails_its_call_and_the_next_call_starts_another(binary):
    both = program(BOTH)
    souffle_engine.run_binary(binary, both, FACTS)
    running = souffle_server.server(binary)
    running.proc.kill()
    running.proc.wait()
    with pytest.raises(SdyError, match="souffle failed"):
        running.call(both, FACTS)
    assert souffle_engine.run_binary(binary, both, FACTS) == get_engine("python").run(both, FACTS)
    assert souffle_server.server(binary).proc.pid != running.proc.pid


def test_a_binary_that_cannot_serve_runs_once_per_call_on_fact_files(binary, tmp_path):
    wrapper = tmp_path / "program"
    name = souffle_build.program_name(os.path.dirname(binary))   # what Soufflé's own main lacks
    wrapper.write_text(f'#!/bin/sh\n[ "$1" = --serve ] && exit 1\nexec {binary} "$@" {name}\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    out = souffle_engine.run_binary(str(wrapper), program(BOTH), echo_facts())
    assert (out["echo"], out["same"]) == expected_echo()
    assert souffle_server.server(str(wrapper)) is None



def test_a_server_that_stops_mid_call_reports_what_it_wrote_last(tmp_path):
    wrapper = tmp_path / "program"
    wrapper.write_text('#!/bin/sh\necho \'!ready\'\nhead -c 10 >/dev/null\n'
                       'echo "Error: out of memory" >&2\nexit 1\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    big = {"edge": [(i, i + 1) for i in range(50_000)]}
    with pytest.raises(SdyError, match="souffle failed: Error: out of memory"):
        souffle_engine.run_binary(str(wrapper), program(BOTH), big)


def test_a_forked_child_starts_its_own_server(binary, monkeypatch):
    # A real fork of a process running JAX's threads may deadlock: the child is
    # simulated by another process id.
    both = program(BOTH)
    expected = get_engine("python").run(both, FACTS)
    assert souffle_engine.run_binary(binary, both, FACTS) == expected
    parent = souffle_server.server(binary)
    monkeypatch.setattr(souffle_server.os, "getpid", lambda: parent.owner + 1)
    assert souffle_engine.run_binary(binary, both, FACTS) == expected
    child = souffle_server.server(binary)
    assert child.proc.pid != parent.proc.pid and parent.proc.poll() is None
    souffle_server.close_all()   # the child's exit closes its own server only
    assert child.proc.poll() is not None and parent.proc.poll() is None
    parent.close()
