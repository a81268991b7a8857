"""Compile Soufflé programs into the binary cache, detached from sdy-dl.

``python -m sdy_dl.engines.souffle_build SOUFFLE SOURCE EXE`` compiles
``SOURCE`` into ``EXE``, then every other program of the same cache still
waiting for its binary, the largest first.  At most :data:`SLOTS` compilers
run per cache (a step program's compiler takes up to ~2 GB): a builder takes
one of the cache's slot locks or exits at once, leaving its program to the
builders that hold them, and a lock next to each binary's place gives each
program to one builder.  Started, at low priority, by the Soufflé engine
when it runs with ``background=True``; a run that waits for its binary
(:func:`build` with ``wait=True``) compiles it with every slot it can take.

How: ``SOUFFLE -g`` writes the program's C++, which is compiled with
``__EMBEDDED_SOUFFLE__`` (no ``main`` of its own) and linked with
``souffle_server.cpp`` as its ``main`` (:mod:`sdy_dl.engines.souffle_server`)
with the compiler, include directories, definitions and link options the Soufflé
install reports (the JSON in the ``souffle-compile.py`` next to the
``souffle`` binary, which ``souffle -o`` itself runs) but at ``-O1`` and
without OpenMP instead of ``-O3 -fopenmp``: a step program compiles in half
the CPU time with ~10% less memory, and the binaries (one thread: sdy-dl
never passes ``-j``) run as fast (within a few percent).  Soufflé's runtime
headers are precompiled once per cache (:func:`runtime_header`).  A large
program compiled with two slots is cut into two translation units
(:mod:`sdy_dl.engines.souffle_split`) compiled at once.  An install that
reports no such configuration, or a compilation that fails this way, falls
back to the whole file, then to ``SOUFFLE -o``.  Measurements:
``docs/performance.md``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time

from sdy_dl.engines.souffle_split import split

#: Left next to the binary's place when compiling failed: no further attempts.
FAILED = "failed"

#: The optimisation level of the generated C++ (Soufflé's own is ``-O3``).
OPTIMIZATION = "-O1"

#: The ``main`` of sdy-dl's binaries (one process serves every call).
SERVER_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "souffle_server.cpp")

#: Compilers that may run at once per cache (one per core of a 2-core machine).
SLOTS = 2

#: Generated C++ at least this large (the step programs) is cut into one
#: translation unit per slot held: each unit repeats the declarations and the
#: templates it instantiates, +15-45% of CPU, worth it only for the largest.
SPLIT_BYTES = 1_000_000

_CONFIG_KEYS = ("compiler", "compiler_id", "definitions", "compile_options", "includes",
                "std_flag", "cxx_flags", "link_options", "rpaths", "rpath_fmt",
                "path_delimiter", "outname_fmt")
_JSON_RE = re.compile(r'^JSON_DATA_TEXT\s*=\s*"""(.*?)"""', re.DOTALL | re.MULTILINE)


def compiler_config(souffle: str) -> dict | None:
    """The C++ build configuration of the Soufflé install of binary ``souffle``
    (the JSON in its ``souffle-compile.py``), or None when there is none we can use."""
    dirs = dict.fromkeys([os.path.dirname(souffle), os.path.dirname(os.path.realpath(souffle))])
    for directory in dirs:
        try:
            with open(os.path.join(directory, "souffle-compile.py"), encoding="utf-8") as f:
                match = _JSON_RE.search(f.read())
            conf = json.loads(match.group(1)) if match else None
        except (OSError, ValueError):
            continue
        if (isinstance(conf, dict) and all(isinstance(conf.get(k), str) for k in _CONFIG_KEYS)
                and conf["compiler_id"] in ("GNU", "Clang", "AppleClang")
                and conf["outname_fmt"] == "-o {}"):
            return conf
    return None


def _flags(conf: dict, key: str) -> list[str]:
    return [f for f in shlex.split(conf[key]) if f != "-fopenmp"]


def compile_flags(conf: dict) -> list[str]:
    """The compiler and its options for the generated C++: what ``souffle-compile.py``
    passes, at :data:`OPTIMIZATION` and without OpenMP."""
    return [conf["compiler"], *_flags(conf, "definitions"), "-D__EMBEDDED_SOUFFLE__",
            *_flags(conf, "compile_options"), *_flags(conf, "includes"), *_flags(conf, "std_flag"),
            *_flags(conf, "cxx_flags"), OPTIMIZATION]


def _link_flags(conf: dict) -> list[str]:
    rpaths = [conf["rpath_fmt"].format(p)
              for p in conf["rpaths"].split(conf["path_delimiter"]) if p]
    return [*_flags(conf, "link_options"), *rpaths]


def compile_command(conf: dict, cpp: str, exe: str) -> list[str]:
    """The command compiling the generated C++ ``cpp`` with :data:`SERVER_SOURCE`
    into ``exe`` in one step."""
    return [*compile_flags(conf), "-o", exe, cpp, SERVER_SOURCE, *_link_flags(conf)]


def link_command(conf: dict, objects: list[str], exe: str) -> list[str]:
    """The command linking the object files ``objects`` into ``exe``."""
    return [conf["compiler"], *_flags(conf, "compile_options"), *_flags(conf, "cxx_flags"),
            "-o", exe, *objects, *_link_flags(conf)]


def _run(cmd: list[str]) -> str | None:
    """None when ``cmd`` succeeds, else its message."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode == 0:
        return None
    return (proc.stderr or proc.stdout).strip() or f"exit status {proc.returncode}"


