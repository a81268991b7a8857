"""Single-op modules covering every op kind and variant of Shardy's rule registry.

The cases follow the structure of Shardy's lit test
``op_sharding_rule_registry.mlir`` (every op kind and the variants it checks:
size-0 and size-1 dims, scalars, slices feeding concatenates, constant start
indices, FFT kinds, gather/scatter batching dims, reshape splits/merges/swaps,
conv groups, custom-call targets, ...), written anew with their own shapes.
``CASES`` maps a case name to module text with one function ``@main``;
``EXPECTED`` holds hand-checked rules of a few cases; ``MATMUL``, ``USER_RULES``
and ``write_rules`` are shared by the user-rule tests.
"""

from __future__ import annotations

import textwrap


def module(args: list[str], results: list[str], body: str) -> str:
    """A module with ``func.func @main(args) -> results`` and ``body``."""
    sig = ", ".join(f"%arg{i}: {t}" for i, t in enumerate(args))
    return f"func.func @main({sig}) -> ({', '.join(results)}) {{\n{body}\n}}\n"


def op(args: list[str], results: list[str], text: str, prelude: str = "") -> str:
    """A module whose body is ``prelude``, then ``%r = text`` returned whole."""
    lhs = "%r" if len(results) == 1 else f"%r:{len(results)}"
    rets = "%r" if len(results) == 1 else ", ".join(f"%r#{i}" for i in range(len(results)))
    body = f"{prelude}  {lhs} = {text}\n  return {rets} : {', '.join(results)}"
    return module(args, results, body)


def _t(shape: str, elem: str = "f32") -> str:
    return f"tensor<{shape}x{elem}>" if shape else f"tensor<{elem}>"


def _binary(name: str, shape: str, elem: str = "f32") -> str:
    t = _t(shape, elem)
    return op([t, t], [t], f"stablehlo.{name} %arg0, %arg1 : {t}")


def _unary(name: str, shape: str, elem: str = "f32", out: str | None = None) -> str:
    t = _t(shape, elem)
    o = out or t
    return op([t], [o], f"stablehlo.{name} %arg0 : ({t}) -> {o}")


CASES: dict[str, str] = {}

# --------------------------------------------------------------------------- pointwise
CASES["pointwise_add"] = _binary("add", "4x1x6")
CASES["pointwise_size_zero_dim"] = _binary("multiply", "3x0x2")
CASES["pointwise_scalar"] = _binary("subtract", "")
for _name in ("divide", "remainder", "power", "atan2", "maximum", "minimum"):
    CASES[f"pointwise_{_name}"] = _binary(_name, "5x3")
for _name in ("and", "or", "xor", "shift_left", "shift_right_arithmetic",
              "shift_right_logical"):
    CASES[f"pointwise_{_name}"] = _binary(_name, "6x2", "i32")
for _name in ("negate", "abs", "sign", "cbrt", "ceil", "floor", "cosine", "sine", "tan",
              "tanh", "exponential", "exponential_minus_one", "log", "log_plus_one",
              "logistic", "sqrt", "rsqrt", "round_nearest_afz", "round_nearest_even"):
    CASES[f"pointwise_{_name}"] = _unary(_name, "2x7")
for _name in ("not", "count_leading_zeros", "popcnt"):
    CASES[f"pointwise_{_name}"] = _unary(_name, "2x7", "i32")
CASES["pointwise_is_finite"] = _unary("is_finite", "3x5", out=_t("3x5", "i1"))
CASES["pointwise_convert"] = _unary("convert", "3x5", out=_t("3x5", "i32"))
CASES["pointwise_real"] = _unary("real", "4x2", "complex<f32>", out=_t("4x2"))
CASES["pointwise_imag"] = _unary("imag", "4x2", "complex<f32>", out=_t("4x2"))
CASES["pointwise_complex"] = op(
    [_t("4x2"), _t("4x2")], [_t("4x2", "complex<f32>")],
    "stablehlo.complex %arg0, %arg1 : (tensor<4x2xf32>, tensor<4x2xf32>) -> "
    "tensor<4x2xcomplex<f32>>")
CASES["pointwise_compare"] = op(
    [_t("5x6"), _t("5x6")], [_t("5x6", "i1")],
    "stablehlo.compare LT, %arg0, %arg1 : (tensor<5x6xf32>, tensor<5x6xf32>) -> tensor<5x6xi1>")
CASES["pointwise_reduce_precision"] = op(
    [_t("3x3")], [_t("3x3")],
    "stablehlo.reduce_precision %arg0, format = e5m10 : tensor<3x3xf32>")
CASES["sharding_constraint"] = op(
    [_t("8x4")], [_t("8x4")], "sdy.sharding_constraint %arg0 <@mesh, [{}, {}]> : tensor<8x4xf32>",
).replace("func.func", 'sdy.mesh @mesh = <["a"=2]>\nfunc.func', 1)

# --------------------------------------------------------------------------- collectives
CASES["all_reduce_variadic"] = op(
    [_t("4x6"), _t("3")], [_t("4x6"), _t("3")],
    '"stablehlo.all_reduce"(%arg0, %arg1) ({\n'
    "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
    "    %s = stablehlo.add %a, %b : tensor<f32>\n"
    "    stablehlo.return %s : tensor<f32>\n"
    "  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : "
    "(tensor<4x6xf32>, tensor<3xf32>) -> (tensor<4x6xf32>, tensor<3xf32>)")
CASES["collective_permute"] = op(
    [_t("4x6")], [_t("4x6")],
    '"stablehlo.collective_permute"(%arg0) {source_target_pairs = dense<[[0, 1], [1, 0]]> : '
    "tensor<2x2xi64>} : (tensor<4x6xf32>) -> tensor<4x6xf32>")
CASES["collective_broadcast"] = op(
    [_t("4x6")], [_t("4x6")],
    '"stablehlo.collective_broadcast"(%arg0) {replica_groups = dense<[[0, 1]]> : '
    "tensor<1x2xi64>} : (tensor<4x6xf32>) -> tensor<4x6xf32>")
CASES["all_gather"] = op(
    [_t("3x2", "i64"), _t("3x2", "i64")], [_t("6x2", "i64"), _t("6x2", "i64")],
    '"stablehlo.all_gather"(%arg0, %arg1) {all_gather_dim = 0 : i64, '
    "replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : "
    "(tensor<3x2xi64>, tensor<3x2xi64>) -> (tensor<6x2xi64>, tensor<6x2xi64>)")
