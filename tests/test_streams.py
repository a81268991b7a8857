"""Closed, full and broken standard streams: the ``sdy-dl`` process (run by a
shell, so the streams are really closed) ends with one error line where
standard error exists, the documented exit status, and no output file when
it fails; a stream the command does not use may be closed (as GNU tools)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SDY_DL = os.path.join(os.path.dirname(sys.executable), "sdy-dl")
MODULE = ('sdy.mesh @mesh = <["a"=2]>\n'
          'func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>})'
          ' -> tensor<8xf32> {\n  %0 = stablehlo.negate %arg0 : tensor<8xf32>\n'
          '  return %0 : tensor<8xf32>\n}\n')

# (id, shell command ({s} = sdy-dl, {m} = the module, {o} = the output path), exit status,
#  the error line's words (None: no error line), whether {o} exists afterwards)
CASES = [
    ("show-stdout-closed", "{s} show {m} >&-", 1, ["<stdout>:", "standard output is closed"], False),
    ("propagate-stdout-closed", "{s} propagate {m} >&-", 1, ["<stdout>:", "closed"], False),
    ("propagate-o-stdout-closed", "{s} propagate {m} -o {o} >&-", 0, None, True),
    ("propagate-o-stderr-closed", "{s} propagate {m} -o {o} 2>&-", 0, None, True),
    ("error-stderr-closed", "{s} propagate {m}.missing -o {o} 2>&-", 1, None, False),
    ("error-stderr-full", "{s} propagate {m}.missing -o {o} 2>/dev/full", 1, None, False),
    ("stdin-closed", "{s} propagate - -o {o} <&-", 1, ["<stdin>:", "standard input is closed"],
     False),
    ("stdout-full", "{s} propagate {m} > /dev/full", 1, ["<stdout>:", "No space left"], False),
    ("show-json-stdout-full", "{s} show {m} --format json > /dev/full", 1,
     ["<stdout>:", "No space left"], False),
    ("o-full", "{s} propagate {m} -o /dev/full", 1, ["/dev/full:", "No space left"], False),
    ("help-stdout-closed", "{s} --help >&-", 1, ["<stdout>:", "closed"], False),
    ("version-stdout-full", "{s} --version > /dev/full", 1, ["<stdout>:", "No space left"], False),
    ("o-empty", "{s} propagate {m} -o ''", 2, ["output file name is empty"], False),
    ("module-empty", "{s} propagate '' -o {o}", 2, ["module file name is empty"], False),
    ("out-dir-empty", "{s} emit {m} --out-dir ''", 2, ["output directory name is empty"], False),
    ("rules-empty", "{s} propagate {m} --rules '' -o {o}", 2, ["rule file name is empty"], False),
]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("command, code, words, output", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_stream_faults(tmp_path, command, code, words, output):
    m, o = tmp_path / "m.mlir", tmp_path / "out.mlir"
    m.write_text(MODULE)
    shell = command.format(s=SDY_DL, m=m, o=o)
    p = subprocess.run(["sh", "-c", shell], stdout=subprocess.PIPE if ">" not in command else None,
                       stderr=subprocess.PIPE, timeout=120)
    err = p.stderr.decode()
    assert p.returncode == code, err
    assert "Traceback" not in err and "internal error" not in err
    lines = err.splitlines()
    if words is None:
        assert lines == []
    else:
        assert len(lines) == 1 and lines[0].startswith("sdy-dl: error: "), err
        for w in words:
            assert w in lines[0], (w, lines[0])
    assert o.exists() == output
    if output:
        assert "sdy.sharding_per_value" in o.read_text()
    assert sorted(os.listdir(tmp_path)) == sorted(["m.mlir"] + (["out.mlir"] if output else []))


def test_broken_pipe_is_quiet(tmp_path):
    """A reader that goes away (``| head``): no error line, no traceback."""
    m = tmp_path / "m.mlir"
    body = "".join(f"  %{i + 1} = stablehlo.negate %{i} : tensor<8xf32>\n" for i in range(3000))
    m.write_text(MODULE.replace("  return %0", body + "  return %3000"))
    p = subprocess.run(["sh", "-c", f"{SDY_DL} propagate {m} --quiet | head -c 1 >/dev/null"],
                       stderr=subprocess.PIPE, timeout=300)
    assert p.stderr.decode() == ""



@pytest.mark.parametrize("outputs", ["-o - --save-input -", "-o - --save-input /dev/stdout",
                                     "-o /dev/stdout --save-input /dev/fd/1",
                                     "-o - --save-input {o} > {o}",
                                     "-o {o} --save-input /dev/stdout > {o}"])
def test_two_outputs_on_standard_output_are_a_usage_error(tmp_path, outputs):
    """Two outputs that are standard output (``-``, ``/dev/stdout``, the file it is
    redirected to) are two names of one file: one line, exit 2, nothing written."""
    m, o = tmp_path / "m.mlir", tmp_path / "out.mlir"
    m.write_text(MODULE)
    shell = f"{SDY_DL} whatif {m} --unset %arg0 --quiet " + outputs.format(o=o)
    p = subprocess.run(["sh", "-c", shell], capture_output=True, text=True, timeout=120)
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr.startswith("sdy-dl: error: two outputs name the same file: ")
    assert p.stderr.count("\n") == 1
    assert sorted(os.listdir(tmp_path)) == ["m.mlir"] + (["out.mlir"] if ">" in outputs else [])
    assert not o.exists() or o.read_text() == ""


def test_two_outputs_on_one_device_are_accepted(tmp_path):
    """A device holds nothing one output could spoil for another: ``/dev/null`` (or a
    terminal) may take both outputs of a what-if."""
    m = tmp_path / "m.mlir"
    m.write_text(MODULE)
    p = subprocess.run(["sh", "-c", f"{SDY_DL} whatif {m} --unset %arg0 --quiet "
                        "-o /dev/null --save-input /dev/null"],
                       capture_output=True, text=True, timeout=120)
    assert (p.returncode, p.stderr) == (0, "")
    assert sorted(os.listdir(tmp_path)) == ["m.mlir"]


@pytest.mark.parametrize("command, code", [
    ("diff {m} {other}", 1), ("diff {m} {m}", 0), ("diff {m} {other} --format json", 1),
    ("propagate {m} --quiet", 1), ("show {m}", 1), ("show {m} --format json", 1)])
def test_a_broken_pipe_gives_the_documented_status(tmp_path, command, code):
    """A reader that has gone before anything is written: no line; exit status 1 (the
    output was not all read), diff's its answer (0 the same, 1 different)."""
    m, other = tmp_path / "m.mlir", tmp_path / "other.mlir"
    m.write_text(MODULE)
    other.write_text(MODULE.replace('[{"a"}]', "[{}]"))
    p = subprocess.Popen([SDY_DL, *command.format(m=m, other=other).split()],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()   # (no reader left: the first write fails)
    assert (p.wait(timeout=120), p.stderr.read()) == (code, "")
