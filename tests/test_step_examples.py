"""One step on one op, against Shardy: the examples of semantics §4, §5, §6 and §11.

Each case is a module whose single op reads the function arguments and whose
results are returned; Shardy's basic/aggressive pass applies exactly one step
to it.  Every case runs under both strategies (and conservative mode where
marked), and every tensor's final sharding must equal Shardy's.
"""

from __future__ import annotations

import shutil

import pytest

from test_step_common import assert_case, check_batch, module_text

AB = {"mesh": '<["a"=2, "b"=2]>'}
ABCD = {"mesh": '<["a"=2, "b"=2, "c"=2, "d"=2]>'}
X4Y2 = {"mesh": '<["x"=4, "y"=2]>'}
A3 = {"mesh": '<["a"=3]>'}
A4 = {"mesh": '<["a"=4]>'}
A6 = {"mesh": '<["a"=6]>'}
A8 = {"mesh": '<["a"=8]>'}
A4B2 = {"mesh": '<["a"=4, "b"=2]>'}

T8 = "tensor<8xf32>"
T88 = "tensor<8x8xf32>"


def s(body: str, mesh: str = "mesh") -> str:
    return f"<@{mesh}, {body}>"


def custom(rule: str, n_in: int, in_type: str | list[str], out_types: list[str]) -> str:
    """A custom_call whose rule is given by an sdy.sharding_rule attribute."""
    in_types = in_type if isinstance(in_type, list) else [in_type] * n_in
    args = ", ".join(f"%arg{i}" for i in range(n_in))
    outs = out_types[0] if len(out_types) == 1 else "(" + ", ".join(out_types) + ")"
    lhs = "%0" if len(out_types) == 1 else f"%0:{len(out_types)}"
    return (f"{lhs} = stablehlo.custom_call @foo({args}) {{sdy.sharding_rule = "
            f"#sdy.op_sharding_rule<{rule}, custom>}} : ({', '.join(in_types)}) -> {outs}")


def add(t: str, res: str | None = None, op: str = "stablehlo.add") -> str:
    attr = f" {{sdy.sharding = #sdy.sharding_per_value<[{res}]>}}" if res else ""
    return f"%0 = {op} %arg0, %arg1{attr} : {t}"


def reshape(tin: str, tout: str, res: str | None = None) -> str:
    attr = f" {{sdy.sharding = #sdy.sharding_per_value<[{res}]>}}" if res else ""
    return f"%0 = stablehlo.reshape %arg0{attr} : ({tin}) -> {tout}"


DOT = ("%0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] "
       ": (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>")

