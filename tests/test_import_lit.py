"""Shardy's own import lit-test inputs, run through both implementations.

The inputs are read from a Shardy source tree at test time (nothing is
copied into this repository; :mod:`shardy_source` says where).  Each
``// -----`` chunk goes through Shardy's pass and sdy-dl's; the outputs must
be equal, or both must fail for the same reason (:func:`oracle.outcome`).
"""

from __future__ import annotations

import re

import pytest

from import_programs import ours, shardy
from oracle import outcome
from shardy_source import lit_or_skip

TEST_DIR = "shardy/dialect/sdy/transforms/import/test"

FILES = {
    "add_data_flow_edges.mlir": ("add-data-flow-edges", None, {}),
    "apply_sharding_constraints.mlir": ("apply-sharding-constraints", None, {}),
    "constant_or_scalar_splitter.mlir": ("constant-or-scalar-splitter", None, {}),
    "import_pipeline.mlir": ("import-pipeline", "sdy-import-pipeline{dedup-functions-fully=true}",
                             {"dedup_functions_fully": True}),
    "lift_inlined_meshes.mlir": ("lift-inlined-meshes", None, {}),
    "manual_axes_cleanup.mlir": ("manual-axes-cleanup", None, {}),
    "manual_axes_cleanup_failures.mlir": ("manual-axes-cleanup", None, {}),
    "propagate_sharding_from_func_to_call.mlir": ("propagate-sharding-from-func-to-call", None, {}),
    "remove_size_one_axes.mlir": ("remove-size-one-axes", None, {}),
    "sharding_group_constraints.mlir": ("sharding-group-import", None, {}),
    "sharding_group_import.mlir": ("sharding-group-import", None, {}),
}


@pytest.mark.parametrize("name", list(FILES))
def test_lit_file(name):
    text = lit_or_skip(name, TEST_DIR)
    pass_name, pipeline, extra = FILES[name]
    chunks = re.split(r"^// -----\s*$", text, flags=re.M)
    differ = []
    for i, chunk in enumerate(chunks):
        expected = outcome(lambda: shardy(chunk, pipeline or f"sdy-{pass_name}"), chunk)
        actual = outcome(lambda: ours(chunk, pass_name, **extra), chunk)
        if expected != actual:
            differ.append(i)
    assert not differ, f"{len(differ)}/{len(chunks)} chunks differ: {differ}"
