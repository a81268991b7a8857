"""What-ifs of random edits on random modules: each output is exactly a full
``propagate`` of the edited input, and Shardy's pipeline on it.

The modules are :func:`random_modules.random_module`'s with the dots and
concatenates insert-explicit-reshards reshards, so edits there insert and
remove ``sdy.reshard`` ops: the edited output then differs from the first in
structure, not only in shardings; and
:func:`random_control_flow.random_control_flow_module`'s (while, case,
barriers, constraints, calls that become named computations and functions
again: the passes after propagation whose output depends on shardings
anywhere).  The edits are drawn per module from its
propagated output: a main argument set to a random sharding or unset, an op
result given one (an open dim among them), a constraint dropped or set.  The
seeds are fixed and cover both an edit that adds reshards and one that
removes them (checked).
"""

from __future__ import annotations

import random

import pytest

from random_control_flow import random_control_flow_module
from random_modules import random_module
from sdy_dl import propagate
from sdy_dl.audit.whatif import Edit, resolve
from sdy_dl.errors import SdyError
from test_whatif import _check_exact

#: Default-run seeds (the slow run adds many more): 5 adds reshards, 1 removes some,
#: 2 and 25 both.
SEEDS = [1, 2, 5, 25]


def _random_sharding(rng: random.Random, axes: list[str], rank: int) -> str:
    """A sharding of rank ``rank`` over some of ``axes`` (each at most once), each
    dim open or closed."""
    dims: list[list[str]] = [[] for _ in range(rank)]
    for axis in rng.sample(axes, len(axes)):
        if rank and rng.random() < 0.6:
            dims[rng.randrange(rank)].append(axis)
    parts = []
    for dim in dims:
        inner = ", ".join(f'"{a}"' for a in dim)
        parts.append("{" + inner + ("" if rng.random() < 0.6 else (", ?" if inner else "?")) + "}")
    return f"<@mesh, [{', '.join(parts)}]>"


def _target(audit, name: str, kind: str) -> str | None:
    """The input value ``kind`` would edit for output value ``name`` (None: the edit
    does not apply there)."""
    try:
        target = resolve(audit, Edit(kind, name, "<@mesh, []>" if kind == "set" else None))
    except SdyError:
        return None
    if kind == "drop":
        ok = target.op_name == "sdy.sharding_constraint"
    elif kind == "unset":   # (a constraint's sharding is dropped with it, not unset)
        ok = target.current is not None and target.op_name != "sdy.sharding_constraint"
    else:
        ok = True
    return target.name if ok else None


def random_edits(result, rng: random.Random) -> list[Edit]:
    """One to three edits of the propagated ``result``, drawn with ``rng``."""
    audit = result.audit
    axes = [a.name for a in audit.propagated.meshes["mesh"].axes]
    outs = [v for v in audit.outputs.values if v.value is not None and v.func == "main"
            and v.sharding is not None]
    rng.shuffle(outs)
    edits, used = [], set()
    for out in outs:
        if len(edits) == rng.randint(1, 3):
            break
        kind = rng.choice(["set", "set", "unset", "drop"])
        target = _target(audit, out.name, kind)
        if target is None or target in used:
            continue
        used.add(target)
        sharding = _random_sharding(rng, axes, out.sharding.rank) if kind == "set" else None
        edits.append(Edit(kind, out.name, sharding))
    return edits


def _reshards(result) -> int:
    return result.text.count("sdy.reshard")


def _dag(seed: int) -> str:
    return random_module(seed, 12, ("dot", "concat"))


def _check_seed(seed: int, module=_dag) -> tuple[int, int]:
    """The what-ifs of ``module(seed)``, each checked exact; (reshards added, reshards
    removed) over them."""
    rng = random.Random(seed)
    before = propagate(module(seed), engine="python")
    added = removed = 0
    for _ in range(3):
        edits = random_edits(before, rng)
        if not edits:
            continue
        after, _ = _check_exact(before, edits)
        change = _reshards(after) - _reshards(before)
        added += change > 0
        removed += change < 0
    return added, removed


def test_random_edits_of_random_modules_are_exact():
    counts = [_check_seed(seed) for seed in SEEDS]
    assert any(a for a, _ in counts) and any(r for _, r in counts), counts


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 160))
def test_random_edits_of_random_modules_are_exact_slow(seed):
    _check_seed(seed)


#: Default-run seeds of the control-flow modules (the slow run adds more).
CONTROL_FLOW_SEEDS = [0, 1, 2]


@pytest.mark.parametrize("seed", CONTROL_FLOW_SEEDS)
def test_random_edits_with_control_flow_and_calls_are_exact(seed):
    _check_seed(seed, random_control_flow_module)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 200))
def test_random_edits_with_control_flow_and_calls_are_exact_slow(seed):
    _check_seed(seed, random_control_flow_module)