CASES["all_to_all_different_dims"] = op(
    [_t("3x8", "i64"), _t("3x8", "i64")], [_t("6x4", "i64"), _t("6x4", "i64")],
    '"stablehlo.all_to_all"(%arg0, %arg1) {split_dimension = 1 : i64, '
    "concat_dimension = 0 : i64, split_count = 2 : i64, "
    "replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : "
    "(tensor<3x8xi64>, tensor<3x8xi64>) -> (tensor<6x4xi64>, tensor<6x4xi64>)")
CASES["all_to_all_same_dim"] = op(
    [_t("4x6", "i64")], [_t("4x6", "i64")],
    '"stablehlo.all_to_all"(%arg0) {split_dimension = 0 : i64, '
    "concat_dimension = 0 : i64, split_count = 2 : i64, "
    "replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : "
    "(tensor<4x6xi64>) -> tensor<4x6xi64>")
CASES["reduce_scatter"] = op(
    [_t("3x8x1x5", "i64")], [_t("3x4x1x5", "i64")],
    '"stablehlo.reduce_scatter"(%arg0) ({\n'
    "  ^bb0(%a: tensor<i64>, %b: tensor<i64>):\n"
    "    %s = stablehlo.add %a, %b : tensor<i64>\n"
    "    stablehlo.return %s : tensor<i64>\n"
    "  }) {scatter_dimension = 1 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : "
    "(tensor<3x8x1x5xi64>) -> tensor<3x4x1x5xi64>")

# --------------------------------------------------------------------------- misc ops
CASES["batch_norm_inference"] = op(
    [_t("2x6x10x3"), _t("10"), _t("10"), _t("10"), _t("10")], [_t("2x6x10x3")],
    '"stablehlo.batch_norm_inference"(%arg0, %arg1, %arg2, %arg3, %arg4) '
    "{epsilon = 1.0e-03 : f32, feature_index = 2 : i64} : (tensor<2x6x10x3xf32>, "
    "tensor<10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<10xf32>) -> tensor<2x6x10x3xf32>")
CASES["bitcast_convert_narrower_out"] = _unary("bitcast_convert", "6x2", "ui64",
                                               out=_t("6x2x2", "ui32"))
CASES["bitcast_convert_same_width"] = _unary("bitcast_convert", "6x2", "ui32",
                                             out=_t("6x2", "f32"))
CASES["bitcast_convert_wider_out"] = _unary("bitcast_convert", "6x2x4", "ui16",
                                            out=_t("6x2", "ui64"))
CASES["cholesky"] = op([_t("3x2x6x6")], [_t("3x2x6x6")],
                       "stablehlo.cholesky %arg0, lower = true : tensor<3x2x6x6xf32>")
CASES["clamp_full"] = op([_t("5x3")] * 3, [_t("5x3")],
                         "stablehlo.clamp %arg0, %arg1, %arg2 : tensor<5x3xf32>")
CASES["clamp_scalar_bounds"] = op(
    [_t(""), _t("5x3"), _t("")], [_t("5x3")],
    "stablehlo.clamp %arg0, %arg1, %arg2 : (tensor<f32>, tensor<5x3xf32>, tensor<f32>) -> "
    "tensor<5x3xf32>")
CASES["select"] = op([_t("6x2", "i1"), _t("6x2"), _t("6x2")], [_t("6x2")],
                     "stablehlo.select %arg0, %arg1, %arg2 : tensor<6x2xi1>, tensor<6x2xf32>")
CASES["select_scalar_pred"] = op([_t("", "i1"), _t("6x2"), _t("6x2")], [_t("6x2")],
                                 "stablehlo.select %arg0, %arg1, %arg2 : tensor<i1>, "
                                 "tensor<6x2xf32>")
CASES["reverse"] = op([_t("3x16x5x2")], [_t("3x16x5x2")],
                      "stablehlo.reverse %arg0, dims = [0, 2] : tensor<3x16x5x2xf32>")
CASES["rng_bit_generator"] = op(
    [_t("2", "ui64")], [_t("2", "ui64"), _t("6x100", "ui32")],
    "stablehlo.rng_bit_generator %arg0, algorithm = DEFAULT : (tensor<2xui64>) -> "
    "(tensor<2xui64>, tensor<6x100xui32>)")
CASES["transpose"] = op([_t("10x4x6x3")], [_t("3x4x10x6")],
                        "stablehlo.transpose %arg0, dims = [3, 1, 0, 2] : (tensor<10x4x6x3xf32>) -> "
                        "tensor<3x4x10x6xf32>")
for _side, _trans, _b, _r in (("left", "NO_TRANSPOSE", "4x3x7", "4x3x7"),
                              ("right", "NO_TRANSPOSE", "4x7x3", "4x7x3"),
                              ("left", "TRANSPOSE", "4x3x7", "4x3x7"),
                              ("right", "ADJOINT", "4x7x3", "4x7x3")):
    CASES[f"triangular_solve_{_side}_{_trans.lower()}"] = op(
        [_t("4x3x3"), _t(_b)], [_t(_r)],
        f'"stablehlo.triangular_solve"(%arg0, %arg1) {{left_side = {str(_side == "left").lower()}, '
        f"lower = true, unit_diagonal = false, transpose_a = #stablehlo<transpose {_trans}>}} : "
        f"(tensor<4x3x3xf32>, {_t(_b)}) -> {_t(_r)}")

# --------------------------------------------------------------------------- broadcast
CASES["broadcast_in_dim"] = op([_t("3x7x1")], [_t("3x32x7x1")],
                               "stablehlo.broadcast_in_dim %arg0, dims = [0, 2, 3] : "
                               "(tensor<3x7x1xf32>) -> tensor<3x32x7x1xf32>")
CASES["broadcast_in_dim_size_zero"] = op([_t("3x7x0")], [_t("3x32x7x0")],
                                         "stablehlo.broadcast_in_dim %arg0, dims = [0, 2, 3] : "
                                         "(tensor<3x7x0xf32>) -> tensor<3x32x7x0xf32>")
CASES["broadcast_in_dim_scalar"] = op([_t("")], [_t("3x1x9")],
                                      "stablehlo.broadcast_in_dim %arg0, dims = [] : "
                                      "(tensor<f32>) -> tensor<3x1x9xf32>")
CASES["broadcast_in_dim_expanded"] = op([_t("3x1x9")], [_t("3x16x9")],
                                        "stablehlo.broadcast_in_dim %arg0, dims = [0, 1, 2] : "
                                        "(tensor<3x1x9xf32>) -> tensor<3x16x9xf32>")
CASES["broadcast_in_dim_all_kinds"] = op([_t("3x4x6x1x5")], [_t("3x6x4x7x5x2")],
                                         "stablehlo.broadcast_in_dim %arg0, dims = [0, 2, 1, 3, 4]"
                                         " : (tensor<3x4x6x1x5xf32>) -> tensor<3x6x4x7x5x2xf32>")

