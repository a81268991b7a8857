"""Compiled Soufflé programs as long-running processes: one per binary serves every call.

sdy-dl's binaries are linked with ``souffle_server.cpp`` as their main
(:mod:`sdy_dl.engines.souffle_build`).  A binary may hold several programs
(a group compiled together, each program's cache directory holding a link to
it); started with ``--serve NAME``, NAME the program's
:func:`~sdy_dl.engines.souffle_build.program_name` (that of the binary's
directory), it answers ``!ready`` and then, per call, reads the input relations

    @<relation> <number of rows>
    <row: tab-separated fields, symbols escaped as in fact files>
    ...
    #<relation of numbers only> <number of rows> <arity>
    <the rows' numbers, row after row, as native 32-bit integers>
    !run

runs the program once, writes every output relation the same way (its header
``@<relation> <number of rows> <number of bytes>``) followed by ``!done`` (or
one line ``!error <message>``), and empties its relations.  A
call then costs pipe I/O instead of a process start and a dozen fact files
(~5 ms, more than a step batch's evaluation).  The processes last as long as
sdy-dl's (they end when their input closes).  A binary that does not answer
``!ready`` (one ``souffle -o`` built when sdy-dl's own build failed) is run
once per call on fact files instead.  A call that gets no answer within
:func:`call_timeout` seconds ends the process (:class:`ServerTimeout`); a
binary that cannot be started, or that dies by a signal before ``!ready``, is
broken (:class:`BrokenBinary`): the Soufflé engine decides what runs instead.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import tempfile
import threading
import time

from sdy_dl.datalog.facts import Facts, encoded_relations, parse_rows
from sdy_dl.datalog.program import Program
from sdy_dl.engines.base import Relations
from sdy_dl.engines.souffle_build import program_name
from sdy_dl.errors import SdyError

#: The answer of a binary started with ``--serve`` before its first call.
READY = b"!ready\n"

#: Seconds a call may take when ``$SDY_DL_SOUFFLE_TIMEOUT`` does not say.
DEFAULT_TIMEOUT = 600.0


def call_timeout() -> float:
    """Seconds a server may take to answer one call (``$SDY_DL_SOUFFLE_TIMEOUT``)."""
    try:
        return float(os.environ.get("SDY_DL_SOUFFLE_TIMEOUT") or DEFAULT_TIMEOUT)
    except ValueError:
        return DEFAULT_TIMEOUT


class ServerTimeout(SdyError):
    """A server that did not answer a call in time (it was ended)."""


class BrokenBinary(SdyError):
    """A binary that cannot be started, or that died by a signal before it was ready."""


class Server:
    """One binary running with ``--serve``."""

    def __init__(self, exe: str):
        self.exe = exe
        self.owner = os.getpid()   # a forked child starts its own
        self.stderr = tempfile.TemporaryFile()   # read when the process stops
        self.deadline: float | None = None   # of the call in progress
        self.timed_out = False
        try:
            # its own process group: a timeout ends whatever it started too
            self.proc = subprocess.Popen([exe, "--serve", program_name(os.path.dirname(exe))],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self.stderr, start_new_session=True)
        except OSError as e:
            raise BrokenBinary(f"cannot start {exe}: {e.strerror or e}") from None
        self.deadline = time.monotonic() + call_timeout()
        threading.Thread(target=self._watch, daemon=True).start()
        self.ready = self.proc.stdout.readline() == READY
        self.deadline = None
        if not self.ready:
            self.close()
            if self.timed_out:
                raise ServerTimeout(f"{exe} was not ready within {call_timeout():g} s")
            if self.proc.returncode < 0:
                raise BrokenBinary(f"{exe} died by signal {-self.proc.returncode} "
                                   "before it was ready")

    def _watch(self) -> None:
        """End the process when a call outlives its deadline (a daemon thread)."""
        while self.proc.poll() is None:
            deadline = self.deadline
            if deadline is not None and time.monotonic() > deadline:
                self.timed_out = True
                self._kill()
                return
            time.sleep(0.2)

    def _kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass

    def call(self, program: Program, facts: Facts) -> Relations:
        """``program``'s output relations on ``facts`` (checked here)."""
        encoded = encoded_relations(program, facts)
        request = []
        for decl in program.inputs:
            rows, data = encoded.get(decl.name, (0, ""))
            if rows and isinstance(data, bytes):
                request += [f"#{decl.name} {rows} {decl.arity}\n".encode(), data]
            elif rows:
                request.append(f"@{decl.name} {rows}\n{data}".encode())
        request.append(b"!run\n")
        self.deadline = time.monotonic() + call_timeout()
        try:
            self.proc.stdin.write(b"".join(request))
            self.proc.stdin.flush()
            return self._read(program)
        except (OSError, ValueError):
            raise self._stopped() from None
        finally:
            self.deadline = None

    def _read(self, program: Program) -> Relations:
        out = {d.name: set() for d in program.outputs}
        readline = self.proc.stdout.readline
        while True:
            header = readline().decode()
            if header == "!done\n":
                return out
            if header.startswith("!error "):
                self.close()
                raise SdyError(f"souffle failed: {header[len('!error '):].strip()}")
            if not header.startswith("@"):
                raise self._stopped()
            name, rows, size = header[1:].rsplit(" ", 2)
            lines = self.proc.stdout.read(int(size)).decode().split("\n")[:-1]
            if len(lines) != int(rows):
                if self.timed_out:
                    raise self._stopped()
                self.close()
                raise SdyError(f"souffle failed: relation {name} came truncated")
            out[name] = parse_rows(program.decls[name], lines, f"<{self.exe}: {name}>")

    def _stopped(self) -> SdyError:
        """The error of a call the process did not answer (it stopped): the last
        line it wrote to its standard error, if any."""
        self.close()
        if self.timed_out:
            return ServerTimeout(f"{self.exe} gave no answer within {call_timeout():g} s")
        self.stderr.seek(0)
        lines = self.stderr.read().decode(errors="replace").strip().splitlines()
        return SdyError(f"souffle failed: {lines[-1] if lines else f'{self.exe} stopped'}")

    def close(self) -> None:
        """End the process (its input closes; one that stopped is only reaped)."""
        try:
            self.proc.stdin.close()
        except OSError:   # the process stopped with a request half written
            pass
        self.proc.wait()


#: exe -> its server (``ready`` False: the binary cannot serve).
_SERVERS: dict[str, Server] = {}


def server(exe: str) -> Server | None:
    """The running server of binary ``exe`` (started now if need be), or None
    when the binary cannot serve; BrokenBinary when it is broken."""
    found = _SERVERS.get(exe)
    if (found is None or found.owner != os.getpid()
            or (found.ready and found.proc.poll() is not None)):
        found = _SERVERS[exe] = Server(exe)
    return found if found.ready else None


@atexit.register
def close_all() -> None:
    """Stop every server this process started."""
    for found in _SERVERS.values():
        if found.owner == os.getpid():
            found.close()
    _SERVERS.clear()