def _run_all(cmds: list[list[str]]) -> str | None:
    """Run ``cmds`` at once; None when all succeed, else the first failure's message."""
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for cmd in cmds]
    errors = []
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode != 0:
            errors.append(out.strip() or f"exit status {proc.returncode}")
    return errors[0] if errors else None


#: A runtime header that programs with indirect relations include and others
#: not: the precompiled runtime has it, so one precompiled header serves both.
SHARED_INCLUDES = ('#include "souffle/datastructure/Table.h"\n',)


def runtime_header(conf: dict, cache: str, runtime: str) -> str | None:
    """A header holding ``runtime`` (the ``#include`` lines a generated program
    starts with) and :data:`SHARED_INCLUDES`, precompiled with
    :func:`compile_flags` next to it, kept in the binary cache ``cache``; None
    while another builder precompiles it, or when precompiling failed.
    Programs then parse Soufflé's runtime headers (~2.5 s of CPU per
    translation unit) once per cache instead of once each."""
    lines = runtime.splitlines(keepends=True)
    includes = sorted({line for line in lines if line.startswith("#include")}
                      | set(SHARED_INCLUDES))
    shared = "".join([line for line in lines if not line.startswith("#include")] + includes)
    for text in dict.fromkeys([shared, runtime]):   # without the shared includes if they fail
        header = _precompiled(conf, cache, text)
        if header != FAILED:
            return header
    return None


def _built_once_dir(conf: dict, cache: str, kind: str, text: str) -> str | None:
    """The directory of ``cache`` holding what is built once per cache from
    ``text`` with :func:`compile_flags` (``kind``: what it is), keyed by the
    flags, the compiler's file stamp and ``text``; None when the compiler is
    not there."""
    try:
        stamp = os.stat(os.path.realpath(conf["compiler"])).st_mtime_ns
    except OSError:
        return None
    key = hashlib.sha256(json.dumps([compile_flags(conf), stamp, text]).encode()).hexdigest()[:20]
    return os.path.join(cache, f"{kind}-{key}")


def _precompiled(conf: dict, cache: str, text: str) -> str | None:
    """The precompiled header of ``text`` in ``cache`` (built now unless another
    builder is building it: None then), or FAILED."""
    directory = _built_once_dir(conf, cache, "runtime", text)
    if directory is None:
        return FAILED
    header = os.path.join(directory, "runtime.h")
    if os.path.exists(header + ".gch"):
        return header
    if os.path.exists(os.path.join(directory, FAILED)):
        return FAILED
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "build.lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        if os.path.exists(header + ".gch"):
            return header
        with open(header, "w", encoding="utf-8") as f:
            f.write(text)
        tmp = f"{header}.{os.getpid()}.gch"
        error = _run([*compile_flags(conf), "-x", "c++-header", header, "-o", tmp])
        if error is not None:
            with open(os.path.join(directory, FAILED), "w") as f:
                f.write(error[-4000:])
            return FAILED
        os.replace(tmp, header + ".gch")
    return header