# --------------------------------------------------------------------------- concatenate
def _concat(args: list[str], out: str, dim: int, operands: str) -> str:
    return op(args, [out], f"stablehlo.concatenate {operands}, dim = {dim} : "
                           f"({', '.join(args)}) -> {out}")


CASES["concat_size_one_operands"] = _concat([_t("2x1x64")] * 3, _t("2x3x64"), 1,
                                            "%arg0, %arg1, %arg2")
CASES["concat_coprime_sizes"] = _concat([_t("2x5x64"), _t("2x7x64")], _t("2x12x64"), 1,
                                        "%arg0, %arg1")
CASES["concat_same_shapes"] = _concat([_t("2x8x64")] * 2, _t("2x16x64"), 1, "%arg0, %arg1")
CASES["concat_different_sizes"] = _concat([_t("2x24x64"), _t("2x8x64")], _t("2x32x64"), 1,
                                          "%arg0, %arg1")
CASES["concat_gcd_exceeds_operand_dims"] = _concat([_t("2x32x64"), _t("2x48x64")], _t("2x80x64"),
                                                   1, "%arg0, %arg1")


def _slice_concat(args, slices, operands, out_dim) -> str:
    """Concatenate ``operands`` (names among %argN and %sN) after the slices."""
    pre = ""
    types = {f"%arg{i}": t for i, t in enumerate(args)}
    for k, (src, bounds, st) in enumerate(slices):
        pre += f"  %s{k} = stablehlo.slice {src} [{bounds}] : ({types[src]}) -> {st}\n"
        types[f"%s{k}"] = st
    in_types = ", ".join(types[o] for o in operands)
    out = _t(f"2x{out_dim}x64")
    return op(args, [out], f"stablehlo.concatenate {', '.join(operands)}, dim = 1 : "
                           f"({in_types}) -> {out}", pre)


CASES["concat_all_slices"] = _slice_concat(
    [_t("2x20x64"), _t("2x30x64")],
    [("%arg0", "0:2, 0:16, 0:64", _t("2x16x64")), ("%arg1", "0:2, 2:26, 0:64", _t("2x24x64"))],
    ["%s0", "%s1"], 40)
CASES["concat_slices_of_one_tensor_and_it"] = _slice_concat(
    [_t("2x20x64")],
    [("%arg0", "0:2, 0:16, 0:64", _t("2x16x64")), ("%arg0", "0:2, 4:16, 0:64", _t("2x12x64"))],
    ["%s0", "%arg0", "%s1"], 48)
CASES["concat_slice_and_other_op"] = module(
    [_t("2x20x64"), _t("2x30x64")], [_t("2x46x64")],
    "  %s0 = stablehlo.slice %arg0 [0:2, 0:16, 0:64] : (tensor<2x20x64xf32>) -> tensor<2x16x64xf32>\n"
    "  %n = stablehlo.negate %arg1 : tensor<2x30x64xf32>\n"
    "  %r = stablehlo.concatenate %s0, %n, dim = 1 : (tensor<2x16x64xf32>, tensor<2x30x64xf32>) -> "
    "tensor<2x46x64xf32>\n  return %r : tensor<2x46x64xf32>")
CASES["concat_slices_of_two_tensors_and_one"] = _slice_concat(
    [_t("2x20x64"), _t("2x30x64")],
    [("%arg0", "0:2, 0:16, 0:64", _t("2x16x64")), ("%arg1", "0:2, 0:12, 0:64", _t("2x12x64"))],
    ["%s0", "%arg0", "%s1"], 48)
CASES["concat_same_value_thrice"] = op(
    [_t("3x32", "bf16")], [_t("9x32", "bf16")],
    "stablehlo.concatenate %arg0, %arg0, %arg0, dim = 0 : (tensor<3x32xbf16>, tensor<3x32xbf16>, "
    "tensor<3x32xbf16>) -> tensor<9x32xbf16>")
CASES["concat_same_value_and_its_slice"] = op(
    [_t("6x32", "bf16")], [_t("15x32", "bf16")],
    "stablehlo.concatenate %arg0, %s, %arg0, dim = 0 : (tensor<6x32xbf16>, tensor<3x32xbf16>, "
    "tensor<6x32xbf16>) -> tensor<15x32xbf16>",
    "  %s = stablehlo.slice %arg0 [1:4, 0:32] : (tensor<6x32xbf16>) -> tensor<3x32xbf16>\n")


# --------------------------------------------------------------------------- convolution
def _conv(lhs: str, rhs: str, out: str, batch_groups: int = 1, feature_groups: int = 1,
          dims: str = "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]",
          window: str = "stride = [2, 2], pad = [[0, 1], [0, 1]]") -> str:
    return op([_t(lhs), _t(rhs)], [_t(out)],
              f"stablehlo.convolution(%arg0, %arg1) dim_numbers = {dims}, window = {{{window}}} "
              f"{{batch_group_count = {batch_groups} : i64, feature_group_count = "
              f"{feature_groups} : i64}} : ({_t(lhs)}, {_t(rhs)}) -> {_t(out)}")


CASES["conv_simple"] = _conv("2x64x64x32", "3x3x32x16", "2x32x32x16")
CASES["conv_window_larger_than_windows"] = _conv("2x64x64x32", "40x40x32x16", "2x13x13x16")
CASES["conv_batch_groups"] = _conv("8x64x64x32", "3x3x32x64", "2x32x32x64", batch_groups=4)
CASES["conv_batch_groups_per_group_batch_one"] = _conv("4x64x64x32", "3x3x32x64",
                                                       "1x32x32x64", batch_groups=4)
CASES["conv_feature_groups"] = _conv("4x64x64x48", "3x3x6x32", "4x32x32x32", feature_groups=8)
CASES["conv_feature_groups_input_feature_one"] = _conv("4x64x64x8", "3x3x1x32", "4x32x32x32",
                                                       feature_groups=8)
CASES["conv_output_feature_one_per_group"] = _conv("4x64x64x48", "3x3x6x8", "4x32x32x8",
                                                   feature_groups=8)
CASES["conv_nchw_1d"] = _conv("2x16x50", "8x16x5", "2x8x46", dims="[b, f, 0]x[o, i, 0]->[b, f, 0]",
                              window="stride = [1], pad = [[0, 0]]")

