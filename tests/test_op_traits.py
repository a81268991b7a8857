"""The op-trait table (rules/traits/op_traits.yaml): complete, used, and the sets the code reads."""

from __future__ import annotations

from pathlib import Path

import yaml

from sdy_dl.ir import traits

ROOT = Path(__file__).resolve().parent.parent
TABLE = yaml.safe_load((ROOT / "rules" / traits.TRAITS_FILE).read_text())["traits"]


def test_every_trait_has_a_doc_and_ops():
    for name, entry in TABLE.items():
        assert entry.get("doc"), name
        assert entry.get("ops") or entry.get("call_targets"), name


def test_every_trait_is_read_by_the_code():
    source = "\n".join(p.read_text() for p in (ROOT / "sdy_dl").rglob("*.py"))
    unread = [name for name in TABLE if f'"{name}"' not in source]
    assert unread == []


def test_no_op_is_listed_twice_in_a_trait():
    for name, entry in TABLE.items():
        names = entry.get("ops") or entry.get("call_targets")
        assert len(names) == len(set(names)), name


def test_elementwise_follows_shardy():
    assert traits.is_elementwise("stablehlo.add", (4,), (4,))
    assert traits.is_elementwise("sdy.reshard", (4,), (4,))
    assert not traits.is_elementwise("stablehlo.dot_general", (4, 4), (4,))
    assert traits.is_elementwise("stablehlo.bitcast_convert", (4, 2), (4, 2))
    assert not traits.is_elementwise("stablehlo.bitcast_convert", (4, 2), (4,))


def test_sets_the_storage_reads():
    assert traits.COMPUTATION_OPS <= traits.DATA_FLOW_OPS
    assert "sdy.all_gather" in traits.COLLECTIVE_OPS
    assert "stablehlo.constant" in traits.CONSTANT_OPS and "sdy.constant" in traits.CONSTANT_OPS
    assert traits.TERMINATORS == {"func.return", "stablehlo.return", "sdy.return", "mhlo.return"}
