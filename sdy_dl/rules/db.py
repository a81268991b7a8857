"""The rule database: load rule files, validate them, give every op its rule.

Sources, later ones overriding earlier ones (per op, custom-call target and
template): the shipped ``rules/*.yaml``, then the files and folders listed in
the environment variable ``SDY_DL_RULES`` (``os.pathsep``-separated), then
``extra_files`` (the CLI's ``--rules``).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from sdy_dl.errors import SdyError, UsageError
from sdy_dl.ir.walk import walk_model
from sdy_dl.resources import rules_dir
from sdy_dl.rules.generators import GENERATORS
from sdy_dl.rules.instance import RuleInstance
from sdy_dl.rules.rule_attr import rule_of_attr
from sdy_dl.rules.interp import instantiate
from sdy_dl.rules.schema import (CUSTOM_CALL_OP, Entry, RuleFile, Template, parse_rule_file,
                                 validate_entry)

#: The environment variable with extra rule files or folders.
RULES_ENV = "SDY_DL_RULES"
#: The attribute an op may carry with its own rule (it wins over the database).
RULE_ATTR = "sdy.sharding_rule"


@dataclass(frozen=True)
class CoveredOp:
    """One line of ``rules list``: an op or custom-call target and where its rule is."""

    name: str          # op name, or '@target' for a custom call
    doc: str
    file: str
    line: int
    has_rule: bool     # False for entries that say the op has no rule


class RuleDB:
    """Validated rule entries; :meth:`rule_for` instantiates them."""

    def __init__(self, files: Sequence[RuleFile], conservative: bool = False,
                 validated: bool = False):
        self.conservative = conservative
        self.files = list(files)
        self.templates: dict[str, Template] = {}
        self.op_entries: dict[str, Entry] = {}
        self.custom_call_entries: dict[str, Entry] = {}
        for f in self.files:
            self.templates.update(f.templates)
            for entry in f.entries:
                table = (self.custom_call_entries if entry.section == "custom_calls"
                         else self.op_entries)
                table[entry.key] = entry
        self.generators = GENERATORS
        for entry in ([] if validated else self.entries()):
            validate_entry(entry, self.templates, self.generators)
        self._local = {id(e): self._is_local(e) for e in self.entries()}
        self._cache: dict[tuple, RuleInstance | None] = {}

    def _is_local(self, entry: Entry) -> bool:
        """Whether the entry's rule depends only on the op itself (its types and
        attributes), not on neighbouring ops, so equal ops share one instance."""
        sources = [entry.source] + [t.source for name, t in self.templates.items()
                                    if name in entry.source]
        return not any(word in text for text in sources for word in NEIGHBOUR_FIELDS)

    def entries(self) -> list[Entry]:
        """Every effective entry (ops, then custom-call targets)."""
        return list(self.op_entries.values()) + list(self.custom_call_entries.values())

    def entry_for(self, op) -> Entry | None:
        """The entry that gives ``op`` its rule (by name, or by custom-call target)."""
        if op.name == CUSTOM_CALL_OP:
            target = op.attr("call_target_name")
            if target is None:
                return None
            from jaxlib.mlir import ir
            return self.custom_call_entries.get(ir.StringAttr(target).value)
        return self.op_entries.get(op.name)

    def lookup(self, name: str) -> Entry | None:
        """The entry of an op name, or of a custom-call target (``@target`` or bare)."""
        if name.startswith("@"):
            return self.custom_call_entries.get(name[1:])
        return self.op_entries.get(name) or self.custom_call_entries.get(name)

    def rule_for(self, op, module=None) -> RuleInstance | None:
        """The rule of ``op``: its own ``sdy.sharding_rule`` attribute, else the
        database's; None when the op has no rule (semantics §3.7)."""
        # (the op's attributes are read once, for its own rule and its signature)
        mlir = getattr(op, "mlir", None)
        attrs = mlir.attributes if mlir is not None else None
        if attrs is not None and RULE_ATTR in attrs:
            return rule_of_attr(attrs[RULE_ATTR])
        entry = self.entry_for(op)
        if entry is None or entry.no_rule:
            return None
        if not self._local[id(entry)]:
            return instantiate(entry, op, self.conservative, self.templates, self.generators)
        key = _signature(op, attrs)
        # (one lookup: hashing a signature hashes its MLIR types and attributes)
        found = self._cache.get(key, _UNKNOWN)
        if found is _UNKNOWN:
            found = self._cache[key] = instantiate(entry, op, self.conservative, self.templates,
                                                   self.generators)
        return found

    def ops(self) -> list[CoveredOp]:
        """What the database covers (ops, then ``@target`` custom calls), by name."""
        out = [CoveredOp("@" + e.key if e.section == "custom_calls" else e.key, e.doc,
                         e.loc.file, e.loc.line, not e.no_rule) for e in self.entries()]
        return sorted(out, key=lambda c: (c.name.startswith("@"), c.name.lower()))


#: A signature not in the cache yet.
_UNKNOWN = object()