# (id, meshes, [(arg type, arg sharding)], op line, [result types], modes)
# modes: strategies to run ("b" basic, "a" aggressive, "c" both conservative too)
CASES = [
    # -- §4.1 projection in / §4.2 projection out --------------------------------------------
    ("proj_compound_xy", X4Y2, [(T8, s('[{"x", "y"}]'))], reshape(T8, "tensor<2x4xf32>"), ["tensor<2x4xf32>"]),
    ("proj_compound_yx", X4Y2, [(T8, s('[{"y", "x"}]'))], reshape(T8, "tensor<2x4xf32>"), ["tensor<2x4xf32>"]),
    ("proj_overflow_a3", A3, [(T8, s('[{"a"}]'))], reshape(T8, "tensor<2x4xf32>"), ["tensor<2x4xf32>"]),
    ("proj_minor_nondiv_a6", A6, [(T8, s('[{"a"}]'))], reshape(T8, "tensor<2x4xf32>"), ["tensor<2x4xf32>"]),
    ("proj_out_merge", A4, [("tensor<2x4xf32>", s('[{"a":(1)2}, {"a":(2)2}]'))],
     reshape("tensor<2x4xf32>", T8), [T8]),
    ("proj_out_partial_major", AB, [("tensor<4x4xf32>", s('[{"a"}, {"b"}]'))],
     reshape("tensor<4x4xf32>", "tensor<16xf32>"), ["tensor<16xf32>"]),
    ("proj_out_full_major", A4B2, [("tensor<4x4xf32>", s('[{"a"}, {"b"}]'))],
     reshape("tensor<4x4xf32>", "tensor<16xf32>"), ["tensor<16xf32>"]),
    ("proj_3x2_to_2x3", AB, [("tensor<3x2xf32>", s('[{"a"}, {"b"}]'))],
     reshape("tensor<3x2xf32>", "tensor<2x3xf32>"), ["tensor<2x3xf32>"]),
    ("proj_8x16_to_2x64", A8, [("tensor<8x16xf32>", s('[{"a"}, {?}]'))],
     reshape("tensor<8x16xf32>", "tensor<2x64xf32>"), ["tensor<2x64xf32>"]),
    ("proj_back_2x64_to_8x16", A8, [("tensor<2x64xf32>", s('[{"a":(1)2}, {"a":(2)4}]'))],
     reshape("tensor<2x64xf32>", "tensor<8x16xf32>"), ["tensor<8x16xf32>"]),
    ("proj_three_factor_overflow", {"mesh": '<["a"=3, "b"=2]>'}, [("tensor<12xf32>", s('[{"b", "a"}]'))],
     reshape("tensor<12xf32>", "tensor<2x2x3xf32>"), ["tensor<2x2x3xf32>"]),
    ("proj_size_one_dims", A4, [("tensor<8x1xf32>", s('[{"a"}, {?}]'))],
     reshape("tensor<8x1xf32>", "tensor<1x8xf32>"), ["tensor<1x8xf32>"]),
    # -- §5.2 compatible major axes ----------------------------------------------------------
    ("compat_ab_ac", {"mesh": '<["a"=2, "b"=2, "c"=2]>'},
     [(T8, s('[{"a", "b"}]')), (T8, s('[{"a", "c"}]'))], add(T8), [T8]),
    ("compat_four", ABCD, [(T8, s('[{"a", ?}]')), (T8, None), (T8, s('[{"a", "b", "c"}]')),
                           (T8, s('[{"a", "b", "d"}]'))],
     custom("([i], [i], [i], [i])->([i]) {i=8}", 4, T8, [T8]), [T8]),
    ("compat_sub_grow", A8, [(T8, s('[{"a":(1)2, ?}]')), (T8, s('[{"a":(1)4, ?}]'))], add(T8), [T8]),
    ("compat_sub_stop", {"mesh": '<["a"=8, "b"=2]>'},
     [(T8, s('[{"a":(1)2, "b", ?}]')), (T8, s('[{"a":(1)4, ?}]'))], add(T8), [T8]),
    ("compat_sub_conflict", A4, [(T8, s('[{"a":(1)2, ?}]')), (T8, s('[{"a":(2)2, ?}]'))], add(T8), [T8]),
    # -- §5.3 conflicts ----------------------------------------------------------------------
    ("conflict_replicated", AB, [(T88, s('[{"a"}, {}]')), (T88, s('[{?}, {?}], replicated={"a"}'))],
     add(T88), [T88]),
    ("conflict_unreduced", AB, [(T88, s('[{"a"}, {}]')), (T88, s('[{?}, {?}], unreduced={"a"}'))],
     add(T88), [T88]),
    ("conflict_closed", AB, [(T88, s('[{"a"}, {}]')), (T88, s('[{}, {}]'))], add(T88), [T88]),
    ("conflict_closed_result", AB, [(T8, s('[{"a", ?}]')), (T8, s('[{?}]'))], add(T8, s('[{}]')), [T8]),
    ("conflict_across_dot", AB, [("tensor<8x4xf32>", s('[{"a"}, {}]')), ("tensor<4x16xf32>", s('[{}, {"a"}]'))],
     DOT, ["tensor<8x16xf32>"]),
    ("conflict_across_add", AB, [(T88, s('[{"a"}, {?}]')), (T88, s('[{?}, {"a"}]'))], add(T88), [T88]),
    ("conflict_sharded_sizes", AB, [(T88, s('[{}, {"a"}]')), (T88, s('[{"b", "a"}, {}]'))], add(T88), [T88]),
    ("conflict_gcd_shrink", A4, [("tensor<2x4xf32>", s('[{"a"}, {?}]'))],
     reshape("tensor<2x4xf32>", T8), [T8]),
    ("conflict_last_prefix", A4, [(T8, s('[{"a":(1)2}]')), (T8, s('[{"a", ?}]'))], add(T8), [T8]),
    ("conflict_overflow_record", {"mesh": '<["a"=3, "b"=2]>'},
     [(T8, s('[{"a"}]')), ("tensor<2x4xf32>", s('[{?}, {"b", ?}]'))],
     custom("([ij], [i, j])->([ij]) {i=2, j=4}", 2, [T8, "tensor<2x4xf32>"], [T8]), [T8]),
    ("conflict_subaxes_cannot_coexist", A6,
     [("tensor<6x6xf32>", s('[{"a":(1)2, ?}, {?}]')), ("tensor<6x6xf32>", s('[{?}, {"a":(3)2, ?}]'))],
     add("tensor<6x6xf32>"), ["tensor<6x6xf32>"]),
    ("conflict_other_result", AB, [(T88, s('[{"a", ?}, {?}]'))],
     custom("([i, j])->([i, j], [j, i]) {i=8, j=8}", 1, T88, [T88, T88]), [T88, T88]),
    # -- §5.4 expansion, §11 subtle behaviours -----------------------------------------------
    ("sideways", AB, [(T88, s('[{"a", ?}, {?}]')), (T88, s('[{?}, {"b", ?}]'))], add(T88), [T88]),
    ("minor_most_nondivisible", A4, [("tensor<6xf32>", s('[{"a"}]')), ("tensor<6xf32>", None)],
     add("tensor<6xf32>"), ["tensor<6xf32>"]),
    ("reshape_nondivisible_a3", A3, [(T8, s('[{"a"}]'))], reshape(T8, "tensor<2x4xf32>"), ["tensor<2x4xf32>"]),
    ("reshape_subaxes_a4", A4, [(T8, s('[{"a"}]'))], reshape(T8, "tensor<2x4xf32>"), ["tensor<2x4xf32>"]),
    ("open_subaxis_grows", A4, [(T8, s('[{"a", ?}]')), (T8, None)], add(T8, s('[{"a":(1)2, ?}]')), [T8]),
    ("closed_dim_kept", AB, [(T88, s('[{}, {?}]')), (T88, s('[{"a"}, {"b"}]'))], add(T88), [T88]),
    ("closed_dim_kept2", AB, [(T88, s('[{"b"}, {?}]')), (T88, s('[{?}, {"a", ?}]'))], add(T88), [T88]),
    ("priorities_dropped", AB, [(T88, s('[{"a"}p1, {?}]')), (T88, s('[{?}, {"b"}p0]'))], add(T88), [T88]),
    ("replicated_kept", AB, [(T88, s('[{"a"}, {?}], replicated={"b"}')), (T88, s('[{?}, {"b"}]'))],
     add(T88), [T88]),
    ("unreduced_kept", AB, [(T88, s('[{?}, {"a"}], unreduced={"b"}')), (T88, None)], add(T88), [T88]),
    # -- ops ---------------------------------------------------------------------------------
    ("dot_lhs_rhs", AB, [("tensor<8x4xf32>", s('[{"a"}, {"b"}]')), ("tensor<4x16xf32>", None)],
     DOT, ["tensor<8x16xf32>"]),
    ("dot_result", AB, [("tensor<8x4xf32>", None), ("tensor<4x16xf32>", None)],
     DOT.replace(" : (", " {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"b\"}, {\"a\"}]>]>} : ("),
     ["tensor<8x16xf32>"]),
    ("transpose", AB, [("tensor<8x4x2xf32>", s('[{"a"}, {}, {"b"}]'))],
     "%0 = stablehlo.transpose %arg0, dims = [2, 0, 1] : (tensor<8x4x2xf32>) -> tensor<2x8x4xf32>",
     ["tensor<2x8x4xf32>"]),
    ("broadcast", AB, [("tensor<8xf32>", s('[{"a"}]'))],
     "%0 = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>",
     ["tensor<4x8xf32>"]),
    ("broadcast_size1", AB, [("tensor<1x8xf32>", s('[{?}, {"a"}]'))],
     "%0 = stablehlo.broadcast_in_dim %arg0, dims = [0, 1] : (tensor<1x8xf32>) -> tensor<4x8xf32>",
     ["tensor<4x8xf32>"]),
    ("reduce", AB, [("tensor<8x4xf32>", s('[{"a"}, {"b"}]')), ("tensor<f32>", None)],
     "%0 = stablehlo.reduce(%arg0 init: %arg1) applies stablehlo.add across dimensions = [1] "
     ": (tensor<8x4xf32>, tensor<f32>) -> tensor<8xf32>", ["tensor<8xf32>"]),
    ("reduce_back", AB, [("tensor<8x4xf32>", s('[{?}, {"b", ?}]')), ("tensor<f32>", None)],
     "%0 = stablehlo.reduce(%arg0 init: %arg1) applies stablehlo.add across dimensions = [1] "
     "{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"a\"}]>]>} "
     ": (tensor<8x4xf32>, tensor<f32>) -> tensor<8xf32>", ["tensor<8xf32>"]),
    # -- meshes (§5.1 step 1) ----------------------------------------------------------------
    ("mesh_equal_symbols", {"m1": '<["a"=2, "b"=2]>', "m2": '<["a"=2, "b"=2]>'},
     [(T88, s('[{?}, {"b"}]', "m2")), (T88, s('[{"a"}, {?}]', "m1"))], add(T88), [T88]),
    ("mesh_unequal", {"m1": '<["a"=2, "b"=2]>', "m2": '<["a"=2, "b"=4]>'},
     [(T88, s('[{?}, {"b"}]', "m2")), (T88, s('[{"a"}, {?}]', "m1"))], add(T88), [T88]),
    ("mesh_device_ids", {"m1": '<["a"=2, "b"=2]>', "m2": '<["a"=2, "b"=2], device_ids=[3, 2, 1, 0]>'},
     [(T88, s('[{?}, {"b"}]', "m1")), (T88, s('[{"a"}, {?}]', "m2"))], add(T88), [T88]),
    ("mesh_empty_placeholder", {"e": "<[]>", "mesh": '<["a"=2, "b"=2]>'},
     [(T88, s('[{}, {?}]', "e")), (T88, s('[{"a"}, {"b"}]'))], add(T88), [T88]),
    ("mesh_maximal", {"mx": "<[], device_ids=[0]>", "mesh": '<["a"=2, "b"=2]>'},
     [(T88, s('[{?}, {?}]', "mesh")), (T88, None)],
     add(T88, "<@mx, []>"), [T88]),
    ("mesh_size_one_axis", {"mesh": '<["a"=1, "b"=2]>'},
     [(T8, s('[{"a", "b"}]')), (T8, None)], add(T8), [T8]),
]

