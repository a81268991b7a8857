"""The collective ledger (``sdy-dl comms``, ``result.collectives()``) and its cost model.

* Every collective of the explicit-collectives output of the JAX programs is in the
  ledger exactly once, and its cause's two shardings are the ones the printed
  output shows (read from the text, not from sdy-dl's indexes).
* Bytes per device by hand for each kind, on meshes with sub-axes and dims the
  axes do not divide.
* Against XLA: for the FSDP weight all-gather, the data-parallel gradient
  all-reduce, Megatron's row-parallel all-reduce and a resharding constraint's
  all-to-all, XLA's compiled module has the same kinds, device counts and bytes.
* The cost model file: times, and an invalid file is one located error line.
"""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

import comms_programs
import jax_programs
import sdy_dl
from sdy_dl.audit.cost_model import collective_bytes, element_bytes, load_cost_model
from sdy_dl.cli import main
from sdy_dl.errors import SdyError

#: A printed collective: its name, kind and out_sharding.
_COLLECTIVE = re.compile(r"^\s*(%[\w#@.]+) = sdy\.(all_gather|all_slice|all_to_all|collective_permute|"
                         r"all_reduce|reduce_scatter|sharded_to_unreduced|replicated_to_unreduced|"
                         r"reshard) .*?(?:out_sharding=|sharding=#sdy\.sharding)(<@\w+, \[.*?\]>) :")


#: A collective the program wrote (a shard_map body's psum, ppermute, ...): its name.
_WRITTEN = re.compile(r'^\s*(%[\w#@.]+)(?::\d+)? = "stablehlo\.(all_reduce|all_gather|all_to_all|'
                      r'reduce_scatter|collective_permute)"\(')


def _inner(text: str) -> str:
    """``#sdy.sharding<@mesh, [..]>`` or ``<@mesh, [..]>`` -> ``<@mesh, [..]>``."""
    return text.removeprefix("#sdy.sharding")


def printed_sharding(text: str, name: str) -> str:
    """The sharding the printed module ``text`` gives the value ``name`` of main: a
    collective's out_sharding, an op's (first) sdy.sharding, an argument's attribute."""
    assert not name.startswith("@"), name   # (main's values only)
    lines = text.splitlines()
    if "@" in name:   # qualified by the line that defines it (or its region op's line)
        base, line = name.split("@L")
        line = re.match(r"\d+", line).group(0)
        header = lines[int(line) - 1]
        if base.startswith("%iterArg"):   # a while's block argument: the while's sharding
            args = re.findall(r"(%iterArg\w*) = ", header)
            entries = re.findall(r"<@\w+, \[.*?\](?:, \w+=\{[^}]*\})*>",
                                 header.split("sdy.sharding_per_value<[")[1])
            return entries[args.index(base)]
        return printed_sharding("\n".join(["", *lines[int(line) - 1:]]), base)
    if name.startswith("%arg"):
        m = re.search(re.escape(name) + r": tensor<[^>]*> \{sdy\.sharding = #sdy\.sharding(<@\w+, \[.*?\]>)",
                      text)
        return m.group(1) if m else "(none)"
    base, _, index = name.partition("#")
    for k, line in enumerate(lines):
        if re.match(rf"^\s*{re.escape(base)}(?::\d+)? = ", line):
            indent = len(line) - len(line.lstrip())
            if line.rstrip().endswith("({"):   # an op with regions: its attributes follow them
                line = next(x for x in lines[k + 1:]
                            if x.startswith(" " * indent + "})") and len(x) - len(x.lstrip()) == indent)
            m = re.search(r"(?:out_sharding=|sharding=#sdy\.sharding)(<@\w+, \[.*?\]>) :", line)
            if m:
                return m.group(1)
            m = re.search(r"sdy\.sharding_per_value<\[(.*)\]>", line)
            if m is None:
                return "(none)"
            entries = re.findall(r"<@\w+, \[.*?\](?:, \w+=\{[^}]*\})*>", m.group(1))
            return entries[int(index or 0)]
    raise AssertionError(f"{name} is not defined in the output")