# --------------------------------------------------------------------------- custom calls
def _cc(target: str, args: list[str], results: list[str], attrs: str = "") -> str:
    operands = ", ".join(f"%arg{i}" for i in range(len(args)))
    res = results[0] if len(results) == 1 else f"({', '.join(results)})"
    return op(args, results, f"stablehlo.custom_call @{target}({operands}) {attrs} : "
                             f"({', '.join(args)}) -> {res}")


for _target in ("CompactWyHelper", "InspectSharding", "X64SplitHigh", "X64SplitLow",
                "xla.megascale.provide_metadata", "MoveToDevice", "MoveToHost",
                "LayoutConstraint", "mhlo.erf", "annotate_device_placement", "Cholesky",
                "InvertDiagBlocksLowerTriangular", "InvertDiagBlocksUpperTriangular",
                "_SPMDInternalOp_MultiPad", "_SPMDInternalOp_RotateRight",
                "_SPMDInternalOp_MultiRotate", "_SPMDInternalOp_MultiSlice",
                "_SPMDInternalOp_Wrap"):
    CASES[f"custom_call_{_target}"] = _cc(_target, [_t("6x4")], [_t("6x4")],
                                          '{backend_config = ""}')
for _target in ("sdy_testonly", "tpu_custom_call", "xla_python_cpu_callback",
                "xla_python_gpu_callback", "xla_ffi_python_cpu_callback",
                "xla_ffi_python_gpu_callback", "xla.debug.Log", "some_unknown_target"):
    CASES[f"custom_call_no_rule_{_target}"] = _cc(_target, [_t("6x4")], [_t("6x4")])
CASES["custom_call_x64_combine"] = _cc("X64Combine", [_t("6x2", "ui32")] * 2, [_t("6x2", "ui64")])
CASES["custom_call_x64_combine_feeds_rng"] = module(
    [_t("2", "ui32"), _t("2", "ui32")], [_t("3x50", "ui32"), _t("2", "ui64")],
    "  %c = stablehlo.custom_call @X64Combine(%arg0, %arg1) : (tensor<2xui32>, tensor<2xui32>) -> "
    "tensor<2xui64>\n"
    "  %s, %o = stablehlo.rng_bit_generator %c, algorithm = DEFAULT : (tensor<2xui64>) -> "
    "(tensor<2xui64>, tensor<3x50xui32>)\n"
    "  return %o, %c : tensor<3x50xui32>, tensor<2xui64>")
CASES["custom_call_eigh"] = _cc("Eigh", [_t("5x6x6")], [_t("5x6x6"), _t("5x6")])
CASES["custom_call_qr"] = _cc("Qr", [_t("5x7x4")], [_t("5x7x4"), _t("5x4")])
CASES["custom_call_qr_block"] = _cc("QrDecompositionBlock", [_t("2x5x7x4")],
                                    [_t("2x5x7x4"), _t("2x5x4")])
CASES["custom_call_householder"] = _cc("ProductOfElementaryHouseholderReflectors",
                                       [_t("5x9x12"), _t("5x4")], [_t("5x9x12")])
CASES["custom_call_topk_1d"] = _cc("mhlo.topk", [_t("12")], [_t("1"), _t("1", "i32")],
                                   "{mhlo.attributes = {k = 1 : i64, largest = true}}")
CASES["custom_call_topk_2d"] = _cc("mhlo.topk", [_t("12x6")], [_t("12x3"), _t("12x3", "i32")],
                                   "{mhlo.attributes = {k = 3 : i64, largest = true}}")
for _target in ("ApproxTopK", "PartialReduce"):
    CASES[f"custom_call_{_target}"] = _cc(
        _target, [_t("12x8"), _t("12x8"), _t(""), _t("", "i32")], [_t("12x3"), _t("12x3")],
        '{backend_config = "x"}')
CASES["custom_call_own_rule"] = _cc(
    "not_in_registry", [_t("6x2")], [_t("2x6")],
    "{sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([j, i]) {i=6, j=2}, custom>}")
CASES["builtin_op_own_rule_wins"] = op(
    [_t("6x2"), _t("6x2")], [_t("6x2")],
    "stablehlo.add %arg0, %arg1 {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j], [i, k])"
    "->([i, j]) {i=6, j=2, k=2} need_replication={k}>} : tensor<6x2xf32>")

# --------------------------------------------------------------------------- dots
CASES["dot_vector_vector"] = op([_t("24"), _t("24")], [_t("")],
                                "stablehlo.dot %arg0, %arg1 : (tensor<24xf32>, tensor<24xf32>) -> "
                                "tensor<f32>")
CASES["dot_vector_matrix"] = op([_t("24"), _t("24x10")], [_t("10")],
                                "stablehlo.dot %arg0, %arg1 : (tensor<24xf32>, tensor<24x10xf32>) -> "
                                "tensor<10xf32>")
CASES["dot_matrix_vector"] = op([_t("6x24"), _t("24")], [_t("6")],
                                "stablehlo.dot %arg0, %arg1 : (tensor<6x24xf32>, tensor<24xf32>) -> "
                                "tensor<6xf32>")
CASES["dot_matrix_matrix"] = op([_t("6x24"), _t("24x10")], [_t("6x10")],
                                "stablehlo.dot %arg0, %arg1 : (tensor<6x24xf32>, tensor<24x10xf32>)"
                                " -> tensor<6x10xf32>")
CASES["dot_general_no_batching"] = op(
    [_t("6x24"), _t("24x10")], [_t("6x10")],
    "stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<6x24xf32>, "
    "tensor<24x10xf32>) -> tensor<6x10xf32>")
CASES["dot_general_batching"] = op(
    [_t("3x6x24"), _t("3x24x10")], [_t("3x6x10")],
    "stablehlo.dot_general %arg0, %arg1, batching_dims = [0] x [0], contracting_dims = [2] x [1] "
    ": (tensor<3x6x24xf32>, tensor<3x24x10xf32>) -> tensor<3x6x10xf32>")
CASES["dot_general_mixed"] = op(
    [_t("3x2x5x2x16x8"), _t("12x8x16x2x3")], [_t("3x2x5x2x12")],
    "stablehlo.dot_general %arg0, %arg1, batching_dims = [0, 1] x [4, 3], contracting_dims = "
    "[5, 4] x [1, 2] : (tensor<3x2x5x2x16x8xf32>, tensor<12x8x16x2x3xf32>) -> "
    "tensor<3x2x5x2x12xf32>")

# --------------------------------------------------------------------------- dynamic slicing
CASES["dynamic_slice"] = op(
    [_t("16x6x10"), _t("", "i32"), _t("", "i32"), _t("", "i32")], [_t("16x1x4")],
    "stablehlo.dynamic_slice %arg0, %arg1, %arg2, %arg3, sizes = [16, 1, 4] : (tensor<16x6x10xf32>, "
    "tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<16x1x4xf32>")