CONSERVATIVE = {"conflict_gcd_shrink", "conflict_last_prefix", "reshape_subaxes_a4", "proj_compound_xy",
                "proj_minor_nondiv_a6", "minor_most_nondivisible", "open_subaxis_grows",
                "proj_out_merge", "compat_sub_grow", "proj_8x16_to_2x64", "proj_back_2x64_to_8x16"}


def _params():
    for case in CASES:
        for strategy in ("basic", "aggressive"):
            yield pytest.param(case, strategy, False, id=f"{case[0]}-{strategy}")
            if case[0] in CONSERVATIVE:
                yield pytest.param(case, strategy, True, id=f"{case[0]}-{strategy}-conservative")


@pytest.mark.parametrize("case,strategy,conservative", list(_params()))
def test_example(case, strategy, conservative):
    _, meshes, args, op_line, results = case
    assert_case(module_text(meshes, args, op_line, results), strategy, conservative)


# -- directions: propagation barriers (identity rule, one direction for every factor) ----------

def identity_rule(shape):
    from sdy_dl.rules.instance import Factor, RuleInstance
    dims = tuple((d,) for d in range(len(shape)))
    return RuleInstance(tuple(Factor(n) for n in shape), (dims,), (dims,))


BARRIER_CASES = [
    ("fwd_operand", "FORWARD", s('[{"a"}, {?}]'), None),
    ("fwd_result_only", "FORWARD", s('[{?}, {?}]'), s('[{"b", ?}, {?}]')),
    ("fwd_both", "FORWARD", s('[{"a", ?}, {?}]'), s('[{"a", "b", ?}, {?}]')),
    ("fwd_conflict", "FORWARD", s('[{"a", ?}, {?}]'), s('[{"b", ?}, {?}]')),
    ("bwd_result", "BACKWARD", s('[{?}, {?}]'), s('[{"b", ?}, {"a"}]')),
    ("bwd_operand_only", "BACKWARD", s('[{"a"}, {?}]'), None),
    ("bwd_both", "BACKWARD", s('[{"a", ?}, {?}]'), s('[{"a", "b", ?}, {?}]')),
    ("none", "NONE", s('[{"a"}, {?}]'), s('[{?}, {"b", ?}]')),
]


