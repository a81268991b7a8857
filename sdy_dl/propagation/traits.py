"""Op traits propagation needs but MLIR's Python bindings do not expose.

Facts about the stablehlo, chlo and sdy op definitions, collected in
``docs/research/mlir-driver-and-traits.md`` (with their sources):

* which ops are *elementwise* in Shardy's sense (aggressive strategy §6,
  op priorities §7.1);
* which ops the greedy driver may erase when unused (``isOpTriviallyDead``):
  ops without memory effects, and region ops with recursive memory effects
  whose nested ops all have none.
"""

from __future__ import annotations

from sdy_dl.ir import Op


def _names(dialect: str, text: str) -> frozenset[str]:
    return frozenset(f"{dialect}.{n}" for n in text.split())


#: stablehlo ops with MLIR's Elementwise or stablehlo's BroadcastingElementwise trait.
_STABLEHLO_ELEMENTWISE = _names("stablehlo", """
    abs cbrt ceil convert count_leading_zeros cosine exponential exponential_minus_one floor
    imag is_finite log log_plus_one logistic not negate popcnt real round_nearest_afz
    round_nearest_even rsqrt sign sine sqrt tan tanh uniform_quantize uniform_dequantize
    add atan2 complex divide maximum minimum multiply power remainder shift_left
    shift_right_arithmetic shift_right_logical subtract and or xor
    compare reduce_precision clamp select
""")

#: chlo ops with Elementwise or BroadcastingElementwise.
_CHLO_ELEMENTWISE = _names("chlo", """
    _asin_acos_kernel acos acosh asin asinh atan atanh bessel_i1e conj cosh sinh tan digamma
    erf erf_inv erfc is_inf is_neg_inf is_pos_inf lgamma square
    broadcast_add broadcast_atan2 broadcast_divide broadcast_maximum broadcast_minimum
    broadcast_multiply broadcast_next_after broadcast_polygamma broadcast_power
    broadcast_remainder broadcast_shift_left broadcast_shift_right_arithmetic
    broadcast_shift_right_logical broadcast_subtract broadcast_zeta broadcast_and broadcast_or
    broadcast_xor broadcast_complex broadcast_compare constant_like broadcast_select
""")

#: sdy ops Shardy's isElementwise special-cases (they carry no trait).
_SDY_ELEMENTWISE = _names("sdy", "propagation_barrier sharding_constraint reshard")

ELEMENTWISE_OPS = _STABLEHLO_ELEMENTWISE | _CHLO_ELEMENTWISE | _SDY_ELEMENTWISE

#: Ops whose nested ops decide their effects (RecursiveMemoryEffects).
RECURSIVE_EFFECT_OPS = _names("stablehlo", """
    if case while reduce map scatter select_and_scatter sort reduce_window
""") | _names("sdy", "manual_computation named_computation") | _names("chlo", "scan")

#: Ops that have memory effects, or declare none (unknown effects): never dead.
EFFECTFUL_OPS = _names("stablehlo", """
    infeed outfeed send recv all_gather all_reduce reduce_scatter all_to_all async_start
    async_done collective_broadcast collective_reduce collective_permute composite rng
""") | _names("sdy", """
    sharding_constraint data_flow_edge func_data_flow_edge sharding_group all_gather
    all_slice all_to_all collective_permute all_reduce reduce_scatter sharded_to_unreduced
    replicated_to_unreduced mesh
""") | _names("func", "call func")

#: Dialects whose remaining ops have no memory effects.
_EFFECT_FREE_DIALECTS = frozenset({"stablehlo", "chlo", "sdy"})


def is_elementwise(op: Op) -> bool:
    """Shardy's ``isElementwise`` (§6)."""
    if op.name in ELEMENTWISE_OPS:
        return True
    if op.name == "stablehlo.bitcast_convert":
        return op.operands[0].shape == op.results[0].shape
    return False


def has_no_effects(op: Op) -> bool:
    """Whether ``op`` (ignoring its uses) would be trivially dead: no effects at all
    (ops with recursive effects: none of the ops nested in them has any)."""
    stack = [op]
    while stack:
        op = stack.pop()
        if op.name in RECURSIVE_EFFECT_OPS:
            stack.extend(child for region in op.regions for block in region.blocks
                         for child in block.ops)
        elif not _own_effects_free(op):
            return False
    return True


def _own_effects_free(op: Op) -> bool:
    if op.name == "stablehlo.custom_call":
        side = op.attr_text("has_side_effect")
        return side is None or side == "false"
    if op.name in EFFECTFUL_OPS:
        return False
    return op.dialect in _EFFECT_FREE_DIALECTS or op.name == "func.return"
