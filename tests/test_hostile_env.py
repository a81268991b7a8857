"""A hostile environment never changes an answer: damaged cache entries are made
again.

Each case runs the ``sdy-dl`` process (the cache is read from disk only in a
fresh process) and compares its output with a run on a sound cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

MODULE = """sdy.mesh @mesh = <["data"=2, "model"=4]>
func.func @main(%arg0: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>},
                %arg1: tensor<32x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>})
    -> tensor<16x64xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<16x32xf32>, tensor<32x64xf32>) -> tensor<16x64xf32>
  %1 = stablehlo.negate %0 : tensor<16x64xf32>
  return %1 : tensor<16x64xf32>
}
"""

COMMANDS = [["propagate", "{m}", "--engine", "python"], ["explain", "{m}", "%1", "--proof"],
            ["conflicts", "{m}", "--format", "json"]]


def sdy_dl(args, cache, module, **kwargs):
    env = {**os.environ, "SDY_DL_CACHE": str(cache)}
    return subprocess.run([sys.executable, "-m", "sdy_dl.cli",
                           *[a.format(m=module) for a in args], "--quiet"],
                          env=env, capture_output=True, text=True, timeout=300, **kwargs)


def damage(path, how: str) -> None:
    data = path.read_bytes()
    if how == "cut":
        path.write_bytes(data[:len(data) // 2])
    elif how == "emptied":
        path.write_bytes(b"")
    elif how == "one-byte":
        i = len(data) // 3
        path.write_bytes(data[:i] + bytes([data[i] ^ 0x20]) + data[i + 1:])
    else:
        path.write_bytes(os.urandom(200))


@pytest.fixture(scope="module")
def sound(tmp_path_factory):
    """A cache every command of COMMANDS filled, and their outputs."""
    tmp = tmp_path_factory.mktemp("cache")
    module = tmp / "m.mlir"
    module.write_text(MODULE)
    outputs = []
    for args in COMMANDS:
        done = sdy_dl(args, tmp / "cache", module)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    return module, tmp / "cache", outputs


@pytest.mark.parametrize("how", ["cut", "emptied", "one-byte", "junk"])
def test_damaged_cache_entries_are_made_again(sound, tmp_path, how):
    module, cache, outputs = sound
    shutil.copytree(cache, tmp_path / "cache")
    files = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert len(files) > 10
    for path in files:
        damage(path, how)
    for args, expected in zip(COMMANDS, outputs):
        done = sdy_dl(args, tmp_path / "cache", module)
        assert (done.returncode, done.stderr) == (0, ""), args
        assert done.stdout == expected, args
