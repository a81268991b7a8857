"""Datalog stages are folders with a main.dl.j2; input relations, and only they, are named in_*."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sdy_dl.datalog.compiler import available_stages, compile_stage
from sdy_dl.datalog.program import check_input_names, parse_declarations
from sdy_dl.errors import SdyError
from sdy_dl.resources import datalog_dir

#: Template parameters each stage needs (variants included).
PARAMS = {"step": [{"max_factors": 3}],
          "constant_or_scalar_splitter": [{"variant": "or_scalar"}, {"variant": "legacy"}],
          "unflatten_call_graph": [{"dedup": False}, {"dedup": True}],
          "insert_explicit_reshards": [{"phase": "project"}, {"phase": "out"}],
          "find_common_axes_heuristic": [{"picks": 1}, {"picks": 4}]}


def test_every_stage_is_a_folder_with_a_main():
    stages = available_stages()
    assert "step" in stages and "op_priorities" in stages
    assert not list(datalog_dir().glob("*.dl.j2")), "stage templates belong in datalog/<stage>/"
    for stage in stages:
        assert (datalog_dir() / stage / "main.dl.j2").is_file()


@pytest.mark.parametrize("stage", available_stages())
def test_every_stage_compiles_with_in_names(stage):
    for params in PARAMS.get(stage, [{}]):
        program = compile_stage(stage, **params)   # the compiler checks the in_* names
        inputs = [d for d in program.decls.values() if d.is_input]
        assert inputs and all(d.name.startswith("in_") for d in inputs)


@pytest.mark.parametrize("text, message", [
    ("// doc\n.decl edge(a: number)\n.input edge\n", "input relation edge is not named in_*"),
    ("// doc\n.decl in_x(a: number)\n// doc\n.decl in_y(a: number)\n.input in_x\n"
     "in_y(A) :- in_x(A).\n", "relation in_y is named in_* but is not an input"),
])
def test_in_names_are_checked(text, message):
    with pytest.raises(SdyError, match=re.escape(message)):
        check_input_names(parse_declarations(text, source="t.dl"), source="t.dl")


#: Stages the propagation runs (``sdy_dl/propagation/``), not a pass.
PROPAGATION_STAGES = {"step", "op_priorities", "user_priority_propagation", "sharding_group_map"}
#: Stages the audit runs (``sdy_dl/audit/``), not a pass.
AUDIT_STAGES = {"why_not"}


def _declared_stages() -> dict[str, list[str]]:
    """Stage name -> the pass modules declaring it (``Stage("name")``)."""
    import ast

    from sdy_dl.passes import Stage

    found: dict[str, list[str]] = {}
    root = Path(__file__).resolve().parent.parent / "sdy_dl" / "passes"
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == Stage.__name__:
                assert isinstance(node.args[0], ast.Constant), path
                found.setdefault(node.args[0].value, []).append(path.stem)
    return found


def test_every_pass_stage_is_declared_by_the_pass_it_is_named_after():
    """A pass's Datalog is found from the pass file: each stage is declared once,
    by the module named like it (a part of a pass, collective_inserter, by the
    pass that runs it; insert-explicit-reshards's by the module of its facts)."""
    declared = _declared_stages()
    parts = {"collective_inserter": "reshard_to_collectives",
             "insert_explicit_reshards": "explicit_reshards_projection"}
    assert set(declared) == set(available_stages()) - PROPAGATION_STAGES - AUDIT_STAGES
    for stage, modules in declared.items():
        assert modules == [parts.get(stage, stage)], (stage, modules)


def test_passes_run_stages_only_through_their_declarations():
    """No stage name is written at a call (``run_analysis("...")``)."""
    import ast

    root = Path(__file__).resolve().parent.parent / "sdy_dl" / "passes"
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "run_analysis":
                assert not isinstance(node.args[0], ast.Constant), path


def test_a_rendered_program_is_keyed_by_jinja2s_package(monkeypatch):
    """Another Jinja2 may render other text: the key of a rendered stage changes with
    Jinja2's package file, as with a template's."""
    import os

    import jinja2

    from sdy_dl import resources
    from sdy_dl.datalog import compiler

    def key() -> str:
        for cached in (compiler._compile_cached, compiler._templates_digest,
                       resources.code_digest):
            cached.cache_clear()
        return compile_stage("step", max_factors=3).key

    before = key()
    stamp = resources.file_stamp
    jinja = os.path.realpath(jinja2.__file__)
    monkeypatch.setattr(resources, "file_stamp", lambda path: stamp(path) + (
        b"another release" if os.path.realpath(path) == jinja else b""))
    try:
        assert key() != before
    finally:
        monkeypatch.undo()
        assert key() == before