CASES["dynamic_update_slice"] = op(
    [_t("16x6x10"), _t("16x1x4"), _t("", "i32"), _t("", "i32"), _t("", "i32")], [_t("16x6x10")],
    "stablehlo.dynamic_update_slice %arg0, %arg1, %arg2, %arg3, %arg4 : (tensor<16x6x10xf32>, "
    "tensor<16x1x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<16x6x10xf32>")
CASES["dynamic_update_slice_constant_starts"] = op(
    [_t("16x6x10"), _t("16x1x4")], [_t("16x6x10")],
    "stablehlo.dynamic_update_slice %arg0, %arg1, %c0, %c1, %c0 : (tensor<16x6x10xf32>, "
    "tensor<16x1x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<16x6x10xf32>",
    "  %c0 = stablehlo.constant dense<0> : tensor<i32>\n"
    "  %c1 = sdy.constant dense<2> : tensor<i32>\n")
CASES["dynamic_update_slice_some_constant_starts"] = op(
    [_t("16x6x10"), _t("16x1x4"), _t("", "i32")], [_t("16x6x10")],
    "stablehlo.dynamic_update_slice %arg0, %arg1, %c0, %arg2, %c0 : (tensor<16x6x10xf32>, "
    "tensor<16x1x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<16x6x10xf32>",
    "  %c0 = stablehlo.constant dense<0> : tensor<i32>\n")

# --------------------------------------------------------------------------- fft
for _kind, _in, _out, _len in (("FFT", "4x16x32xcomplex<f32>", "4x16x32xcomplex<f32>", "16, 32"),
                               ("IFFT", "4x16x32xcomplex<f32>", "4x16x32xcomplex<f32>", "16, 32"),
                               ("RFFT", "4x16x32xf32", "4x16x17xcomplex<f32>", "16, 32"),
                               ("IRFFT", "4x16x17xcomplex<f32>", "4x16x32xf32", "16, 32"),
                               ("FFT", "4x16x32xcomplex<f32>", "4x16x32xcomplex<f32>", "32"),
                               ("IFFT", "4x16x32xcomplex<f32>", "4x16x32xcomplex<f32>", "32"),
                               ("RFFT", "4x16x32xf32", "4x16x17xcomplex<f32>", "32"),
                               ("IRFFT", "4x16x17xcomplex<f32>", "4x16x32xf32", "32")):
    CASES[f"fft_{_kind.lower()}_{_len.count(',') + 1}d"] = op(
        [f"tensor<{_in}>"], [f"tensor<{_out}>"],
        f"stablehlo.fft %arg0, type = {_kind}, length = [{_len}] : (tensor<{_in}>) -> "
        f"tensor<{_out}>")


# --------------------------------------------------------------------------- gather / scatter
def _gather(operand: str, indices: str, out: str, dnums: str, sizes: str) -> str:
    return op([_t(operand), _t(indices, "i64")], [_t(out)],
              f'"stablehlo.gather"(%arg0, %arg1) {{dimension_numbers = #stablehlo.gather<{dnums}>, '
              f"slice_sizes = array<i64: {sizes}>, indices_are_sorted = false}} : "
              f"({_t(operand)}, {_t(indices, 'i64')}) -> {_t(out)}")


CASES["gather"] = _gather("4x6x3x7", "3x2x3", "3x2x3x3x1",
                          "offset_dims = [2, 3, 4], collapsed_slice_dims = [0], "
                          "start_index_map = [1, 0, 3], index_vector_dim = 2", "1, 3, 3, 1")
CASES["gather_implicit_index_vector_dim_size_one_collapsed"] = _gather(
    "4x1x3", "3x2x5", "3x2x5x3",
    "offset_dims = [3], collapsed_slice_dims = [0, 1], start_index_map = [1], "
    "index_vector_dim = 3", "1, 1, 3")
CASES["gather_batching_dims"] = _gather(
    "6x4x5x3", "5x6x2x2", "5x6x2x2",
    "offset_dims = [3], collapsed_slice_dims = [1], operand_batching_dims = [0, 2], "
    "start_indices_batching_dims = [1, 0], start_index_map = [1, 3], index_vector_dim = 3",
    "1, 1, 1, 2")
CASES["gather_index_vector_dim_first"] = _gather(
    "6x4x5x3", "5x2x6x2", "5x6x2x2",
    "offset_dims = [3], collapsed_slice_dims = [1], operand_batching_dims = [0, 2], "
    "start_indices_batching_dims = [2, 0], start_index_map = [1, 3], index_vector_dim = 1",
    "1, 1, 1, 2")
CASES["gather_full_slice"] = _gather(
    "10x8", "5x1", "5x8",
    "offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1",
    "1, 8")


def _scatter(inputs: list[str], indices: str, updates: list[str], dnums: str,
             body: str | None = None) -> str:
    n = len(inputs)
    elems = [t.split("x")[-1] for t in inputs]
    args = [_t(*t.rsplit("x", 1)) for t in inputs] + [_t(indices, "i64")] + \
           [_t(*t.rsplit("x", 1)) for t in updates]
    results = args[:n]
    if body is None:
        block_args = ", ".join(f"%b{i}: tensor<{e}>" for i, e in enumerate(elems + elems))
        lines = "".join(f"      %s{i} = stablehlo.add %b{i}, %b{i + n} : tensor<{e}>\n"
                        for i, e in enumerate(elems))
        rets = ", ".join(f"%s{i}" for i in range(n))
        body = (f"    ^bb0({block_args}):\n{lines}      stablehlo.return {rets} : "
                f"{', '.join(f'tensor<{e}>' for e in elems)}\n")
    operands = ", ".join(f"%arg{i}" for i in range(len(args)))
    res = results[0] if n == 1 else f"({', '.join(results)})"
    return op(args, results,
              f'"stablehlo.scatter"({operands}) ({{\n{body}  }}) {{scatter_dimension_numbers = '
              f"#stablehlo.scatter<{dnums}>, indices_are_sorted = false, unique_indices = false}}"
              f" : ({', '.join(args)}) -> {res}")


_SCATTER_DN = ("update_window_dims = [2, 3], inserted_window_dims = [0], "
               "scatter_dims_to_operand_dims = [1, 0], index_vector_dim = 2")
CASES["scatter_single_input"] = _scatter(["4x5x3xf32"], "3x2x2", ["3x2x3x3xf32"], _SCATTER_DN)
CASES["scatter_implicit_index_vector_dim"] = _scatter(
    ["4x5x3xf32"], "3x2", ["3x2x3x3xf32"],
    "update_window_dims = [2, 3], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], "
    "index_vector_dim = 2")
