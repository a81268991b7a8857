"""The engines: the Python engine runs the program's rules, clingo a translation;
they agree with each other and with Soufflé (when present)."""

from __future__ import annotations

import shutil

import pytest

from sdy_dl.datalog.compiler import compile_stage
from sdy_dl.datalog.program import Program, parse_declarations
from sdy_dl.datalog.stratify import check_stratified
from sdy_dl.engines import get_engine
from sdy_dl.engines.to_clingo import translate
from sdy_dl.errors import SdyError

GRAPH = '''
// edge(x, y): an edge from x to y
.decl edge(x: number, y: number)
.input edge
// label(x, l): node x carries label l
.decl label(x: number, l: symbol)
.input label
// path(x, y): y is reachable from x
.decl path(x: number, y: number)
.output path
// outdeg(x, n): n edges leave x
.decl outdeg(x: number, n: number)
.output outdeg
// lo(x, m): the smallest node reachable from x
.decl lo(x: number, m: number)
.output lo
// total(x, s): the sum of the nodes reachable from x
.decl total(x: number, s: number)
.output total
// odd_sink(x): x is an odd node with no successor
.decl odd_sink(x: number)
.output odd_sink
// named(l, y): a node labelled l reaches y
.decl named(l: symbol, y: number)
.output named
path(X, Y) :- edge(X, Y).
path(X, Z) :- path(X, Y), edge(Y, Z).
outdeg(X, N) :- edge(X, _), N = count : { edge(X, _) }.
lo(X, M) :- path(X, _), M = min Y : { path(X, Y) }.
total(X, S) :- path(X, _), S = sum Y : { path(X, Y) }.
odd_sink(Y) :- edge(_, Y), !edge(Y, _), Y % 2 = 1.
named(L, Y) :- label(X, L), path(X, Y).
'''
FACTS = {"edge": [(1, 2), (2, 3), (1, 5), (3, 4), (4, 2)], "label": [(1, "one"), (3, "three")]}


def program(text: str = GRAPH) -> Program:
    return Program(text, parse_declarations(text))


def test_clingo_runs_the_translated_program():
    out = get_engine("clingo").run(program(), FACTS)
    assert out["path"] == {(1, 2), (1, 3), (1, 4), (1, 5), (2, 3), (2, 4), (2, 2), (3, 4),
                           (3, 2), (3, 3), (4, 2), (4, 3), (4, 4)}
    assert out["outdeg"] == {(1, 2), (2, 1), (3, 1), (4, 1)}
    assert out["lo"] == {(1, 2), (2, 2), (3, 2), (4, 2)}
    assert out["total"] == {(1, 14), (2, 9), (3, 9), (4, 9)}
    assert out["odd_sink"] == {(5,)}
    assert ("three", 4) in out["named"] and ("one", 5) in out["named"]


def test_translation_rejects_what_the_engines_would_read_differently():
    bad_var = GRAPH + "path(x, y) :- edge(x, y).\n"
    with pytest.raises(SdyError, match="upper-case"):
        translate(program(bad_var))
    with pytest.raises(SdyError, match="functors are not supported"):
        translate(program(GRAPH + "path(X, Y) :- edge(X, Y), Y = max(X, 3).\n"))
    with pytest.raises(SdyError, match="not a declared relation"):
        translate(program(GRAPH + "path(X, Y) :- edge(X, Y), nope(Y).\n"))


def test_unstratified_program_is_rejected():
    text = GRAPH + "path(X, Y) :- edge(X, Y), !odd_sink(Y).\nodd_sink(Y) :- path(_, Y), !edge(Y, _).\n"
    with pytest.raises(SdyError, match="not stratified"):
        check_stratified(text)
    check_stratified(GRAPH)


def test_every_relation_needs_a_doc_comment():
    with pytest.raises(SdyError, match="no doc comment"):
        parse_declarations(".decl r(x: number)\n")


