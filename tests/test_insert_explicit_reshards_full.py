"""insert-explicit-reshards with ``enable-full-version=true`` against jaxlib's
``func.func(sdy-insert-explicit-reshards{enable-full-version=true})``: modules
of our own (one family of ops each), JAX programs after the propagation
pipeline, and Shardy's lit inputs for the pass (read from a Shardy source at
test time, skipped when there is none; jaxlib runs in a child process since
it aborts on some of them).
"""

from __future__ import annotations

import pytest

from oracle import assert_same, normalize, ours, shardy

FULL = "func.func(sdy-insert-explicit-reshards{enable-full-version=true})"
MESH = 'sdy.mesh @mesh = <["x"=2, "y"=4, "z"=2]>\n'


def full(text: str) -> str:
    return normalize(ours(text, "insert-explicit-reshards", engine="clingo",
                          options={"enable_full_version": True}))


def func(args: str, results: str, body: str, mesh: str = MESH) -> str:
    return mesh + f"func.func @main({args}) -> ({results}) {{\n{body}\n}}\n"


def arg(i: int, type_: str, sharding: str | None) -> str:
    attr = f" {{sdy.sharding = #sdy.sharding<@mesh, {sharding}>}}" if sharding else ""
    return f"%arg{i}: {type_}{attr}"


def res(type_: str, sharding: str | None) -> str:
    return type_ + (f" {{sdy.sharding = #sdy.sharding<@mesh, {sharding}>}}" if sharding else "")


def per_value(*shardings: str) -> str:
    return "sdy.sharding = #sdy.sharding_per_value<[" + ", ".join(
        f"<@mesh, {s}>" for s in shardings) + "]>"


T = "tensor<8x16xf32>"

