"""The op index (``sdy_dl.ir.op_index``): a module's walks, read once and kept
by the passes that keep them valid (``Module.invalidate(ops_kept=True)``).  Every walk a module object
holds must be the walk of its MLIR as it is: checked before every stage of
the pipeline on real JAX programs (calls, loops, shard_map, constants)."""

from __future__ import annotations

import pytest

import call_programs
import jax_programs
from sdy_dl.ir.context import mlir_context
from sdy_dl.ir.loader import parse_module_text
from sdy_dl.ir.mlir_ops import module_ops
from sdy_dl.ir.op_index import OpIndex, op_index, ops_named, ops_of
from sdy_dl.ir.walk import key, walk_named, walk_post, walk_pre
from sdy_dl.passes import PassOptions, get_pass
from sdy_dl.pipeline import make_options, propagate


def stale_walks(module) -> list[str]:
    """The walks ``module``'s op index holds that are not those of its MLIR now."""
    index = module.walks
    bad = []
    with mlir_context():
        tops = {key(top): top for top in module_ops(module)}
        for (k, post), (ops, names) in index._walks.items():
            top = tops.get(k)
            if top is None:
                bad.append(f"a walk of an op no longer at top level ({names[0]})")
                continue
            fresh = walk_post(top) if post else walk_pre(top)
            if [key(op) for op in ops] != [key(op) for op in fresh] \
                    or names != [op.name for op in fresh]:
                bad.append(f"the {'post' if post else 'pre'}-order walk of {names[-1 if post else 0]}")
    return bad


CASES = [("jax", "training_step"), ("jax", "grad_scan_helpers"), ("jax", "shard_map"), ("jax", "shard_map_scan_pipeline"),
         ("jax", "while_loop"), ("jax", "explicit_unreduced"), ("calls", "scan_calls"),
         ("calls", "grad_of_calls"), ("calls", "helper_with_constraint")]


def _text(source: str, name: str) -> str:
    return (jax_programs if source == "jax" else call_programs).lowered(name)


@pytest.mark.parametrize("mode", ["default", "dedup", "collectives"])
@pytest.mark.parametrize("source,name", CASES)
def test_every_stage_is_handed_walks_of_its_module_as_it_is(source, name, mode):
    extra = {"dedup_functions_fully": mode == "dedup",
             "enable_insert_explicit_collectives": mode == "collectives"}
    options = make_options(extra)
    held = []

    def before(stage, module):
        assert stale_walks(module) == [], f"before {stage}"
        if module.walks._walks:
            held.append(stage)
    out = propagate(parse_module_text(_text(source, name)), options, before=before)
    assert stale_walks(out) == []
    assert held, "no stage was handed an op index"


NESTED = """
sdy.mesh @mesh = <["a"=2]>
func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%iterArg = %arg0, %i = %c) : tensor<8xf32>, tensor<i32>
    cond {
      %1 = stablehlo.compare LT, %i, %c : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %1 = sdy.named_computation<"inner">(%iterArg) (%x: tensor<8xf32>) {
        %2 = stablehlo.add %x, %x : tensor<8xf32>
        sdy.return %2 : tensor<8xf32>
      } : (tensor<8xf32>) -> tensor<8xf32>
      %3 = func.call @f(%1) : (tensor<8xf32>) -> tensor<8xf32>
      stablehlo.return %3, %i : tensor<8xf32>, tensor<i32>
    }
  %4 = sdy.named_computation<"outer">(%0#0) (%y: tensor<8xf32>) {
    %5 = sdy.named_computation<"deep">(%y) (%z: tensor<8xf32>) {
      sdy.return %z : tensor<8xf32>
    } : (tensor<8xf32>) -> tensor<8xf32>
    sdy.return %5 : tensor<8xf32>
  } : (tensor<8xf32>) -> tensor<8xf32>
  %dead = stablehlo.negate %4 : tensor<8xf32>
  return %4 : tensor<8xf32>
}
func.func private @f(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.abs %arg0 : tensor<8xf32>
  return %0 : tensor<8xf32>
}
"""

NAMES = [("func.call",), ("sdy.named_computation",), ("stablehlo.add", "func.call"),
         ("sdy.named_computation", "stablehlo.return"), ("stablehlo.while", "sdy.return")]


@pytest.mark.parametrize("first", [False, True])
def test_queries_give_the_walks_of_the_mlir(first):
    """Whichever order was read first, ``ops_named`` and ``ops_of`` give what
    the walks give (region-less ops from the other order's walk, ops with
    regions -- named computations nest here -- from their own)."""
    module = parse_module_text(NESTED)
    with mlir_context():
        for top in module_ops(module):
            op_index(module).walk(top, first)
        for names in NAMES:
            for post in (False, True):
                want = [key(op) for op in walk_named(module.mlir, names, post=post)]
                assert [key(op) for op in ops_named(module, names, post=post)] == want
        for top in module_ops(module):
            for post in (False, True):
                want = walk_post(top) if post else walk_pre(top)
                assert [key(op) for op in ops_of(module, top, post)] == [key(op) for op in want]


