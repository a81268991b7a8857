"""The compiled-Soufflé path under injected faults, with a fake ``souffle`` on PATH
(``fake_souffle.py``: no Soufflé needed): a server that hangs, a compiler that
fails, a broken binary, a changed install; and ``sdy-dl cache``."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from sdy_dl.engines import get_engine, souffle_build, souffle_engine, souffle_server
from sdy_dl.errors import SdyError
from test_engines import FACTS, program

FAKE = Path(__file__).with_name("fake_souffle.py")


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A fake ``souffle`` first on PATH, a fresh cache; returns the tmp folder."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    souffle = bin_dir / "souffle"
    souffle.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
    souffle.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SDY_DL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_SOUFFLE_LOG", str(tmp_path / "log"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(sys.path))
    souffle_engine.build_key.cache_clear()
    souffle_engine._GAVE_UP.clear()
    souffle_engine._STARTED.clear()
    yield tmp_path
    souffle_server.close_all()
    souffle_engine.build_key.cache_clear()
    souffle_engine._GAVE_UP.clear()
    souffle_engine._STARTED.clear()


def compilations(tmp_path) -> int:
    log = tmp_path / "log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_a_server_that_hangs_times_out_and_the_run_continues_embedded(fake, monkeypatch, capfd):
    monkeypatch.setenv("FAKE_SERVER_HANG", "1")
    monkeypatch.setenv("SDY_DL_SOUFFLE_TIMEOUT", "1")
    expected = get_engine("python").run(program(), FACTS)
    engine = get_engine("souffle", compiled=True)
    start = time.monotonic()
    assert engine.run(program(), FACTS) == expected
    assert engine.run(program(), FACTS) == expected   # no second wait
    assert time.monotonic() - start < 30
    warnings = [line for line in capfd.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1, warnings
    assert "gave no answer within 1 s; this run continues on the embedded engine" in warnings[0]
    assert warnings[0].startswith("sdy-dl: warning: ")


def test_a_failed_build_is_retried_after_a_bounded_back_off(fake, monkeypatch):
    (fake / "fails").write_text("1")   # the compiler is killed once, then works
    monkeypatch.setenv("FAKE_SOUFFLE_FAILS", str(fake / "fails"))
    monkeypatch.setattr(souffle_build, "SETTLE_SECONDS", 0)
    monkeypatch.setattr(souffle_build, "RETRY_BASE", 60.0)
    monkeypatch.setattr(souffle_build, "RETRY_MAX", 120.0)
    souffle = str(fake / "bin" / "souffle")
    exe = souffle_engine.binary_path(program())
    source = souffle_engine._cached_source(program())
    directory = os.path.dirname(exe)
    assert souffle_build.build(souffle, source, exe) is None
    assert not os.path.exists(exe) and souffle_build.failed_attempts(directory) == 1
    assert 59 < souffle_build.retry_in(directory) <= 60
    # in its back-off: a background run does not start a builder, the embedded engine answers
    started = []
    with monkeypatch.context() as m:
        m.setattr(souffle_engine.subprocess, "Popen", lambda *a, **k: started.append(a))
        engine = get_engine("souffle", compiled=True, background=True)
        assert engine.run(program(), FACTS) == get_engine("python").run(program(), FACTS)
    assert started == [] and souffle_build.waiting_programs(os.path.dirname(directory)) == []
    # the back-off doubles, and stays bounded
    assert [souffle_build.retry_delay(n) for n in (1, 2, 3, 9)] == [60, 120, 120, 120]
    failed = os.path.join(directory, souffle_build.FAILED)
    past = time.time() - 61
    os.utime(failed, (past, past))
    assert souffle_build.retry_due(directory)
    assert souffle_build.build(souffle, source, exe) is None
    assert os.path.exists(exe) and not os.path.exists(failed)
    assert compilations(fake) == 2


def test_a_broken_binary_is_detected_and_rebuilt(fake, monkeypatch, capfd):
    (fake / "broken").write_text("1")   # the first binary is garbage
    monkeypatch.setenv("FAKE_SOUFFLE_BROKEN", str(fake / "broken"))
    expected = get_engine("python").run(program(), FACTS)
    assert get_engine("souffle", compiled=True).run(program(), FACTS) == expected
    assert compilations(fake) == 2
    err = capfd.readouterr().err
    assert "sdy-dl: warning: cannot start" in err and "built again" in err
    # auto: a broken binary in the cache is removed, the embedded engine answers
    exe = souffle_engine.binary_path(program())
    souffle_server.close_all()
    Path(exe).write_bytes(b"\x7fELF garbage")
    assert get_engine("auto").run(program(), FACTS) == expected
    assert not os.path.exists(exe)


def test_the_cache_key_covers_the_install_and_the_code_that_shapes_the_cxx(fake, monkeypatch,
                                                                            tmp_path):
    from sdy_dl.engines import souffle_trim

    key = souffle_engine.build_key()
    souffle_engine.build_key.cache_clear()
    monkeypatch.setenv("FAKE_SOUFFLE_VERSION", "2.5")
    assert souffle_engine.build_key() != key
    souffle_engine.build_key.cache_clear()
    monkeypatch.delenv("FAKE_SOUFFLE_VERSION")
    assert souffle_engine.build_key() == key
    changed = tmp_path / "souffle_trim.py"
    changed.write_text(Path(souffle_trim.__file__).read_text() + "\n# changed\n")
    monkeypatch.setattr(souffle_trim, "__file__", str(changed))
    souffle_engine.build_key.cache_clear()
    assert souffle_engine.build_key() != key
    monkeypatch.setattr(souffle_build, "compiler_config",
                        lambda souffle: {"compiler": "/bin/true", "cxx_flags": "-O2"})
    souffle_engine.build_key.cache_clear()
    other = souffle_engine.build_key()
    monkeypatch.setattr(souffle_build, "compiler_config",
                        lambda souffle: {"compiler": "/bin/true", "cxx_flags": "-O3"})
    souffle_engine.build_key.cache_clear()
    assert souffle_engine.build_key() != other


def test_cache_command_lists_verifies_and_clears(fake, monkeypatch):
    from sdy_dl.cli import main

    (fake / "fails").write_text("1")
    monkeypatch.setenv("FAKE_SOUFFLE_FAILS", str(fake / "fails"))
    failing = program(open_graph_variant())
    with pytest.raises(SdyError, match="souffle failed: c\\+\\+: fatal error: Killed"):
        get_engine("souffle", compiled=True).run(failing, FACTS)
    get_engine("souffle", compiled=True).run(program(), FACTS)
    souffle_server.close_all()
    runner = CliRunner()
    listed = runner.invoke(main, ["cache", "list"])
    assert listed.exit_code == 0, listed.output
    assert "2 program(s)" in listed.output and " built " in listed.output
    assert "failed" in listed.output and "1 attempt(s)" in listed.output
    assert "Killed signal" in listed.output
    verified = runner.invoke(main, ["cache", "verify"])
    assert verified.exit_code == 0 and " ok" in verified.output
    exe = souffle_engine.binary_path(program())
    Path(exe).write_bytes(b"\x7fELF garbage")
    verified = runner.invoke(main, ["cache", "verify", "--remove-broken"])
    assert verified.exit_code == 1 and "broken: cannot start" in verified.output
    assert not os.path.exists(exe)
    cleared = runner.invoke(main, ["cache", "clear"])
    assert cleared.exit_code == 0 and "removed" in cleared.output
    assert not os.path.exists(souffle_engine.cache_dir())


def open_graph_variant() -> str:
    """Another program (another cache entry) than ``program()``'s."""
    from test_engines import GRAPH

    return GRAPH + "// extra(x): a node with an edge\n.decl extra(x: number)\n.output extra\n" \
        "extra(X) :- edge(X, _).\n"
