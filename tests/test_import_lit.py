"""Shardy's own import lit-test inputs, run through both implementations.

The inputs are read from a Shardy source tree at test time (nothing is
copied into this repository): ``$SDY_DL_SHARDY_SRC`` (a checkout, or a bare
git directory whose ``HEAD`` is read), defaulting to the local mirror.  Each
``// -----`` chunk goes through Shardy's pass and sdy-dl's; the outputs must
be equal, or both must fail.  Skipped when no source is found.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from import_programs import ours, shardy

TEST_DIR = "shardy/dialect/sdy/transforms/import/test"
DEFAULT_SRC = "/work/.mirror/openxla+shardy/repo"

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


def read_lit(name: str, test_dir: str = TEST_DIR) -> str | None:
    """The text of lit file ``test_dir/name`` of the Shardy source (None when absent)."""
    src = os.environ.get("SDY_DL_SHARDY_SRC", DEFAULT_SRC)
    path = os.path.join(src, test_dir, name)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return f.read()
    if os.path.isdir(src):
        proc = subprocess.run(["git", f"--git-dir={src}", "show", f"HEAD:{test_dir}/{name}"],
                              capture_output=True, text=True)
        if proc.returncode == 0:
            return proc.stdout
    return None


def _outcome(fn):
    try:
        return fn()
    except Exception:  # noqa: BLE001  (both sides failing is agreement)
        return "<error>"


@pytest.mark.parametrize("name", list(FILES))
def test_lit_file(name):
    text = read_lit(name)
    if text is None:
        pytest.skip("no Shardy source found (set SDY_DL_SHARDY_SRC)")
    pass_name, pipeline, extra = FILES[name]
    chunks = re.split(r"^// -----\s*$", text, flags=re.M)
    differ = []
    for i, chunk in enumerate(chunks):
        expected = _outcome(lambda: shardy(chunk, pipeline or f"sdy-{pass_name}"))
        actual = _outcome(lambda: ours(chunk, pass_name, **extra))
        if expected != actual:
            differ.append(i)
    assert not differ, f"{len(differ)}/{len(chunks)} chunks differ: {differ}"
