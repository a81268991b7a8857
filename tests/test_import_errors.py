"""Invalid input to the import passes: a one-line error, and through the CLI
exit status 1 with no output file; and the CLI's successful runs."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from import_programs import normalize, ours, shardy, shardy_fails
from sdy_dl.errors import SdyError

MESH = 'sdy.mesh @mesh = <["a"=2, "b"=2]>\n'

GROUP_ACROSS_MANUAL = MESH + """
func.func @main(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  sdy.sharding_group %arg0 group_id=7 : tensor<8x8xf32>
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"a"}, {}]>] out_shardings=[<@mesh, [{"a"}, {}]>] manual_axes={"a"} (%arg1: tensor<4x8xf32>) {
    sdy.sharding_group %arg1 group_id=7 : tensor<4x8xf32>
    sdy.return %arg1 : tensor<4x8xf32>
  } : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}"""

GROUP_ACROSS_TWO_MANUALS = MESH + """
func.func @main(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"a"}, {}]>] out_shardings=[<@mesh, [{"a"}, {}]>] manual_axes={"a"} (%arg1: tensor<4x8xf32>) {
    sdy.sharding_group %arg1 group_id=1 : tensor<4x8xf32>
    sdy.return %arg1 : tensor<4x8xf32>
  } : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = sdy.manual_computation(%0) in_shardings=[<@mesh, [{"a"}, {}]>] out_shardings=[<@mesh, [{"a"}, {}]>] manual_axes={"a"} (%arg1: tensor<4x8xf32>) {
    sdy.sharding_group %arg1 group_id=1 : tensor<4x8xf32>
    sdy.return %arg1 : tensor<4x8xf32>
  } : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}"""

GROUP_SHAPE_MISMATCH = """
func.func @main(%arg0: tensor<8x8xf32>, %arg1: tensor<8x4xf32>) {
  sdy.sharding_group %arg0 group_id=3 : tensor<8x8xf32>
  sdy.sharding_group %arg1 group_id=3 : tensor<8x4xf32>
  return
}"""

MANUAL_NO_IN_OUT = MESH + """
func.func @main() {
  sdy.manual_computation() in_shardings=[] out_shardings=[] manual_axes={"a"} () {
    %0 = stablehlo.constant dense<1.0> : tensor<4xf32>
    sdy.return
  } : () -> ()
  return
}"""

UNKNOWN_MESH = """
func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@nowhere, [{"a"}]>}) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}"""

BAD_INLINED_MESH = """
func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<mesh<["a"=2, "a"=2]>, [{"a"}]>}) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}"""

PASS_ERRORS = [
    ("sharding-group-import", GROUP_ACROSS_MANUAL,
     "ShardingGroupOps values cannot cross ManualComputationOp boundaries for groupId: 7"),
    ("sharding-group-import", GROUP_ACROSS_TWO_MANUALS,
     "ShardingGroupOps values cannot cross ManualComputationOp boundaries for groupId: 1"),
    ("sharding-group-import", GROUP_SHAPE_MISMATCH,
     "ShardingGroupOps values must have the same shape for groupId: 3"),
    ("manual-axes-cleanup", MANUAL_NO_IN_OUT,
     "op has manual_axes when there are no in/out shardings and the body is not empty"),
]


@pytest.mark.parametrize("name,text,message", PASS_ERRORS,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(PASS_ERRORS)])
def test_pass_error_matches_shardy(name, text, message):
    assert message in shardy_fails(text, f"sdy-{name}")
    with pytest.raises(SdyError) as info:
        ours(text, name)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    assert info.value.line is not None


def test_group_error_from_the_pipeline():
    with pytest.raises(SdyError, match="cannot cross ManualComputationOp"):
        ours(GROUP_ACROSS_MANUAL, "import-pipeline", dedup_functions_fully=True)
    # Without dedup-functions-fully the pipeline does not import groups.
    expected = shardy(GROUP_ACROSS_MANUAL, "sdy-import-pipeline")
    assert ours(GROUP_ACROSS_MANUAL, "import-pipeline") == expected


def run_cli(*args):
    from sdy_dl.cli import main

    return CliRunner().invoke(main, list(args))


CLI_ERRORS = [
    ("sharding-group-import", GROUP_ACROSS_MANUAL, "cannot cross ManualComputationOp"),
    ("sharding-group-import", GROUP_SHAPE_MISMATCH, "must have the same shape"),
    ("manual-axes-cleanup", MANUAL_NO_IN_OUT, "op has manual_axes"),
    ("lift-inlined-meshes", UNKNOWN_MESH, "nowhere"),
    ("lift-inlined-meshes", BAD_INLINED_MESH, "a"),
    ("import-pipeline", UNKNOWN_MESH, "nowhere"),
    ("apply-sharding-constraints", "func.func @main(", ""),
]


@pytest.mark.parametrize("name,text,fragment", CLI_ERRORS,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(CLI_ERRORS)])
def test_cli_error_is_one_line_and_writes_nothing(tmp_path, name, text, fragment):
    src = tmp_path / "in.mlir"
    src.write_text(text)
    out = tmp_path / "out.mlir"
    result = run_cli("pass", name, str(src), "-o", str(out))
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("sdy-dl: error: "), result.output
    assert str(src) in lines[0] and fragment in lines[0]
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["in.mlir"]


@pytest.mark.parametrize("name", ["lift-inlined-meshes", "constant-or-scalar-splitter",
                                  "add-data-flow-edges", "import-pipeline"])
def test_cli_writes_shardys_output(tmp_path, name):
    from import_programs import lowered

    text = lowered("shard_map_partial")
    src = tmp_path / "in.mlir"
    src.write_text(text)
    out = tmp_path / "out.mlir"
    result = run_cli("pass", name, str(src), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert normalize(out.read_text()) == shardy(text, f"sdy-{name}")


def test_constant_splitter_is_registered_in_cli(tmp_path):
    src = tmp_path / "in.mlir"
    src.write_text("""
func.func @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %c = stablehlo.constant dense<1.0> : tensor<4xf32>
  %0 = stablehlo.add %arg0, %c : tensor<4xf32>
  return %0, %c : tensor<4xf32>, tensor<4xf32>
}""")
    result = run_cli("pass", "constant-splitter", str(src))
    assert result.exit_code == 0, result.output
    assert result.output.count("sdy.constant dense<1.000000e+00>") == 2
