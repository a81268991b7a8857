"""Ops of real JAX programs: our rule equals Shardy's for every op, both modes.

Programs come from ``rules_programs`` (no shardings: transformer training step,
convnet with pooling gradients, indexing, sort/top-k/cumulative ops, FFT,
control flow, einsums, shape ops, linear algebra) and from the shared
``jax_programs`` (sharded programs; rules do not depend on shardings).
"""

from __future__ import annotations

import pytest

import jax_programs
import rules_programs
from oracle_rules import Agreement, assert_agree
from sdy_dl.rules.db import load_rule_db

DBS = {"normal": load_rule_db(), "conservative": load_rule_db(conservative=True)}
PROGRAMS = {**{f"rules:{n}": (rules_programs.lowered, n) for n in rules_programs.RULE_PROGRAMS},
            **{f"shared:{n}": (jax_programs.lowered, n) for n in jax_programs.PROGRAMS}}


@pytest.mark.parametrize("mode", sorted(DBS))
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_program_rules_agree_with_shardy(program, mode):
    lower, name = PROGRAMS[program]
    assert_agree(lower(name), DBS[mode])


def test_program_totals(capsys):
    """All programs together: every op kind that JAX emitted, and the counts."""
    for mode, db in DBS.items():
        total = Agreement()
        for lower, name in PROGRAMS.values():
            total.add(assert_agree(lower(name), db))
        with capsys.disabled():
            print(f"\nJAX programs ({mode}): {total}")
        expected = {"stablehlo.dot_general", "stablehlo.convolution", "stablehlo.reduce_window",
                    "stablehlo.select_and_scatter", "stablehlo.gather", "stablehlo.scatter",
                    "stablehlo.sort", "stablehlo.fft", "stablehlo.while", "stablehlo.case",
                    "stablehlo.reshape", "stablehlo.transpose", "stablehlo.broadcast_in_dim",
                    "stablehlo.concatenate", "stablehlo.pad", "stablehlo.slice",
                    "stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice",
                    "stablehlo.reduce", "stablehlo.select", "stablehlo.clamp",
                    "stablehlo.reverse", "stablehlo.bitcast_convert",
                    "stablehlo.rng_bit_generator", "stablehlo.custom_call",
                    "sdy.sharding_constraint"}
        assert expected <= total.ops, sorted(expected - total.ops)
