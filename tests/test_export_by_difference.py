"""The export by difference (:mod:`sdy_dl.passes.export.by_difference`) against
the passes run in full, on random edits of main's arguments (the what-ifs that
start from the first run's imported module) of random dataflow modules (with
the dots and concatenates insert-explicit-reshards reshards) and random
control-flow modules (while, case, barriers, calls and named computations):
every what-if's output equals a full ``propagate`` of its edited input, and
some of them were made by difference.  A statement of what a pass reads
(:mod:`sdy_dl.passes.export.export_reads`) with one op name left out makes
some outputs wrong: the statements are what the exactness rests on.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from random_control_flow import random_control_flow_module
from random_modules import random_module
from sdy_dl import propagate
from sdy_dl.audit.whatif import Edit
from sdy_dl.passes.export import by_difference, export_reads
from test_whatif_random import _random_sharding, _target


def _arg_edit(result, rng: random.Random) -> list[Edit]:
    """One edit of a main argument of ``result``: a random sharding, or unset."""
    audit = result.audit
    axes = [a.name for a in audit.propagated.meshes["mesh"].axes]
    args = [v for v in audit.outputs.values if v.value is not None and v.func == "main"
            and v.names[0].startswith("%arg") and v.sharding is not None]
    if not args:
        return []
    value = rng.choice(args)
    if rng.random() < 0.2 and _target(audit, value.name, "unset"):
        return [Edit("unset", value.name)]
    return [Edit("set", value.name, _random_sharding(rng, axes, value.sharding.rank))]


def _dataflow(seed: int) -> str:
    return random_module(seed, 12, (("dot",), ("concat",), ())[seed % 3])


def _whatifs(seeds, module, monkeypatch) -> tuple[int, list]:
    """(how many what-ifs were made by difference, the edits whose output is not a
    full propagate's) over three what-ifs per seed."""
    made: list[bool] = []
    export = by_difference.export_by_difference

    def spy(*args):
        out = export(*args)
        made.append(out is not None)
        return out
    monkeypatch.setattr(by_difference, "export_by_difference", spy)
    wrong = []
    for seed in seeds:
        rng = random.Random(seed)
        before = propagate(module(seed), engine="python")
        for _ in range(3):
            edits = _arg_edit(before, rng)
            if not edits:
                continue
            after, _ = before.whatif(edits)
            if after.text != propagate(after.edited_input, engine="python").text:
                wrong.append((seed, edits))
    return sum(made), wrong


def test_random_argument_edits_of_dataflow_modules(monkeypatch):
    made, wrong = _whatifs(range(24), _dataflow, monkeypatch)
    assert not wrong
    assert made >= 10, made


def test_random_argument_edits_of_control_flow_modules(monkeypatch):
    made, wrong = _whatifs(range(20), random_control_flow_module, monkeypatch)
    assert not wrong
    assert made >= 3, made


def test_a_statement_left_out_is_caught(monkeypatch):
    """insert-explicit-reshards stated without the concatenates it reads the
    operands of (it reshards those sharded unlike their result): what-ifs whose
    changed value a concatenate reads are then made by difference, wrongly."""
    stated = export_reads.READS["insert-explicit-reshards"]
    less = frozenset({"stablehlo.concatenate"})
    monkeypatch.setitem(export_reads.READS, "insert-explicit-reshards", dataclasses.replace(
        stated, reads_own=stated.reads_own - less, reads_operands=stated.reads_operands - less))
    _, wrong = _whatifs(range(1, 24, 3), _dataflow, monkeypatch)
    assert wrong


@pytest.mark.slow
def test_random_argument_edits_slow(monkeypatch):
    made, wrong = _whatifs(range(100, 200), _dataflow, monkeypatch)
    assert not wrong
    made, wrong = _whatifs(range(100, 160), random_control_flow_module, monkeypatch)
    assert not wrong