CASES["scatter_inserted_last_dim"] = _scatter(
    ["5x3x4xf32"], "3x2x2", ["3x2x5x3xf32"],
    "update_window_dims = [2, 3], inserted_window_dims = [2], "
    "scatter_dims_to_operand_dims = [2, 0], index_vector_dim = 2")
CASES["scatter_batching_dims"] = _scatter(
    ["6x4x5x3xf32"], "5x6x2x2", ["5x6x2x2xf32"],
    "update_window_dims = [3], inserted_window_dims = [1], input_batching_dims = [0, 2], "
    "scatter_indices_batching_dims = [1, 0], scatter_dims_to_operand_dims = [1, 3], "
    "index_vector_dim = 3")
CASES["scatter_multiple_inputs"] = _scatter(["4x5x3xi32", "4x5x3xf32"], "3x2x2",
                                            ["3x2x3x3xi32", "3x2x3x3xf32"], _SCATTER_DN)
CASES["scatter_mixed_reductions"] = _scatter(
    ["4x5x3xi32", "4x5x3xf32"], "3x2x2", ["3x2x3x3xi32", "3x2x3x3xf32"], _SCATTER_DN,
    "    ^bb0(%a: tensor<i32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<f32>):\n"
    "      %s0 = stablehlo.add %a, %c : tensor<i32>\n"
    "      %s1 = stablehlo.multiply %b, %d : tensor<f32>\n"
    "      stablehlo.return %s0, %s1 : tensor<i32>, tensor<f32>\n")
CASES["scatter_swapped_reduction_operands"] = _scatter(
    ["4x5x3xf32"], "3x2x2", ["3x2x3x3xf32"], _SCATTER_DN,
    "    ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
    "      %s = stablehlo.maximum %b, %a : tensor<f32>\n"
    "      stablehlo.return %s : tensor<f32>\n")
CASES["scatter_overwrite"] = _scatter(
    ["4x5x3xf32"], "3x2x2", ["3x2x3x3xf32"], _SCATTER_DN,
    "    ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n      stablehlo.return %b : tensor<f32>\n")
CASES["scatter_logical_or"] = _scatter(
    ["4x5x3xi1"], "3x2x2", ["3x2x3x3xi1"], _SCATTER_DN,
    "    ^bb0(%a: tensor<i1>, %b: tensor<i1>):\n"
    "      %s = stablehlo.or %a, %b : tensor<i1>\n"
    "      stablehlo.return %s : tensor<i1>\n")
CASES["scatter_and_on_ints"] = _scatter(
    ["4x5x3xi32"], "3x2x2", ["3x2x3x3xi32"], _SCATTER_DN,
    "    ^bb0(%a: tensor<i32>, %b: tensor<i32>):\n"
    "      %s = stablehlo.and %a, %b : tensor<i32>\n"
    "      stablehlo.return %s : tensor<i32>\n")

# --------------------------------------------------------------------------- pad, slice
CASES["pad"] = op([_t("20x20x8"), _t("")], [_t("22x18x8")],
                  "stablehlo.pad %arg0, %arg1, low = [1, -1, 0], high = [1, -1, 0], "
                  "interior = [0, 0, 0] : (tensor<20x20x8xf32>, tensor<f32>) -> tensor<22x18x8xf32>")
CASES["pad_same_size_shift"] = op([_t("20x20")], [_t("20x20")],
                                  "stablehlo.pad %arg0, %c, low = [1, 0], high = [-1, 0], "
                                  "interior = [0, 0] : (tensor<20x20xf32>, tensor<f32>) -> "
                                  "tensor<20x20xf32>",
                                  "  %c = stablehlo.constant dense<0.0> : tensor<f32>\n")
CASES["slice"] = op([_t("16x6x10")], [_t("16x1x3")],
                    "stablehlo.slice %arg0 [0:16, 2:3, 1:10:3] : (tensor<16x6x10xf32>) -> "
                    "tensor<16x1x3xf32>")


# --------------------------------------------------------------------------- reduce
def _reduce(inputs: list[str], out: list[str], dims: str) -> str:
    n = len(inputs)
    elems = [t.rsplit("x", 1)[1] for t in inputs]
    args = [_t(*t.rsplit("x", 1)) for t in inputs]
    results = [_t(*o.rsplit("x", 1)) if "x" in o else _t("", o) for o in out]
    pre = "".join(f"  %i{k} = stablehlo.constant dense<0> : tensor<{e}>\n"
                  if e.startswith("i") else
                  f"  %i{k} = stablehlo.constant dense<0.0> : tensor<{e}>\n"
                  for k, e in enumerate(elems))
    operands = ", ".join(f"(%arg{k} init: %i{k})" for k in range(n))
    in_types = ", ".join(args + [f"tensor<{e}>" for e in elems])
    res = results[0] if n == 1 else f"({', '.join(results)})"
    params = " ".join(f"(%a{k}: tensor<{e}>, %b{k}: tensor<{e}>)" for k, e in enumerate(elems))
    adds = "".join(f"      %s{k} = stablehlo.add %a{k}, %b{k} : tensor<{e}>\n"
                   for k, e in enumerate(elems))
    rets = ", ".join(f"%s{k}" for k in range(n))
    return op(args, results,
              f"stablehlo.reduce {operands} across dimensions = [{dims}] : "
              f"({in_types}) -> {res}\n    reducer{params} {{\n{adds}      stablehlo.return "
              f"{rets} : {', '.join(f'tensor<{e}>' for e in elems)}\n    }}", pre)


CASES["reduce_single"] = _reduce(["3x32x7xf32"], ["3x7xf32"], "1")
CASES["reduce_multiple"] = _reduce(["3x32x7xf32", "3x32x7xi32"], ["32xf32", "32xi32"], "0, 2")
CASES["reduce_with_size_one_dim"] = _reduce(["3x32x1x7xf32"], ["3x1x7xf32"], "1")
CASES["reduce_all"] = _reduce(["3x32xf32"], ["f32"], "0, 1")


# --------------------------------------------------------------------------- windows
def _reduce_window(args, results, attrs: str) -> str:
    n = len(args) // 2
    elems = [a[a.rindex("x") + 1:-1] for a in args[:n]]
    block = ", ".join(f"%a{k}: tensor<{e}>" for k, e in enumerate(elems + elems))
    maxes = "".join(f"    %m{k} = stablehlo.maximum %a{k}, %a{k + n} : tensor<{e}>\n"
                    for k, e in enumerate(elems))
    operands = ", ".join(f"%arg{i}" for i in range(len(args)))
    res = results[0] if n == 1 else f"({', '.join(results)})"
    return op(args, results,
              f'"stablehlo.reduce_window"({operands}) ({{\n  ^bb0({block}):\n{maxes}    '
              f"stablehlo.return {', '.join(f'%m{k}' for k in range(n))} : "
              f"{', '.join(f'tensor<{e}>' for e in elems)}\n  }}) {{{attrs}}} : "
              f"({', '.join(args)}) -> {res}")