def _programs():
    for name in jax_programs.PROGRAMS:
        yield "jax_programs", name, lambda name=name: jax_programs.lowered(name)
    for name in comms_programs.PROGRAMS:
        yield "comms_programs", name, lambda name=name: comms_programs.lowered_text(name)


PROGRAMS = list(_programs())


@pytest.mark.parametrize("where,name,text", PROGRAMS, ids=[f"{w}.{n}" for w, n, _ in PROGRAMS])
def test_every_collective_once_with_the_printed_shardings(where, name, text):
    result = sdy_dl.propagate(text(), explicit_collectives=True)
    out = result.text
    printed, written = {}, {}
    for number, line in enumerate(out.splitlines(), 1):
        m = _COLLECTIVE.match(line)
        if m:
            printed[number] = (m.group(1), m.group(2), m.group(3))
        m = _WRITTEN.match(line)
        if m:
            written[number] = (m.group(1), m.group(2))
    ledger = result.collectives()
    assert sorted(e.output_line for e in ledger if not e.written) == sorted(printed), name
    assert sorted(e.output_line for e in ledger if e.written) == sorted(written), name
    for e in ledger:
        if e.written:
            value, kind = written[e.output_line]
            prefix = "" if e.function == "main" else f"{e.function}:"
            assert e.name in (prefix + value, f"{prefix}{value}@L{e.output_line}")
            assert e.kind == kind
            continue
        value, kind, out_sharding = printed[e.output_line]
        # a name sibling regions share is qualified by its output line
        # (and by its function outside main)
        prefix = "" if e.function == "main" else f"{e.function}:"
        assert e.name in (prefix + value, f"{prefix}{value}@L{e.output_line}")
        assert (e.kind, _inner(e.out_sharding)) == (kind, out_sharding)
        if e.function != "main":
            continue
        for v in e.had.values:
            assert _inner(v["sharding"]) == printed_sharding(out, v["value"]), (name, e.name)
        for v in e.needed.values:
            assert _inner(v["sharding"]) == printed_sharding(out, v["value"]), (name, e.name)
        if not e.reduction:
            # the chain's target: what its user reads
            assert e.needed.values[0]["value"].split("@L")[0] in {p[0] for p in printed.values()}
    total = ledger.totals()["all"]
    assert total["count"] == len(printed) + len(written)
    assert total["bytes_per_device"] == sum(e.bytes or 0 for e in ledger)
    assert [e.bytes or 0 for e in ledger] == sorted((e.bytes or 0 for e in ledger), reverse=True)


def test_enough_programs_have_collectives():
    with_collectives = 0
    for _, _, text in PROGRAMS:
        if re.search(r"= sdy\.(all_gather|all_to_all|all_reduce|collective_permute|all_slice)",
                     sdy_dl.propagate(text(), explicit_collectives=True).text):
            with_collectives += 1
    assert with_collectives >= 10


# -- bytes by hand ---------------------------------------------------------------------

GATHER = """
sdy.mesh @mesh = <["x"=4, "y"=6]>
func.func @main(%arg0: tensor<10x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y":(1)2}]>}) -> (tensor<10x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  %0 = stablehlo.negate %arg0 : tensor<10x12xf32>
  return %0 : tensor<10x12xf32>
}
"""

ALL_TO_ALL = """
sdy.mesh @mesh = <["x"=4, "y"=6]>
func.func @main(%arg0: tensor<10x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<10x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) {
  %0 = stablehlo.negate %arg0 : tensor<10x12xf32>
  return %0 : tensor<10x12xf32>
}
"""

PERMUTE = """
sdy.mesh @mesh = <["x"=2, "y"=2, "z"=3]>
func.func @main(%arg0: tensor<8x9xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"z"}]>}) -> (tensor<8x9xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {"z"}]>}) {
  %0 = stablehlo.negate %arg0 : tensor<8x9xbf16>
  return %0 : tensor<8x9xbf16>
}
"""