def test_region_ops_are_not_served_from_the_other_order():
    """Named computations nested in each other come in another relative order
    in post-order than in pre-order: the post-order walk is read for them."""
    module = parse_module_text(NESTED)
    with mlir_context():
        main = module_ops(module)[1]
        op_index(module).walk(main, False)
        found = [str(op.attributes["name"]) for op in ops_named(module, ("sdy.named_computation",),
                                                               post=True)]
        assert found == ['"inner"', '"deep"', '"outer"']
        assert op_index(module).known(main, True)


def test_the_model_gives_the_index_of_the_propagated_module():
    """User-priority propagation erases the dead negate: the index it builds from
    its model is the walks of what is left."""
    module = get_pass("user-priority-propagate").run(parse_module_text(NESTED), PassOptions())
    with mlir_context():
        tops = module_ops(module)
        # (made from the model when first asked for)
        assert not module.walks._walks and all(module.walks.known(top, post)
                                               for top in tops for post in (False, True))
        for top in tops:
            module.walks.walk(top, True)
    assert module.walks._walks and stale_walks(module) == []
    with mlir_context():
        assert "stablehlo.negate" not in {op.name for op in walk_pre(module.mlir.operation)}
        fresh = OpIndex.from_model(module, set())   # (re-indexed: nothing erased since)
        for top in tops:
            fresh.walk(top)
    assert fresh._walks.keys() == module.walks._walks.keys()
    assert all([key(op) for op in fresh._walks[k][0]] == [key(op) for op in w[0]]
               for k, w in module.walks._walks.items())


def test_passes_that_erase_hand_on_an_index_without_the_erased_ops():
    """symbol-dce forgets the functions it erases; the merger takes the constants
    it merges out of the post-order walks and drops the pre-order ones."""
    text = NESTED.replace("func.func private @f", "func.func private @unused(%a: tensor<8xf32>) "
                          "-> tensor<8xf32> {\n  return %a : tensor<8xf32>\n}\n"
                          "func.func private @f")
    module = parse_module_text(text)
    with mlir_context():
        for top in module_ops(module):
            op_index(module).walk(top, False)
            op_index(module).walk(top, True)
        tops = len(module_ops(module))
    walks = module.walks
    out = get_pass("symbol-dce").run(module, PassOptions())
    assert out.walks is walks and stale_walks(out) == []
    assert len(out.walks._walks) == 2 * (tops - 1)   # (@unused erased)

    merged = parse_module_text("""
func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %c = sdy.constant dense<1.0> : tensor<8xf32>
  %d = sdy.constant dense<1.0> : tensor<8xf32>
  %0 = stablehlo.add %arg0, %c : tensor<8xf32>
  %1 = stablehlo.add %0, %d : tensor<8xf32>
  return %1 : tensor<8xf32>
}
""")
    with mlir_context():
        op_index(merged).walk(module_ops(merged)[0], False)
    walks = merged.walks
    out = get_pass("constant-or-scalar-merger").run(merged, PassOptions())
    assert not out.is_indexed() and out.walks is walks
    assert stale_walks(out) == [] and not any(not post for _, post in out.walks._walks)
    with mlir_context():
        assert [op.name for op in ops_of(out, module_ops(out)[0], True)].count("sdy.constant") == 1


def test_a_pass_that_adds_ops_drops_the_index():
    module = parse_module_text(NESTED)
    with mlir_context():
        for top in module_ops(module):
            op_index(module).walk(top, True)
    walks = module.walks
    out = get_pass("export-named-computations").run(module, PassOptions())
    assert out.walks is not walks and not out.walks._walks and out.walks.names is None


def test_an_index_is_per_module():
    module, other = parse_module_text(NESTED), parse_module_text(NESTED)
    assert op_index(module) is op_index(module) and op_index(other) is not op_index(module)
    assert isinstance(op_index(module), OpIndex)


@pytest.mark.parametrize("program", ["grad_scan_helpers", "shard_map_scan_pipeline"])
def test_the_index_from_the_model_is_its_walk_without_the_erased_ops(program):
    """``from_model``'s walks are the model walk's (``walk_model``), in both orders,
    without the erased ops and what they hold."""
    import random

    from sdy_dl.ir.walk import walk_model

    module = parse_module_text(jax_programs.lowered(program))
    ops = module.ops
    nested = [op for op in ops if op.parent is not None]
    assert any(op.regions for op in nested)   # (nested regions are walked)
    for erased in [set(), {op.oid for op in random.Random(0).sample(nested, 5)},
                   {op.oid for op in nested if op.regions}]:
        with mlir_context():
            index = OpIndex.from_model(module, erased)
        expected = {}
        for top in ops:
            if top.parent is not None or top.oid in erased:
                continue
            pre, post = [], []
            for op, entering in walk_model(top, lambda op: op.oid not in erased):
                if op.oid not in erased:
                    (pre if entering else post).append(op)
            expected[(key(top.mlir), False)] = ([o.mlir for o in pre], [o.name for o in pre])
            expected[(key(top.mlir), True)] = ([o.mlir for o in post], [o.name for o in post])
        tops = {key(top.mlir): top.mlir for top in ops if top.parent is None}
        with mlir_context():
            found = {k: index.walk(tops[k[0]], k[1]) for k in expected}
        assert found == expected and index._walks == expected