@pytest.mark.souffle
@pytest.mark.skipif(shutil.which("souffle") is None, reason="souffle is not on PATH")
@pytest.mark.parametrize("compiled", [False, True])
def test_souffle_and_clingo_agree(tmp_path, monkeypatch, compiled):
    monkeypatch.setenv("SDY_DL_CACHE", str(tmp_path))
    expected = get_engine("clingo").run(program(), FACTS)
    assert get_engine("souffle", compiled=compiled).run(program(), FACTS) == expected


def test_python_engine_and_clingo_agree():
    out = get_engine("python").run(program(), FACTS)
    assert out == get_engine("clingo").run(program(), FACTS)
    assert out["outdeg"] == {(1, 2), (2, 1), (3, 1), (4, 1)}
    assert out["odd_sink"] == {(5,)}


def test_auto_runs_the_python_engine_where_no_binary_is_cached(tmp_path, monkeypatch):
    from sdy_dl.engines import python_engine

    monkeypatch.setenv("SDY_DL_CACHE", str(tmp_path))
    calls = []
    run = python_engine.PythonEngine.run
    monkeypatch.setattr(python_engine.PythonEngine, "run",
                        lambda self, *a: calls.append(1) or run(self, *a))
    assert get_engine("auto").run(program(), FACTS) == get_engine("clingo").run(program(), FACTS)
    assert calls == [1]
    assert not (tmp_path / "souffle").exists()  # auto never compiles


@pytest.mark.souffle
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("souffle") is None, reason="souffle is not on PATH")
def test_background_compilation_then_auto_uses_the_binary(tmp_path, monkeypatch, capfd):
    import time

    from sdy_dl.engines import python_engine, souffle_engine

    monkeypatch.setenv("SDY_DL_CACHE", str(tmp_path))
    monkeypatch.setattr(souffle_engine, "_STARTED", set())
    expected = get_engine("clingo").run(program(), FACTS)
    # Cold: the answer comes from the Python engine while a detached process compiles.
    assert get_engine("souffle", compiled=True, background=True).run(program(), FACTS) == expected
    assert "compiling Soufflé programs in the background" in capfd.readouterr().err
    exe = souffle_engine.binary_path(program())
    deadline = time.monotonic() + 600
    while not souffle_engine.cached_binary(program()) and time.monotonic() < deadline:
        time.sleep(1)
    assert souffle_engine.cached_binary(program()) == exe

    def no_embedded(*_):
        raise AssertionError("the embedded engine ran although a binary is cached")
    monkeypatch.setattr(python_engine.PythonEngine, "run", no_embedded)
    assert get_engine("souffle", compiled=True, background=True).run(program(), FACTS) == expected
    assert get_engine("auto").run(program(), FACTS) == expected


INSTALL_JSON = {
    "compiler": "/usr/bin/c++", "compiler_id": "GNU", "includes": "-I/opt/souffle/include",
    "std_flag": "-std=c++17", "cxx_flags": " -fopenmp", "release_cxx_flags": "-O3 ",
    "definitions": "-DUSE_LIBZ -DRAM_DOMAIN_SIZE=64", "compile_options": "",
    "link_options": " -ldl /usr/lib/libz.so ", "rpaths": "/usr/lib:/opt/lib",
    "outname_fmt": "-o {}", "rpath_fmt": "-Wl,-rpath,{}", "path_delimiter": ":",
}


def fake_install(directory, conf) -> str:
    """A ``souffle`` with a ``souffle-compile.py`` reporting ``conf`` (as Soufflé writes it)."""
    import json

    directory.mkdir(exist_ok=True)
    (directory / "souffle").write_text("")
    if conf is not None:
        (directory / "souffle-compile.py").write_text(
            '#!/usr/bin/env python3\nJSON_DATA_TEXT = """' + json.dumps(conf, indent=2)
            + '"""\n\nif not JSON_DATA_TEXT:\n    JSON_DATA_TEXT = """{"compiler": "other"}"""\n')
    return str(directory / "souffle")