REDUCE = """
sdy.mesh @mesh = <["x"=2, "y"=4]>
func.func @main(%arg0: tensor<5x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y":(2)2}]>}, %arg1: tensor<16x7xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y":(2)2}, {}]>}) -> (tensor<5x7xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<5x16xf32>, tensor<16x7xf32>) -> tensor<5x7xf32>
  return %0 : tensor<5x7xf32>
}
"""


def _by_kind(module: str) -> dict:
    return {e.kind: e for e in sdy_dl.propagate(module, explicit_collectives=True).collectives()}


def test_all_gather_bytes_with_sub_axes_and_padding():
    e = _by_kind(GATHER)["all_gather"]
    # local shard [{"x"}, {"y":(1)2}] of 10x12: ceil(10/4)=3 x 12/2=6 floats = 72 B; n = 4*2 = 8
    assert (e.axes, e.devices, e.bytes) == (['"x"', '"y":(1)2'], 8, 7 * 72)
    # the same as (n-1)/n of the padded gathered tensor, 12x12 floats
    assert e.bytes == 7 * (12 * 12 * 4) // 8
    # the propagation first slices "x":(2)2 out of the argument: an all-slice moves nothing
    assert _by_kind(GATHER)["all_slice"].bytes == 0


def test_all_to_all_and_permute_bytes_with_sub_axes_and_padding():
    kinds = _by_kind(ALL_TO_ALL)
    a2a, permute = kinds["all_to_all"], kinds["collective_permute"]
    # [{"x":(2)2}, {"x":(1)2}] of 10x12: 5x6 floats = 120 B per device
    assert permute.bytes == 120
    assert (a2a.axes, a2a.devices, a2a.bytes) == (['"x":(2)2'], 2, 120 // 2)


def test_collective_permute_bytes_bf16():
    e = _by_kind(PERMUTE)["collective_permute"]
    # [{"x"}, {"z"}] of 8x9 bf16: 4x3 x 2 B
    assert (e.axes, e.bytes) == (['"y"'], 4 * 3 * 2)


def test_all_reduce_bytes_with_sub_axis_and_padding():
    e = _by_kind(REDUCE)["all_reduce"]
    # [{"x"}, {}] of 5x7: ceil(5/2)=3 x 7 floats = 84 B; n = 2: 2 (n-1)/n x 84
    assert (e.axes, e.devices, e.bytes, e.reduction) == (['"y":(2)2'], 2, 84, True)
    assert [v["value"] for v in e.had.values] == ["%arg1"] or e.had.values


def test_formulas_per_kind():
    assert collective_bytes("all_gather", 4, 100, 400) == 300
    assert collective_bytes("reduce_scatter", 4, 400, 100) == 300
    assert collective_bytes("all_reduce", 4, 400, 400) == 600
    assert collective_bytes("all_to_all", 4, 400, 400) == 300
    assert collective_bytes("collective_permute", 2, 400, 400) == 400
    assert collective_bytes("all_slice", 4, 400, 100) == 0
    assert collective_bytes("reshard", 4, 400, 100) is None
    assert [element_bytes(t) for t in ("f32", "bf16", "i1", "ui8", "f8E4M3FN", "complex<f64>")] \
        == [4, 2, 1, 1, 1, 16]


# -- against XLA ------------------------------------------------------------------------

@pytest.mark.parametrize("name,kind,devices", [
    ("fsdp_gather", "all_gather", 2), ("dp_gradient", "all_reduce", 2),
    ("megatron_mlp", "all_reduce", 4), ("resharding_constraint", "all_to_all", 4)])
def test_same_collectives_as_xla(name, kind, devices):
    ledger = sdy_dl.propagate(comms_programs.lowered_text(name), explicit_collectives=True
                              ).collectives()
    moving = [(e.kind, e.devices, e.bytes) for e in ledger if e.bytes]
    xla = [(c["kind"], c["devices"], c["bytes"])
           for c in comms_programs.xla_collectives(comms_programs.compiled(name).as_text())]
    assert moving == xla
    assert moving[0][:2] == (kind, devices)


def test_the_collectives_a_program_writes_are_xlas():
    """A shard_map body's own psum, ppermute and all_gather are in the ledger, named
    by the mesh axes their device groups span, with XLA's bytes (a collective-permute
    sends its operand once: XLA's n is 2, the ledger's the axis it moves along)."""
    ledger = sdy_dl.propagate(comms_programs.lowered_text("manual_collectives"),
                              explicit_collectives=True).collectives()
    ours = sorted((e.kind, e.axes, e.devices, e.bytes) for e in ledger)
    assert ours == [("all_gather", ['"model"'], 4, 768), ("all_reduce", ['"model"'], 4, 384),
                    ("collective_permute", ['"data"'], 2, 256)]
    assert all(e.written for e in ledger)
    xla = comms_programs.xla_collectives(comms_programs.compiled("manual_collectives").as_text())
    assert sorted((c["kind"], c["bytes"]) for c in xla) == [(k, b) for k, _, _, b in ours]
    assert "written in the program" in str(ledger)


def test_fsdp_gather_cause_names_the_weight_annotation():
    ledger = sdy_dl.propagate(comms_programs.lowered_text("fsdp_gather"),
                              explicit_collectives=True).collectives()
    (gather,) = [e for e in ledger if e.kind == "all_gather"]
    assert gather.had.values[0]["value"] == "%arg1"
    assert any(a.startswith('%arg1 = #sdy.sharding<@mesh, [{"data"}, {}]>')
               for a in gather.had.annotations)
    assert any("sharding_constraint" in a or "[{}, {}]" in a for a in gather.needed.annotations)


def test_python_lines_from_debug_info():
    text = comms_programs.PROGRAMS["megatron_mlp"]().as_text(debug_info=True)
    ledger = sdy_dl.propagate(text, explicit_collectives=True, file="<jax>").collectives()
    (reduce,) = [e for e in ledger if e.kind == "all_reduce"]
    assert reduce.python and reduce.python.endswith(".py:" + reduce.python.rsplit(":", 1)[1])
    assert "comms_programs.py" in reduce.python
    (line,) = [x for x in str(ledger).splitlines() if " at output line " in x]
    assert line.count(reduce.python) == 1, line   # (its place is its Python line: said once)


def test_groups_count_layers():
    # two identical layers: one group of two all-reduces
    import jax
    import jax.numpy as jnp

    ns, f32 = comms_programs._ns, comms_programs._f32

    def f(x, w1, w2, w3, w4):
        h = jax.nn.relu(x @ w1) @ w2
        return jax.nn.relu(h @ w3) @ w4
    text = jax.jit(f, in_shardings=(ns("data", None), ns(None, "model"), ns("model", None),
                                    ns(None, "model"), ns("model", None))).lower(
        f32(16, 32), f32(32, 64), f32(64, 32), f32(32, 64), f32(64, 32)).as_text()
    ledger = sdy_dl.propagate(text, explicit_collectives=True).collectives()
    reduces = [g for g in ledger.groups() if g.first.kind == "all_reduce"]
    assert [len(g.members) for g in reduces] == [2]
    assert reduces[0].bytes == 2 * reduces[0].first.bytes
    assert "all_reduce x2 over \"model\"" in str(ledger)   # as sdy-dl comms prints it
    del jnp


def test_collectives_need_explicit_collectives():
    with pytest.raises(SdyError, match="explicit collectives"):
        sdy_dl.propagate(comms_programs.lowered_text("dp_gradient")).collectives()


# -- the cost model ---------------------------------------------------------------------

def test_cost_model_times(tmp_path):
    path = tmp_path / "model.yaml"
    path.write_text("default: {bandwidth: 1 GB/s, latency: 1 us}\n"
                    "axes:\n  data: {bandwidth: 1000, latency: 0.5}\n")
    model = load_cost_model(str(path))
    ledger = sdy_dl.propagate(comms_programs.lowered_text("dp_gradient"),
                              explicit_collectives=True).collectives(str(path))
    (e,) = [e for e in ledger if e.kind == "all_reduce"]
    # 2 (n-1) steps of 0.5 s, then 2048 B at 1000 B/s
    assert e.seconds == pytest.approx(2 * 0.5 + 2048 / 1000)
    assert model.link(["data", "other"]).bandwidth == 1000
    assert ledger.totals()["all"]["estimated_seconds"] == pytest.approx(
        sum(x.seconds for x in ledger))
    shipped = load_cost_model()
    assert shipped.default.bandwidth > 0 and "data" in shipped.axes


@pytest.mark.parametrize("text,line,col,what", [
    ("default: {bandwidth: 1 GB/s}\n", 1, 10, "has no 'latency'"),
    ("default: {bandwidth: 1 GB/s, latency: 1 us}\naxes:\n  data: {bandwidth: fast, latency: 1}\n",
     3, 21, "bandwidth must be a number"),
    ("default: {bandwidth: 1 GB/s, latency: 1 us}\naxes:\n  data: {bandwidth: 3 GB/h, latency: 1}\n",
     3, 21, "unknown unit 'GB/h'"),
    ("default: {bandwidth: 1 GB/s, latency: 1 us}\nspeed: 3\n", 2, 1, "unknown key 'speed'"),
    ("default: [1, 2\n", 2, 1, "invalid YAML"),
    ("default: {bandwidth: 0, latency: 1 us}\n", 1, 22, "bandwidth must be at least 1 B/s"),
    ("default: {bandwidth: 1e-320, latency: 1 us}\n", 1, 22, "bandwidth must be at least 1 B/s"),
    ("default: {bandwidth: 1" + "0" * 400 + ", latency: 1 us}\n", 1, 22, "finite"),
    ("default: {bandwidth: 1 GB/s, latency: 1e300}\n", 1, 39, "latency must be at most 1 hour"),
])
def test_invalid_cost_model_is_one_located_line(tmp_path, text, line, col, what):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    module = tmp_path / "m.mlir"
    module.write_text(GATHER)
    result = CliRunner().invoke(main, ["comms", str(module), "--cost-model", str(path)])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"sdy-dl: error: {path}:{line}:{col}: "), lines
    assert what in lines[0]


