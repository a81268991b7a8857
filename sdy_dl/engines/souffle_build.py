"""Compile Soufflé programs into the binary cache, detached from sdy-dl.

``python -m sdy_dl.engines.souffle_build SOUFFLE SOURCE EXE`` compiles
``SOURCE`` into ``EXE``, then every other program of the same cache still
waiting for its binary, the largest first.  At most :data:`SLOTS` compilers
run per cache (a step program's compiler takes up to ~2 GB): a builder takes
one of the cache's slot locks or exits at once, leaving its program to the
builders that hold them, and a lock next to each binary's place gives each
program to one builder.  A builder first lets the queue settle (the run that
started it queues its programs within seconds), then compiles the small
programs waiting (:data:`GROUP_BYTES`) together into one binary that each of
their places gets: a translation unit costs ~8 s of CPU however little it
holds (Soufflé's runtime code each program instantiates), so five small
programs cost half as much together as apart.  Started, at low priority, by
the Soufflé engine when it runs with ``background=True``; a run that waits for
its binary (:func:`build` with ``wait=True``) compiles it alone with every slot
it can take.

How: ``SOUFFLE -g`` writes each program's C++, in a namespace and under a
name of its own (:func:`program_name`: the name the server is started with),
which is trimmed of what the server never uses
(:mod:`sdy_dl.engines.souffle_trim`), compiled with ``__EMBEDDED_SOUFFLE__``
(no ``main`` of its own) and linked with ``souffle_server.cpp`` as its
``main`` (:mod:`sdy_dl.engines.souffle_server`) with the compiler, include
directories, definitions and link options the Soufflé install reports (the
JSON in the ``souffle-compile.py`` next to the ``souffle`` binary, which
``souffle -o`` itself runs) but at ``-O1`` and without OpenMP instead of
``-O3 -fopenmp``: a step program compiles in half the CPU time with ~10% less
memory, and the binaries (one thread: sdy-dl never passes ``-j``) run as fast
(within a few percent).  Soufflé's runtime headers are precompiled once per
cache (:func:`runtime_header`).  A large program compiled with two slots is
cut into two translation units (:mod:`sdy_dl.engines.souffle_split`) compiled
at once.  An install that reports no such configuration, or a compilation that
fails this way, falls back to the whole file as Soufflé wrote it, then to
``SOUFFLE -o`` (a group that fails is compiled program by program).  A
program whose compilation failed is tried again after a back-off that
doubles per failure (:data:`RETRY_BASE`, at most :data:`RETRY_MAX`).
Measurements: ``docs/performance.md``.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from sdy_dl.engines.souffle_split import split
from sdy_dl.engines.souffle_trim import trim
from sdy_dl.resources import sha256

#: Left next to the binary's place when compiling failed (``attempts N``, then the
#: compiler's message); the program is compiled again after :func:`retry_delay`.
FAILED = "failed"

#: A program whose compilation failed N times waits RETRY_BASE * 2**(N-1)
#: seconds, at most RETRY_MAX, before the next attempt (a compiler killed for
#: memory may succeed later; a program that cannot compile costs an attempt
#: an hour at most).
RETRY_BASE = 60.0
RETRY_MAX = 3600.0

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

#: Programs whose Datalog text is at most this large are compiled together,
#: as many as fit in this many bytes (every program but the step programs).
GROUP_BYTES = 64_000

#: A background builder starts once no program has joined the queue for this
#: long (or after :data:`SETTLE_MAX` seconds), so that it sees what to group.
SETTLE_SECONDS = 1.0
SETTLE_MAX = 10.0

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


def runtime_header(conf: dict, cache: str, runtime: str, build: bool = True) -> str | None:
    """A header holding ``runtime`` (the ``#include`` lines a generated program
    starts with) and :data:`SHARED_INCLUDES`, precompiled with
    :func:`compile_flags` next to it, kept in the binary cache ``cache`` (built
    now if need be, unless ``build`` is false); None while another builder
    precompiles it, when it is not built yet and ``build`` is false, or when
    precompiling failed.  Programs then parse Soufflé's runtime headers (~2 s
    of CPU per translation unit) once per cache instead of once each."""
    lines = runtime.splitlines(keepends=True)
    includes = sorted({line for line in lines if line.startswith("#include")}
                      | set(SHARED_INCLUDES))
    shared = "".join([line for line in lines if not line.startswith("#include")] + includes)
    for text in dict.fromkeys([shared, runtime]):   # without the shared includes if they fail
        header = _precompiled(conf, cache, text, build)
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
    key = sha256(json.dumps([compile_flags(conf), stamp, text]).encode()).hexdigest()[:20]
    return os.path.join(cache, f"{kind}-{key}")


def _precompiled(conf: dict, cache: str, text: str, build: bool = True) -> str | None:
    """The precompiled header of ``text`` in ``cache`` (built now unless another
    builder is building it, or ``build`` is false: None then), or FAILED."""
    directory = _built_once_dir(conf, cache, "runtime", text)
    if directory is None:
        return FAILED
    header = os.path.join(directory, "runtime.h")
    if os.path.exists(header + ".gch"):
        return header
    if os.path.exists(os.path.join(directory, FAILED)):
        return FAILED
    if not build:
        return None
    os.makedirs(directory, exist_ok=True)
    lock = _try_lock(os.path.join(directory, "build.lock"))
    if lock is None:
        return None
    with lock:
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


def program_name(directory: str) -> str:
    """The name of the program of the cache directory ``directory`` in a binary:
    its C++ namespace, class and ``ProgramFactory`` name (a binary may hold
    several programs; its server is started with the name of one)."""
    return "p_" + re.sub(r"\W", "_", os.path.basename(os.path.normpath(directory)))


def compile_cxx(conf: dict, cpps: list[str], exe: str, jobs: int = 1,
                cache: str | None = None) -> str | None:
    """Compile the generated C++ files ``cpps`` (one per program), trimmed
    (:mod:`sdy_dl.engines.souffle_trim`), into one binary ``exe``, with up to
    ``jobs`` compilers at once for a single program, with the precompiled runtime
    header of ``cache`` when there is one; None when done, else the compiler's
    message (also when the C++ is not laid out as :func:`split` expects)."""
    texts = []
    for cpp in cpps:
        with open(cpp, encoding="utf-8") as f:
            texts.append(trim(f.read()))
    alone = len(texts) == 1
    large = alone and len(texts[0]) >= SPLIT_BYTES
    parts = [split(text, jobs if large else 1) for text in texts]
    if any(p is None for p in parts):   # the caller compiles a single program whole
        return f"unrecognised generated C++ in {cpps[parts.index(None)]}"
    runtime = "".join(dict.fromkeys(line for p in parts
                                    for line in p.runtime.splitlines(keepends=True)))
    # A large program does not wait ~8 s for the runtime to be precompiled to save ~2 s.
    header = runtime_header(conf, cache, runtime, build=not large) if cache else None
    directory = os.path.dirname(exe)
    with open(os.path.join(directory, "program.h"), "w", encoding="utf-8") as f:
        f.write("".join(p.declarations for p in parts))
    precompiled = ["-include", header] if header else []
    compiles, objects = [], []
    units = parts[0].pieces if alone else ["".join(p.pieces[0] for p in parts)]
    for i, piece in enumerate(units):
        unit, obj = os.path.join(directory, f"unit{i}.cpp"), os.path.join(directory, f"unit{i}.o")
        with open(unit, "w", encoding="utf-8") as f:   # the runtime comes first, precompiled or not
            f.write(("" if header else runtime) + '#include "program.h"\n' + piece)
        compiles.append([*compile_flags(conf), *precompiled, "-c", "-o", obj, unit])
        objects.append(obj)
    error = _run_all(compiles)
    if error is not None:
        return error
    server, error = server_object(conf, cache or directory)   # built by whoever links first
    return error or _run(link_command(conf, [server, *objects], exe))


def _generate(souffle: str, source: str, tmp: str) -> tuple[str | None, str | None]:
    """(the C++ of the program ``source`` of a cache directory, written into
    ``tmp`` under its :func:`program_name`, None), or (None, Soufflé's message)."""
    name = program_name(os.path.dirname(source))
    named, cpp = os.path.join(tmp, name + ".dl"), os.path.join(tmp, name + ".cpp")
    shutil.copyfile(source, named)   # Soufflé names the program after its file
    error = _run([souffle, "-w", "-N", name, "-g", cpp, named])
    return (None, error) if error is not None else (cpp, None)


def compile_program(souffle: str, source: str, built: str, jobs: int = 1,
                    cache: str | None = None) -> str | None:
    """Compile the Soufflé program ``source`` (``DIR/program.dl`` of a cache) into
    the binary ``built`` with up to ``jobs`` compilers at once (see
    :func:`compile_cxx`); None when done, else the compiler's message."""
    return compile_programs(souffle, [source], built, jobs, cache)


def compile_programs(souffle: str, sources: list[str], built: str, jobs: int = 1,
                     cache: str | None = None) -> str | None:
    """Compile the Soufflé programs ``sources`` (each ``DIR/program.dl`` of a
    cache) into one binary ``built`` serving each under its :func:`program_name`;
    None when done, else the compiler's message.  A single program falls back
    to its whole file, then to ``souffle -o``; a group does not."""
    conf = compiler_config(souffle)
    directory = os.path.dirname(built)
    if conf is not None:
        cpps = []
        for source in sources:
            cpp, error = _generate(souffle, source, directory)
            if error is not None:
                return error   # the Datalog program itself is at fault: `souffle -o` would fail too
            cpps.append(cpp)
        error = compile_cxx(conf, cpps, built, jobs, cache)
        if error is None or len(sources) > 1:
            return error
        print(f"compiling {cpps[0]} in pieces failed ({error.splitlines()[0]}); trying it whole",
              file=sys.stderr)
        error = _run(compile_command(conf, cpps[0], built))
        if error is None:
            return None
        print(f"compiling {cpps[0]} failed ({error.splitlines()[0]}); trying `souffle -o`",
              file=sys.stderr)
    if len(sources) > 1:
        return "no C++ build configuration to compile programs together"
    return _run([souffle, "-o", built, sources[0]])


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


def failed_attempts(directory: str) -> int:
    """How many times compiling the program of cache directory ``directory`` failed
    in a row (0: never, or it was built since)."""
    try:
        with open(os.path.join(directory, FAILED), encoding="utf-8", errors="replace") as f:
            first = f.readline().split()
    except OSError:
        return 0
    return int(first[1]) if len(first) == 2 and first[0] == "attempts" and \
        first[1].isdigit() else 1


def retry_delay(attempts: int) -> float:
    """Seconds to wait after the ``attempts``-th failed compilation."""
    return min(RETRY_BASE * 2 ** max(attempts - 1, 0), RETRY_MAX)


def retry_in(directory: str) -> float:
    """Seconds until the program of ``directory`` may be compiled again (0: now)."""
    attempts = failed_attempts(directory)
    if not attempts:
        return 0.0
    try:
        since = time.time() - os.path.getmtime(os.path.join(directory, FAILED))
    except OSError:
        return 0.0
    return max(0.0, retry_delay(attempts) - since)


def retry_due(directory: str) -> bool:
    """Whether the program of ``directory`` may be compiled now (it never failed,
    or its back-off after the last failure is over)."""
    return retry_in(directory) == 0.0


def _record_failure(directory: str, message: str) -> None:
    attempts = failed_attempts(directory) + 1
    tmp = os.path.join(directory, f"{FAILED}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(f"attempts {attempts}\n{message[-4000:]}")
    os.replace(tmp, os.path.join(directory, FAILED))


def _clear_failure(directory: str) -> None:
    try:
        os.remove(os.path.join(directory, FAILED))
    except OSError:
        pass


def waiting_programs(cache: str) -> list[str]:
    """Program directories of ``cache`` with a program text but neither a binary
    nor a failed compilation still in its back-off, largest program first."""
    out = []
    for name in os.listdir(cache) if os.path.isdir(cache) else []:
        directory = os.path.join(cache, name)
        source = os.path.join(directory, "program.dl")
        if (os.path.exists(source) and not os.path.exists(os.path.join(directory, "program"))
                and retry_due(directory)):
            try:
                out.append((-os.path.getsize(source), name))
            except OSError:
                continue
    return [os.path.join(cache, name) for _, name in sorted(out)]


def _source_size(directory: str) -> int:
    try:
        return os.path.getsize(os.path.join(directory, "program.dl"))
    except OSError:
        return 0


def _claim_next(cache: str) -> list:
    """[(directory, its locked ``build.lock``)] of the programs to compile next,
    none of which another builder has: the largest waiting program, and with a
    small one (:data:`GROUP_BYTES`) the other small ones, largest first, as many
    as fit; [] when none waits."""
    claimed, total = [], 0
    for directory in waiting_programs(cache):
        size = _source_size(directory)
        if claimed and total + size > GROUP_BYTES:
            continue
        lock = _try_lock(os.path.join(directory, "build.lock"))
        if lock is None:
            continue
        if os.path.exists(os.path.join(directory, "program")):
            lock.close()
            continue
        claimed.append((directory, lock))
        total += size
    return claimed


def _settle(cache: str) -> None:
    """Wait until no program has joined ``cache``'s queue for :data:`SETTLE_SECONDS`
    (at most :data:`SETTLE_MAX` seconds)."""
    deadline = time.monotonic() + SETTLE_MAX
    while time.monotonic() < deadline:
        newest = 0.0
        for directory in waiting_programs(cache):
            try:
                newest = max(newest, os.path.getmtime(os.path.join(directory, "program.dl")))
            except OSError:
                continue
        quiet = time.time() - newest
        if quiet >= SETTLE_SECONDS:
            return
        time.sleep(max(0.0, min(SETTLE_SECONDS - quiet, deadline - time.monotonic(), 0.5)))


def _build_locked(souffle: str, directories: list[str], jobs: int) -> str | None:
    """Compile the programs of ``directories`` (whose locks the caller holds) into
    one binary that each of them gets; None when done, else the compiler's
    message (also left in ``FAILED``).  A group that fails is compiled program
    by program."""
    first = directories[0]
    sources = [os.path.join(d, "program.dl") for d in directories]
    start, cpu = time.monotonic(), _children_cpu()
    with tempfile.TemporaryDirectory(prefix="sdy-dl-build-", dir=first) as tmp:
        built = os.path.join(tmp, "program")
        message = compile_programs(souffle, sources, built, jobs, os.path.dirname(first))
        if message is not None and len(directories) > 1:
            print(f"compiling {', '.join(sources)} together failed "
                  f"({message.splitlines()[0]}); compiling them one by one", file=sys.stderr)
            errors = [_build_locked(souffle, [d], jobs) for d in directories]
            return next((e for e in errors if e is not None), None)
        if message is not None:
            _record_failure(first, message)
            return message
        for directory in directories[1:]:
            _place(built, os.path.join(directory, "program"))
            _clear_failure(directory)
        os.replace(built, os.path.join(first, "program"))
        _clear_failure(first)
    print(f"compiled {', '.join(sources)} in {time.monotonic() - start:.1f} s "
          f"({_children_cpu() - cpu:.1f} s CPU, {jobs} compiler(s))", file=sys.stderr)
    return None


def _place(built: str, exe: str) -> None:
    """``built`` at ``exe`` too (a hard link, else a copy), atomically."""
    tmp = f"{exe}.{os.getpid()}.tmp"
    try:
        os.link(built, tmp)
    except OSError:
        shutil.copy2(built, tmp)
    os.replace(tmp, exe)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def build(souffle: str, source: str, exe: str, wait: bool = False) -> str | None:
    """Compile ``source`` (``DIR/program.dl`` of a cache) into ``exe`` (``DIR/program``)
    unless it is there; None when done, else the compiler's message.

    With ``wait``, compile it now (after any builder that has it), with as many
    compilers as slots are free.  Without, while one of the cache's slots is
    free, compile the waiting programs of the cache once the queue settles,
    largest first, the small ones together (:func:`_claim_next`), ``source``'s
    among them; None then."""
    directory = os.path.dirname(exe)
    cache = os.path.dirname(directory)
    if wait:
        with open(os.path.join(directory, "build.lock"), "w") as mine:
            fcntl.flock(mine, fcntl.LOCK_EX)
            if os.path.exists(exe):
                return None
            slots = _take_slots(cache, SLOTS, wait=True)
            try:
                return _build_locked(souffle, [directory], len(slots))
            finally:
                for slot in slots:
                    slot.close()
    while True:
        slots = _take_slots(cache, 1, wait=False)
        if not slots:
            return None   # the builders holding the slots will compile it
        try:
            _settle(cache)
            while claimed := _claim_next(cache):
                try:
                    _build_locked(souffle, [d for d, _ in claimed], 1)
                finally:
                    for _, lock in claimed:
                        lock.close()
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
