"""Differential tests of the import passes on real JAX programs.

Every program of :mod:`import_programs` (loops, conditionals, remat,
shard_map fully and partially manual, sharding-constraint chains,
shard_alike, constants) and of the shared :mod:`jax_programs` is lowered on
the 2x4 CPU mesh, then each import pass -- and the import pipeline in both
modes -- must print exactly what Shardy's pass prints.  The passes that run
after ``add-data-flow-edges`` in the pipeline are also checked on the
module as the pipeline hands it to them.
"""

from __future__ import annotations

import pytest

import import_programs
import jax_programs
from import_programs import check, shardy

PASSES = ["lift-inlined-meshes", "remove-size-one-axes", "propagate-sharding-from-func-to-call",
          "constant-or-scalar-splitter", "manual-axes-cleanup", "add-data-flow-edges",
          "apply-sharding-constraints", "sharding-group-import"]

PROGRAMS = [("import", n) for n in import_programs.PROGRAMS] + \
           [("shared", n) for n in jax_programs.PROGRAMS]

# Shardy's import pipeline up to (and including) add-data-flow-edges.
PREFIX = ("symbol-dce,sdy-lift-inlined-meshes,sdy-remove-size-one-axes,"
          "sdy-propagate-sharding-from-func-to-call,sdy-constant-or-scalar-splitter,symbol-dce,"
          "sdy-manual-axes-cleanup,sdy-add-data-flow-edges")


def program(source: str, name: str) -> str:
    return (import_programs if source == "import" else jax_programs).lowered(name)


def _ids(p):
    return f"{p[0]}:{p[1]}"


@pytest.mark.parametrize("prog", PROGRAMS, ids=_ids)
@pytest.mark.parametrize("name", PASSES)
def test_pass_on_jax_program(prog, name):
    check(program(*prog), name)


@pytest.mark.parametrize("prog", PROGRAMS, ids=_ids)
@pytest.mark.parametrize("dedup", [False, True], ids=["default", "dedup"])
def test_import_pipeline_on_jax_program(prog, dedup):
    pipeline = f"sdy-import-pipeline{{dedup-functions-fully={'true' if dedup else 'false'}}}"
    check(program(*prog), "import-pipeline", pipeline, dedup_functions_fully=dedup)


@pytest.mark.parametrize("prog", PROGRAMS, ids=_ids)
@pytest.mark.parametrize("name", ["apply-sharding-constraints", "sharding-group-import"])
def test_late_passes_after_data_flow_edges(prog, name):
    """The constraint and group passes on the module with data-flow edges."""
    check(shardy(program(*prog), PREFIX), name)
