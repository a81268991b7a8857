"""Op traits propagation needs but MLIR's Python bindings do not expose.

These are facts about the stablehlo/sdy op definitions (see
``docs/research/mlir-driver-and-traits.md`` for where each list comes from):
which ops are elementwise (aggressive strategy §6, op priorities §7.1) and
which ops have side effects (the greedy driver erases trivially dead ops
that have none, §0).
"""

from __future__ import annotations

from sdy_dl.ir import Op

#: Ops with MLIR's Elementwise or stablehlo's BroadcastingElementwise trait.
ELEMENTWISE_OPS = frozenset(f"stablehlo.{n}" for n in """
    abs add and atan2 cbrt ceil clamp complex compare convert cosine count_leading_zeros
    divide exponential exponential_minus_one floor imag is_finite log log_plus_one logistic
    maximum minimum multiply negate not or popcnt power real reduce_precision remainder
    round_nearest_afz round_nearest_even rsqrt select shift_left shift_right_arithmetic
    shift_right_logical sign sine sqrt subtract tan tanh xor
""".split())

#: sdy ops that count as elementwise for the aggressive strategy (§6).
SDY_ELEMENTWISE = frozenset({"sdy.propagation_barrier", "sdy.sharding_constraint", "sdy.reshard"})

#: Ops with side effects: never trivially dead even when unused.
SIDE_EFFECT_OPS = frozenset({
    "stablehlo.custom_call", "stablehlo.infeed", "stablehlo.outfeed", "stablehlo.send",
    "stablehlo.recv", "stablehlo.rng_bit_generator", "stablehlo.rng", "stablehlo.all_reduce",
    "stablehlo.all_gather", "stablehlo.all_to_all", "stablehlo.reduce_scatter",
    "stablehlo.collective_permute", "stablehlo.collective_broadcast", "stablehlo.after_all",
    "stablehlo.create_token", "stablehlo.optimization_barrier", "stablehlo.partition_id",
    "stablehlo.replica_id", "stablehlo.while", "stablehlo.case", "stablehlo.if",
    "sdy.sharding_group", "sdy.manual_computation", "sdy.named_computation",
    "sdy.propagation_barrier", "sdy.data_flow_edge", "sdy.sharding_constraint", "sdy.reshard",
    "func.call", "func.func", "func.return", "sdy.mesh", "sdy.return", "stablehlo.return",
})


def is_elementwise(op: Op) -> bool:
    """The aggressive strategy's notion of an elementwise op (§6)."""
    if op.name in ELEMENTWISE_OPS or op.name in SDY_ELEMENTWISE:
        return True
    if op.name == "stablehlo.bitcast_convert":
        return op.operands[0].shape == op.results[0].shape
    return False


def has_side_effects(op: Op) -> bool:
    """Whether the op may not be erased when its results are unused."""
    return op.name in SIDE_EFFECT_OPS or op.dialect not in ("stablehlo", "sdy", "chlo")