CASES = {
    # Elementwise: operands and the result on other dims; a missing operand sharding.
    "elementwise": func(
        ", ".join([arg(0, T, '[{"x"}, {}]'), arg(1, T, '[{}, {"y"}]'), arg(2, T, None)]),
        res(T, '[{"y"}, {}]'),
        f'''  %0 = stablehlo.add %arg0, %arg1 {{{per_value('[{"x"}, {"y"}]')}}} : {T}
  %1 = stablehlo.multiply %0, %arg2 {{{per_value('[{}, {"y", "z"}]')}}} : {T}
  %2 = stablehlo.negate %1 {{{per_value('[{"z"}, {}]')}}} : {T}
  return %2 : {T}'''),
    # Dots: the result conflicts with both operands; a contracting dim sharded
    # (all-reduce after the dot); batching dims.
    "dot": func(
        ", ".join([arg(0, "tensor<8x32xf32>", '[{"x"}, {"y"}]'),
                   arg(1, "tensor<32x16xf32>", '[{"z"}, {"x"}]'),
                   arg(2, "tensor<4x8x32xf32>", '[{"x"}, {}, {"y"}]'),
                   arg(3, "tensor<4x32x16xf32>", '[{}, {"y"}, {"z"}]')]),
        res(T, '[{}, {"y"}]') + ", tensor<4x8x16xf32>",
        f'''  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {{{per_value('[{"y"}, {}]')}}} : (tensor<8x32xf32>, tensor<32x16xf32>) -> {T}
  %1 = stablehlo.dot_general %arg2, %arg3, batching_dims = [0] x [0], contracting_dims = [2] x [1] {{{per_value('[{"x"}, {"z"}, {}]')}}} : (tensor<4x8x32xf32>, tensor<4x32x16xf32>) -> tensor<4x8x16xf32>
  return %0, %1 : {T}, tensor<4x8x16xf32>'''),
    # Concatenates: operands sharded alike but the concat dim sharded; unlike.
    "concatenate": func(
        ", ".join([arg(0, "tensor<8x8xf32>", '[{"x"}, {"y"}]'),
                   arg(1, "tensor<8x8xf32>", '[{"x"}, {"y"}]'),
                   arg(2, "tensor<4x8xf32>", '[{}, {"z"}]')]),
        "tensor<16x8xf32>, tensor<12x8xf32>",
        f'''  %0 = stablehlo.concatenate %arg0, %arg1, dim = 0 {{{per_value('[{"x"}, {"y"}]')}}} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
  %1 = stablehlo.concatenate %arg0, %arg2, dim = 0 {{{per_value('[{}, {"y"}]')}}} : (tensor<8x8xf32>, tensor<4x8xf32>) -> tensor<12x8xf32>
  return %0, %1 : tensor<16x8xf32>, tensor<12x8xf32>'''),
    # Reductions: a sharded reduced dim (all-reduce), two results, unreduced results.
    "reduce": func(
        ", ".join([arg(0, "tensor<8x16xf32>", '[{"x"}, {"y"}]'),
                   arg(1, "tensor<8x16xi32>", '[{"z"}, {"y"}]')]),
        "tensor<8xf32>, tensor<8xi32>, tensor<16xf32>",
        f'''  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %ci = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.reduce(%arg0 init: %c), (%arg1 init: %ci) across dimensions = [1] {{{per_value('[{"x"}]', '[{"x"}]')}}} : (tensor<8x16xf32>, tensor<8x16xi32>, tensor<f32>, tensor<i32>) -> (tensor<8xf32>, tensor<8xi32>)
    reducer(%a: tensor<f32>, %b: tensor<f32>) (%c1: tensor<i32>, %d: tensor<i32>) {{
      %s = stablehlo.add %a, %b : tensor<f32>
      %t = stablehlo.add %c1, %d : tensor<i32>
      stablehlo.return %s, %t : tensor<f32>, tensor<i32>
    }}
  %1 = stablehlo.reduce(%arg0 init: %c) applies stablehlo.add across dimensions = [0] {{{per_value('[{"y"}], unreduced={"x"}')}}} : (tensor<8x16xf32>, tensor<f32>) -> tensor<16xf32>
  return %0#0, %0#1, %1 : tensor<8xf32>, tensor<8xi32>, tensor<16xf32>'''),
    # Reshapes: a merge and a split with sub-axes; transpose.
    "reshape": func(
        ", ".join([arg(0, "tensor<8x16xf32>", '[{"y"}, {"x"}]'),
                   arg(1, "tensor<128xf32>", '[{"x", "y"}]')]),
        "tensor<128xf32>, tensor<4x32xf32>, tensor<16x8xf32>",
        f'''  %0 = stablehlo.reshape %arg0 {{{per_value('[{"z", "y"}]')}}} : (tensor<8x16xf32>) -> tensor<128xf32>
  %1 = stablehlo.reshape %arg1 {{{per_value('[{"y"}, {"x"}]')}}} : (tensor<128xf32>) -> tensor<4x32xf32>
  %2 = stablehlo.transpose %arg0, dims = [1, 0] {{{per_value('[{"y"}, {"x"}]')}}} : (tensor<8x16xf32>) -> tensor<16x8xf32>
  return %0, %1, %2 : tensor<128xf32>, tensor<4x32xf32>, tensor<16x8xf32>'''),
    # Reshapes whose projection has overflow axes: the axes are spread again
    # over the factors of both sides.
    "reshape_overflow": ('sdy.mesh @mesh = <["b"=2, "c"=4]>\n' + f'''func.func @main({arg(0, "tensor<8x12xf32>", '[{}, {"b"}]')}, {arg(1, "tensor<12xf32>", '[{"c", "b"}]')}) -> (tensor<6x16xf32>, tensor<6x2xf32>) {{
  %0 = stablehlo.reshape %arg0 {{{per_value('[{}, {"c"}]')}}} : (tensor<8x12xf32>) -> tensor<6x16xf32>
  %1 = stablehlo.reshape %arg1 {{{per_value('[{}, {}]')}}} : (tensor<12xf32>) -> tensor<6x2xf32>
  return %0, %1 : tensor<6x16xf32>, tensor<6x2xf32>
}}
'''),
    # Gather and scatter.
    "gather_scatter": func(
        ", ".join([arg(0, "tensor<8x16xf32>", '[{"x"}, {"y"}]'),
                   arg(1, "tensor<4x1xi32>", '[{"y"}, {}]'),
                   arg(2, "tensor<4x16xf32>", '[{}, {"z"}]')]),
        "tensor<4x16xf32>, tensor<8x16xf32>",
        f'''  %0 = "stablehlo.gather"(%arg0, %arg1) <{{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 16>}}> {{{per_value('[{"z"}, {"x"}]')}}} : (tensor<8x16xf32>, tensor<4x1xi32>) -> tensor<4x16xf32>
  %1 = "stablehlo.scatter"(%arg0, %arg1, %arg2) <{{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}}> ({{
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }}) {{{per_value('[{}, {"y"}]')}}} : (tensor<8x16xf32>, tensor<4x1xi32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  return %0, %1 : tensor<4x16xf32>, tensor<8x16xf32>'''),
    # Custom calls: one with a registered rule (Sharding is skipped, a
    # custom rule attached by the user is skipped too).
    "custom_call": func(
        arg(0, T, '[{"x"}, {"y"}]'),
        f"{T}, {T}",
        f'''  %0 = stablehlo.custom_call @Sharding(%arg0) {{{per_value('[{"y"}, {}]')}}} : ({T}) -> {T}
  %1 = stablehlo.custom_call @foo(%arg0) {{{per_value('[{}, {"x"}]')}, sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {{i=8, j=16}}, custom>}} : ({T}) -> {T}
  %2 = stablehlo.custom_call @bar(%arg0) {{{per_value('[{}, {"x"}]')}, sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i, j]) {{i=8, j=16}}>}} : ({T}) -> {T}
  return %1, %2 : {T}, {T}'''),
    # Manual computations: operands resharded to in_shardings, returned values
    # to the local view of out_shardings; ops inside see the local view.
    "manual_computation": func(
        arg(0, "tensor<16x8xf32>", '[{"y"}, {}]'),
        "tensor<16x8xf32>",
        '''  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {"y"}]>] manual_axes={"x"} (%arg1: tensor<8x8xf32>) {
    %1 = stablehlo.negate %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"z"}, {}]>]>} : tensor<8x8xf32>
    sdy.return %1 : tensor<8x8xf32>
  } : (tensor<16x8xf32>) -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>'''),
    # While and optimization barrier: the sources of each result are resharded to it.
    "data_flow": func(
        ", ".join([arg(0, T, '[{"x"}, {}]'), arg(1, "tensor<i32>", None)]),
        f"{T}, {T}",
        f'''  %0:2 = "stablehlo.while"(%arg0, %arg1) ({{
    ^bb0(%a: {T}, %i: tensor<i32>):
      %c = stablehlo.constant dense<4> : tensor<i32>
      %1 = stablehlo.compare LT, %i, %c : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
  }}, {{
    ^bb0(%a: {T}, %i: tensor<i32>):
      %c = stablehlo.constant dense<1> : tensor<i32>
      %1 = stablehlo.negate %a {{{per_value('[{"z"}, {}]')}}} : {T}
      %2 = stablehlo.add %i, %c : tensor<i32>
      stablehlo.return %1, %2 : {T}, tensor<i32>
  }}) {{{per_value('[{}, {"y"}]', '[]')}}} : ({T}, tensor<i32>) -> ({T}, tensor<i32>)
  %3 = "stablehlo.optimization_barrier"(%arg0) {{{per_value('[{}, {"z"}]')}}} : ({T}) -> {T}
  return %0#0, %3 : {T}, {T}'''),
    # Calls and returns: operands to the callee's argument shardings, returned
    # values to the function's result shardings.
    "call_and_return": MESH + f'''func.func private @callee(%arg0: {T} {{sdy.sharding = #sdy.sharding<@mesh, [{{}}, {{"y"}}]>}}) -> ({T} {{sdy.sharding = #sdy.sharding<@mesh, [{{}}, {{"y"}}]>}}) {{
  %0 = stablehlo.abs %arg0 {{{per_value('[{"x"}, {}]')}}} : {T}
  return %0 : {T}
}}
func.func @main({arg(0, T, '[{"x"}, {}]')}) -> ({res(T, '[{"z"}, {}]')}) {{
  %0 = func.call @callee(%arg0) {{{per_value('[{}, {"y"}]')}}} : ({T}) -> {T}
  return %0 : {T}
}}
''',
    # Meshes with another device order: resharded onto the most used mesh.
    "device_order": ('sdy.mesh @mesh = <["x"=2, "y"=4]>\n'
                     'sdy.mesh @other = <["x"=2, "y"=4], device_ids=[7, 6, 5, 4, 3, 2, 1, 0]>\n'
                     f'''func.func @main(%arg0: {T} {{sdy.sharding = #sdy.sharding<@other, [{{"x"}}, {{}}]>}}, %arg1: {T} {{sdy.sharding = #sdy.sharding<@mesh, [{{"x"}}, {{}}]>}}) -> {T} {{
  %0 = stablehlo.add %arg0, %arg1 {{sdy.sharding = #sdy.sharding_per_value<[<@other, [{{"x"}}, {{"y"}}]>]>}} : {T}
  return %0 : {T}
}}
'''),
}

