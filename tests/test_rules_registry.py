"""Every op kind and variant of Shardy's registry: our rule equals Shardy's.

The single-op modules of ``rules_cases.CASES`` mirror the cases of Shardy's
lit test ``op_sharding_rule_registry.mlir`` (and its conservative variant);
each is compared op by op with the oracle in normal and conservative mode.
A few rules are also checked against hand-written expectations.
"""

from __future__ import annotations

import pytest

from oracle_rules import Agreement, assert_agree, compare
from rules_cases import CASES, EXPECTED
from sdy_dl.ir import parse_module_text
from sdy_dl.rules.db import load_rule_db

DBS = {"normal": load_rule_db(), "conservative": load_rule_db(conservative=True)}


@pytest.mark.parametrize("mode", sorted(DBS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_case_agrees_with_shardy(case, mode):
    no_rule = "no_rule" in case or case == "reshape_size_zero"
    assert_agree(CASES[case], DBS[mode], min_rules=0 if no_rule else 1)


def _main_op(text: str, db):
    """The case's op (the last op of @main before the return) and its rule."""
    module = parse_module_text(text, "<case>")
    op = [o for o in module.ops if o.parent is not None and o.parent.name == "func.func"
          and o.name != "func.return"][-1]
    return op, db.rule_for(op, module)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_hand_checked_rules(case):
    assert _main_op(CASES[case], DBS["normal"])[1].to_text() == EXPECTED[case]


def test_conservative_changes_exactly_the_documented_ops():
    """Conservative mode changes only concatenate, convolution, pad, slice,
    reduce_window and select_and_scatter (semantics §3.8)."""
    changed = set()
    for text in CASES.values():
        op, normal = _main_op(text, DBS["normal"])
        if normal != _main_op(text, DBS["conservative"])[1]:
            changed.add(op.name)
    assert changed == {"stablehlo.concatenate", "stablehlo.convolution", "stablehlo.pad",
                       "stablehlo.slice", "stablehlo.reduce_window",
                       "stablehlo.select_and_scatter"}


def test_case_totals(capsys):
    """All cases together: report the agreement counts."""
    for mode, db in DBS.items():
        total = Agreement()
        for text in CASES.values():
            total.add(compare(text, db))
        assert not total.diffs
        with capsys.disabled():
            print(f"\nregistry cases ({mode}): {total}")