def server_object(conf: dict, cache: str) -> tuple[str | None, str | None]:
    """(object file, None): :data:`SERVER_SOURCE` compiled with
    :func:`compile_flags`, once per cache ``cache`` (waiting for another builder
    compiling it); (None, the compiler's message) when that failed."""
    with open(SERVER_SOURCE, encoding="utf-8") as f:
        directory = _built_once_dir(conf, cache, "server", f.read())
    if directory is None:
        return None, f"no compiler {conf['compiler']}"
    obj = os.path.join(directory, "server.o")
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "build.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(obj):
            tmp = f"{obj}.{os.getpid()}.o"
            error = _run([*compile_flags(conf), "-c", "-o", tmp, SERVER_SOURCE])
            if error is not None:
                return None, error
            os.replace(tmp, obj)
    return obj, None


def compile_cxx(conf: dict, cpp: str, exe: str, jobs: int = 1, cache: str | None = None) -> str | None:
    """Compile the generated C++ ``cpp`` into ``exe`` with up to ``jobs`` compilers
    at once, with the precompiled runtime header of ``cache`` when there is one;
    None when done, else the compiler's message."""
    with open(cpp, encoding="utf-8") as f:
        text = f.read()
    parts = split(text, jobs if len(text) >= SPLIT_BYTES else 1)
    if parts is None:
        return _run(compile_command(conf, cpp, exe))
    header = runtime_header(conf, cache, parts.runtime) if cache else None
    directory = os.path.dirname(exe)
    with open(os.path.join(directory, "program.h"), "w", encoding="utf-8") as f:
        f.write(parts.declarations)
    server, error = server_object(conf, cache or directory)
    if error is not None:
        return error
    precompiled = ["-include", header] if header else []
    compiles, objects = [], [server]
    for i, piece in enumerate(parts.pieces):
        unit, obj = os.path.join(directory, f"unit{i}.cpp"), os.path.join(directory, f"unit{i}.o")
        with open(unit, "w", encoding="utf-8") as f:   # the runtime comes first, precompiled or not
            f.write(("" if header else parts.runtime) + '#include "program.h"\n' + piece)
        compiles.append([*compile_flags(conf), *precompiled, "-c", "-o", obj, unit])
        objects.append(obj)
    return _run_all(compiles) or _run(link_command(conf, objects, exe))


def compile_program(souffle: str, source: str, built: str, jobs: int = 1,
                    cache: str | None = None) -> str | None:
    """Compile the Soufflé program ``source`` into the binary ``built`` with up to
    ``jobs`` compilers at once (see :func:`compile_cxx`); None when done, else the
    compiler's message."""
    conf = compiler_config(souffle)
    if conf is not None:
        cpp = os.path.splitext(built)[0] + ".cpp"
        error = _run([souffle, "-w", "-g", cpp, source])
        if error is not None:
            return error   # the Datalog program itself is at fault: `souffle -o` would fail too
        error = compile_cxx(conf, cpp, built, jobs, cache)
        if error is None:
            return None
        print(f"compiling {cpp} in pieces failed ({error.splitlines()[0]}); trying it whole",
              file=sys.stderr)
        error = _run(compile_command(conf, cpp, built))
        if error is None:
            return None
        print(f"compiling {cpp} failed ({error.splitlines()[0]}); trying `souffle -o`",
              file=sys.stderr)
    return _run([souffle, "-o", built, source])


def _try_lock(path: str):
    """The open file ``path`` locked exclusively, or None when another process holds it."""
    f = open(path, "w")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return None
    return f


def held(path: str) -> bool:
    """Whether another process holds the lock file ``path``."""
    if not os.path.exists(path):
        return False
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
    return False


def slot_locks(cache: str) -> list[str]:
    """The lock files of the compiler slots of the binary cache ``cache``."""
    return [os.path.join(cache, f"slot-{i}.lock") for i in range(SLOTS)]


