"""Differential tests of the import passes on hand-written modules.

Each case runs Shardy's pass from jaxlib and sdy-dl's pass of the same name
on the same module; the printed modules must be equal.  Cases are grouped
per pass, one per rule or edge case (semantics §8, §9.1).
"""

from __future__ import annotations

import pytest

from import_programs import check

MESH = 'sdy.mesh @mesh = <["a"=2, "b"=2]>\n'
T = "tensor<8x8xf32>"


def cases(table: dict[str, str]):
    return pytest.mark.parametrize("text", list(table.values()), ids=list(table))


# -- lift-inlined-meshes ------------------------------------------------------------------------

LIFT = {
    "inlined_everywhere": """
func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<mesh<["x"=2]>, [{"x"}]>})
    -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<mesh<["x"=2]>, [{?}]>}) {
  %0 = stablehlo.add %arg0, %arg0 {sdy.sharding = #sdy.sharding_per_value<[<mesh<["y"=4]>, [{"y"}]>]>} : tensor<8xf32>
  %1 = sdy.sharding_constraint %arg0 <mesh<["x"=2]>, [{}]> : tensor<8xf32>
  %2 = sdy.data_flow_edge %0 sharding=<mesh<["y"=4]>, [{?}]> : tensor<8xf32>
  %3 = stablehlo.add %1, %2 : tensor<8xf32>
  return %3 : tensor<8xf32>
}""",
    "maximal_and_empty": """
func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.add %arg0, %arg0 {sdy.sharding = #sdy.sharding_per_value<[<mesh<[], device_ids=[3]>, []>]>} : tensor<8xf32>
  %1 = stablehlo.add %0, %0 {sdy.sharding = #sdy.sharding_per_value<[<mesh<[]>, [{?}]>]>} : tensor<8xf32>
  %2 = stablehlo.add %1, %1 {sdy.sharding = #sdy.sharding_per_value<[<mesh<[], device_ids=[0]>, []>]>} : tensor<8xf32>
  return %2 : tensor<8xf32>
}""",
    "dedup_existing_meshes": """
sdy.mesh @m1 = <["a"=2, "b"=2]>
sdy.mesh @m2 = <["a"=2, "b"=2]>
sdy.mesh @m3 = <["a"=4]>
sdy.mesh @m4 = <["a"=4]>
func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@m2, [{"a"}]>}) -> tensor<8xf32> {
  %0 = stablehlo.add %arg0, %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@m4, [{"a"}]>]>} : tensor<8xf32>
  %1 = stablehlo.add %0, %0 {sdy.sharding = #sdy.sharding_per_value<[<mesh<["a"=4]>, [{}]>]>} : tensor<8xf32>
  return %1 : tensor<8xf32>
}""",
    "name_clashes": """
sdy.mesh @mesh = <["q"=2]>
sdy.mesh @mesh_0 = <["r"=2]>
func.func @maximal_mesh_1(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<mesh<["x"=2]>, [{"x"}]>}) -> tensor<8xf32> {
  %0 = stablehlo.add %arg0, %arg0 {sdy.sharding = #sdy.sharding_per_value<[<mesh<["y"=2]>, [{"y"}]>]>} : tensor<8xf32>
  %1 = stablehlo.add %0, %0 {sdy.sharding = #sdy.sharding_per_value<[<mesh<[], device_ids=[1]>, []>]>} : tensor<8xf32>
  %2 = stablehlo.add %1, %1 {sdy.sharding = #sdy.sharding_per_value<[<mesh<["z"=2]>, [{"z"}]>]>} : tensor<8xf32>
  return %2 : tensor<8xf32>
}""",
    "device_ids_and_nested_regions": """
sdy.mesh @mesh = <["x"=2, "y"=2]>
func.func @main(%arg0: tensor<8x8xf32>, %arg1: tensor<i32>) -> tensor<8x8xf32> {
  %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %arg1) : tensor<8x8xf32>, tensor<i32>
      attributes {sdy.sharding = #sdy.sharding_per_value<[<mesh<["x"=2, "y"=2], device_ids=[3, 2, 1, 0]>, [{"x"}, {}]>, <mesh<["x"=2, "y"=2]>, []>]>}
   cond {
    %1 = stablehlo.compare LT, %iterArg_0, %iterArg_0 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %1 = stablehlo.negate %iterArg {sdy.sharding = #sdy.sharding_per_value<[<mesh<["x"=2, "y"=2], device_ids=[3, 2, 1, 0]>, [{}, {"y"}]>]>} : tensor<8x8xf32>
    stablehlo.return %1, %iterArg_0 : tensor<8x8xf32>, tensor<i32>
  }
  return %0#0 : tensor<8x8xf32>
}""",
    "manual_and_named_computations": """
func.func @main(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<mesh<["a"=2, "b"=2]>, [{"a"}, {?}]>] out_shardings=[<mesh<["a"=2, "b"=2]>, [{"a"}, {?}]>] manual_axes={"a"} (%arg1: tensor<4x8xf32>) {
    %2 = stablehlo.negate %arg1 {sdy.sharding = #sdy.sharding_per_value<[<mesh<["a"=2, "b"=2]>, [{}, {"b"}]>]>} : tensor<4x8xf32>
    sdy.return %2 : tensor<4x8xf32>
  } : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = sdy.named_computation<"foo">(%0) in_shardings=[<mesh<["c"=8]>, [{"c"}, {}]>] out_shardings=[<mesh<["a"=2, "b"=2]>, [{}, {}]>] (%arg1: tensor<8x8xf32>) {
    sdy.return %arg1 : tensor<8x8xf32>
  } : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}""",
    "existing_stablehlo_mesh_attr_kept": """
sdy.mesh @mesh = <["a"=2]> {stablehlo.mesh = {axes = [{name = "a", size = 2 : i64}], note = "kept"}}
func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>}) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}""",
    "replica_groups": """
sdy.mesh @mesh = <["z"=4]>
sdy.mesh @dup = <["z"=4]>
func.func @main(%arg0: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %0 = "stablehlo.all_reduce"(%arg0) <{replica_groups = #stablehlo.replica_group_mesh_axes<mesh = #stablehlo.mesh<axes = [#stablehlo.mesh_axis<name = "z", size = 4>]>, axes = [#stablehlo.axis_ref<name = "z">]>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %2 = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %2 : tensor<f32>
  }) : (tensor<16xf32>) -> tensor<16xf32>
  %1 = "stablehlo.all_reduce"(%arg0) <{replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @dup, axes = [#stablehlo.axis_ref<name = "z">]>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %2 = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %2 : tensor<f32>
  }) : (tensor<16xf32>) -> tensor<16xf32>
  return %0, %1 : tensor<16xf32>, tensor<16xf32>
}""",
    "no_meshes_at_all": """
func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}""",
}


