"""The memory table (``sdy-dl memory``, ``result.memory()``).

* Argument bytes per device equal XLA's ``memory_analysis().argument_size_in_bytes``
  for JAX programs without padding.
* Bytes per device by hand with sub-axes and dims the axes do not divide.
* The top-N list names the replicated lm_head-style weight, why, and the mesh axes
  that could shard it.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import comms_programs
import sdy_dl
from sdy_dl.cli import main


@pytest.mark.parametrize("name", list(comms_programs.PROGRAMS))
def test_argument_bytes_equal_xla(name):
    table = sdy_dl.propagate(comms_programs.lowered_text(name), explicit_collectives=True).memory()
    (main_totals,) = [f for f in table.functions if f.function == "main"]
    xla = comms_programs.compiled(name).memory_analysis()
    assert main_totals.arguments == xla.argument_size_in_bytes
    assert main_totals.results == xla.output_size_in_bytes
    assert main_totals.arguments == sum(v.bytes_per_device for v in table.values
                                        if v.op == "argument" and v.function == "main")


PADDED = """
sdy.mesh @mesh = <["x"=4, "y"=6]>
func.func @main(%arg0: tensor<10x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y":(1)2}]>},
                %arg1: tensor<7x5xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>},
                %arg2: tensor<3xi1>) -> (tensor<10x12xf32>, tensor<7x5xbf16>) {
  %0 = stablehlo.negate %arg0 : tensor<10x12xf32>
  %1 = stablehlo.negate %arg1 : tensor<7x5xbf16>
  return %0, %1 : tensor<10x12xf32>, tensor<7x5xbf16>
}
"""


def test_bytes_by_hand_with_sub_axes_and_padding():
    table = sdy_dl.propagate(PADDED).memory()
    a0, a1, a2, v0, v1 = (table.value(n) for n in ("%arg0", "%arg1", "%arg2", "%0", "%1"))
    # the export passes keep the divisible prefix on arguments: [{"x":(1)2}, {"y":(1)2}]
    assert a0.sharding == '#sdy.sharding<@mesh, [{"x":(1)2}, {"y":(1)2}]>'
    assert (a0.bytes_per_device, a0.global_bytes, a0.devices) == (5 * 6 * 4, 10 * 12 * 4, 4)
    # %0 = [{"x"}, {"y":(1)2}]: 10 over "x"=4 is 3 rows (padded), 12 over "y":(1)2 is 6
    assert v0.sharding == '#sdy.sharding<@mesh, [{"x"}, {"y":(1)2}]>'
    assert (v0.bytes_per_device, v0.devices) == (3 * 6 * 4, 8)
    # %1 = [{"y"}, {}] of 7x5 bf16: 7 over "y"=6 is 2 rows (padded)
    assert (v1.bytes_per_device, v1.devices) == (2 * 5 * 2, 6)
    assert v1.partly_sharded and v0.partly_sharded and not v0.replicated   # of 24 devices
    # no sharding: whole on every device; i1 takes a byte
    assert (a1.bytes_per_device, a2.bytes_per_device, a2.sharding) == (7 * 5 * 2, 3, "(none)")
    (f,) = table.functions
    assert f.arguments == 120 + 70 + 3
    assert f.peak_intermediates == 72 + 20   # %0 and %1 both live until the return


def test_top_names_the_replicated_lm_head_weight():
    table = sdy_dl.propagate(comms_programs.lowered_text("lm_head"),
                             explicit_collectives=True).memory(top=3)
    first = table.top[0]
    assert first.value.name == "%arg2" and first.value.replicated
    assert first.value.bytes_per_device == 1024 * 64 * 4
    assert any("%arg2 = #sdy.sharding<@mesh, [{}, {}]>" in w for w in first.why)
    assert any("closed" in w for w in first.why)
    assert first.shardable == {"data": [0, 1], "model": [0, 1]}
    assert "[1] %arg2 in main (argument)" in str(table)   # as sdy-dl memory prints it
    assert [u.value.bytes_per_device for u in table.top] == sorted(
        (u.value.bytes_per_device for u in table.top), reverse=True)


def test_no_annotation_reaches_it():
    text = """
