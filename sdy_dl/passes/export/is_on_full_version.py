"""Shardy's ``isOnFullVersion`` in insert-explicit-reshards, decided by the
Datalog stage ``is_on_full_version`` (``datalog/is_on_full_version/``) for
every op the pass's walk visits, in one engine call before the walk: whether
the op is treated in full (its name is a ``full_name``, or it is a ``full_op``:
a concatenate, the one op told apart from others of its name).  This module
writes the facts and reads the answer."""

from __future__ import annotations

from collections.abc import Sequence

from sdy_dl.ir.value_sharding import get_sharding
from sdy_dl.passes import Stage

STAGE = Stage("is_on_full_version")

#: The op whose operand and result shardings the stage compares (the facts of
#: single ops are written for it alone).
CONCATENATE = "stablehlo.concatenate"


def full_version_facts(ops: Sequence, enable_full_version: bool,
                       names: Sequence[str]) -> dict[str, set]:
    """The facts of stage ``is_on_full_version`` for ``ops`` (op ``k`` is ``ops[k]``;
    ``names``: their names)."""
    facts: dict[str, set] = {"in_enable_full_version": set(), "in_name": set(), "in_op": set(),
                             "in_operand_sharding": set(), "in_result_sharding": set()}
    if enable_full_version:
        facts["in_enable_full_version"].add((1,))
    ids: dict = {None: 0}
    facts["in_name"].update((name,) for name in set(names))
    for k, name in enumerate(names):
        if name == CONCATENATE:
            mop = ops[k]
            facts["in_op"].add((k, name))
            for i, operand in enumerate(mop.operands):
                facts["in_operand_sharding"].add((k, i, ids.setdefault(get_sharding(operand),
                                                                       len(ids))))
            facts["in_result_sharding"].add((k, ids.setdefault(get_sharding(mop.results[0]),
                                                               len(ids))))
    return facts


def is_on_full_version(ops: Sequence, enable_full_version: bool, options,
                       names: Sequence[str] | None = None) -> list[bool]:
    """Per op of ``ops``, whether insert-explicit-reshards treats it in full
    (``names``: the ops' names, read from them when not given)."""
    if not ops:
        return []
    names = [mop.name for mop in ops] if names is None else names
    decided = STAGE.run(full_version_facts(ops, enable_full_version, names), options)
    full = {n for (n,) in decided["full_name"]}
    single = {k for (k,) in decided["full_op"]}
    return [name in full or k in single for k, name in enumerate(names)]
