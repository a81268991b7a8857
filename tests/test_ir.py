"""Module I/O: load → write back unchanged shardings → print equals jaxlib's own print."""

from __future__ import annotations

import pytest

from jax_programs import PROGRAMS, lowered
from sdy_dl.errors import SdyError
from sdy_dl.ir import parse_module_text
from sdy_dl.ir.context import mlir_context
from sdy_dl.ir.storage import (is_shardable, store_shardings, stored_result_sharding,
                               stored_sharding, write_func_attr)


def jaxlib_print(text: str) -> str:
    from jaxlib.mlir import ir

    with mlir_context():
        return str(ir.Module.parse(text))


def rewrite_every_sharding(module) -> int:
    """Write every stored sharding back through the model; returns how many."""
    count = 0
    for func in module.funcs.values():
        for i in range(len(func.mlir.attributes["function_type"].value.results)):
            s = stored_result_sharding(func, i)
            if s is not None:
                write_func_attr(func.mlir, "res_attrs", i, s)
                count += 1
    for v in module.values:
        if is_shardable(v):
            s = stored_sharding(v)
            if s is not None:
                store_shardings(module, [(v, s)])
                count += 1
    return count


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_round_trip_on_real_programs(name):
    text = lowered(name)
    module = parse_module_text(text, f"{name}.mlir")
    rewrite_every_sharding(module)
    assert module.print() == jaxlib_print(text)


def test_a_verified_module_prints_as_jaxlib_prints_it():
    """A verified module is printed without the printer's own verification and
    ``binary=True`` gives UTF-8 bytes: the text is jaxlib's either way."""
    from sdy_dl.ir.loader import verify_module

    text = lowered("mlp")
    module = parse_module_text(text, "mlp.mlir")
    expected = jaxlib_print(text)
    assert module.print(binary=True) == expected.encode("utf-8")
    verify_module(module)
    assert module.print() == expected
    assert module.print(binary=True) == expected.encode("utf-8")


def test_only_a_module_verified_since_its_last_edit_is_verified():
    """``verified`` is set by ``verify_module`` and cleared by an edit
    (``invalidate``), so printing cannot skip a verification nobody ran."""
    from sdy_dl.ir.loader import verify_module

    module = parse_module_text(lowered("mlp"), "mlp.mlir")
    assert not module.verified
    verify_module(module)
    assert module.verified
    module.invalidate()
    assert not module.verified


@pytest.mark.parametrize("edit_says, invalidated", [
    (False, False), (True, True), ({"ops_kept": True}, True), ({}, True)])
def test_a_rewrite_invalidates_the_module_when_its_edit_says_it_changed_it(edit_says, invalidated):
    """``passes.rewrite`` forgets what was read of the module when the edit
    returns True or its own invalidation keywords (a dict, even an empty one)."""
    from sdy_dl.ir.loader import verify_module
    from sdy_dl.passes import rewrite

    module = parse_module_text(lowered("mlp"), "mlp.mlir")
    verify_module(module)
    assert rewrite(module, lambda: edit_says) is module
    assert module.verified is not invalidated


def test_round_trip_rewrites_shardings_of_every_kind():
    text = lowered("shard_map")
    module = parse_module_text(text)
    assert rewrite_every_sharding(module) >= 3  # manual computation in/out shardings
    text = lowered("mlp")
    module = parse_module_text(text)
    assert rewrite_every_sharding(module) >= 3  # function arguments


SDY_OPS = '''
sdy.mesh @mesh = <["a"=2, "b"=4]>
sdy.mesh @maximal_mesh_0 = <[], device_ids=[0]>
func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"b":(1)2}p1], replicated={"b":(2)2}>}, %arg1: tensor<8x16xf32>) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {?}]>}, tensor<8x16xf32>) {
  %0 = sdy.sharding_constraint %arg0 <@mesh, [{"a"}, {?}]> : tensor<8x16xf32>
  %1 = sdy.propagation_barrier %0 allowed_direction=FORWARD : tensor<8x16xf32>
  sdy.sharding_group %1 group_id=3 : tensor<8x16xf32>
  %2 = stablehlo.add %1, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<mesh<["x"=2]>, [{"x"}, {}]>]>} : tensor<8x16xf32>
  %3:2 = stablehlo.while(%iterArg = %2, %iterArg_0 = %arg1) : tensor<8x16xf32>, tensor<8x16xf32>
   cond {
    %c = stablehlo.constant dense<true> : tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    %5 = sdy.data_flow_edge %iterArg sharding=<@mesh, [{?}, {"b"}]> : tensor<8x16xf32>
    stablehlo.return %5, %iterArg_0 : tensor<8x16xf32>, tensor<8x16xf32>
  }
  %4 = sdy.named_computation<"foo">(%3#0) in_shardings=[<@mesh, [{"a"}, {}]>] out_shardings=[<@maximal_mesh_0, []>] (%arg2: tensor<8x16xf32>) {
    sdy.return %arg2 : tensor<8x16xf32>
  } : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %6 = sdy.reshard %4 <@mesh, [{}, {"b"}]> : tensor<8x16xf32>
  return %6, %3#1 : tensor<8x16xf32>, tensor<8x16xf32>
}
'''