#: ``mhlo.ragged_dot`` (an unregistered op in jaxlib): with the rule XLA gives
#: it, the non-full version treats it in full too.
RAGGED_DOT = MESH + '''func.func @main(%arg0: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %arg1: tensor<2x8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}, {"y"}]>}, %arg2: tensor<2xi32>) -> tensor<16x4xf32> {
  %0 = "mhlo.ragged_dot"(%arg0, %arg1, %arg2) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>, sdy.sharding_rule = #sdy.op_sharding_rule<([i, j], [l, j, k], [l])->([i, k]) {i=16, j=8, k=4, l=2} reduction={j} need_replication={l}>, ragged_dot_dimension_numbers = 1 : i64} : (tensor<16x8xf32>, tensor<2x8x4xf32>, tensor<2xi32>) -> tensor<16x4xf32>
  return %0 : tensor<16x4xf32>
}
'''


@pytest.mark.parametrize("name", sorted(CASES))
def test_full_version(name):
    text = CASES[name]
    expected = shardy(text, FULL)
    assert expected != normalize(text), "the case must make jaxlib insert something"
    assert_same(expected, full(text))


@pytest.mark.parametrize("enable", [False, True])
def test_ragged_dot(enable):
    from sdy_dl.ir.context import allow_unregistered_dialects

    allow_unregistered_dialects(True)
    try:
        expected = shardy(RAGGED_DOT, f"func.func(sdy-insert-explicit-reshards"
                                      f"{{enable-full-version={str(enable).lower()}}})")
        actual = normalize(ours(RAGGED_DOT, "insert-explicit-reshards", engine="clingo",
                                options={"enable_full_version": enable}))
    finally:
        allow_unregistered_dialects(False)
    assert "sdy.reshard" in expected and "sdy.all_reduce" in expected
    assert_same(expected, actual)


