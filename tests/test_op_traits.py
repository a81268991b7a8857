"""The op-trait table (rules/traits/op_traits.yaml): complete, used, and the sets the code reads."""

from __future__ import annotations

from pathlib import Path

import yaml

from sdy_dl.ir import traits

ROOT = Path(__file__).resolve().parent.parent
TABLE = yaml.safe_load((ROOT / "rules" / traits.TRAITS_FILE).read_text())["traits"]


def _names(entry) -> list:
    """A trait's list: op names, custom-call targets or dialects."""
    return entry.get("ops") or entry.get("call_targets") or entry.get("dialects")


def test_every_trait_has_a_doc_and_ops():
    for name, entry in TABLE.items():
        assert entry.get("doc"), name
        assert _names(entry), name


def test_every_trait_is_read_by_the_code():
    source = "\n".join(p.read_text() for p in (ROOT / "sdy_dl").rglob("*.py"))
    unread = [name for name in TABLE if f'"{name}"' not in source]
    assert unread == []


def test_no_op_is_listed_twice_in_a_trait():
    for name, entry in TABLE.items():
        names = _names(entry)
        assert len(names) == len(set(names)), name


def test_elementwise_follows_shardy():
    def unread():
        raise AssertionError("the shapes decide only for bitcast_convert")

    assert traits.is_elementwise("stablehlo.add", unread)
    assert traits.is_elementwise("sdy.reshard", unread)
    assert not traits.is_elementwise("stablehlo.dot_general", unread)
    assert traits.is_elementwise("stablehlo.bitcast_convert", lambda: ((4, 2), (4, 2)))
    assert not traits.is_elementwise("stablehlo.bitcast_convert", lambda: ((4, 2), (4,)))


def test_sets_the_storage_reads():
    assert traits.COMPUTATION_OPS <= traits.DATA_FLOW_OPS
    assert "sdy.all_gather" in traits.COLLECTIVE_OPS
    assert "stablehlo.constant" in traits.CONSTANT_OPS and "sdy.constant" in traits.CONSTANT_OPS
    assert traits.TERMINATORS == {"func.return", "stablehlo.return", "sdy.return", "mhlo.return"}


def test_dead_code_reads_the_effects_of_the_table():
    """The canonicalizer's Datalog stage and the propagation's dead-op erasure
    take their effect facts from the one table."""
    from sdy_dl.ir.traits import EFFECT_FREE_DIALECTS, PURE_OPS
    from sdy_dl.propagation import traits

    assert EFFECT_FREE_DIALECTS == {"stablehlo", "chlo", "sdy"}
    assert "arith.constant" in PURE_OPS
    text = (ROOT / "datalog" / "canonicalize" / "main.dl.j2").read_text()
    assert "in_effectful_op" in text and '"stablehlo", "rng"' not in text
    assert traits.EFFECTFUL_OPS is not None
