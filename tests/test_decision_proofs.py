"""``explain --proof`` reaches the rules of the Datalog stages that decide rewrites:
a value whose sharding a user priority closed and re-opened shows the
``user_priority_propagation`` rules behind each write, and a value a sharding
group's sync wrote shows ``sharding_group_map``'s."""

from __future__ import annotations

import pytest

from sdy_dl.audit import Audit
from sdy_dl.ir import parse_module_text
from sdy_dl.pipeline import make_options

USER_PRIORITIES = """sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}p1, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}p0, {?}]>}, %arg2: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}p2, {"c"}p1]>}) -> (tensor<8x8xf32>) {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  %1 = stablehlo.multiply %0, %arg2 : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
"""

STAGE = "datalog/user_priority_propagation/main.dl.j2"


def _rules(proof) -> set[str]:
    return {proof.rule.split(":")[0]} | {r for c in proof.children for r in _rules(c)}


@pytest.mark.parametrize("engine", ["python", "clingo"])
def test_user_priority_rewrites_have_proofs(engine):
    audit = Audit(parse_module_text(USER_PRIORITIES), make_options(engine=engine))
    tree = audit.explain("%arg0")
    audit.attach_proofs([tree])
    rewrites = [n for n in tree.walk() if n.kind == "priority"]
    assert [n.because for n in rewrites] == [
        "user priority 1: its dims re-opened",
        "user priorities: dims with priority > 0 closed and replicated"]
    reopened, closed = rewrites
    assert [p.atom() for p in reopened.proof] == ['reopen(1, 0, 0)', 'unreplicated(1, 0, ""a"")']
    assert [p.atom() for p in closed.proof] == ['closed_at_start(0, 0)',
                                                'replicated_at_start(0, ""a"")']
    for proof in reopened.proof + closed.proof:
        assert _rules(proof) >= {STAGE}
        text = "\n".join(proof.lines())
        assert "in_dim_priority(0, 0, 1)  [input fact]" in text
    assert "round(1, 1)" in "\n".join(reopened.proof[0].lines())


GROUP = """sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  sdy.sharding_group %arg0 group_id=0 : tensor<8x8xf32>
  sdy.sharding_group %arg1 group_id=0 : tensor<8x8xf32>
  %0 = stablehlo.negate %arg1 : tensor<8x8xf32>
  return %0, %arg0 : tensor<8x8xf32>, tensor<8x8xf32>
}
"""


@pytest.mark.parametrize("engine", ["python", "clingo"])
def test_group_sync_has_proof(engine):
    audit = Audit(parse_module_text(GROUP), make_options(engine=engine))
    tree = audit.explain("%arg1")
    audit.attach_proofs([tree])
    [synced] = [n for n in tree.walk() if n.kind == "group"]
    assert synced.because == "sharding group 0: members synced"
    [proof] = synced.proof
    assert proof.atom() == "synced(0, 1, 0)"
    assert _rules(proof) >= {"datalog/sharding_group_map/main.dl.j2"}
    text = "\n".join(proof.lines())
    assert "common(0, 0)" in text and "in_sharding(0, 0)  [input fact]" in text


GROUP_COPY = """sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = stablehlo.negate %arg0 : tensor<8x8xf32>
  sdy.sharding_group %0 group_id=0 : tensor<8x8xf32>
  sdy.sharding_group %arg1 group_id=0 : tensor<8x8xf32>
  %1 = stablehlo.abs %arg1 : tensor<8x8xf32>
  return %0, %1 : tensor<8x8xf32>, tensor<8x8xf32>
}
"""


@pytest.mark.parametrize("engine", ["python", "clingo"])
def test_group_copy_has_proof(engine):
    """%arg1 gets its sharding during the pass only as a member of %0's group: the
    copy is its own cause (not the negate that updated %0), read from %0, and its
    proof is stage ``sharding_group_map``'s ``copy_to``."""
    audit = Audit(parse_module_text(GROUP_COPY), make_options(engine=engine))
    tree = audit.explain("%arg1")
    audit.attach_proofs([tree])
    [copied] = [n for n in tree.walk() if n.kind == "group"]
    assert copied.because == "sharding group 0: member 0 updated, copied onto member 1"
    assert [c.because.split(" at ")[0] for c in copied.children] == ["stablehlo.negate"]
    [proof] = copied.proof
    assert proof.atom() == "copy_to(0, 0, 1)"
    assert _rules(proof) >= {"datalog/sharding_group_map/main.dl.j2"}
    assert "in_member(0, 0, " in "\n".join(proof.lines())