def test_round_trip_sdy_ops_and_nested_regions():
    module = parse_module_text(SDY_OPS)
    assert rewrite_every_sharding(module) >= 8
    assert module.print() == jaxlib_print(SDY_OPS)
    names = [op.name for op in module.ops]
    assert names.index("stablehlo.while") < names.index("sdy.data_flow_edge")
    assert set(module.meshes) == {"mesh", "maximal_mesh_0"}


def test_model_lists_ops_in_mlir_pre_order_with_their_places():
    """Every op once, in MLIR's own pre-order walk, each in the block and under the
    op that holds it (ops after a region-holding op included)."""
    from sdy_dl.ir.walk import walk_pre

    module = parse_module_text(SDY_OPS)
    with mlir_context():
        expected = [mop.name for top in module.mlir.body.operations for mop in walk_pre(top)]
    assert [op.name for op in module.ops] == expected
    assert [op.oid for op in module.ops] == list(range(len(module.ops)))
    for op in module.ops:
        for region in op.regions:
            for block in region.blocks:
                assert all(child.parent is op and child.block is block for child in block.ops)
                assert all(arg.block is block for arg in block.args)
    assert [v.vid for v in module.values] == list(range(len(module.values)))


def test_values_know_their_uses_and_owners():
    module = parse_module_text(SDY_OPS)
    add = next(op for op in module.ops if op.name == "stablehlo.add")
    assert [v.name for v in add.operands] == ["%1", "%arg1"]
    assert add.results[0].shape == (8, 16)
    arg1 = add.operands[1]
    assert arg1.is_block_arg and {op.name for op, _ in arg1.uses} == {"stablehlo.add", "stablehlo.while"}


USES = """func.func @main(%arg0: tensor<8xf32>, %arg1: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<8xf32>
  %1 = stablehlo.negate %0 : tensor<8xf32>
  %2 = stablehlo.multiply %1, %0 : tensor<8xf32>
  %3 = stablehlo.abs %2 : tensor<8xf32>
  return %3 : tensor<8xf32>
}"""


def test_uses_are_in_mlir_use_list_order():
    """Values with no, one and several uses (one op using a value twice), before and
    after an edit adds a use of a single-use value."""
    from jaxlib.mlir import ir

    from sdy_dl.ir.walk import key

    def check(module):
        for v in module.values:
            expected = [(key(u.owner), u.operand_number) for u in v.mlir.uses]
            assert [(key(op.mlir), k) for op, k in v.uses] == expected

    module = parse_module_text(USES)
    check(module)
    with mlir_context():
        negate = next(op for op in module.ops if op.name == "stablehlo.negate")
        ret = next(op for op in module.ops if op.name == "func.return")
        ir.InsertionPoint(ret.mlir).insert(ir.Operation.create(
            "stablehlo.abs", results=[negate.mlir.results[0].type],
            operands=[negate.mlir.results[0]], loc=ir.Location.unknown()))
    edited = module.invalidate()
    assert len(next(op for op in edited.ops if op.name == "stablehlo.negate").results[0].uses) == 2
    check(edited)


@pytest.mark.parametrize("text, message", [
    ("this is not mlir", "unknown"),
    ("func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n  return %arg0", "expected"),
    ("", "empty module"),
    ('sdy.mesh @mesh = <["a"=2]>\nfunc.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"z"}]>}) -> tensor<8xf32> {\n  return %arg0 : tensor<8xf32>\n}', "unknown axis"),
    ('sdy.mesh @mesh = <["a"=2]>\nfunc.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"a"}]>}) -> tensor<8x8xf32> {\n  return %arg0 : tensor<8x8xf32>\n}', "duplicate axis"),
    ('func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@nomesh, [{"a"}]>}) -> tensor<8xf32> {\n  return %arg0 : tensor<8xf32>\n}', "unknown mesh"),
])
def test_bad_input_is_one_located_error(text, message):
    with pytest.raises(SdyError) as err:
        parse_module_text(text, "bad.mlir")
    assert message in str(err.value)
    assert str(err.value).startswith("bad.mlir")
    assert "\n" not in str(err.value)


CALLS = '''sdy.mesh @mesh = <["a"=2]>
func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>}) -> tensor<8xf32> {
  %c = sdy.constant dense<1.0> : tensor<8xf32>
  %0 = func.call @helper(%arg0, %c) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}]>]>} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
func.func private @helper(%arg0: tensor<8xf32>, %arg1: tensor<8xf32>) -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8xf32>
  return %0 : tensor<8xf32>
}
'''