def test_comms_cli_text_and_json(tmp_path):
    import json

    module = tmp_path / "m.mlir"
    module.write_text(comms_programs.lowered_text("megatron_mlp"))
    text = CliRunner().invoke(main, ["comms", str(module)])
    assert text.exit_code == 0, text.output
    assert "all_reduce over \"model\" (4 devices)" in text.output and "had:" in text.output
    out = tmp_path / "ledger.json"
    done = CliRunner().invoke(main, ["comms", str(module), "--format", "json", "-o", str(out)])
    assert done.exit_code == 0 and done.output == ""
    data = json.loads(out.read_text())
    assert data["totals"]["kind"]["all_reduce"]["bytes_per_device"] == 1536
    assert data["collectives"][0]["cause"]["reduction"] is True


def test_the_report_marks_the_collectives_a_program_wrote(tmp_path):
    """The report's Communication section says which collectives the program wrote."""
    module = tmp_path / "m.mlir"
    module.write_text(comms_programs.lowered_text("manual_collectives"))
    out = tmp_path / "r.html"
    done = CliRunner().invoke(main, ["report", str(module), "-o", str(out), "--pass-option",
                                     "enable-insert-explicit-collectives=true"])
    assert done.exit_code == 0, done.output
    section = re.search(r'<section id="sec-communication">(.*?)</section>', out.read_text(),
                        re.S).group(1)
    assert section.count("written in the program; operand:") == 3, section