@cases(LIFT)
def test_lift_inlined_meshes(text):
    check(text, "lift-inlined-meshes")


# -- remove-size-one-axes ------------------------------------------------------------------------

SIZE_ONE = {
    "dims_replicated_unreduced_priorities": """
sdy.mesh @mesh = <["a"=1, "b"=2, "c"=1, "d"=4]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", "b"}, {"c"}p1], unreduced={"d"}>}, %arg9: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}], replicated={"a", "b"}, unreduced={"c"}>})
    -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}p2, {"d":(1)2, "c"}]>}) {
  %0 = sdy.sharding_constraint %arg0 <@mesh, [{"c"}, {"a", ?}p0]> : tensor<8x8xf32>
  %1 = sdy.manual_computation(%0) in_shardings=[<@mesh, [{"b", "a"}, {"c"}]>] out_shardings=[<@mesh, [{"b"}, {}], replicated={"a"}>] manual_axes={"b"} (%arg1: tensor<4x8xf32>) {
    sdy.return %arg1 : tensor<4x8xf32>
  } : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}""",
    "no_size_one_axis": """
sdy.mesh @mesh = <["a"=2]>
func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>}) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}""",
    "other_mesh_has_size_one_axis": """
sdy.mesh @mesh = <["a"=2]>
sdy.mesh @other = <["x"=1, "y"=2]>
func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@other, [{"x", "y"}]>}) -> tensor<8xf32> {
  %0 = stablehlo.add %arg0, %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}]>]>} : tensor<8xf32>
  return %0 : tensor<8xf32>
}""",
}


@cases(SIZE_ONE)
def test_remove_size_one_axes(text):
    check(text, "remove-size-one-axes")


# -- constant-or-scalar-splitter ---------------------------------------------------------------