# -- JAX programs: the pipeline's output through the full version ---------------------

PROGRAMS = ["mlp", "attention", "training_step", "gather_scatter", "reductions_reshapes",
            "while_loop", "shard_map", "sharding_constraint", "convnet"]


def conflicting_layouts() -> str:
    """Concatenate, pad, slice, a matmul and a transpose whose operands and
    constraints disagree."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax_programs import _f32, _ns

    def f(a, b, w):
        c = lax.with_sharding_constraint(jnp.concatenate([a, b], axis=0), _ns(None, "model"))
        y = lax.with_sharding_constraint(jnp.pad(c, ((1, 1), (0, 0)))[2:10] @ w,
                                         _ns("model", None))
        return y + jnp.transpose(y)
    return jax.jit(f, in_shardings=(_ns("data", None), _ns(None, "model"), _ns("model", "data")),
                   out_shardings=_ns(None, "data")).lower(
        _f32(8, 16), _f32(8, 16), _f32(16, 8)).as_text()


def constrained_matmuls() -> str:
    """Two matmuls around a constraint on the other axis, then a reduction."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax_programs import _f32, _ns

    def f(x, w1, w2):
        h = lax.with_sharding_constraint(jnp.tanh(x @ w1), _ns(None, "data"))
        return (h @ w2).sum(axis=0)
    return jax.jit(f, in_shardings=(_ns("data", "model"), _ns("model", None),
                                    _ns(None, "model"))).lower(
        _f32(16, 32), _f32(32, 64), _f32(64, 8)).as_text()


