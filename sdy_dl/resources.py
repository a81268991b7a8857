"""Locate the shipped data directories (``rules/`` and ``datalog/``).

Installed, they are the packages ``sdy_dl.rules_data`` and
``sdy_dl.datalog_data``; in a source checkout they are the top-level folders
next to ``sdy_dl/``.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

# SHA-256 (cache keys and digests): CPython's own module where there is one (importing
# hashlib loads and starts OpenSSL, ~15M instructions a process, more than the
# keys cost to hash); Python 3.12 names it _sha2.
try:
    from _sha256 import sha256
except ImportError:
    try:
        from _sha2 import sha256
    except ImportError:
        from hashlib import sha256


@functools.lru_cache(maxsize=None)
def _data_dir(package: str, folder: str) -> Path:
    """The folder of a shipped data package (looked up once per process: every
    compiled stage and rule lookup asks)."""
    spec = importlib.util.find_spec(package)
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(__file__).resolve().parent.parent / folder


def rules_dir() -> Path:
    """The folder of the shipped YAML rule files."""
    return _data_dir("sdy_dl.rules_data", "rules")


def datalog_dir() -> Path:
    """The folder of the shipped Datalog templates."""
    return _data_dir("sdy_dl.datalog_data", "datalog")


def cache_root() -> Path:
    """sdy-dl's cache: ``$SDY_DL_CACHE``, else ``$XDG_CACHE_HOME/sdy-dl`` (``~/.cache/sdy-dl``)."""
    import os

    base = os.environ.get("SDY_DL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sdy-dl")
    return Path(base)


@functools.lru_cache(maxsize=None)
def code_digest(*modules) -> str:
    """A digest of the source files of ``modules`` (keys cache entries that those
    modules' code computed, so that a changed checker or translator misses); a
    module given by its dotted name is found without being imported.  A file
    counts by its :func:`file_stamp`, as Python's byte-code cache checks a source."""
    h = sha256()
    for module in modules:
        path = importlib.util.find_spec(module).origin if isinstance(module, str) else module.__file__
        h.update(file_stamp(path))
    return h.hexdigest()[:16]


def file_stamp(path) -> bytes:
    """What changes when the file at ``path`` changes: its path, size and
    modification time, and sdy-dl's version (an installed release whose files
    carry fixed times).  Reading and hashing every source that keys a cache
    entry cost each process more than the entries saved (~0.5% at 1k)."""
    import os

    from sdy_dl import __version__

    st = os.stat(path)
    return f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0{__version__}\0".encode()


def cached_text(kind: str, key: str, compute) -> str:
    """The text ``compute()`` gives, kept in the cache under ``kind/key``; an
    unwritable or unreadable cache only costs the computation."""
    return cached(kind, key, lambda: compute().encode("utf-8"), lambda data: data.decode("utf-8"))


def cached_value(kind: str, key: str, compute, dumps, loads):
    """The value ``compute()`` gives, kept in the cache under ``kind/key`` as the
    bytes ``dumps`` makes of it; an entry ``loads`` cannot read back (a damaged
    file) is computed again."""
    def load(data: bytes):
        try:
            return loads(data)
        except Exception as e:
            raise ValueError(str(e)) from None

    return cached(kind, key, lambda: dumps(compute()), load)


def cached(kind: str, key: str, compute, load):
    """``load(data)`` of the bytes ``compute()`` gives, kept in the cache under
    ``kind/key``.  A cached entry that is damaged (:func:`unseal` or ``load``
    rejects it with ValueError) is computed again and replaced; an unwritable
    cache only costs the computation."""
    path = cache_root() / kind / key
    try:
        return load(unseal(path.read_bytes()))
    except (OSError, ValueError):
        pass
    data = compute()
    write_cache_file(path, seal(data))
    return load(data)


def write_cache_file(path: Path, data: bytes) -> None:
    """Replace the cache file at ``path`` by ``data`` whole (a reader never sees
    part of it); an unwritable cache writes nothing."""
    import os
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        pass


def seal(data: bytes) -> bytes:
    """``data`` as a cache file holds it: followed by its CRC-32, so that a file
    cut short, emptied or overwritten is known as damaged (:func:`unseal`)."""
    import zlib

    return data + zlib.crc32(data).to_bytes(4, "big")


def unseal(entry: bytes) -> bytes:
    """The data of the cache file contents ``entry`` (:func:`seal`); ValueError
    when it is damaged."""
    import zlib

    data, check = entry[:-4], entry[-4:]
    if len(entry) < 4 or zlib.crc32(data).to_bytes(4, "big") != check:
        raise ValueError("damaged cache entry")
    return data