CONSTANTS = {
    "constant_two_users": f"""
func.func @main(%arg0: {T}) -> ({T}, {T}) {{
  %c = stablehlo.constant {{foo}} dense<1.0> : {T}
  %0 = stablehlo.dot_general %c, %arg0, contracting_dims = [1] x [0] : ({T}, {T}) -> {T}
  %1 = stablehlo.add %c, %0 : {T}
  return %c, %1 : {T}, {T}
}}""",
    "chain_with_shared_uses": f"""
func.func @main(%arg0: {T}) -> ({T}, {T}) {{
  %c = stablehlo.constant dense<1.0> : tensor<8xf32>
  %b = stablehlo.broadcast_in_dim %c, dims = [1] : (tensor<8xf32>) -> {T}
  %d = stablehlo.add %b, %b : {T}
  %i = stablehlo.iota dim = 0 : {T}
  %e = stablehlo.multiply %d, %i : {T}
  %r = stablehlo.reshape %e : ({T}) -> {T}
  %s = stablehlo.slice %r [0:8, 0:8] : ({T}) -> {T}
  %x = stablehlo.add %s, %s : {T}
  %y = stablehlo.dot_general %x, %arg0, contracting_dims = [1] x [0] : ({T}, {T}) -> {T}
  %z = stablehlo.dot_general %s, %y, contracting_dims = [1] x [0] : ({T}, {T}) -> {T}
  return %z, %d : {T}, {T}
}}""",
    "non_preserving_op_stops_the_chain": f"""
func.func @main(%arg0: {T}) -> ({T}, {T}) {{
  %c = stablehlo.constant dense<1.0> : {T}
  %t = stablehlo.transpose %c, dims = [1, 0] : ({T}) -> {T}
  %n = stablehlo.negate %t : {T}
  %0 = stablehlo.add %n, %arg0 : {T}
  %1 = stablehlo.add %n, %0 : {T}
  return %0, %1 : {T}, {T}
}}""",
    "scalars_and_scalar_expansions": f"""
func.func @main(%arg0: {T}, %arg1: tensor<f32>) -> ({T}, {T}, tensor<f32>) {{
  %s = stablehlo.constant dense<2.0> : tensor<f32>
  %b = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> {T}
  %a = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> {T}
  %0 = stablehlo.multiply %arg0, %b : {T}
  %1 = stablehlo.add %0, %b : {T}
  %2 = stablehlo.add %a, %1 : {T}
  %3 = stablehlo.subtract %a, %2 : {T}
  %4 = stablehlo.add %s, %arg1 : tensor<f32>
  return %2, %3, %4 : {T}, {T}, tensor<f32>
}}""",
    "sharding_groups_are_cloned": f"""
func.func @main(%arg0: {T}) -> ({T}, {T}) {{
  %c = stablehlo.constant dense<1.0> : {T}
  %n = stablehlo.negate %c : {T}
  sdy.sharding_group %n group_id=3 : {T}
  sdy.sharding_group %arg0 group_id=3 : {T}
  %0 = stablehlo.add %n, %arg0 : {T}
  %1 = stablehlo.multiply %n, %0 : {T}
  %u = stablehlo.constant dense<5.0> : {T}
  sdy.sharding_group %u group_id=4 : {T}
  return %0, %1 : {T}, {T}
}}""",
    "constant_used_in_nested_regions": f"""
func.func @main(%arg0: {T}, %arg1: tensor<i32>) -> {T} {{
  %c = stablehlo.constant dense<1.0> : {T}
  %0 = "stablehlo.case"(%arg1) ({{
    %1 = stablehlo.add %c, %arg0 : {T}
    stablehlo.return %1 : {T}
  }}, {{
    stablehlo.return %c : {T}
  }}) : (tensor<i32>) -> {T}
  %2 = stablehlo.while(%it = %0) : {T}
   cond {{
    %t = stablehlo.constant dense<true> : tensor<i1>
    stablehlo.return %t : tensor<i1>
  }} do {{
    %3 = stablehlo.multiply %it, %c : {T}
    stablehlo.return %3 : {T}
  }}
  return %2 : {T}
}}""",
    "named_computations": f"""
func.func @main(%arg0: {T}) -> ({T}, {T}) {{
  %c = stablehlo.constant dense<1.0> : {T}
  %0 = sdy.named_computation<"const">(%c) (%arg1: {T}) {{
    %1 = stablehlo.negate %arg1 : {T}
    sdy.return %1 : {T}
  }} : ({T}) -> {T}
  %2 = sdy.named_computation<"nonconst">(%0) (%arg1: {T}) {{
    %k = stablehlo.constant dense<2.0> : {T}
    %1 = stablehlo.dot_general %arg1, %k, contracting_dims = [1] x [0] : ({T}, {T}) -> {T}
    %3 = stablehlo.add %1, %k : {T}
    sdy.return %3 : {T}
  }} : ({T}) -> {T}
  %4 = stablehlo.add %0, %arg0 : {T}
  %5 = stablehlo.add %2, %0 : {T}
  return %4, %5 : {T}, {T}
}}""",
    "calls_of_constant_functions": f"""
func.func @main(%arg0: {T}) -> ({T}, {T}, {T}) {{
  %c = stablehlo.constant dense<1.0> : {T}
  %0 = func.call @pure(%c) : ({T}) -> {T}
  %1 = func.call @impure(%c) : ({T}) -> {T}
  %2 = stablehlo.add %0, %arg0 : {T}
  %3 = stablehlo.add %0, %1 : {T}
  return %2, %3, %0 : {T}, {T}, {T}
}}
func.func private @pure(%arg0: {T}) -> {T} {{
  %0 = func.call @inner(%arg0) : ({T}) -> {T}
  %1 = stablehlo.abs %0 : {T}
  return %1 : {T}
}}
func.func private @inner(%arg0: {T}) -> {T} {{
  %0 = stablehlo.negate %arg0 : {T}
  return %0 : {T}
}}
func.func private @impure(%arg0: {T}) -> {T} {{
  %0 = stablehlo.custom_call @foo(%arg0) : ({T}) -> {T}
  return %0 : {T}
}}""",
}


@cases(CONSTANTS)
def test_constant_or_scalar_splitter(text):
    check(text, "constant-or-scalar-splitter")


# -- add-data-flow-edges ------------------------------------------------------------------------