CASES["reduce_window"] = _reduce_window(
    [_t("24x24x3"), _t("24x24x3", "i32"), _t(""), _t("", "i32")],
    [_t("8x24x3"), _t("8x24x3", "i32")],
    "window_dimensions = array<i64: 3, 1, 1>, window_strides = array<i64: 3, 1, 1>, "
    "padding = dense<[[0, 0], [2, -2], [0, 0]]> : tensor<3x2xi64>")
CASES["reduce_window_padding_only"] = _reduce_window(
    [_t("6x12"), _t("")], [_t("6x12")],
    "window_dimensions = array<i64: 1, 1>, padding = dense<[[-1, 1], [3, -3]]> : tensor<2x2xi64>")
CASES["reduce_window_passthrough"] = _reduce_window(
    [_t("6x12"), _t("")], [_t("6x12")],
    "window_dimensions = array<i64: 1, 1>, padding = dense<[[0, 0], [0, 0]]> : tensor<2x2xi64>")
CASES["reduce_window_no_padding_attr"] = _reduce_window(
    [_t("6x12"), _t("")], [_t("6x11")],
    "window_dimensions = array<i64: 1, 2>")
CASES["reduce_window_dilations"] = _reduce_window(
    [_t("6x12"), _t("")], [_t("6x10")],
    "window_dimensions = array<i64: 1, 2>, window_dilations = array<i64: 1, 2>, "
    "base_dilations = array<i64: 1, 1>")


def _select_and_scatter(operand: str, source: str, attrs: str) -> str:
    return op([_t(operand), _t(source), _t("")], [_t(operand)],
              f'"stablehlo.select_and_scatter"(%arg0, %arg1, %arg2) ({{\n'
              "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
              "    %c = stablehlo.compare GE, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>\n"
              "    stablehlo.return %c : tensor<i1>\n  }, {\n"
              "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
              "    %s = stablehlo.add %a, %b : tensor<f32>\n"
              "    stablehlo.return %s : tensor<f32>\n"
              f"  }}) {{{attrs}}} : ({_t(operand)}, {_t(source)}, tensor<f32>) -> {_t(operand)}")


CASES["select_and_scatter_padding"] = _select_and_scatter(
    "6x16x16x8", "5x8x8x8",
    "window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, 1>, "
    "padding = dense<[[-1, 0], [0, 0], [0, 0], [0, 0]]> : tensor<4x2xi64>")
CASES["select_and_scatter_no_padding"] = _select_and_scatter(
    "6x16x16x8", "6x8x8x8",
    "window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, 1>")

# --------------------------------------------------------------------------- reshape
for _name, _in, _out in (("scalar", "1x1", ""), ("size_zero", "3x0", "0x6"),
                         ("merge", "3x4", "12"), ("split", "12", "3x4"),
                         ("split_three_way", "2x24", "2x2x4x3"),
                         ("split_and_merge", "6x4x7", "2x12x7"),
                         ("swap_coprime", "5x2", "2x5"), ("swap_common_divisor", "6x4", "4x6"),
                         ("swap_with_dims_around", "7x2x7x3", "7x3x7x2"),
                         ("swap_and_merge", "2x3x8", "3x4x4"), ("split_and_swap", "3x4x4", "2x3x8"),
                         ("split_swap_merge", "4x7x5x8", "14x10x8"),
                         ("size_one_dims", "1x6x4", "6x1x4x1"), ("merge_then_one", "6x4", "24x1"),
                         ("split_then_one", "24x1", "6x4"), ("split_middle_one", "24", "6x1x4"),
                         ("eight_by_sixteen", "8x16", "2x64"), ("to_one_eight_one", "8", "1x8x1")):
    CASES[f"reshape_{_name}"] = op([_t(_in)], [_t(_out)],
                                   f"stablehlo.reshape %arg0 : ({_t(_in)}) -> {_t(_out)}")


# --------------------------------------------------------------------------- sort
def _sort(inputs: list[str], dim: int) -> str:
    elems = [t.rsplit("x", 1)[1] for t in inputs]
    types = [_t(*t.rsplit("x", 1)) for t in inputs]
    block = ", ".join(f"%a{k}: tensor<{e}>, %b{k}: tensor<{e}>" for k, e in enumerate(elems))
    operands = ", ".join(f"%arg{i}" for i in range(len(inputs)))
    res = types[0] if len(types) == 1 else f"({', '.join(types)})"
    return op(types, types,
              f'"stablehlo.sort"({operands}) ({{\n  ^bb0({block}):\n'
              f"    %c = stablehlo.compare GT, %a0, %b0 : (tensor<{elems[0]}>, tensor<{elems[0]}>) "
              f"-> tensor<i1>\n    stablehlo.return %c : tensor<i1>\n  }}) {{dimension = {dim} : "
              f"i64, is_stable = true}} : ({', '.join(types)}) -> {res}")


CASES["sort_two_inputs"] = _sort(["3x16x6xi32", "3x16x6xf32"], 0)
CASES["sort_other_dims_size_one"] = _sort(["1x5x1xi32"], 1)
CASES["sort_1d"] = _sort(["9xf32"], 0)

CASES["gather_semantics_example"] = _gather(
    "3x4x2x5", "2x3x3", "2x3x2x2x1",
    "offset_dims = [2, 3, 4], collapsed_slice_dims = [0], start_index_map = [1, 0, 3], "
    "index_vector_dim = 2", "1, 2, 2, 1")

