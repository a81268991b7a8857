"""``sdy-dl emit``: a standalone Soufflé program whose relations rebuild the same module."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from facts_dirs import read_facts_dir, write_relations_dir
from jax_programs import lowered
from sdy_dl.cli import main
from sdy_dl.datalog.program import Program, parse_declarations
from sdy_dl.engines import get_engine

PROGRAMS = ["mlp", "while_loop", "shard_map", "attention"]


def emit(tmp_path, name: str):
    source = tmp_path / f"{name}.mlir"
    source.write_text(lowered(name))
    out = tmp_path / "emitted"
    result = CliRunner().invoke(main, ["emit", str(source), "--out-dir", str(out), "--engine", "clingo"])
    assert result.exit_code == 0, result.output
    return source, out


def propagate(source, *args) -> str:
    result = CliRunner().invoke(main, ["propagate", str(source), "--engine", "clingo", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def emitted_program(out) -> Program:
    text = (out / "program.dl").read_text()
    return Program(text, parse_declarations(text))


@pytest.mark.parametrize("name", PROGRAMS)
def test_relations_of_the_emitted_program_rebuild_the_module(tmp_path, name):
    source, out = emit(tmp_path, name)
    program = emitted_program(out)
    relations = get_engine("clingo").run(program, read_facts_dir(program, str(out)))
    write_relations_dir(program, relations, str(out))
    assert propagate(source, "--relations", str(out)) == propagate(source)


@pytest.mark.souffle
@pytest.mark.skipif(shutil.which("souffle") is None, reason="souffle is not on PATH")
@pytest.mark.parametrize("name", PROGRAMS[:2])
def test_souffle_runs_the_emitted_program_standalone(tmp_path, name):
    source, out = emit(tmp_path, name)
    proc = subprocess.run(["souffle", "-w", "-F", str(out), "-D", str(out), str(out / "program.dl")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert os.path.getsize(out / "step_mesh.csv") > 0
    assert propagate(source, "--relations", str(out)) == propagate(source)


def test_relations_from_another_module_are_rejected(tmp_path):
    source, out = emit(tmp_path, "mlp")
    other = tmp_path / "other.mlir"
    other.write_text(lowered("attention"))
    result = CliRunner().invoke(main, ["propagate", str(other), "--relations", str(out), "-o",
                                       str(tmp_path / "x.mlir")])
    assert result.exit_code == 1
    assert not (tmp_path / "x.mlir").exists()


def test_emit_of_bad_module_fails_without_output(tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text("not mlir")
    out = tmp_path / "never"
    result = CliRunner().invoke(main, ["emit", str(bad), "--out-dir", str(out)])
    assert result.exit_code == 1 and "sdy-dl: error:" in result.output
    assert not out.exists()