EDGES = {
    "while_case_barrier": MESH + f"""
func.func @main(%arg0: {T}, %arg1: tensor<i32>, %arg2: !stablehlo.token) -> ({T}, {T}, !stablehlo.token) {{
  %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %arg1) : {T}, tensor<i32>
      attributes {{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{{"a", ?}}, {{?}}]>, <@mesh, []>]>}}
   cond {{
    %1 = stablehlo.compare LT, %iterArg_0, %iterArg_0 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  }} do {{
    %1 = stablehlo.add %iterArg, %iterArg : {T}
    stablehlo.return %1, %iterArg_0 : {T}, tensor<i32>
  }}
  %2:2 = "stablehlo.case"(%arg1) ({{
    stablehlo.return %0#0, %arg2 : {T}, !stablehlo.token
  }}, {{
    stablehlo.return %arg0, %arg2 : {T}, !stablehlo.token
  }}) : (tensor<i32>) -> ({T}, !stablehlo.token)
  %3:2 = stablehlo.optimization_barrier %2#0, %arg0 : {T}, {T}
  %4 = stablehlo.add %3#0, %3#0 : {T}
  return %4, %0#0, %2#1 : {T}, {T}, !stablehlo.token
}}""",
    "nested_while_and_dynamic_shapes": f"""
func.func @main(%arg0: {T}, %arg1: tensor<?x8xf32>) -> ({T}, tensor<?x8xf32>) {{
  %0:2 = stablehlo.optimization_barrier %arg0, %arg1 : {T}, tensor<?x8xf32>
  %1 = stablehlo.while(%it = %0#0) : {T}
   cond {{
    %t = stablehlo.constant dense<true> : tensor<i1>
    stablehlo.return %t : tensor<i1>
  }} do {{
    %2 = stablehlo.while(%it2 = %it) : {T}
     cond {{
      %t = stablehlo.constant dense<false> : tensor<i1>
      stablehlo.return %t : tensor<i1>
    }} do {{
      stablehlo.return %it2 : {T}
    }}
    stablehlo.return %2 : {T}
  }}
  return %1, %0#1 : {T}, tensor<?x8xf32>
}}""",
    "named_and_manual_computations": MESH + """
func.func @main(%arg0: tensor<8x2xi32>, %arg1: tensor<4x2xi32>) -> (tensor<8x2xi32>, tensor<4x2xi32>) {
  %0:2 = sdy.named_computation<"f">(%arg0, %arg1) in_shardings=[<@mesh, [{"a"}, {}]>, <@mesh, [{?}, {}]>] out_shardings=[<@mesh, [{"a"}, {}]>, <@mesh, [{?}, {}]>] (%arg2: tensor<8x2xi32>, %arg3: tensor<4x2xi32>) {
    %1 = stablehlo.add %arg2, %arg2 : tensor<8x2xi32>
    sdy.return %1, %arg3 : tensor<8x2xi32>, tensor<4x2xi32>
  } : (tensor<8x2xi32>, tensor<4x2xi32>) -> (tensor<8x2xi32>, tensor<4x2xi32>)
  %2:2 = sdy.manual_computation(%0#0, %0#1) in_shardings=[<@mesh, [{"b", "a", ?}p1, {?}]>, <@mesh, [{"b", ?}, {?}]>] out_shardings=[<@mesh, [{"b", "a", ?}, {?}]>, <@mesh, [{"b", ?}, {?}], replicated={"a"}>] manual_axes={"b"} (%arg2: tensor<4x2xi32>, %arg3: tensor<2x2xi32>) {
    sdy.return %arg2, %arg3 : tensor<4x2xi32>, tensor<2x2xi32>
  } : (tensor<8x2xi32>, tensor<4x2xi32>) -> (tensor<8x2xi32>, tensor<4x2xi32>)
  return %2#0, %2#1 : tensor<8x2xi32>, tensor<4x2xi32>
}""",
    "named_computation_without_shardings_unused_results": """
func.func @main(%arg0: tensor<8x2xi32>, %arg1: !stablehlo.token) -> tensor<8x2xi32> {
  %0:3 = sdy.named_computation<"g">(%arg0, %arg1) (%arg2: tensor<8x2xi32>, %arg3: !stablehlo.token) {
    sdy.return %arg2, %arg3, %arg2 : tensor<8x2xi32>, !stablehlo.token, tensor<8x2xi32>
  } : (tensor<8x2xi32>, !stablehlo.token) -> (tensor<8x2xi32>, !stablehlo.token, tensor<8x2xi32>)
  return %0#2 : tensor<8x2xi32>
}""",
}


@cases(EDGES)
def test_add_data_flow_edges(text):
    check(text, "add-data-flow-edges")


# -- apply-sharding-constraints -------------------------------------------------------------------

def _constraint_case(body: str, args: str = f"%arg0: {T}", results: str = T) -> str:
    return MESH + f"func.func @main({args}) -> ({results}) {{\n{body}\n}}"


