"""Engine parity: Soufflé and clingo give byte-identical modules (skips without souffle)."""

from __future__ import annotations

import shutil

import pytest

import import_programs
import test_propagate
from jax_programs import lowered
from oracle import ours

pytestmark = [pytest.mark.souffle,
              pytest.mark.skipif(shutil.which("souffle") is None, reason="souffle is not on PATH")]

MODULES = {**test_propagate.CASES,
           **{n: lowered(n) for n in ("mlp", "attention", "convnet", "shard_map", "while_loop")}}


@pytest.mark.parametrize("strategy", ["basic", "aggressive"])
@pytest.mark.parametrize("name", sorted(MODULES))
def test_souffle_interpreted_equals_clingo(name, strategy):
    text = MODULES[name]
    assert ours(text, f"{strategy}-propagate", engine="souffle") == \
        ours(text, f"{strategy}-propagate", engine="clingo")


@pytest.mark.parametrize("name", ["training_step", "gather_scatter"])
def test_souffle_compiled_equals_clingo(name):
    text = lowered(name)
    assert ours(text, "aggressive-propagate", engine="souffle", compiled=True) == \
        ours(text, "aggressive-propagate", engine="clingo")


@pytest.mark.parametrize("name", ["shard_alike", "scan", "constraint_chain"])
def test_import_pipeline_souffle_equals_clingo(name):
    text = import_programs.lowered(name)
    assert ours(text, "import-pipeline", engine="souffle", options={"dedup_functions_fully": True}) == \
        ours(text, "import-pipeline", engine="clingo", options={"dedup_functions_fully": True})


@pytest.mark.parametrize("name", ["mlp", "while_loop"])
def test_whole_pipeline_souffle_equals_clingo(name):
    from sdy_dl.ir import parse_module_text
    from sdy_dl.pipeline import make_options
    from sdy_dl.pipeline import propagate

    def run(engine):
        return propagate(parse_module_text(lowered(name)), make_options(engine=engine)).print()
    assert run("souffle") == run("clingo")