#: Rule fields that look at other ops (see ``view.py``): rules using them are not cached.
NEIGHBOUR_FIELDS = ("producer", "users", "is_constant", "behind")


def _signature(op, attrs=None, structures=None) -> tuple:
    """What a local rule can depend on: the op's name, types, attributes and
    regions (a scatter's update computation decides its factor kinds).  Types
    and attributes are uniqued in sdy-dl's one MLIR context, so they are
    compared as objects, without printing them.  ``attrs``: the op's
    attributes, when the caller has them; ``structures``: the region
    structures of ops nested in it, when read already (see
    :func:`_region_structure`)."""
    if attrs is None:
        attrs = op.mlir.attributes
    types = getattr(op, "types", None)   # (a view reads them from the MLIR)
    operand_types, result_types = types() if types is not None else (
        tuple([v.mlir_type for v in op.operands]), tuple([v.mlir_type for v in op.results]))
    if not op.regions:
        structure = ()
    elif structures is not None and op in structures:
        structure = structures[op]
    else:
        structure = _region_structure(op)
    return (op.name, operand_types, result_types,
            tuple(sorted([item for item in attrs.items() if not item[0].startswith("sdy.")]))
            if len(attrs) else (), structure)


def _region_structure(op) -> tuple:
    """The ops of ``op``'s regions with their operands numbered locally (per op
    with regions), each with its own signature: read for the nested ops first
    (one post-order walk, :func:`~sdy_dl.ir.walk.walk_model`)."""
    structures: dict = {}
    for nested, entering in walk_model(op):
        if entering or not nested.regions:
            continue
        numbers: dict[int, int] = {}
        out = []
        for region in nested.regions:
            for block in region.blocks:
                for arg in block.args:
                    numbers[arg.vid] = len(numbers)
                for child in block.ops:
                    out.append((child.name, tuple(numbers.get(v.vid, -1) for v in child.operands),
                                tuple(v.mlir_type for v in child.results),
                                _signature(child, structures=structures)[3:]))
                    for r in child.results:
                        numbers[r.vid] = len(numbers)
        structures[nested] = tuple(out)
    return structures[op]


def rule_files_in(path: str | Path) -> list[Path]:
    """The ``*.yaml``/``*.yml`` files of a folder (sorted), or the file itself (an
    empty name is an error, not the current folder)."""
    if not str(path):
        raise UsageError("the rule file name is empty ('')")
    p = Path(path)
    if p.is_dir():
        return sorted(q for q in p.iterdir() if q.suffix in (".yaml", ".yml") and q.is_file())
    if not p.exists():
        raise SdyError("rule file not found", str(path))
    return [p]


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise SdyError(f"cannot read rule file: {e.strerror}", str(path)) from None
    except UnicodeDecodeError:
        raise SdyError("rule file is not UTF-8 text", str(path)) from None


def rule_sources(extra_files: Sequence[str] = ()) -> list[Path]:
    """Every rule file, in load order: shipped, ``$SDY_DL_RULES``, ``extra_files``."""
    paths = rule_files_in(rules_dir())
    for item in os.environ.get(RULES_ENV, "").split(os.pathsep):
        if item.strip():
            paths += rule_files_in(item.strip())
    for item in extra_files:
        paths += rule_files_in(item)
    return paths


def load_rule_db(extra_files: Sequence[str] = (), conservative: bool = False) -> RuleDB:
    """Load and validate the rule database (see the module docstring for the order).

    Every pass that needs rules calls this; the files are read each time, but
    parsing and validation happen once per distinct set of file contents."""
    sources = tuple((str(p), _read_text(p)) for p in rule_sources(extra_files))
    return _parsed_db(sources, conservative)


@functools.lru_cache(maxsize=8)
def _parsed_db(sources: tuple[tuple[str, str], ...], conservative: bool) -> RuleDB:
    return RuleDB(_validated_files(sources), conservative, validated=True)


def _validated_files(sources: tuple[tuple[str, str], ...]) -> list[RuleFile]:
    """The rule files ``sources`` (path, text) parsed and validated, kept in the
    cache (pickled) under their paths and texts and the code that parses and
    validates them; an invalid file raises its error and nothing is kept."""
    import hashlib
    import pickle
    import sys

    from sdy_dl.resources import cached_value, code_digest
    from sdy_dl.rules import (attrs, builder, expr, generators, instance, notation, schema, view,
                              yamlsrc)

    h = hashlib.sha256()
    for path, text in sources:
        h.update(path.encode("utf-8", "surrogateescape") + b"\0" + text.encode("utf-8") + b"\0")
    key = "-".join((h.hexdigest()[:32], code_digest(sys.modules[__name__], attrs, builder, expr,
                                                     generators, instance, notation, schema,
                                                     view, yamlsrc),
                    sys.implementation.cache_tag))

    def compute() -> list[RuleFile]:
        files = [parse_rule_file(text, path) for path, text in sources]
        RuleDB(files)   # validates every entry
        return files

    return cached_value("rules", key, compute,
                        lambda files: pickle.dumps(files, protocol=pickle.HIGHEST_PROTOCOL),
                        pickle.loads)