CLOSED = '<@mesh, [{}, {"b"}]>'
CONSTRAINTS = {
    "applied_to_unsharded_input": _constraint_case(f"""
  %0 = stablehlo.add %arg0, %arg0 : {T}
  %1 = sdy.sharding_constraint %0 {CLOSED} : {T}
  %2 = stablehlo.add %0, %0 : {T}
  return %1 : {T}""", results=T),
    "input_already_sharded": _constraint_case(f"""
  %0 = stablehlo.add %arg0, %arg0 {{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{{"a", ?}}, {{?}}]>]>}} : {T}
  %1 = sdy.sharding_constraint %0 {CLOSED} : {T}
  return %1 : {T}"""),
    "func_arg_already_sharded": _constraint_case(
        f"""  %0 = sdy.sharding_constraint %arg0 {CLOSED} : {T}
  return %0 : {T}""", args=f"%arg0: {T} {{sdy.sharding = #sdy.sharding<@mesh, [{{?}}, {{?}}]>}}"),
    "open_constraint_not_applied": _constraint_case(f"""
  %0 = stablehlo.add %arg0, %arg0 : {T}
  %1 = sdy.sharding_constraint %0 <@mesh, [{{}}, {{"b", ?}}]> : {T}
  return %1 : {T}"""),
    "unshardable_block_argument": MESH + """
func.func @main(%arg0: tensor<4x8xf32>, %arg1: tensor<f32>) -> tensor<4xf32> {
  %0 = stablehlo.reduce(%arg0 init: %arg1) across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
   reducer(%a: tensor<f32>, %b: tensor<f32>) {
    %1 = sdy.sharding_constraint %a <@mesh, []> : tensor<f32>
    %2 = stablehlo.add %1, %b : tensor<f32>
    stablehlo.return %2 : tensor<f32>
  }
  return %0 : tensor<4xf32>
}""",
    "other_constraint_with_different_sharding": _constraint_case(f"""
  %0 = stablehlo.add %arg0, %arg0 : {T}
  %1 = sdy.sharding_constraint %0 {CLOSED} : {T}
  %2 = sdy.sharding_constraint %0 <@mesh, [{{"a"}}, {{}}]> : {T}
  %3 = stablehlo.add %1, %2 : {T}
  return %3 : {T}"""),
    "other_constraint_with_same_sharding": _constraint_case(f"""
  %0 = stablehlo.add %arg0, %arg0 : {T}
  %1 = sdy.sharding_constraint %0 {CLOSED} : {T}
  %2 = sdy.sharding_constraint %0 {CLOSED} : {T}
  %3 = stablehlo.add %1, %2 : {T}
  return %3 : {T}"""),
    "manual_computation_with_different_in_sharding": _constraint_case(f"""
  %0 = stablehlo.add %arg0, %arg0 : {T}
  %1 = sdy.sharding_constraint %0 {CLOSED} : {T}
  %2 = sdy.manual_computation(%0) in_shardings=[<@mesh, [{{"a"}}, {{}}]>] out_shardings=[<@mesh, [{{"a"}}, {{}}]>] manual_axes={{"a"}} (%arg1: tensor<4x8xf32>) {{
    sdy.return %arg1 : tensor<4x8xf32>
  }} : ({T}) -> {T}
  %3 = stablehlo.add %1, %2 : {T}
  return %3 : {T}"""),
    "manual_computation_in_sharding_applied": _constraint_case(f"""
  %0 = stablehlo.add %arg0, %arg0 : {T}
  %1 = sdy.manual_computation(%0, %arg0) in_shardings=[<@mesh, [{{"a"}}, {{}}]>, <@mesh, [{{"a", ?}}, {{}}]>] out_shardings=[<@mesh, [{{"a"}}, {{}}]>] manual_axes={{"a"}} (%arg1: tensor<4x8xf32>, %arg2: tensor<4x8xf32>) {{
    %2 = stablehlo.add %arg1, %arg1 : tensor<4x8xf32>
    %3 = sdy.sharding_constraint %2 <@mesh, [{{}}, {{"b"}}]> : tensor<4x8xf32>
    sdy.return %3 : tensor<4x8xf32>
  }} : ({T}, {T}) -> {T}
  return %1 : {T}"""),
    "data_flow_edge_input_moves_constraint": _constraint_case(f"""
  %0 = sdy.data_flow_edge %arg0 : {T}
  %1 = stablehlo.add %0, %0 : {T}
  %2 = sdy.sharding_constraint %0 {CLOSED} : {T}
  return %1, %2, %0 : {T}, {T}, {T}""", results=f"{T}, {T}, {T}"),
    "data_flow_edge_unreduced": _constraint_case(f"""
  %0 = stablehlo.add %arg0, %arg0 : {T}
  %1 = sdy.data_flow_edge %0 sharding=<@mesh, [{{?}}, {{?}}]> : {T}
  %2 = stablehlo.negate %arg0 : {T}
  %3 = sdy.data_flow_edge %2 : {T}
  %4 = stablehlo.add %1, %3 : {T}
  %5 = sdy.sharding_constraint %3 <@mesh, [{{"a"}}, {{}}], unreduced={{"b"}}> : {T}
  %6 = sdy.sharding_constraint %1 <@mesh, [{{"a"}}, {{}}], unreduced={{"b"}}> : {T}
  return %4, %5, %6 : {T}, {T}, {T}""", results=f"{T}, {T}, {T}"),
    "while_block_arg_with_edge": MESH + f"""
func.func @main(%arg0: {T}, %arg1: tensor<i32>) -> {T} {{
  %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %arg1) : {T}, tensor<i32>
   cond {{
    %1 = stablehlo.compare LT, %iterArg_0, %iterArg_0 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  }} do {{
    %1 = stablehlo.add %iterArg, %iterArg : {T}
    %2 = sdy.sharding_constraint %iterArg {CLOSED} : {T}
    %3 = stablehlo.add %1, %2 : {T}
    stablehlo.return %3, %iterArg_0 : {T}, tensor<i32>
  }}
  %4 = sdy.data_flow_edge %0#0 : {T}
  %5 = sdy.data_flow_edge %0#1 : tensor<i32>
  return %4 : {T}
}}""",
    "while_block_arg_without_edge": MESH + f"""
func.func @main(%arg0: {T}) -> {T} {{
  %0 = stablehlo.while(%iterArg = %arg0) : {T}
   cond {{
    %t = stablehlo.constant dense<true> : tensor<i1>
    stablehlo.return %t : tensor<i1>
  }} do {{
    %2 = sdy.sharding_constraint %iterArg {CLOSED} : {T}
    stablehlo.return %2 : {T}
  }}
  %1 = sdy.sharding_constraint %0 <@mesh, [{{"a"}}, {{}}]> : {T}
  return %1 : {T}
}}""",
    "manual_computation_operand_is_edge": _constraint_case(f"""
  %0 = sdy.data_flow_edge %arg0 : {T}
  %1 = sdy.manual_computation(%0) in_shardings=[<@mesh, [{{"a"}}, {{}}], unreduced={{"b"}}>] out_shardings=[<@mesh, [{{"a"}}, {{}}]>] manual_axes={{"a"}} (%arg1: tensor<4x8xf32>) {{
    sdy.return %arg1 : tensor<4x8xf32>
  }} : ({T}) -> {T}
  %2 = stablehlo.add %0, %1 : {T}
  return %2 : {T}"""),
    "existing_sharding_rule_kept": _constraint_case(f"""
  %0 = stablehlo.add %arg0, %arg0 : {T}
  %1 = sdy.sharding_constraint %0 {CLOSED} {{sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {{i=4, j=2}}>}} : {T}
  return %1 : {T}"""),
    "chain_redirects_later_uses": _constraint_case(f"""
  %0 = stablehlo.add %arg0, %arg0 : {T}
  %1 = stablehlo.multiply %0, %0 : {T}
  %2 = sdy.sharding_constraint %0 <@mesh, [{{"a", ?}}, {{?}}]> : {T}
  %3 = sdy.sharding_constraint %2 <@mesh, [{{}}, {{"b", ?}}]> : {T}
  %4 = sdy.sharding_constraint %3 <@mesh, [{{}}, {{"b"}}]> : {T}
  %5 = stablehlo.add %0, %4 : {T}
  %6 = stablehlo.negate %0 : {T}
  return %0, %1, %5, %6 : {T}, {T}, {T}, {T}""", results=f"{T}, {T}, {T}, {T}"),
    "chain_uses_in_nested_block_not_redirected": _constraint_case(f"""
  %0 = stablehlo.add %arg0, %arg0 : {T}
  %1 = sdy.sharding_constraint %0 {CLOSED} : {T}
  %2 = sdy.sharding_constraint %1 <@mesh, [{{"a"}}, {{"b"}}]> : {T}
  %3 = stablehlo.while(%it = %2) : {T}
   cond {{
    %t = stablehlo.constant dense<true> : tensor<i1>
    stablehlo.return %t : tensor<i1>
  }} do {{
    %4 = stablehlo.add %it, %0 : {T}
    stablehlo.return %4 : {T}
  }}
  %5 = stablehlo.add %3, %0 : {T}
  return %5 : {T}"""),
    "chain_of_length_one": _constraint_case(f"""
  %0 = stablehlo.add %arg0, %arg0 : {T}
  %1 = sdy.sharding_constraint %0 <@mesh, [{{"a", ?}}, {{?}}]> : {T}
  %2 = stablehlo.add %0, %1 : {T}
  return %2 : {T}"""),
    "chain_tail_used_by_constraint": _constraint_case(f"""
  %0 = stablehlo.add %arg0, %arg0 : {T}
  %1 = sdy.sharding_constraint %0 <@mesh, [{{"a", ?}}, {{?}}]> : {T}
  %2 = sdy.sharding_constraint %1 <@mesh, [{{"a", ?}}, {{"b", ?}}]> : {T}
  %3 = sdy.sharding_constraint %2 <@mesh, [{{"a"}}, {{"b"}}]> : {T}
  %4 = sdy.sharding_constraint %2 <@mesh, [{{"a"}}, {{}}]> : {T}
  %5 = stablehlo.add %0, %3 : {T}
  return %5, %4 : {T}, {T}""", results=f"{T}, {T}"),
    "chain_head_input_sharded": _constraint_case(f"""
  %0 = stablehlo.add %arg0, %arg0 {{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{{?}}, {{?}}]>]>}} : {T}
  %1 = sdy.sharding_constraint %0 <@mesh, [{{"a", ?}}, {{?}}]> : {T}
  %2 = sdy.sharding_constraint %1 <@mesh, [{{"a"}}, {{"b"}}]> : {T}
  %3 = stablehlo.add %0, %2 : {T}
  return %3 : {T}"""),
    "chain_input_with_other_constraint": _constraint_case(f"""
  %0 = stablehlo.add %arg0, %arg0 : {T}
  %1 = sdy.sharding_constraint %0 <@mesh, [{{"a", ?}}, {{?}}]> : {T}
  %2 = sdy.sharding_constraint %1 <@mesh, [{{"a"}}, {{"b"}}]> : {T}
  %3 = sdy.sharding_constraint %0 <@mesh, [{{"a"}}, {{}}]> : {T}
  %4 = stablehlo.add %0, %2 : {T}
  return %4, %3 : {T}, {T}""", results=f"{T}, {T}"),
    "chain_intermediate_with_two_uses": _constraint_case(f"""
  %0 = stablehlo.add %arg0, %arg0 : {T}
  %1 = sdy.sharding_constraint %0 <@mesh, [{{"a", ?}}, {{?}}]> : {T}
  %2 = sdy.sharding_constraint %1 <@mesh, [{{"a"}}, {{"b"}}]> : {T}
  %3 = sdy.sharding_constraint %2 <@mesh, [{{"a"}}, {{"b"}}]> : {T}
  %4 = stablehlo.add %0, %2 : {T}
  return %4, %3 : {T}, {T}""", results=f"{T}, {T}"),
    "chain_on_data_flow_edge": _constraint_case(f"""
  %0 = sdy.data_flow_edge %arg0 : {T}
  %1 = stablehlo.add %0, %0 : {T}
  %2 = sdy.sharding_constraint %0 {CLOSED} : {T}
  %3 = sdy.sharding_constraint %2 <@mesh, [{{"a"}}, {{"b"}}]> : {T}
  %4 = stablehlo.add %0, %3 : {T}
  return %1, %4 : {T}, {T}""", results=f"{T}, {T}"),
}