#: Programs with conflicts the full version makes explicit with reshards.
CONFLICTS = {"conflicting_layouts": conflicting_layouts,
             "constrained_matmuls": constrained_matmuls}


@pytest.mark.parametrize("name", PROGRAMS + sorted(CONFLICTS))
def test_jax_program_after_pipeline(name):
    import lowering
    from jax_programs import lowered

    from sdy_dl.ir import parse_module_text
    from sdy_dl.passes import get_pass
    from sdy_dl.pipeline import make_options
    from sdy_dl.pipeline import propagate

    text = (lowering.once("explicit_reshards_full", name, CONFLICTS[name]) if name in CONFLICTS
            else lowered(name))
    expected = shardy(text, "sdy-propagation-pipeline," + FULL)
    options = make_options({"enable_full_version": True}, engine="clingo")
    module = propagate(parse_module_text(text, "<jax>"), make_options(engine="clingo"))
    actual = get_pass("insert-explicit-reshards").run(module, options).print()
    if name in CONFLICTS:
        assert expected.count("sdy.reshard") > shardy(text, "sdy-propagation-pipeline").count(
            "sdy.reshard")
    assert_same(expected, normalize(actual))


# -- Shardy's lit inputs --------------------------------------------------------------

LIT_DIR = "shardy/dialect/sdy/transforms/export/test/insert_explicit_reshards"
LIT_FILES = [
    "bitcast_convert.mlir", "broadcast_in_dim.mlir", "call_ops.mlir",
    "call_ops_enable_full_version_false.mlir", "cholesky_triangular_solve.mlir",
    "clamp_select.mlir", "collective_ops.mlir", "concatenate.mlir", "convolution.mlir",
    "custom_call.mlir", "data_flow_ops.mlir", "dot_dot_general.mlir",
    "dynamic_slice_dynamic_update_slice.mlir", "elementwise_ops.mlir", "fft.mlir",
    "func_inputs_outputs.mlir", "gather_scatter.mlir", "manual_computation.mlir",
    "meshes.mlir", "pad_slice.mlir", "reduce.mlir", "reduce_window_select_and_scatter.mlir",
    "reshape.mlir", "reverse.mlir", "rng_bit_generator.mlir", "single_device_sharding.mlir",
    "single_device_sharding_errors.mlir", "sort.mlir", "unreduced.mlir",
]