def test_compilation_uses_what_the_souffle_install_reports(tmp_path):
    from sdy_dl.engines.souffle_build import (OPTIMIZATION, SERVER_SOURCE, compile_command,
                                              compiler_config)

    conf = compiler_config(fake_install(tmp_path / "ok", INSTALL_JSON))
    assert compile_command(conf, "p.cpp", "p") == [
        "/usr/bin/c++", "-DUSE_LIBZ", "-DRAM_DOMAIN_SIZE=64", "-D__EMBEDDED_SOUFFLE__",
        "-I/opt/souffle/include", "-std=c++17", OPTIMIZATION, "-o", "p", "p.cpp", SERVER_SOURCE,
        "-ldl", "/usr/lib/libz.so",
        "-Wl,-rpath,/usr/lib", "-Wl,-rpath,/opt/lib"]
    # No usable configuration: the builder falls back to `souffle -o`.
    assert compiler_config(fake_install(tmp_path / "none", None)) is None
    assert compiler_config(fake_install(tmp_path / "msvc", {**INSTALL_JSON, "compiler_id": "MSVC"})) is None
    assert compiler_config(fake_install(tmp_path / "partial", {"compiler": "/usr/bin/c++"})) is None
    broken = tmp_path / "broken"
    fake_install(broken, None)
    (broken / "souffle-compile.py").write_text('JSON_DATA_TEXT = """{"compiler": """\n')
    assert compiler_config(str(broken / "souffle")) is None


@pytest.mark.souffle
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("souffle") is None, reason="souffle is not on PATH")
def test_a_failing_cxx_compilation_falls_back_to_souffle_o(tmp_path, monkeypatch):
    from sdy_dl.engines import souffle_build, souffle_engine

    monkeypatch.setenv("SDY_DL_CACHE", str(tmp_path))
    monkeypatch.setattr(souffle_build, "compiler_config",
                        lambda souffle: {**INSTALL_JSON, "compiler": "/bin/false"})
    assert get_engine("souffle", compiled=True).run(program(), FACTS) == \
        get_engine("clingo").run(program(), FACTS)
    assert souffle_engine.cached_binary(program())


#: Names as modules may spell them: each must reach the engines as data only.
AWKWARD_NAMES = ['a"b', "c\\d", "e\tf", "g\nh", "i\r\nj", "日本", "ÿ", ":- foo.", "x).",
                 '"), bar("', "%41", "% 2", "plain", "", " lead", "\\\"", "#show.", "\\n", "\\t",
                 "a\\\\b", "end\\"]

ECHO = '''
// name(i, s): the i-th name
.decl name(i: number, s: symbol)
.input name
// blocked(s): a name that is not echoed
.decl blocked(s: symbol)
.input blocked
// echo(s, i): name s (not blocked) with its index
.decl echo(s: symbol, i: number)
.output echo
// same(i, j): names i and j are equal
.decl same(i: number, j: number)
.output same
echo(S, I) :- name(I, S), !blocked(S).
same(I, J) :- name(I, S), name(J, S), I != J.
'''


def echo_facts():
    names = [(i, n) for i, n in enumerate(AWKWARD_NAMES)] + [(100, 'a"b')]
    return {"name": names, "blocked": [("plain",)]}


def expected_echo():
    return ({(n, i) for i, n in echo_facts()["name"] if n != "plain"}, {(0, 100), (100, 0)})


@pytest.mark.parametrize("engine", ["clingo", "python"])
def test_names_round_trip_through_embedded_engines_as_data(engine):
    out = get_engine(engine).run(program(ECHO), echo_facts())
    assert (out["echo"], out["same"]) == expected_echo()


@pytest.mark.parametrize("engine", ["clingo", "python"])
def test_facts_are_checked(engine):
    with pytest.raises(SdyError, match="not an input relation"):
        get_engine(engine).run(program(ECHO), {"echo": [("a", 1)]})
    with pytest.raises(SdyError, match="type number mismatch"):
        get_engine(engine).run(program(ECHO), {"name": [("1", "a")]})
    with pytest.raises(SdyError, match="NUL"):
        get_engine(engine).run(program(ECHO), {"name": [(1, "a\0b")]})
    with pytest.raises(SdyError, match="not valid Unicode"):
        get_engine(engine).run(program(ECHO), {"name": [(1, "a\udcffb")]})


