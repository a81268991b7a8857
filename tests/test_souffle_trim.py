"""Trimming the C++ of ``souffle -g``: internal relations lose their wrappers,
Soufflé's I/O goes through the server object, and text the edits do not
recognise in full stays as it is."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from sdy_dl.engines.souffle_split import split
from sdy_dl.engines.souffle_trim import (IO_CALL, IO_THROUGH_SERVER, call_io_through_server,
                                         drop_internal_wrappers, trim)
from test_souffle_server import BOTH

pytestmark = [pytest.mark.souffle,
              pytest.mark.skipif(shutil.which("souffle") is None, reason="souffle is not on PATH")]


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("trim")
    (tmp / "both.dl").write_text(BOTH)
    subprocess.run([shutil.which("souffle"), "-w", "-g", str(tmp / "both.cpp"), str(tmp / "both.dl")],
                   check=True, capture_output=True)
    return (tmp / "both.cpp").read_text()


def test_only_internal_relations_lose_their_wrappers(generated):
    out = drop_internal_wrappers(generated)
    assert "wrapper_rel_hop2_" in generated and "wrapper_rel_hop2_" not in out
    for kept in ("edge", "label", "path", "hops2", "echo"):
        assert out.count(f"wrapper_rel_{kept}_") == generated.count(f"wrapper_rel_{kept}_") == 3
    assert len(generated.splitlines()) - len(out.splitlines()) == 3


def test_wrappers_stay_unless_all_three_lines_of_each_are_recognised(generated):
    lines = [line for line in generated.splitlines() if "wrapper_rel_hop2_" in line]
    assert len(lines) == 3
    for line in lines:   # the member, the initialiser, addRelation: each one changed
        changed = generated.replace(line, line.replace("wrapper_rel_hop2_", "wrapper_rel_hop2 _", 1))
        assert drop_internal_wrappers(changed) == changed


def test_io_goes_through_the_server_and_the_result_still_splits(generated):
    out = call_io_through_server(generated)
    assert IO_CALL in generated and IO_CALL not in out
    assert out.count(IO_THROUGH_SERVER) == generated.count(IO_CALL)
    parts = split(trim(generated), 2)
    assert parts is not None and "sdy_dl_io" in parts.declarations
    assert parts.runtime == split(generated, 2).runtime
    assert call_io_through_server("int x;\n") == "int x;\n"