@cases(CONSTRAINTS)
def test_apply_sharding_constraints(text):
    check(text, "apply-sharding-constraints")


# -- manual-axes-cleanup -------------------------------------------------------------------------

MANUAL = {
    "sort_and_replicate_unused_axes": """
sdy.mesh @mesh = <["c"=2, "a"=4, "b"=2]>
func.func @main(%arg0: tensor<16x16xf32>, %arg1: !stablehlo.token) -> (tensor<16x16xf32>, !stablehlo.token) {
  %0:2 = sdy.manual_computation(%arg0, %arg1) in_shardings=[<@mesh, [{"b", "a":(1)2}, {}], replicated={"c"}>, <@mesh, []>] out_shardings=[<@mesh, [{"a"}, {}]>, <@mesh, []>] manual_axes={"b", "a", "c"} (%arg2: tensor<4x16xf32>, %arg3: !stablehlo.token) {
    sdy.return %arg2, %arg3 : tensor<4x16xf32>, !stablehlo.token
  } : (tensor<16x16xf32>, !stablehlo.token) -> (tensor<16x16xf32>, !stablehlo.token)
  return %0#0, %0#1 : tensor<16x16xf32>, !stablehlo.token
}""",
    "partial_manual_axes_and_empty_mesh": """
sdy.mesh @mesh = <["a"=2, "b"=2]>
sdy.mesh @empty_mesh = <[]>
func.func @main(%arg0: tensor<8xf32>, %arg1: tensor<8xf32>) -> tensor<8xf32> {
  %0 = sdy.manual_computation(%arg0, %arg1) in_shardings=[<@empty_mesh, [{?}]>, <@mesh, [{"a", ?}]>] out_shardings=[<@mesh, [{?}]>] manual_axes={"a"} (%arg2: tensor<8xf32>, %arg3: tensor<4xf32>) {
    %1 = sdy.manual_computation(%arg2) in_shardings=[<@mesh, [{"b"}]>] out_shardings=[<@empty_mesh, [{?}]>] manual_axes={"b"} (%arg4: tensor<4xf32>) {
      %5 = stablehlo.concatenate %arg4, %arg4, dim = 0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
      sdy.return %5 : tensor<8xf32>
    } : (tensor<8xf32>) -> tensor<8xf32>
    sdy.return %1 : tensor<8xf32>
  } : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}""",
    "sub_axes_merge_in_replicated": """
sdy.mesh @mesh = <["a"=8, "b"=2]>
func.func @main(%arg0: tensor<16xf32>) -> tensor<16xf32> {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"a":(2)2}], replicated={"a":(1)2}>] out_shardings=[<@mesh, [{"b"}], replicated={"a":(4)2}>] manual_axes={"a", "b"} (%arg1: tensor<8xf32>) {
    %1 = stablehlo.slice %arg1 [0:4] : (tensor<8xf32>) -> tensor<4xf32>
    %2 = stablehlo.concatenate %1, %1, dim = 0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
    sdy.return %2 : tensor<8xf32>
  } : (tensor<16xf32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}""",
    "no_in_out_empty_body": """
sdy.mesh @mesh = <["a"=2]>
func.func @main() {
  sdy.manual_computation() in_shardings=[] out_shardings=[] manual_axes={"a"} () {
    sdy.return
  } : () -> ()
  return
}""",
}


