"""The export by difference (:mod:`sdy_dl.passes.export.by_difference`) against
the passes run in full, on random edits of main's arguments (the what-ifs that
start from the first run's imported module) of random dataflow modules (with
the dots and concatenates insert-explicit-reshards reshards) and random
control-flow modules (while, case, barriers, calls and named computations):
every what-if's output equals a full ``propagate`` of its edited input, and
some of them were made by difference; and a crafted module whose edits split
and join the merger's groups of scalar broadcasts
(:mod:`sdy_dl.passes.export.merge_groups`), against the full pipeline and
Shardy's.  A statement of what a pass reads
(:mod:`sdy_dl.passes.export.export_reads`) with one op name left out makes
some outputs wrong: the statements are what the exactness rests on.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from oracle import assert_same, normalize, shardy
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


def _spy(monkeypatch) -> list[bool]:
    """Whether each export by difference made an output (appended as they run)."""
    made: list[bool] = []
    export = by_difference.export_by_difference

    def spy(*args):
        out = export(*args)
        made.append(out is not None)
        return out
    monkeypatch.setattr(by_difference, "export_by_difference", spy)
    return made


def random_whatifs(seeds, module):
    """(seed, first result, edits, what-if result, its changes) of three random
    main-argument what-ifs per seed of ``module(seed)``."""
    for seed in seeds:
        rng = random.Random(seed)
        before = propagate(module(seed), engine="python")
        for _ in range(3):
            edits = _arg_edit(before, rng)
            if edits:
                yield (seed, before, edits, *before.whatif(edits))


def _whatifs(seeds, module, monkeypatch) -> tuple[int, list]:
    """(how many what-ifs were made by difference, the edits whose output is not a
    full propagate's) over three what-ifs per seed."""
    made = _spy(monkeypatch)
    wrong = [(seed, edits) for seed, _, edits, after, _ in random_whatifs(seeds, module)
             if after.text != propagate(after.edited_input, engine="python").text]
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


def test_the_replays_hand_over_names_every_op_that_differs(monkeypatch):
    """The ops the what-if's replaying propagation hands over as changed are exactly
    those whose attributes differ from the first propagated module's (every op
    compared), on the random what-ifs of both kinds of module."""
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.walk import walk_pre

    seen = []
    export = by_difference.export_by_difference

    def spy(record, module, options, stages, changes=None):
        if changes is not None and record is not None and record.output is not None:
            with mlir_context():
                ops = walk_pre(module.mlir.operation)
                if [op.name for op in ops] == record.names:
                    every = by_difference.differences(record, ops)[0]
                    seen.append((every, by_difference.differences(record, ops, changes,
                                                                  options)[0]))
        return export(record, module, options, stages, changes)
    monkeypatch.setattr(by_difference, "export_by_difference", spy)
    _whatifs(range(12), _dataflow, monkeypatch)
    _whatifs(range(12), random_control_flow_module, monkeypatch)
    assert len(seen) >= 20
    assert all(every == handed for every, handed in seen)


#: Two equal scalar broadcasts, each multiplied by one argument: the merger merges
#: them when the arguments are sharded alike.
TWO_BROADCASTS = """sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [ARG1]>})
    -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %c = stablehlo.constant dense<2.0> : tensor<f32>
  %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<8x8xf32>
  %1 = stablehlo.multiply %0, %arg0 : tensor<8x8xf32>
  %c2 = stablehlo.constant dense<2.0> : tensor<f32>
  %2 = stablehlo.broadcast_in_dim %c2, dims = [] : (tensor<f32>) -> tensor<8x8xf32>
  %3 = stablehlo.multiply %2, %arg1 : tensor<8x8xf32>
  return %1, %3 : tensor<8x8xf32>, tensor<8x8xf32>
}"""


def _merge_whatif(first: str, edit: str) -> tuple:
    """(the what-if of setting ``%arg1`` to ``edit`` on TWO_BROADCASTS with ``%arg1``
    sharded ``first``, the broadcasts in the first output and in the edited one)."""
    before = propagate(TWO_BROADCASTS.replace("ARG1", first), engine="python")
    after, _ = before.whatif([Edit("set", "%arg1", f"<@mesh, [{edit}]>")])
    return after, before.text.count("broadcast_in_dim"), after.text.count("broadcast_in_dim")


@pytest.mark.parametrize("first, edit, counts", [
    ('{"a"}, {}', '{}, {"b"}', (1, 2)),    # a group splits: a broadcast is made again
    ('{}, {"b"}', '{"a"}, {}', (2, 1)),    # two groups join: one broadcast goes
])
def test_split_and_joined_merger_groups(monkeypatch, first, edit, counts):
    made = _spy(monkeypatch)
    after, *found = _merge_whatif(first, edit)
    assert tuple(found) == counts
    assert made == [True]
    assert after.text == propagate(after.edited_input, engine="python").text
    assert_same(shardy(after.edited_input, "sdy-propagation-pipeline"), normalize(after.text))


def test_a_merge_statement_left_out_is_caught(monkeypatch):
    """The merger stated without the broadcasts it merges: a changed broadcast is then
    rewritten where it stands, and the one the merger would merge stays."""
    stated = export_reads.READS["constant-or-scalar-merger"]
    monkeypatch.setitem(export_reads.READS, "constant-or-scalar-merger",
                        dataclasses.replace(stated, merges=frozenset()))
    made = _spy(monkeypatch)
    after, _, _ = _merge_whatif('{}, {"b"}', '{"a"}, {}')
    assert made == [True]
    assert after.text != propagate(after.edited_input, engine="python").text


@pytest.mark.slow
def test_random_argument_edits_slow(monkeypatch):
    made, wrong = _whatifs(range(100, 200), _dataflow, monkeypatch)
    assert not wrong
    made, wrong = _whatifs(range(100, 160), random_control_flow_module, monkeypatch)
    assert not wrong


@pytest.mark.parametrize("seed", [0, 1])
def test_a_modules_ops_from_its_model_are_its_walk(seed):
    """The export by difference takes a propagated module's ops from its model when
    it holds one (``_walked``): the same ops and names, in the same order, as a
    walk of its MLIR; an invalidated module is walked."""
    from sdy_dl.ir import parse_module_text
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.walk import key, walk_pre

    module = parse_module_text(random_control_flow_module(seed), "m.mlir")
    with mlir_context():
        walked = walk_pre(module.mlir.operation)
        for indexed in (True, False):
            if indexed:
                module.ops
            else:
                module.invalidate()
            assert module.is_indexed() == indexed
            ops, names = by_difference._walked(module)
            assert [key(op) for op in ops] == [key(op) for op in walked]
            assert names == [op.name for op in walked]
            assert all(type(op) is type(walked[0]) for op in ops)


@pytest.mark.parametrize("seed", [2, 3])
def test_the_first_modules_ops_found_by_their_places_are_its_walks(seed):
    """``ExportRecord.input_op`` finds an op of its copy of the first propagated
    module by the places of its model op's ancestors: the op the copy's walk has
    at that number, for every op (nested ones too)."""
    from sdy_dl.ir import parse_module_text
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.walk import key, walk_pre

    module = parse_module_text(random_control_flow_module(seed), "m.mlir")
    module.ops
    record = by_difference.ExportRecord(module)
    with mlir_context():
        walked = walk_pre(record._input)
        assert any(op.parent is not None and op.parent.name != "builtin.module"
                   for op in walked[1:])
        for i in range(1, len(walked)):
            found = record.input_op(i, module)
            assert key(found) == key(walked[i]) and found.name == walked[i].name
    assert record._input_ops is None   # (never walked)


def test_an_op_is_found_by_its_place_after_another_modules_top_level_ops():
    """``ExportRecord.input_op`` asked of a module whose top-level ops are
    numbered otherwise (a shorter function before main) finds no op of another
    name (:class:`NotLocal`), and then the recorded module's own ops again:
    the top-level numbers it keeps are checked, not taken from the first
    module asked of."""
    from sdy_dl.ir import parse_module_text
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.walk import key, walk_pre

    main = """
  func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<8xf32>
    %1 = stablehlo.multiply %0, %0 : tensor<8xf32>
    return %1 : tensor<8xf32>
  }"""
    helper = """
  func.func private @f(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.negate %arg0 : tensor<8xf32>
    %1 = stablehlo.abs %0 : tensor<8xf32>
    %2 = stablehlo.sine %1 : tensor<8xf32>
    return %2 : tensor<8xf32>
  }"""
    short = """
  func.func private @g(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    return %arg0 : tensor<8xf32>
  }"""
    recorded = parse_module_text("module {" + main + helper + "\n}", "a.mlir")
    other = parse_module_text("module {" + short + main + "\n}", "b.mlir")
    recorded.ops, other.ops
    record = by_difference.ExportRecord(recorded)
    with mlir_context():
        walked = walk_pre(record._input)
        with pytest.raises(by_difference.NotLocal):   # (its add, in @main, is second)
            record.input_op(4, other)
        for i in range(1, len(walked)):
            found = record.input_op(i, recorded)
            assert key(found) == key(walked[i]) and found.name == walked[i].name
