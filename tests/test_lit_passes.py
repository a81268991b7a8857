"""Shardy's lit-test inputs for the call, export and pipeline passes, run through
jaxlib's pass and sdy-dl's (options and ``-allow-unregistered-dialect`` as the
file's RUN line gives them).

The inputs are read from a Shardy source tree at test time (nothing is copied
into this repository; see :func:`test_import_lit.read_lit`).  Every
``// -----`` chunk jaxlib accepts must give the same module from sdy-dl;
a chunk jaxlib rejects must be rejected by sdy-dl too.  Skipped when no
source is found.
"""

from __future__ import annotations

import re

import pytest

from oracle import normalize, shardy
from sdy_dl.ir import parse_module_text
from sdy_dl.ir.context import allow_unregistered_dialects
from sdy_dl.passes import PassOptions, get_pass
from test_import_lit import read_lit

IMPORT = "shardy/dialect/sdy/transforms/import/test"
EXPORT = "shardy/dialect/sdy/transforms/export/test"
PROPAGATION = "shardy/dialect/sdy/transforms/propagation/test"

#: file -> (directory, sdy-dl pass, Shardy pass pipeline, extra options, allow unregistered)
FILES = {
    "import_func_calls.mlir": (IMPORT, "import-func-calls", "sdy-import-func-calls", {}, False),
    "import_func_calls_add_data_flow_edges_on_named_computations_false.mlir": (
        IMPORT, "import-func-calls",
        "sdy-import-func-calls{add-data-flow-edges-on-named-computations=false}",
        {"add_data_flow_edges_on_named_computations": False}, False),
    "propagate_to_func_results.mlir": (EXPORT, "propagate-to-func-results",
                                       "sdy-propagate-to-func-results", {}, True),
}


def _outcome(fn):
    try:
        return fn()
    except Exception:  # noqa: BLE001  (both sides failing is agreement)
        return "<error>"


def run_lit(name: str) -> tuple[list[int], int]:
    """(indices of the chunks that differ, number of chunks) of lit file ``name``."""
    directory, pass_name, pipeline, extra, unregistered = FILES[name]
    text = read_lit(name, directory)
    if text is None:
        pytest.skip("no Shardy source found (set SDY_DL_SHARDY_SRC)")
    chunks = re.split(r"^// -----\s*$", text, flags=re.M)
    differ = []
    allow_unregistered_dialects(unregistered)
    try:
        for i, chunk in enumerate(chunks):
            expected = _outcome(lambda: shardy(chunk, pipeline))
            actual = _outcome(lambda: normalize(get_pass(pass_name).run(
                parse_module_text(chunk, "<lit>"), PassOptions(extra=extra)).print()))
            if expected != actual:
                differ.append(i)
    finally:
        allow_unregistered_dialects(False)
    return differ, len(chunks)


@pytest.mark.parametrize("name", list(FILES))
def test_lit_file(name):
    differ, total = run_lit(name)
    assert not differ, f"{len(differ)}/{total} chunks differ: {differ}"