def run_lit(name: str) -> tuple[list[str], int]:
    """(names of the chunks that differ, number of chunks jaxlib accepts)."""
    from oracle_isolated import shardy_each
    from shardy_source import lit_or_skip
    from test_lit_passes import chunk_name, chunks_of

    from sdy_dl.ir import parse_module_text
    from sdy_dl.ir.context import allow_unregistered_dialects
    from sdy_dl.passes import PassOptions, get_pass

    text = lit_or_skip(name, LIT_DIR)
    chunks = chunks_of(text)
    expected = shardy_each(chunks, FULL)
    differ, accepted = [], 0
    allow_unregistered_dialects(True)
    try:
        for i, (chunk, want) in enumerate(zip(chunks, expected)):
            if want is None:
                continue
            accepted += 1
            try:
                module = parse_module_text(chunk, "<lit>")
                got = normalize(get_pass("insert-explicit-reshards").run(
                    module, PassOptions.create("insert-explicit-reshards", {"enable-full-version": True},
                                       engine="clingo")).print())
            except Exception:  # noqa: BLE001  (a difference like any other)
                got = None
            if got != want:
                differ.append(chunk_name(chunk, i))
    finally:
        allow_unregistered_dialects(False)
    return differ, accepted


#: The longest files (most chunks) run in the slow suite.
SLOW = {"dot_dot_general.mlir", "reshape.mlir", "custom_call.mlir",
        "cholesky_triangular_solve.mlir", "pad_slice.mlir", "meshes.mlir"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in LIT_FILES])
def test_lit_file(name):
    differ, accepted = run_lit(name)
    assert not differ, f"{accepted - len(differ)}/{accepted} equal; differ: {differ}"


# -- random modules: jaxlib's pipeline output through both passes ----------------------

def run_random(seeds, control_flow: bool = False) -> tuple[int, int, list[int]]:
    """(equal, counted, differing seeds) over the seeds whose pipeline output
    jaxlib's full version changes (jaxlib runs in a child process: it aborts
    on a few).  The modules: dots, concatenates, reshapes ... with conflicting
    shardings, or (``control_flow``) while loops, case ops, optimization
    barriers, constraints and calls."""
    from oracle_isolated import shardy_each
    from random_control_flow import random_control_flow_module
    from random_modules import random_module

    seeds = list(seeds)
    inputs = [shardy(random_control_flow_module(seed) if control_flow
                     else random_module(seed, 10, ("dot", "concat")), "sdy-propagation-pipeline")
              for seed in seeds]
    equal, counted, differ = 0, 0, []
    for seed, propagated, expected in zip(seeds, inputs, shardy_each(inputs, FULL)):
        if expected is None or expected == propagated:
            continue  # jaxlib aborts on it, or changes nothing
        counted += 1
        if full(propagated) == expected:
            equal += 1
        else:
            differ.append(seed)
    return equal, counted, differ


def test_random_modules():
    equal, counted, differ = run_random(range(12))
    assert counted >= 6, "too few seeds exercise the full version"
    assert not differ, f"{equal}/{counted} equal; differ: {differ}"


def test_random_control_flow_modules():
    equal, counted, differ = run_random(range(8), control_flow=True)
    assert counted >= 4, "too few seeds exercise the full version"
    assert not differ, f"{equal}/{counted} equal; differ: {differ}"


@pytest.mark.slow
def test_random_control_flow_modules_many():
    equal, counted, differ = run_random(range(8, 150), control_flow=True)
    assert counted >= 80
    assert not differ, f"{equal}/{counted} equal; differ: {differ}"


@pytest.mark.slow
def test_random_modules_many():
    equal, counted, differ = run_random(range(12, 400))
    assert counted >= 100
    assert not differ, f"{equal}/{counted} equal; differ: {differ}"


@pytest.mark.souffle
@pytest.mark.parametrize("name", sorted(CASES))
def test_souffle_equals_clingo(name):
    import shutil

    if shutil.which("souffle") is None:
        pytest.skip("souffle is not on PATH")
    assert ours(CASES[name], "insert-explicit-reshards", engine="souffle",
                options={"enable_full_version": True}) == \
        ours(CASES[name], "insert-explicit-reshards", engine="clingo",
             options={"enable_full_version": True})
