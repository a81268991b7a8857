"""The command line: help, version, show, and one-line errors with exit status 1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from jax_programs import lowered
from sdy_dl import __version__
from sdy_dl.cli import main


def run(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input)


def test_help_and_version():
    assert run("--help").exit_code == 0
    result = run("--version")
    assert result.exit_code == 0 and __version__ in result.output


def test_show_json_lists_meshes_ops_and_shardings(tmp_path):
    path = tmp_path / "mlp.mlir"
    path.write_text(lowered("mlp"))
    result = run("show", str(path), "--format", "json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["meshes"] == {"mesh": '<["data"=2, "model"=4]>'}
    assert summary["op_counts"]["stablehlo.dot_general"] == 2
    shardings = {row["value"]: row["sharding"] for row in summary["shardings"]}
    assert shardings["%arg0"] == '#sdy.sharding<@mesh, [{"data"}, {}]>'
    assert shardings["%arg1"] == '#sdy.sharding<@mesh, [{}, {"model"}]>'


def test_show_reads_stdin():
    result = run("show", "-", input=lowered("while_loop"))
    assert result.exit_code == 0 and "stablehlo.while" in result.output


@pytest.mark.parametrize("content, message", [
    ("not mlir at all", "unknown"),
    ("", "empty module file"),
    ('sdy.mesh @mesh = <["a"=2]>\nfunc.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"q"}]>}) -> tensor<8xf32> {\n  return %arg0 : tensor<8xf32>\n}\n', "unknown axis"),
])
def test_user_errors_are_one_line_with_exit_1(tmp_path, content, message):
    path = tmp_path / "bad.mlir"
    path.write_text(content)
    result = run("show", str(path))
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"sdy-dl: error: {path}")
    assert message in lines[0]


def test_missing_file_and_usage_errors():
    result = run("show", "/nonexistent/x.mlir")
    assert result.exit_code == 1 and "sdy-dl: error: /nonexistent/x.mlir" in result.output
    assert run("show").exit_code == 2
    assert run("no-such-command").exit_code == 2


SDY_DL = shutil.which("sdy-dl", path=os.path.dirname(sys.executable)) or shutil.which("sdy-dl")


@pytest.mark.skipif(SDY_DL is None, reason="sdy-dl is not installed")
def test_installed_entry_point_runs(tmp_path):
    path = tmp_path / "m.mlir"
    path.write_text(lowered("mlp"))
    proc = subprocess.run([SDY_DL, "show", str(path), "--format", "json"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "dot_general" in proc.stdout


PASS_ERRORS = [
    (["pass", "aggressive-propagate"], "not mlir", "unknown"),
    (["pass", "no-such-pass"], None, "unknown pass"),
    (["propagate"], 'sdy.mesh @mesh = <["a"=2]>\nfunc.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"a"}]>}) -> tensor<8x8xf32> {\n  return %arg0 : tensor<8x8xf32>\n}\n', "duplicate axis"),
    (["propagate", "--rules", "/nonexistent/rules.yaml"], None, "rules.yaml"),
    (["propagate", "--relations", "."], None, "program.dl"),
]


@pytest.mark.parametrize("command, content, message", PASS_ERRORS)
def test_failing_commands_leave_no_output_file(tmp_path, command, content, message):
    source = tmp_path / "in.mlir"
    source.write_text(content if content is not None else lowered("mlp"))
    out = tmp_path / "out.mlir"
    result = run(*command, str(source), "-o", str(out), "--engine", "clingo")
    usage_error = "no-such-pass" in command
    assert result.exit_code == (2 if usage_error else 1), result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sdy-dl: error: ") and message in lines[0]
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["in.mlir"]


def test_output_written_in_pieces_is_whole_or_absent(tmp_path):
    """``report`` writes its page in pieces: a piece that fails leaves no file (and
    an existing file as it was)."""
    from sdy_dl.errors import SdyError
    from sdy_dl.output import write_atomic

    out = tmp_path / "page.html"
    write_atomic(str(out), (piece for piece in ["<p>", "value", "</p>\n"]))
    assert out.read_text() == "<p>value</p>\n"

    def failing():
        yield "<p>partial"
        raise SdyError("no tree")
    with pytest.raises(SdyError):
        write_atomic(str(out), failing())
    assert out.read_text() == "<p>value</p>\n"
    with pytest.raises(SdyError):
        write_atomic(str(tmp_path / "new.html"), failing())
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]
    write_atomic(str(out), "<p>\u00e4</p>\n".encode("utf-8"))   # (UTF-8 bytes, as they are)
    assert out.read_text(encoding="utf-8") == "<p>\u00e4</p>\n"



def test_output_goes_through_a_file_of_its_own_beside_the_target(tmp_path):
    """The file written before the rename is one no other writer has: a name
    already taken (another process's, or one left by a killed run) is passed over
    and left as it was."""
    import os

    from sdy_dl.output import write_atomic

    taken = tmp_path / f".sdy-dl-{os.getpid()}-0"
    taken.write_text("someone else's")
    write_atomic(str(tmp_path / "out.mlir"), "module\n")
    assert (tmp_path / "out.mlir").read_text() == "module\n"
    assert taken.read_text() == "someone else's"
    assert sorted(p.name for p in tmp_path.iterdir()) == [taken.name, "out.mlir"]
    assert oct((tmp_path / "out.mlir").stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    import os

    mask = os.umask(0o022)
    os.umask(mask)
    return mask

def test_standard_output_takes_bytes_as_they_are_after_the_text_before_them(monkeypatch):
    """Bytes go to the stream's binary buffer once the text written before them is
    flushed; a text-only stream (no buffer) gets them decoded."""
    import io
    import sys

    from sdy_dl.output import _write_stdout

    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="utf-8", write_through=False)
    monkeypatch.setattr(sys, "stdout", stream)
    _write_stdout(["<a>", "\u00e4".encode("utf-8"), "</a>\n"])
    assert raw.getvalue() == "<a>\u00e4</a>\n".encode("utf-8")
    text = io.StringIO()
    monkeypatch.setattr(sys, "stdout", text)
    _write_stdout("\u00e4\n".encode("utf-8"))
    assert text.getvalue() == "\u00e4\n"


def test_bad_pass_option_is_a_usage_error(tmp_path):
    source = tmp_path / "in.mlir"
    source.write_text(lowered("mlp"))
    assert run("propagate", str(source), "--pass-option", "novalue").exit_code == 2


def test_propagate_writes_the_annotated_module(tmp_path):
    source = tmp_path / "in.mlir"
    source.write_text(lowered("mlp"))
    out = tmp_path / "out.mlir"
    result = run("propagate", str(source), "-o", str(out), "--engine", "clingo")
    assert result.exit_code == 0, result.output
    text = out.read_text()
    # the two dots, the call of relu, and relu's broadcast and maximum (as Shardy)
    assert text.count("sdy.sharding_per_value") == 5
    assert '<@mesh, [{"data"}, {"model"}]>' in text  # closed by the export passes


def test_propagation_pass_rejects_inlined_meshes_with_a_place(tmp_path):
    source = tmp_path / "in.mlir"
    source.write_text('func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<mesh<["a"=2]>, '
                      '[{"a"}, {}]>}) -> tensor<8x8xf32> {\n  return %arg0 : tensor<8x8xf32>\n}\n')
    out = tmp_path / "out.mlir"
    result = run("pass", "aggressive-propagate", str(source), "-o", str(out), "--engine", "clingo")
    assert result.exit_code == 1 and f"{source}:1:1: " in result.output and "inlined mesh" in result.output
    assert not out.exists()
    assert run("propagate", str(source), "-o", str(out), "--engine", "clingo").exit_code == 0


def test_passes_lists_every_registered_pass():
    result = run("passes")
    assert result.exit_code == 0
    names = {line.split()[0] for line in result.output.splitlines()}
    assert {"aggressive-propagate", "user-priority-propagate", "import-pipeline",
            "sink-data-flow-edges", "import-func-calls"} <= names


def _process(*args, **kwargs):
    """The installed ``sdy-dl`` command (its console script runs ``sdy_dl.cli:run``)."""
    return subprocess.run([SDY_DL, *args], capture_output=True, text=True, timeout=300,
                          **kwargs)


@pytest.mark.skipif(SDY_DL is None, reason="sdy-dl is not installed")
def test_the_process_exits_with_the_commands_status_and_flushed_output(tmp_path):
    path = tmp_path / "mlp.mlir"
    path.write_text(lowered("mlp"))
    done = _process("propagate", str(path))
    assert done.returncode == 0 and done.stdout.startswith("module") and not done.stderr
    assert done.stdout.rstrip().endswith("}")
    bad = _process("propagate", str(tmp_path / "missing.mlir"))
    assert bad.returncode == 1 and bad.stderr.startswith("sdy-dl: error: ") and not bad.stdout
    usage = _process("propagate", "--engine", "nope", str(path))
    assert usage.returncode == 2 and usage.stderr.count("\n") == 1


@pytest.mark.skipif(SDY_DL is None, reason="sdy-dl is not installed")
def test_the_process_imports_numpy_only_for_a_pass_that_uses_it(tmp_path):
    """The process imports jaxlib's MLIR bindings without numpy; lifting an inlined
    mesh with device ids (the one use of numpy) still imports it and works."""
    def run_and_list_imports(mesh: str) -> tuple[str, set[str]]:
        path = tmp_path / "m.mlir"
        path.write_text(f"""module {{
  func.func @main(%arg0: tensor<8x8xf32> {{sdy.sharding = #sdy.sharding<{mesh}, [{{"x"}}, {{}}]>}})
      -> tensor<8x8xf32> {{
    %0 = stablehlo.add %arg0, %arg0 : tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }}
}}""")
        done = subprocess.run([sys.executable, "-X", "importtime", SDY_DL, "propagate", str(path)],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout, {line.rpartition("|")[2].strip() for line in done.stderr.splitlines()
                             if line.startswith("import time:")}

    out, imported = run_and_list_imports('mesh<["x"=2, "y"=2]>')
    # (the refused import of numpy is listed too, without its submodules)
    assert "jaxlib.mlir.ir" in imported and not any(m.startswith("numpy.") for m in imported)
    assert "tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, {}]>}" in out
    out, imported = run_and_list_imports('mesh<["x"=2, "y"=2], device_ids=[3, 2, 1, 0]>')
    assert "numpy.linalg" in imported
    assert "device_ids = dense<[3, 2, 1, 0]> : tensor<4xi64>" in out


@pytest.mark.skipif(SDY_DL is None, reason="sdy-dl is not installed")
def test_a_reader_that_goes_away_ends_the_command_quietly():
    proc = subprocess.Popen([SDY_DL, "passes", "--format", "markdown"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()   # nobody reads: the first write fails
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 1
    assert err == ""