@pytest.mark.parametrize("strategy", ["basic", "aggressive"])
@pytest.mark.parametrize("case", BARRIER_CASES, ids=[c[0] for c in BARRIER_CASES])
def test_barrier_direction(case, strategy):
    _, direction, arg, res = case
    attr = f" {{sdy.sharding = #sdy.sharding_per_value<[{res}]>}}" if res else ""
    op = f"%0 = sdy.propagation_barrier %arg0 allowed_direction={direction}{attr} : {T88}"
    text = module_text(AB, [(T88, arg)], op, [T88])
    assert_case(text, strategy, rule=identity_rule((8, 8)), directions=(direction, direction),
                elementwise=True)


# -- blocked factors -----------------------------------------------------------------------------

BLOCKED_CASES = [
    ("dynamic_slice", AB, [(T88, s('[{"a"}, {"b"}]')), ("tensor<i32>", None), ("tensor<i32>", None)],
     "%0 = stablehlo.dynamic_slice %arg0, %arg1, %arg2, sizes = [8, 4] "
     ": (tensor<8x8xf32>, tensor<i32>, tensor<i32>) -> tensor<8x4xf32>", ["tensor<8x4xf32>"]),
    ("custom_blocked", AB, [(T88, s('[{"a"}, {"b"}]'))],
     custom("([i, j])->([i, j]) {i=8, j=8} blocked_propagation={j}", 1, T88, [T88]), [T88]),
]