sdy.mesh @mesh = <["x"=2]>
func.func @main(%arg0: tensor<8x8xf32>, %arg1: tensor<4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> (tensor<8x8xf32>, tensor<4xf32>) {
  %0 = stablehlo.negate %arg0 : tensor<8x8xf32>
  %1 = stablehlo.negate %arg1 : tensor<4xf32>
  return %0, %1 : tensor<8x8xf32>, tensor<4xf32>
}
"""
    table = sdy_dl.propagate(text).memory(top=1)
    (top,) = table.top
    assert top.value.name in ("%arg0", "%0")
    assert any(w.startswith("no annotation reaches it") for w in top.why)
    assert top.shardable == {"x": [0, 1]}


def test_memory_cli(tmp_path):
    module = tmp_path / "m.mlir"
    module.write_text(comms_programs.lowered_text("lm_head"))
    text = CliRunner().invoke(main, ["memory", str(module), "--top", "2"])
    assert text.exit_code == 0, text.output
    assert "[1] %arg2 in main (argument)" in text.output and "could shard: data on dim 0, 1" \
        in text.output and "estimate" in text.output
    done = CliRunner().invoke(main, ["memory", str(module), "--format", "json"])
    data = json.loads(done.output)
    assert data["functions"][0]["arguments"] == 294928
    assert data["top_unsharded"][0]["value"] == "%arg2"
    assert len(data["values"]) >= 10


def _peak_by_hand(entries) -> tuple:
    """The live bytes at every position (each entry live from its position to its last
    use), the first position where they are largest, the first entry defined there."""
    if not entries:
        return 0, None
    peak, at = 0, None
    for p in range(max(e[1] for e in entries) + 1):
        live = sum(e[4].bytes_per_device for e in entries if e[0] <= p <= e[1])
        if live > peak:
            peak, at = live, next(e for e in entries if e[0] == p)
    return peak, at


def test_peak_is_the_first_largest_live_sum():
    """A function's peak of live intermediates and the value defined where it is first
    reached, against the live bytes summed position by position (ties, values dead
    on their own op, several values of one op, zero-byte values, empty)."""
    import random
    from types import SimpleNamespace

    from sdy_dl.audit.memory import _peak

    rng = random.Random(7)
    for _ in range(300):
        entries = []
        for p in sorted(rng.choices(range(12), k=rng.randrange(0, 9))):
            end = p + rng.choice([0, 0, 1, 2, 5])
            entries.append((p, end, ("o", len(entries)), None,
                            SimpleNamespace(bytes_per_device=rng.choice([0, 4, 4, 8, 16]))))
        assert _peak(entries) == _peak_by_hand(entries), entries


@pytest.mark.parametrize("name", ["shard_map", "shard_map_scan_pipeline", "attention"])
def test_stored_in_reads_what_read_stored_reads(name):
    """The layouts read an op result's sharding from the attributes the signatures
    walk read (``Signatures.stored``): the same sharding the bindings give, for
    every op result of the output (per-value and computation shardings)."""
    import jax_programs
    from sdy_dl.audit.collectives import COLLECTIVE_OPS
    from sdy_dl.audit.diff import stored_in
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.storage import read_stored

    audit = sdy_dl.propagate(jax_programs.lowered(name), engine="python").audit
    sa = audit.signatures
    ops, names = sa.table.ops, sa.table.op_names
    seen = set()
    with mlir_context():
        for value in sa.sig:
            mop, index, kind = sa.site(value)
            n = sa.op_number(value)
            if kind != "op" or names[n] in COLLECTIVE_OPS:
                continue
            assert ops[n] is mop
            want = read_stored(mop, index, False)
            assert stored_in(sa.stored[n], names[n], index) == want, (name, value)
            seen.add((names[n], want is None))
    assert any(not none for _, none in seen)
    if name.startswith("shard_map"):   # (a manual computation's out_shardings)
        assert ("sdy.manual_computation", False) in seen