def _take_slots(cache: str, most: int, wait: bool) -> list:
    """Up to ``most`` free compiler slots of ``cache`` (locked files); with ``wait``,
    at least one (waiting for it)."""
    while True:
        held = []
        for path in slot_locks(cache):
            if len(held) < most and (f := _try_lock(path)) is not None:
                held.append(f)
        if held or not wait:
            return held
        time.sleep(0.2)


def waiting_programs(cache: str) -> list[str]:
    """Program directories of ``cache`` with a program text but neither a binary
    nor a failed compilation, largest program first."""
    out = []
    for name in os.listdir(cache) if os.path.isdir(cache) else []:
        directory = os.path.join(cache, name)
        source = os.path.join(directory, "program.dl")
        if (os.path.exists(source) and not os.path.exists(os.path.join(directory, "program"))
                and not os.path.exists(os.path.join(directory, FAILED))):
            try:
                out.append((-os.path.getsize(source), name))
            except OSError:
                continue
    return [os.path.join(cache, name) for _, name in sorted(out)]


def _claim_next(cache: str):
    """(directory, its locked ``build.lock``) of the largest waiting program no
    builder has, or None."""
    for directory in waiting_programs(cache):
        lock = _try_lock(os.path.join(directory, "build.lock"))
        if lock is None:
            continue
        if os.path.exists(os.path.join(directory, "program")):
            lock.close()
            continue
        return directory, lock
    return None


def _build_locked(souffle: str, directory: str, jobs: int) -> str | None:
    """Compile the program of ``directory`` (whose lock the caller holds) into its
    binary; None when done, else the compiler's message (also left in ``FAILED``)."""
    source, exe = os.path.join(directory, "program.dl"), os.path.join(directory, "program")
    start, cpu = time.monotonic(), _children_cpu()
    with tempfile.TemporaryDirectory(prefix="sdy-dl-build-", dir=directory) as tmp:
        built = os.path.join(tmp, "program")
        message = compile_program(souffle, source, built, jobs, os.path.dirname(directory))
        if message is not None:
            with open(os.path.join(directory, FAILED), "w") as f:
                f.write(message[-4000:])
            return message
        os.replace(built, exe)
    print(f"compiled {source} in {time.monotonic() - start:.1f} s "
          f"({_children_cpu() - cpu:.1f} s CPU, {jobs} compiler(s))", file=sys.stderr)
    return None


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def build(souffle: str, source: str, exe: str, wait: bool = False) -> str | None:
    """Compile ``source`` (``DIR/program.dl`` of a cache) into ``exe`` (``DIR/program``)
    unless it is there; None when done, else the compiler's message.

    With ``wait``, compile it now (after any builder that has it), with as many
    compilers as slots are free.  Without, while one of the cache's slots is
    free, compile the waiting programs of the cache one at a time, largest
    first, ``source``'s among them; None then."""
    directory = os.path.dirname(exe)
    cache = os.path.dirname(directory)
    if wait:
        with open(os.path.join(directory, "build.lock"), "w") as mine:
            fcntl.flock(mine, fcntl.LOCK_EX)
            if os.path.exists(exe):
                return None
            slots = _take_slots(cache, SLOTS, wait=True)
            try:
                return _build_locked(souffle, directory, len(slots))
            finally:
                for slot in slots:
                    slot.close()
    while True:
        slots = _take_slots(cache, 1, wait=False)
        if not slots:
            return None   # the builders holding the slots will compile it
        try:
            while (claimed := _claim_next(cache)) is not None:
                with claimed[1]:
                    _build_locked(souffle, claimed[0], 1)
        finally:
            slots[0].close()
        # A program queued after the last look, by a builder that found no free
        # slot, is still waiting: look again now that this slot is free.
        if all(held(os.path.join(d, "build.lock")) for d in waiting_programs(cache)):
            return None


if __name__ == "__main__":
    os.nice(10)   # the sdy-dl run that started this, and anything interactive, go first
    error = build(*sys.argv[1:4])
    if error is not None:
        print(error, file=sys.stderr)
    sys.exit(0 if error is None else 1)