@pytest.mark.parametrize("strategy", ["basic", "aggressive"])
@pytest.mark.parametrize("case", BLOCKED_CASES, ids=[c[0] for c in BLOCKED_CASES])
def test_blocked(case, strategy):
    _, meshes, args, op_line, results = case
    assert_case(module_text(meshes, args, op_line, results), strategy)


# -- tensor sizes when an overflow drops records (aggressive source order, §6) -------------------

SIZE_CASES = [
    # operand 0's dim [ijk] overflows at i ("a"=3 on i=2): it keeps records for i, j only (size 6,
    # not 24), so the 12-element operand 1 is the bigger source.
    ("variant_small", {"mesh": '<["a"=3, "b"=2]>'},
     [("tensor<24xf32>", s('[{"a"}]')), ("tensor<12xf32>", s('[{"b"}]'))],
     custom("([ijk], [l])->([ijk], [l]) {i=2, j=3, k=4, l=12}", 2, ["tensor<24xf32>", "tensor<12xf32>"],
            ["tensor<24xf32>", "tensor<12xf32>"]), ["tensor<24xf32>", "tensor<12xf32>"]),
    ("variant_across", {"mesh": '<["a"=2, "b"=2, "c"=3]>'},
     [("tensor<24x2xf32>", s('[{"c", ?}, {"a", ?}]')), ("tensor<8x2xf32>", s('[{"a", ?}, {?}]'))],
     custom("([ijk, l], [m, l])->([ijk, l], [m, l]) {i=2, j=3, k=4, l=2, m=8}", 2,
            ["tensor<24x2xf32>", "tensor<8x2xf32>"], ["tensor<24x2xf32>", "tensor<8x2xf32>"]),
     ["tensor<24x2xf32>", "tensor<8x2xf32>"]),
]


