"""The whole pipeline on random modules with while loops, case ops,
optimization barriers, sharding constraints and calls
(``random_control_flow``), in the default mode and with
``dedup-functions-fully=true``: ``sdy-dl propagate`` equals jaxlib's
``sdy-propagation-pipeline``."""

from __future__ import annotations

import pytest

from oracle import assert_same, shardy
from random_control_flow import random_control_flow_module
from sdy_dl.ir import parse_module_text
from sdy_dl.pipeline import make_options
from sdy_dl.pipeline import propagate


def check(seed: int, dedup: bool) -> None:
    text = random_control_flow_module(seed)
    option = "{dedup-functions-fully=true}" if dedup else ""
    expected = shardy(text, "sdy-propagation-pipeline" + option)
    options = make_options({"dedup_functions_fully": dedup}, engine="clingo")
    assert_same(expected, propagate(parse_module_text(text, f"<seed {seed}>"), options).print())


@pytest.mark.parametrize("dedup", [False, True], ids=["default", "dedup"])
@pytest.mark.parametrize("seed", range(4))
def test_random_control_flow_modules(seed, dedup):
    check(seed, dedup)


@pytest.mark.slow
@pytest.mark.parametrize("dedup", [False, True], ids=["default", "dedup"])
@pytest.mark.parametrize("seed", range(4, 150))
def test_many_random_control_flow_modules(seed, dedup):
    check(seed, dedup)
