"""Datalog stages are folders with a main.dl.j2; input relations, and only they, are named in_*."""

from __future__ import annotations

import re

import pytest

from sdy_dl.datalog.compiler import available_stages, compile_stage
from sdy_dl.datalog.program import check_input_names, parse_declarations
from sdy_dl.errors import SdyError
from sdy_dl.resources import datalog_dir

#: Template parameters each stage needs (variants included).
PARAMS = {"step": [{"max_factors": 3}], "import_constants": [{"variant": "or_scalar"},
                                                             {"variant": "legacy"}],
          "calls_unflatten": [{"dedup": False}, {"dedup": True}],
          "explicit_reshards": [{"phase": "project"}, {"phase": "out"}]}


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
