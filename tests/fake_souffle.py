"""A stand-in for ``souffle`` and the binaries it builds, for fault injection.

As ``souffle``: ``--version`` prints ``$FAKE_SOUFFLE_VERSION``; ``-o EXE SRC``
"compiles" SRC into EXE, a script running this file as a server of SRC; while
the number in the file ``$FAKE_SOUFFLE_FAILS`` is positive it fails instead
(as a compiler killed for memory), counting down, and while the one in
``$FAKE_SOUFFLE_BROKEN`` is, it writes garbage that cannot be executed; every compilation appends a line
to ``$FAKE_SOUFFLE_LOG``.  As a binary (``serve SRC --serve NAME``) it speaks
sdy-dl's server protocol, evaluating SRC with the Python engine; with
``$FAKE_SERVER_HANG`` it never answers a call.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from array import array


def _count_down(variable: str) -> bool:
    """Whether the number in the file named by ``$variable`` is positive (then one less)."""
    path = os.environ.get(variable)
    if not path or not os.path.exists(path):
        return False
    left = int(open(path).read() or 0)
    if left > 0:
        open(path, "w").write(str(left - 1))
    return left > 0


def compile_(exe: str, source: str) -> int:
    if os.environ.get("FAKE_SOUFFLE_LOG"):
        with open(os.environ["FAKE_SOUFFLE_LOG"], "a") as f:
            f.write(f"compile {source}\n")
    if _count_down("FAKE_SOUFFLE_FAILS"):
        print("c++: fatal error: Killed signal terminated program cc1plus", file=sys.stderr)
        return 1
    with open(exe, "wb") as f:
        if _count_down("FAKE_SOUFFLE_BROKEN"):
            f.write(b"\x7fELF\x00garbage")
        else:
            f.write(f'#!/bin/sh\nexec {sys.executable} {os.path.abspath(__file__)} serve '
                    f'{os.path.abspath(source)} "$@"\n'.encode())
    os.chmod(exe, os.stat(exe).st_mode | stat.S_IXUSR)
    return 0


def serve(source: str) -> int:
    from sdy_dl.datalog.facts import escape_symbol, parse_rows
    from sdy_dl.datalog.program import Program, parse_declarations
    from sdy_dl.engines.python_engine import PythonEngine

    text = open(source, encoding="utf-8").read()
    program = Program(text, parse_declarations(text))
    read, write = sys.stdin.buffer, sys.stdout.buffer
    write.write(b"!ready\n")
    write.flush()
    facts: dict = {}
    while True:
        header = read.readline().decode()
        if not header:
            return 0
        if header.startswith("@"):
            name, rows = header[1:].split()
            lines = [read.readline().decode().rstrip("\n") for _ in range(int(rows))]
            facts[name] = list(parse_rows(program.decls[name], lines, name))
        elif header.startswith("#"):
            name, rows, arity = header[1:].split()
            values = array("i")
            values.frombytes(read.read(4 * int(rows) * int(arity)))
            k = int(arity)
            facts[name] = [tuple(values[i:i + k]) for i in range(0, len(values), k)]
        elif header == "!run\n":
            if os.environ.get("FAKE_SERVER_HANG"):
                time.sleep(3600)
            out = PythonEngine().run(program, facts)
            for decl in program.outputs:
                rows = sorted(out[decl.name])
                data = "".join("\t".join(escape_symbol(v) if isinstance(v, str) else str(v)
                                         for v in row) + "\n" for row in rows).encode()
                write.write(f"@{decl.name} {len(rows)} {len(data)}\n".encode() + data)
            write.write(b"!done\n")
            write.flush()
            facts = {}


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        return serve(argv[1])
    if "--version" in argv:
        print(f"Souffle: {os.environ.get('FAKE_SOUFFLE_VERSION', '2.4')}")
        return 0
    if "-o" in argv:
        exe = argv[argv.index("-o") + 1]
        return compile_(exe, argv[-1])
    print(f"fake souffle: unsupported arguments {argv}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