@cases(MANUAL)
def test_manual_axes_cleanup(text):
    check(text, "manual-axes-cleanup")


# -- sharding-group-import ------------------------------------------------------------------------

GROUPS = {
    "transitive_merge": f"""
func.func @main(%arg0: {T}, %arg1: {T}, %arg2: {T}, %arg3: {T}) {{
  sdy.sharding_group %arg0 group_id=1234 : {T}
  sdy.sharding_group %arg1 group_id=99 : {T}
  sdy.sharding_group %arg1 group_id=1234 : {T}
  sdy.sharding_group %arg2 group_id=7 : {T}
  sdy.sharding_group %arg3 group_id=7 : {T}
  sdy.sharding_group %arg3 group_id=99 : {T}
  return
}}""",
    "leader_order_not_first_appearance": f"""
func.func @main(%arg0: {T}, %arg1: {T}, %arg2: {T}, %arg3: {T}) {{
  sdy.sharding_group %arg0 group_id=5 : {T}
  sdy.sharding_group %arg1 group_id=7 : {T}
  sdy.sharding_group %arg2 group_id=9 : {T}
  sdy.sharding_group %arg3 group_id=9 : {T}
  sdy.sharding_group %arg3 group_id=5 : {T}
  return
}}""",
    "renumber_and_duplicates": f"""
func.func @main(%arg0: {T}, %arg1: {T}, %arg2: {T}) -> {T} {{
  sdy.sharding_group %arg0 group_id=567 : {T}
  sdy.sharding_group %arg0 group_id=23 : {T}
  sdy.sharding_group %arg0 group_id=567 : {T}
  sdy.sharding_group %arg1 group_id=2 : {T}
  %0 = stablehlo.add %arg0, %arg2 : {T}
  sdy.sharding_group %0 group_id=123456 : {T}
  sdy.sharding_group %arg2 group_id=2 : {T}
  return %0 : {T}
}}""",
    "groups_inside_one_manual_computation": MESH + f"""
func.func @main(%arg0: {T}) -> {T} {{
  sdy.sharding_group %arg0 group_id=3 : {T}
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{{"a"}}, {{}}]>] out_shardings=[<@mesh, [{{"a"}}, {{}}]>] manual_axes={{"a"}} (%arg1: tensor<4x8xf32>) {{
    %1 = stablehlo.add %arg1, %arg1 : tensor<4x8xf32>
    sdy.sharding_group %arg1 group_id=1 : tensor<4x8xf32>
    sdy.sharding_group %1 group_id=1 : tensor<4x8xf32>
    sdy.return %1 : tensor<4x8xf32>
  }} : ({T}) -> {T}
  sdy.sharding_group %0 group_id=3 : {T}
  return %0 : {T}
}}""",
}


@cases(GROUPS)
def test_sharding_group_import(text):
    check(text, "sharding-group-import")


# -- propagate-sharding-from-func-to-call, symbol-dce --------------------------------------------

CALLS = {
    "copy_fill_and_keep": MESH + """
sdy.mesh @maximal = <[], device_ids=[0]>
func.func @main(%arg0: tensor<8x2xi32>) -> (tensor<8x2xi32>, tensor<8x2xi32>) {
  %0:2 = call @two(%arg0) : (tensor<8x2xi32>) -> (tensor<8x2xi32>, tensor<8x2xi32>)
  %1 = call @one(%arg0) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : (tensor<8x2xi32>) -> tensor<8x2xi32>
  %2 = call @max(%arg0) : (tensor<8x2xi32>) -> tensor<8x2xi32>
  %3 = call @none(%arg0) : (tensor<8x2xi32>) -> tensor<8x2xi32>
  return %0#1, %1 : tensor<8x2xi32>, tensor<8x2xi32>
}
func.func private @two(%arg0: tensor<8x2xi32>) -> (tensor<8x2xi32>, tensor<8x2xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}) {
  return %arg0, %arg0 : tensor<8x2xi32>, tensor<8x2xi32>
}
func.func private @one(%arg0: tensor<8x2xi32>) -> (tensor<8x2xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}) {
  return %arg0 : tensor<8x2xi32>
}
func.func private @max(%arg0: tensor<8x2xi32>) -> (tensor<8x2xi32> {sdy.sharding = #sdy.sharding<@maximal, []>}) {
  return %arg0 : tensor<8x2xi32>
}
func.func private @none(%arg0: tensor<8x2xi32>) -> tensor<8x2xi32> {
  return %arg0 : tensor<8x2xi32>
}""",
}


