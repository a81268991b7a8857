"""``sdy-dl cache``: list, verify and clear the cache of compiled Soufflé programs."""

from __future__ import annotations

import os
import shutil

import click

from sdy_dl.cli import main


def _cache() -> str:
    from sdy_dl.engines.souffle_engine import cache_dir

    return cache_dir()


@main.group()
def cache() -> None:
    """The cache of compiled Soufflé programs ($SDY_DL_CACHE/souffle)."""


@cache.command("list")
def list_cache() -> None:
    """Every cached program: built, building, waiting or failed (with its attempts,
    when it is retried and the compiler's message), and its size."""
    from sdy_dl.engines.souffle_cache import entries

    found = entries(_cache())
    click.echo(f"{_cache()}: {len(found)} program(s)")
    for e in found:
        line = f"{os.path.basename(e.directory)}  {e.state:<8} {e.size / 1e6:8.1f} MB"
        click.echo(line + (f"  {e.detail}" if e.detail else ""))


@cache.command("verify")
@click.option("--remove-broken", is_flag=True,
              help="Remove broken binaries (the next compiled run builds them again).")
def verify_cache(remove_broken: bool) -> None:
    """Start every built binary and check that it answers; exit status 1 when one
    is broken."""
    from sdy_dl.engines.souffle_cache import entries, verify

    broken = 0
    for e in entries(_cache()):
        if e.state != "built":
            continue
        problem = verify(e)
        name = os.path.basename(e.directory)
        if problem is None:
            click.echo(f"{name}  ok")
            continue
        broken += 1
        click.echo(f"{name}  broken: {' '.join(problem.split())}")
        if remove_broken:
            os.remove(os.path.join(e.directory, "program"))
    if broken:
        raise SystemExit(1)


@cache.command("clear")
def clear_cache() -> None:
    """Remove the cache of compiled programs (not while a compiler runs in it; a
    symbolic link to it is removed, not what it points to)."""
    from sdy_dl.engines.souffle_build import held, slot_locks
    from sdy_dl.errors import SdyError

    root = _cache()
    if not os.path.lexists(root):
        click.echo(f"{root}: no cache to remove")
        return
    if any(held(p) for p in slot_locks(root)):
        raise SdyError("a compilation is running in the cache; clear it when it is done",
                       file=root)
    if os.path.islink(root):   # (as rm does: the link goes, what it points to stays)
        target = os.readlink(root)
        try:
            os.unlink(root)
        except OSError as e:
            raise SdyError(f"cannot remove the link: {e.strerror}", file=root) from None
        click.echo(f"removed the link {root} (to {target}, which is kept)")
        return
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(root)
               for f in files if os.path.isfile(os.path.join(d, f)))
    failed = []
    shutil.rmtree(root, onerror=lambda _, path, info: failed.append((path, info[1])))
    if failed:
        path, e = failed[0]
        raise SdyError(f"cannot remove {'it' if path == root else path}: "
                       f"{getattr(e, 'strerror', None) or e}", file=root)
    click.echo(f"removed {root} ({size / 1e6:.1f} MB)")
