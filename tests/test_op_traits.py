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


def _effect_table() -> dict:
    """The effect traits of the YAML file itself, as (dialect, op) pairs."""
    def pairs(trait):
        return {tuple(name.split(".", 1)) for name in TABLE[trait]["ops"]}

    return {"in_effect_free_dialect": {(d,) for d in TABLE["effect_free_dialects"]["dialects"]},
            "in_pure_op": pairs("pure"), "in_effectful_op": pairs("effectful"),
            "in_recursive_op": pairs("recursive_effects"), "in_terminator_op": pairs("terminator")}


def test_canonicalize_stage_reads_the_effects_of_the_table():
    """The canonicalizer's Datalog stage gets the table's effect traits as its facts
    (and its program reads them instead of naming ops itself)."""
    from sdy_dl.ir import parse_module_text
    from sdy_dl.passes.export.canonicalize import dead_code_facts

    module = parse_module_text("func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
                               "  return %a : tensor<4xf32>\n}\n")
    facts, _ = dead_code_facts(module)
    for relation, rows in _effect_table().items():
        assert facts[relation] == rows, relation
    text = (ROOT / "datalog" / "canonicalize" / "main.dl.j2").read_text()
    assert "in_effectful_op" in text and '"stablehlo", "rng"' not in text


def test_propagation_erasure_reads_the_effects_of_the_table():
    """Propagation's dead-op test (``isOpTriviallyDead``) decides every op the table
    names as the table says: effectful ops are never erased, pure ops and the ops
    of effect-free dialects (not effectful) are, and a recursive-effect op with an
    effectful op inside is not."""
    from types import SimpleNamespace

    from sdy_dl.propagation.traits import has_no_effects

    def op(name, children=()):
        block = SimpleNamespace(ops=list(children))
        return SimpleNamespace(name=name, dialect=name.split(".")[0], attr_text=lambda _: None,
                               regions=[SimpleNamespace(blocks=[block])] if children else [])

    table = _effect_table()
    effectful = {".".join(p) for p in table["in_effectful_op"]}
    pure = {".".join(p) for p in table["in_pure_op"]}
    free = {d for (d,) in table["in_effect_free_dialect"]}
    assert effectful and pure and free
    for name in effectful:
        assert not has_no_effects(op(name)), name
    for name in pure:
        assert has_no_effects(op(name)), name
    assert not has_no_effects(op("mydialect.op"))
    for dialect in free:
        assert has_no_effects(op(f"{dialect}.some_op")), dialect
    for name in {".".join(p) for p in table["in_recursive_op"]}:
        assert not has_no_effects(op(name, [op(sorted(effectful)[0])])), name
        assert has_no_effects(op(name, [op(sorted(pure)[0])])), name