def test_round_trip_several_functions_calls_and_sdy_constants():
    module = parse_module_text(CALLS)
    assert set(module.funcs) == {"main", "helper"} and module.main_func().name == "func.func"
    assert rewrite_every_sharding(module) == 3  # main arg, call result, helper result
    assert module.print() == jaxlib_print(CALLS)
    call = next(op for op in module.ops if op.name == "func.call")
    assert [v.name for v in call.operands] == ["%arg0", "%0"]  # as jaxlib prints them


def test_region_key_is_equal_exactly_for_ops_of_one_region():
    from sdy_dl.ir.mlir_ops import funcs, region_key
    from sdy_dl.ir.walk import walk_post

    text = """
func.func @main(%arg0: tensor<4xf32>, %p: tensor<i32>) -> tensor<4xf32> {
  %c = stablehlo.constant dense<1.0> : tensor<4xf32>
  %0 = stablehlo.while(%iterArg = %arg0) : tensor<4xf32>
   cond {
    %t = stablehlo.constant dense<true> : tensor<i1>
    stablehlo.return %t : tensor<i1>
  } do {
    %1 = "stablehlo.case"(%p) ({
      %c2 = stablehlo.constant dense<2.0> : tensor<4xf32>
      stablehlo.return %c2 : tensor<4xf32>
    }, {
      %c3 = stablehlo.constant dense<3.0> : tensor<4xf32>
      stablehlo.return %c3 : tensor<4xf32>
    }) : (tensor<i32>) -> tensor<4xf32>
    %2 = stablehlo.add %iterArg, %1 : tensor<4xf32>
    stablehlo.return %2 : tensor<4xf32>
  }
  %3 = stablehlo.add %0, %c : tensor<4xf32>
  return %3 : tensor<4xf32>
}
"""
    with mlir_context():
        module = parse_module_text(text, "t.mlir")
        ops = walk_post(funcs(module)[0])[:-1]
        names = [op.name.split(".")[1] for op in ops]
        numbers: dict = {}
        regions = [numbers.setdefault(region_key(op), len(numbers)) for op in ops]
    assert names == ["constant", "constant", "return", "constant", "return", "constant", "return",
                     "case", "add", "return", "while", "add", "return"]
    # main's body, the while's cond, the case's two branches, the while's body
    assert regions == [0, 1, 1, 2, 2, 3, 3, 4, 4, 4, 0, 0, 0]


def test_the_model_numbers_ops_and_values_in_walk_numbereds_order():
    """One numbering: the model's op ids and value ids follow :func:`walk_numbered`'s
    events (an op's results, then each block's arguments before its ops), the order
    the audit's value keys are read in too."""
    import jax_programs

    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.walk import BLOCK, END, OP, walk_numbered

    module = parse_module_text(jax_programs.lowered("shard_map_scan_pipeline"))
    with mlir_context():
        ops, values, opened, closed = [], [], [], []
        for event in walk_numbered(module.mlir.body.operations):
            if event[0] == OP:
                assert event[2:] == (len(ops), len(values))
                ops.append(event[1])
                values += list(event[1].results)
                if len(event[1].regions):
                    opened.append(event[1])
            elif event[0] == BLOCK:
                assert event[3] == len(values) and ops[event[4]] == opened[-1]
                values += list(event[2].arguments)
            else:
                assert event[0] == END and event[1] == opened.pop()
                closed.append(event[1])
        assert not opened and closed
        assert [op.mlir for op in module.ops] == ops
        assert [op.oid for op in module.ops] == list(range(len(ops)))
        assert [v.mlir for v in module.values] == values
        assert [v.vid for v in module.values] == list(range(len(values)))
        assert any(v.is_block_arg for v in module.values)


@pytest.mark.parametrize("text", [SDY_OPS, "training_step", "shard_map"])
def test_storing_many_shardings_at_once_writes_what_storing_each_writes(text):
    """``store_shardings`` (one write per op; the only result of an ordinary op
    written whole) leaves the attributes writing each value's sharding alone
    (``write_stored``) leaves."""
    from sdy_dl.ir.storage import store_shardings, write_stored
    from sdy_dl.sharding import DimSharding, TensorSharding

    text = text if text.startswith("\n") else lowered(text)
    at_once, each = parse_module_text(text), parse_module_text(text)
    mesh = next(iter(at_once.meshes))

    def sharding(value):
        dims = tuple(DimSharding((), d % 2 == 0) for d in range(len(value.shape)))
        return TensorSharding(mesh, dims, (), ())
    with mlir_context():
        picked = [v.vid for v in at_once.values if is_shardable(v) and v.shape is not None]
        store_shardings(at_once, [(at_once.values[vid], sharding(at_once.values[vid]))
                                  for vid in picked])
        for vid in picked:
            v = each.values[vid]
            owner = v.block.region.owner if v.is_block_arg else v.defining_op
            values = v.block.args if v.is_block_arg else owner.results
            write_stored(owner.mlir, v.index, v.is_block_arg, [u.rank or 0 for u in values],
                         sharding(v))
    assert len(picked) > 5
    assert at_once.print() == each.print()
