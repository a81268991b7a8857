"""A process that runs ``sdy-dl`` command lines, each in a forked process of its own.

Started by ``tests/structure_fuzz.py``: it imports sdy-dl (and jaxlib) once,
creates no MLIR context itself, and for each case (one JSON object per line
on standard input) forks a process that sets up its standard streams as the
case says (a file, closed, or ``/dev/full``) and runs the CLI's entry point
(``sdy_dl.cli.run``, which ends the process as the installed ``sdy-dl``
does).  The worker waits with a timeout (a process still running then is
killed: a hang) and answers one JSON object per line: the exit status or the
signal, standard output and error, and the files the case's directory holds
afterwards.  A case may also ask for Shardy's output of a module (run by
``oracle.shardy`` in a forked process too, so an abort of jaxlib is only that
process's).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sdy_dl.cli  # noqa: E402  (imported once, before any fork)


def _preload() -> None:
    """Import what the commands import when they run (no MLIR context is made:
    its worker threads would not survive a fork)."""
    import importlib

    loader = getattr(sdy_dl.cli, "_load_commands", None)
    if loader is not None:
        loader([None])
    for name in ("sdy_dl.pipeline", "sdy_dl.audit", "sdy_dl.passes", "jaxlib.mlir.ir",
                 "jaxlib.mlir.dialects.sdy", "jaxlib.mlir.dialects.stablehlo"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


_preload()


def _child_streams(case: dict, tmp: str) -> None:
    streams = case.get("streams", {})
    stdin = streams.get("stdin", "file")
    if stdin == "closed":
        os.close(0)
    else:
        path = os.path.join(tmp, ".stdin")
        with open(path, "wb") as f:
            f.write(case.get("stdin", "").encode("utf-8", "surrogateescape"))
        fd = os.open(path, os.O_RDONLY)
        os.dup2(fd, 0)
        os.close(fd)
    for fd, name in ((1, "stdout"), (2, "stderr")):
        how = streams.get(name, "file")
        if how == "closed":
            os.close(fd)
            continue
        target = "/dev/full" if how == "full" else os.path.join(tmp, f".{name}")
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, fd)
        os.close(out)


def _wait(pid: int, timeout: float) -> tuple[str, int]:
    """("exit", code), ("signal", number) or ("timeout", 0)."""
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            if os.WIFSIGNALED(status):
                return "signal", os.WTERMSIG(status)
            return "exit", os.WEXITSTATUS(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout", 0
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def run_cli(case: dict) -> dict:
    tmp = case["dir"]
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            os.chdir(tmp)
            _child_streams(case, tmp)
            os.environ.pop("SDY_DL_TRACEBACK", None)
            sys.argv = ["sdy-dl"] + case["argv"]
            sdy_dl.cli.run()
        finally:
            os._exit(70)
    how, code = _wait(pid, case.get("timeout", 120))
    files = sorted(n for n in os.listdir(tmp) if n not in (".stdin", ".stdout", ".stderr"))
    return {"how": how, "code": code, "stdout": _read(os.path.join(tmp, ".stdout")),
            "stderr": _read(os.path.join(tmp, ".stderr")), "files": files}


def run_shardy(case: dict) -> dict:
    out = os.path.join(case["dir"], ".shardy")
    pid = os.fork()
    if pid == 0:
        code = 3
        err = os.open(os.path.join(case["dir"], ".shardy-stderr"), os.O_WRONLY | os.O_CREAT, 0o644)
        os.dup2(err, 2)   # (jaxlib's fatal errors print there)
        try:
            from oracle import shardy

            with open(out, "w", encoding="utf-8") as f:
                f.write(shardy(case["module"], case.get("pipeline", "sdy-propagation-pipeline")))
            code = 0
        except BaseException as e:   # an invalid module: Shardy rejects it
            with open(out, "w", encoding="utf-8") as f:
                f.write(f"{type(e).__name__}: {e}")
        finally:
            os._exit(code)
    how, code = _wait(pid, case.get("timeout", 120))
    text = _read(out)
    ok = how == "exit" and code == 0
    return {"how": how, "code": code, "ok": ok, "output": text if ok else None,
            "error": None if ok else text}


def main() -> None:
    for line in sys.stdin:
        case = json.loads(line)
        result = run_shardy(case) if case.get("kind") == "shardy" else run_cli(case)
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