@cases(CALLS)
def test_propagate_sharding_from_func_to_call(text):
    check(text, "propagate-sharding-from-func-to-call")


DCE = {
    "private_functions": MESH + """
sdy.mesh @other_mesh = <["z"=2]>
func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = call @used(%arg0) : (tensor<8xf32>) -> tensor<8xf32>
  %1 = stablehlo.custom_call @unused(%0) : (tensor<8xf32>) -> tensor<8xf32>
  return %1 : tensor<8xf32>
}
func.func private @used(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = call @used_transitively(%arg0) : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
func.func private @used_transitively(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}
func.func private @unused(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = call @only_from_unused(%arg0) : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
func.func private @only_from_unused(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}
func.func @public_unused(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@other_mesh, [{"z"}]>}) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}""",
    # every private symbol is live once main is read: nothing else needs reading
    "all_private_live": MESH + """
sdy.mesh @private_mesh = <["z"=2]> {sym_visibility = "private"}
func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@private_mesh, [{"z"}]>}) -> tensor<8xf32> {
  %0 = call @used(%arg0) : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
func.func private @used(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = call @used_transitively(%arg0) : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
func.func private @used_transitively(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}""",
    # references from ops nested in regions, inside sdy attributes; "@name" in a
    # string is no reference
    "nested_references": MESH + """
sdy.mesh @nested_mesh = <["z"=2]> {sym_visibility = "private"}
sdy.mesh @quoted_only = <["z"=2]> {sym_visibility = "private"}
func.func @main(%arg0: tensor<8xf32>, %arg1: tensor<i1>) -> tensor<8xf32> {
  %0 = "stablehlo.if"(%arg1) ({
    %1 = stablehlo.add %arg0, %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@nested_mesh, [{"z"}]>]>, note = "@quoted_only"} : tensor<8xf32>
    %2 = call @from_region(%1) : (tensor<8xf32>) -> tensor<8xf32>
    stablehlo.return %2 : tensor<8xf32>
  }, {
    stablehlo.return %arg0 : tensor<8xf32>
  }) : (tensor<i1>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
func.func private @from_region(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}
func.func private @quoted_only_fn(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}""",
    # the calls (read first) name some private symbols only: the other ops are
    # read too, for a mesh and a function named outside any call
    "calls_and_other_references": MESH + """
sdy.mesh @private_mesh = <["z"=2]> {sym_visibility = "private"}
func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = call @called(%arg0) : (tensor<8xf32>) -> tensor<8xf32>
  %1 = stablehlo.add %0, %0 {sdy.sharding = #sdy.sharding_per_value<[<@private_mesh, [{"z"}]>]>, ref = @referenced} : tensor<8xf32>
  return %1 : tensor<8xf32>
}
func.func private @called(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}
func.func private @referenced(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}
func.func private @dead(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = call @called_from_dead(%arg0) : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
func.func private @called_from_dead(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}""",
    "no_private_symbols": MESH + """
func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = call @other(%arg0) : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
func.func @other(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}""",
}


@cases(DCE)
def test_symbol_dce(text):
    check(text, "symbol-dce", "symbol-dce")


# -- import-pipeline ----------------------------------------------------------------------------

PIPELINE = {
    "everything": """
sdy.mesh @mesh = <["c"=2, "a"=2, "b"=1]>
sdy.mesh @copy = <["c"=2, "a"=2, "b"=1]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<mesh<["x"=2]>, [{"x"}, {}]>}, %arg1: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %c = stablehlo.constant dense<1.0> : tensor<8x8xf32>
  %0 = stablehlo.add %arg1, %c : tensor<8x8xf32>
  %1 = sdy.sharding_constraint %0 <@copy, [{"c", "b"}, {}]> : tensor<8x8xf32>
  %2 = call @foo(%1) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %3 = sdy.manual_computation(%2) in_shardings=[<@mesh, [{"c", ?}, {?}]>] out_shardings=[<@mesh, [{"c", ?}, {?}]>] manual_axes={"a", "c"} (%arg2: tensor<4x8xf32>) {
    %4 = stablehlo.multiply %arg2, %arg2 : tensor<4x8xf32>
    sdy.return %4 : tensor<4x8xf32>
  } : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %5 = stablehlo.optimization_barrier %3 : tensor<8x8xf32>
  sdy.sharding_group %5 group_id=9 : tensor<8x8xf32>
  sdy.sharding_group %arg1 group_id=9 : tensor<8x8xf32>
  %6 = stablehlo.add %5, %c : tensor<8x8xf32>
  return %6, %c : tensor<8x8xf32>, tensor<8x8xf32>
}
func.func private @foo(%arg0: tensor<8x8xf32>) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", "c"}, {}]>}) {
  return %arg0 : tensor<8x8xf32>
}
func.func private @dead(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  return %arg0 : tensor<8x8xf32>
}""",
}


@cases(PIPELINE)
@pytest.mark.parametrize("dedup", [False, True], ids=["default", "dedup"])
def test_import_pipeline(text, dedup):
    pipeline = f"sdy-import-pipeline{{dedup-functions-fully={'true' if dedup else 'false'}}}"
    check(text, "import-pipeline", pipeline, dedup_functions_fully=dedup)