#: Cases whose rule is also checked against a hand-written expectation (facts
#: from the semantics document, independent of the oracle).
EXPECTED = {
    "reshape_eight_by_sixteen": "#sdy.op_sharding_rule<([ij, k])->([i, jk]) {i=2, j=4, k=16}>",
    "reshape_swap_common_divisor":
        "#sdy.op_sharding_rule<([ij, mn])->([ik, ln]) {i=2, j=3, k=2, l=3, m=2, n=2}>",
    "reshape_swap_coprime": "#sdy.op_sharding_rule<([i, l])->([j, k]) {i=5, j=2, k=5, l=2}>",
    "reshape_to_one_eight_one": "#sdy.op_sharding_rule<([j])->([i, j, k]) {i=1, j=8, k=1}>",
    "dot_vector_vector": "#sdy.op_sharding_rule<([i], [i])->([]) {i=24} reduction={i}>",
    "pointwise_scalar": "#sdy.op_sharding_rule<([], [])->([])>",
    "gather_semantics_example":
        "#sdy.op_sharding_rule<([o, k, l, m], [i, j, p])->([i, j, k, l, n]) {i=2, j=3, k=4, l=2, "
        "m=5, n=1, o=3, p=3} reduction={m, o} need_replication={k, n, p} "
        "blocked_propagation={k}>",
    "rng_bit_generator": "#sdy.op_sharding_rule<([i])->([i], [j, k]) {i=2, j=6, k=100} "
                         "need_replication={i} blocked_propagation={i}>",
    "triangular_solve_left_no_transpose":
        "#sdy.op_sharding_rule<([i, j, l], [i, j, k])->([i, l, k]) {i=4, j=3, k=7, l=3} "
        "need_replication={j, k, l}>",
}

# --------------------------------------------------------------------------- edge cases
CASES["custom_call_no_rule_token_result"] = module(
    ["tensor<4xf32>"], ["!stablehlo.token"],
    "  %r = stablehlo.custom_call @MoveToHost(%arg0) : (tensor<4xf32>) -> !stablehlo.token\n"
    "  return %r : !stablehlo.token")
CASES["sharding_constraint_scalar"] = op(
    [_t("")], [_t("")], "sdy.sharding_constraint %arg0 <@mesh, []> : tensor<f32>",
).replace("func.func", 'sdy.mesh @mesh = <["a"=2]>\nfunc.func', 1)
CASES["reduce_scalar"] = op(
    [_t("")], [_t("")],
    "stablehlo.reduce(%arg0 init: %c) applies stablehlo.add across dimensions = [] : "
    "(tensor<f32>, tensor<f32>) -> tensor<f32>",
    "  %c = stablehlo.constant dense<0.0> : tensor<f32>\n")
CASES["concat_single_slice_operand"] = op(
    [_t("3x4")], [_t("3x2")], "stablehlo.concatenate %s, dim = 1 : (tensor<3x2xf32>) -> "
    "tensor<3x2xf32>", "  %s = stablehlo.slice %arg0 [0:3, 0:2] : (tensor<3x4xf32>) -> "
    "tensor<3x2xf32>\n")
CASES["pad_interior"] = op([_t("3x4"), _t("")], [_t("5x4")],
                           "stablehlo.pad %arg0, %arg1, low = [0, 0], high = [0, 0], "
                           "interior = [1, 0] : (tensor<3x4xf32>, tensor<f32>) -> tensor<5x4xf32>")
CASES["dynamic_update_slice_arith_constant_starts"] = op(
    [_t("8x4"), _t("2x4")], [_t("8x4")],
    "stablehlo.dynamic_update_slice %arg0, %arg1, %c, %c : (tensor<8x4xf32>, tensor<2x4xf32>, "
    "tensor<i32>, tensor<i32>) -> tensor<8x4xf32>",
    "  %c = arith.constant dense<0> : tensor<i32>\n")
CASES["conv_lhs_dilation"] = _conv("1x8x8x4", "3x3x4x2", "1x17x17x2",
                                   window="stride = [1, 1], pad = [[2, 2], [2, 2]], "
                                          "lhs_dilate = [2, 2]")
CASES["conv_input_smaller_than_window"] = _conv("1x2x2x4", "3x3x4x2", "1x2x2x2",
                                                window="stride = [1, 1], pad = [[1, 1], [1, 1]]")
CASES["conv_permuted_layout"] = _conv("4x10x2x12", "3x4x5x4", "2x5x9x8",
                                      dims="[f, 0, b, 1]x[0, i, o, 1]->[b, f, 1, 0]",
                                      window="stride = [1, 1], pad = [[0, 0], [0, 0]]")
CASES["sort_negative_dimension"] = _sort(["4x5xf32"], -1)
CASES["dot_general_outer_product"] = op(
    [_t("3"), _t("4")], [_t("3x4")],
    "stablehlo.dot_general %arg0, %arg1, contracting_dims = [] x [] : (tensor<3xf32>, "
    "tensor<4xf32>) -> tensor<3x4xf32>")
CASES["rng_bit_generator_scalar_output"] = op(
    [_t("2", "ui64")], [_t("2", "ui64"), _t("", "ui32")],
    "stablehlo.rng_bit_generator %arg0, algorithm = DEFAULT : (tensor<2xui64>) -> "
    "(tensor<2xui64>, tensor<ui32>)")
CASES["bitcast_convert_to_scalar"] = _unary("bitcast_convert", "2", "ui32", out=_t("", "ui64"))
CASES["custom_call_x64_combine_feeds_rng_indirectly"] = module(
    [_t("2", "ui32"), _t("2", "ui32")], [_t("3x5", "ui32"), _t("2", "ui64")],
    "  %c = stablehlo.custom_call @X64Combine(%arg0, %arg1) : (tensor<2xui32>, tensor<2xui32>) -> "
    "tensor<2xui64>\n  %n = stablehlo.add %c, %c : tensor<2xui64>\n"
    "  %s, %o = stablehlo.rng_bit_generator %n, algorithm = DEFAULT : (tensor<2xui64>) -> "
    "(tensor<2xui64>, tensor<3x5xui32>)\n  return %o, %c : tensor<3x5xui32>, tensor<2xui64>")
CASES["chlo_top_k_no_rule"] = op([_t("4x8")], [_t("4x2"), _t("4x2", "i32")],
                                 "chlo.top_k(%arg0, k = 2) : tensor<4x8xf32> -> "
                                 "(tensor<4x2xf32>, tensor<4x2xi32>)")
CASES["optimization_barrier_no_rule"] = op([_t("3")], [_t("3")],
                                           "stablehlo.optimization_barrier %arg0 : tensor<3xf32>")


# --------------------------------------------------------------------------- user rules
MATMUL = op(["tensor<2x8x16xf32>", "tensor<16x32xf32>"], ["tensor<2x8x32xf32>"],
            "stablehlo.custom_call @my_matmul(%arg0, %arg1) : (tensor<2x8x16xf32>, "
            "tensor<16x32xf32>) -> tensor<2x8x32xf32>")
USER_RULES = """\
description: My project's custom calls.
custom_calls:
  my_matmul:
    doc: A fused projection.
    einsum: ([b, s, h], [h, f]) -> ([b, s, f]) reduction={h}
"""


def write_rules(folder, text: str, name: str = "user.yaml") -> str:
    """Write a rule file (dedented) into ``folder``; returns its path."""
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return str(path)