@pytest.mark.parametrize("rows, message", [
    ([(0, "a"), (True, "b"), (2, "c")], "fact name(True, 'b'): column type number mismatch"),
    ([(0, "a"), (2**31, "b")], "the number 2147483648 is beyond the 32-bit numbers"),
    ([(0, "a"), (-2**31 - 1, "b")], "the number -2147483649 is beyond the 32-bit numbers"),
    ([(0, "a"), (1, "b", 2)], "fact name(1, 'b', 2): expected 2 columns"),
    ([(0, "a"), (1, None)], "fact name(1, None): column type symbol mismatch"),
    ([(0, "a"), (1, "b\0"), (2, 3)], "fact name(1, 'b\\x00'): symbol with a NUL character"),
])
def test_the_first_bad_fact_among_good_ones_is_named(rows, message):
    with pytest.raises(SdyError) as info:
        get_engine("clingo").run(program(ECHO), {"blocked": [("x",)], "name": rows})
    assert info.value.message.startswith(message)


NUMBERS = '''
// in_edge(x, y): an edge from x to y
.decl in_edge(x: number, y: number)
.input in_edge
// source(x): x has an edge
.decl source(x: number)
.output source
source(X) :- in_edge(X, _).
'''


@pytest.mark.parametrize("rows, message", [
    ([(0, 1), (True, 2)], "fact in_edge(True, 2): column type number mismatch"),
    ([(0, 1), (1, 2.0)], "fact in_edge(1, 2.0): column type number mismatch"),
    ([(0, 1), ("1", 2)], "fact in_edge('1', 2): column type number mismatch"),
    ([(0, 1), (2, 2**31)], "the number 2147483648 is beyond the 32-bit numbers"),
    ([(0, 1), (-2**31 - 1, 0)], "the number -2147483649 is beyond the 32-bit numbers"),
    ([(0, 1), (1, 2, 3)], "fact in_edge(1, 2, 3): expected 2 columns"),
])
def test_a_relation_of_numbers_names_its_first_bad_fact(rows, message):
    """A relation of numbers only is checked whole, then row by row when that fails."""
    with pytest.raises(SdyError) as info:
        get_engine("python").run(program(NUMBERS), {"in_edge": rows})
    assert info.value.message.startswith(message)


def test_a_relation_of_numbers_takes_32_bit_ints_and_their_subclasses():
    import enum

    class Node(enum.IntEnum):
        TOP = 7

    rows = [(-2**31, 2**31 - 1), (Node.TOP, 0)]
    assert get_engine("python").run(program(NUMBERS), {"in_edge": rows}) == {
        "source": {(-2**31,), (7,)}}

def test_fact_files_escape_names(tmp_path):
    from facts_dirs import read_facts_dir
    from sdy_dl.datalog.facts import write_facts_dir

    prog = program(ECHO)
    write_facts_dir(prog, echo_facts(), str(tmp_path))
    for line in (tmp_path / "name.facts").read_text(encoding="utf-8").splitlines():
        assert line.count("\t") == 1 and '"' not in line and "\\" not in line
    assert read_facts_dir(prog, str(tmp_path))["name"] == set(echo_facts()["name"])


def test_fact_lines_check_and_encode_every_relation_in_one_read():
    from sdy_dl.datalog.facts import encoded_relations, escape_symbol, fact_lines

    prog = program(ECHO)
    facts = echo_facts()
    encoded = encoded_relations(prog, facts)
    assert encoded["name"] == (len(facts["name"]),
                               "".join(f"{i}\t{escape_symbol(n)}\n" for i, n in facts["name"]))
    assert any("%" in line for line in encoded["name"][1].splitlines())   # escapes were needed
    rows = [(1, "plain"), (-2**31, "tab\there")]
    assert fact_lines(prog.decls["name"], rows) == "1\tplain\n-2147483648\ttab%09here\n"
    # rows given as lists; no rows
    assert fact_lines(prog.decls["name"], [[2, "a"]]) == "2\ta\n"
    assert fact_lines(prog.decls["blocked"], []) == ""
    with pytest.raises(SdyError, match="32-bit"):
        encoded_relations(prog, {"name": [(2**31, "a")]})
    with pytest.raises(SdyError, match="column type"):
        encoded_relations(prog, {"name": [(True, "a")]})
    with pytest.raises(SdyError, match="not an input relation"):
        encoded_relations(prog, {"echo": [("a", 1)]})