@pytest.mark.parametrize("strategy", ["basic", "aggressive"])
@pytest.mark.parametrize("case", SIZE_CASES, ids=[c[0] for c in SIZE_CASES])
def test_size_variants(case, strategy):
    _, meshes, args, op_line, results = case
    assert_case(module_text(meshes, args, op_line, results), strategy)


# -- all examples in one batch, and engine parity ------------------------------------------------

def _all_example_cases():
    for case in CASES + SIZE_CASES + BLOCKED_CASES:
        text = module_text(*case[1:])
        for strategy in ("basic", "aggressive"):
            yield text, strategy, False
            if case[0] in CONSERVATIVE:
                yield text, strategy, True


def test_examples_in_one_batch():
    check_batch(list(_all_example_cases()))


@pytest.mark.souffle
@pytest.mark.skipif(shutil.which("souffle") is None, reason="souffle not on PATH")
def test_examples_souffle_equals_clingo():
    cases = list(_all_example_cases())
    assert check_batch(cases, "souffle") == check_batch(cases, "clingo")


# -- one-way directions on a multi-operand op (spec-derived: §5.2, §5.4, §11.5) ---------------
# The passes above only use BOTH (or a barrier's direction on its single operand); op-priority
# bands give FORWARD/BACKWARD to ordinary ops.  Expected values follow §5.2: in a one-way
# direction the "wrong" side cannot contribute axes, but every tensor is expanded sideways.

DIRECTION_CASES = [
    # (direction, [operand, operand, result] before, [...] after)
    ("FORWARD", ['[{"a", ?}]', None, None], ['[{"a", ?}]', '[{"a", ?}]', '[{"a", ?}]']),
    ("FORWARD", [None, None, '[{"b", ?}]'], [None, None, '[{"b", ?}]']),
    ("FORWARD", ['[{"a", ?}]', None, '[{"a", "b", ?}]'], ['[{"a", ?}]', '[{"a", ?}]', '[{"a", "b", ?}]']),
    ("FORWARD", ['[{"a", ?}]', None, '[{"b", ?}]'], ['[{"a", ?}]', None, '[{"b", ?}]']),
    ("BACKWARD", [None, None, '[{"b", ?}]'], ['[{"b", ?}]', '[{"b", ?}]', '[{"b", ?}]']),
    ("BACKWARD", ['[{"a", ?}]', None, None], ['[{"a", ?}]', None, None]),
    ("BACKWARD", ['[{"a", "b", ?}]', '[{?}]', '[{"a", ?}]'], ['[{"a", "b", ?}]', '[{"a", ?}]', '[{"a", ?}]']),
    ("NONE", ['[{"a", ?}]', None, None], ['[{"a", ?}]', None, None]),
]


@pytest.mark.parametrize("strategy", ["basic", "aggressive"])
@pytest.mark.parametrize("case", DIRECTION_CASES)
def test_one_way_direction(case, strategy):
    from sdy_dl.engines import get_engine
    from sdy_dl.propagation.step import StepInput
    from sdy_dl.propagation.step_eval import evaluate_steps
    from sdy_dl.rules.notation import parse_notation
    from oracle import read_mesh
    from sdy_dl.sharding import parse_tensor_sharding

    direction, before, after = case
    parse = lambda t: parse_tensor_sharding(f"<@mesh, {t}>") if t else None  # noqa: E731
    rule = parse_notation("([i], [i])->([i]) {i=8}").to_instance({"i": 8})
    shardings = [parse(t) for t in before]
    step = StepInput(rule, tuple(shardings[:2]), tuple(shardings[2:]), (direction,), strategy,
                     elementwise=True)
    out = evaluate_steps(get_engine("clingo"), [step], {"mesh": read_mesh('<["a"=2, "b"=2]>')})[0]
    got = [n if n is not None else o for n, o in zip(out.operands + out.results, shardings)]
    assert [g.to_text() if g else None for g in got] == \
        [parse(t).to_text() if t else None for t in after]
