"""The op-trait table: which ops are elementwise, terminators, constants, collectives, ...

The facts are data, ``rules/traits/op_traits.yaml`` (each trait with its
documentation); this module reads them once and gives every pass and the
propagation the same sets.  Shardy's ``isElementwise`` needs one per-op check
besides the list (``stablehlo.bitcast_convert`` between equal shapes):
:func:`is_elementwise`.
"""

from __future__ import annotations

import functools

from sdy_dl.resources import rules_dir

TRAITS_FILE = "traits/op_traits.yaml"


@functools.cache
def _table() -> dict[str, frozenset[str]]:
    """The trait table, parsed once per file text and kept in the cache (a
    command's start then needs neither PyYAML nor the parse)."""
    import marshal
    import sys

    from sdy_dl.resources import cached_value, code_digest, sha256

    path = rules_dir() / TRAITS_FILE
    text = path.read_text()
    key = "-".join((sha256(text.encode()).hexdigest()[:32],
                    code_digest(sys.modules[__name__]), sys.implementation.cache_tag))
    table = cached_value("traits", key, lambda: _parse(text, path), marshal.dumps, marshal.loads)
    return {name: frozenset(names) for name, names in table.items()}


def table_key() -> str:
    """A digest of the trait table (keys cache entries made from what it says)."""
    from sdy_dl.resources import sha256

    table = repr(sorted((name, sorted(ops)) for name, ops in _table().items()))
    return sha256(table.encode()).hexdigest()[:16]


def _parse(text: str, path) -> dict[str, list[str]]:
    import yaml

    data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    table = {}
    for name, entry in data["traits"].items():
        names = entry.get("ops", entry.get("call_targets", entry.get("dialects")))
        if not entry.get("doc") or not isinstance(names, list) or not names:
            raise ValueError(f"{path}: trait {name!r} needs a doc and a list of ops")
        table[name] = list(names)
    return table


def ops_with(trait: str) -> frozenset[str]:
    """The op names (or, for a ``call_targets`` or ``dialects`` trait, the names)
    that have ``trait``."""
    return _table()[trait]


ELEMENTWISE_OPS = ops_with("elementwise")
TERMINATORS = ops_with("terminator")
CONSTANT_OPS = ops_with("constant_like")
OWN_SHARDING_OPS = ops_with("own_sharding")
COLLECTIVE_OPS = ops_with("collective")
COMPUTATION_OPS = ops_with("computation")
DATA_FLOW_OPS = ops_with("data_flow")
EFFECT_FREE_DIALECTS = ops_with("effect_free_dialects")
PURE_OPS = ops_with("pure")
EFFECTFUL_OPS = ops_with("effectful")
RECURSIVE_EFFECT_OPS = ops_with("recursive_effects")

#: The op whose ``call_target_name`` names what it is: a ``call_targets`` trait, a
#: rule file's ``custom_calls:`` entry and its effects are looked up by that name.
CUSTOM_CALL_OP = "stablehlo.custom_call"


def is_elementwise(name: str, shapes) -> bool:
    """Shardy's ``isElementwise`` for an op called ``name``; ``shapes()`` gives the
    shapes of its first operand and result (read only when they decide)."""
    if name in ELEMENTWISE_OPS:
        return True
    if name != "stablehlo.bitcast_convert":
        return False
    operand_shape, result_shape = shapes()
    return operand_shape == result_shape