def test_relations_of_numbers_only_are_encoded_as_32_bit_integers():
    from array import array

    from sdy_dl.datalog.facts import encoded_relations

    prog = program(GRAPH)
    encoded = encoded_relations(prog, {"edge": [(1, 2), (-2**31, 2**31 - 1)], "label": [(1, "a")]})
    assert encoded["edge"] == (2, array("i", [1, 2, -2**31, 2**31 - 1]).tobytes())
    assert encoded["label"] == (1, "1\ta\n")
    for rows, message in (([(1, 2**31)], "32-bit"), ([(1, True)], "column type"),
                          ([(1, 2, 3)], "expected 2 columns"), ([(1, "2")], "column type")):
        with pytest.raises(SdyError, match=message):
            encoded_relations(prog, {"edge": rows})


@pytest.mark.souffle
@pytest.mark.skipif(shutil.which("souffle") is None, reason="souffle is not on PATH")
@pytest.mark.parametrize("compiled", [False, True])
def test_names_round_trip_through_souffle_as_data(tmp_path, monkeypatch, compiled):
    monkeypatch.setenv("SDY_DL_CACHE", str(tmp_path))
    out = get_engine("souffle", compiled=compiled).run(program(ECHO), echo_facts())
    assert (out["echo"], out["same"]) == expected_echo()


AWKWARD_MODULE = r'''
sdy.mesh @mesh = <["a\"b"=2, "c\\d"=2, "日本"=2, "x).\n"=1, ":- foo."=1]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a\"b"}, {"c\\d", "日本"}]>},
                %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  %1 = stablehlo.dot_general %0, %arg1, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
'''


@pytest.mark.parametrize("engine", ["python", "clingo", "souffle"])
def test_awkward_axis_names_propagate_as_in_shardy(engine):
    if engine == "souffle" and shutil.which("souffle") is None:
        pytest.skip("souffle is not on PATH")
    from oracle import assert_same, shardy
    from sdy_dl.ir import parse_module_text
    from sdy_dl.pipeline import make_options
    from sdy_dl.pipeline import propagate

    ours = propagate(parse_module_text(AWKWARD_MODULE, "<test>"), make_options(engine=engine)).print()
    assert_same(shardy(AWKWARD_MODULE, "sdy-propagation-pipeline"), ours)


@pytest.mark.parametrize("serves", [True, False])
def test_auto_runs_a_serving_binary_for_every_call_another_only_for_large_calls(monkeypatch,
                                                                                serves):
    import sdy_dl.engines.souffle_engine as souffle_engine
    import sdy_dl.engines.souffle_server as souffle_server
    from sdy_dl.engines import BINARY_MIN_FACTS, AutoEngine

    program = compile_stage("step", max_factors=4, basic=False, aggressive=True)
    engine = AutoEngine()
    ran = []
    monkeypatch.setattr(engine, "_binary", lambda program: "/cached/binary")
    monkeypatch.setattr(souffle_server, "server", lambda exe: object() if serves else None)
    monkeypatch.setattr(souffle_engine, "run_binary",
                        lambda exe, program, facts: ran.append(exe) or {})
    small = engine.run(program, {})
    assert ran == (["/cached/binary"] if serves else [])
    if not serves:
        assert small == engine.embedded.run(program, {})
    big = {"in_step": [(i, "aggressive", 0, 0, 1, 1) for i in range(BINARY_MIN_FACTS)]}
    engine.run(program, big)
    assert ran[-1:] == ["/cached/binary"] and len(ran) == 2 - (not serves)
