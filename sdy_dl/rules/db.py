"""The rule database: load rule files, validate them, give every op its rule.

Sources, later ones overriding earlier ones (per op, custom-call target and
template): the shipped ``rules/*.yaml``, then the files and folders listed in
the environment variable ``SDY_DL_RULES`` (``os.pathsep``-separated), then
``extra_files`` (the CLI's ``--rules``).  The instances of rules that depend
only on the op are made once per distinct op signature and kept between
processes (:class:`InstanceStore`); a process whose ops' rules are all kept
there reads only the directory of the entries (:func:`rule_directory`), not
the parsed files, and never loads the rule language's modules.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Sequence

from sdy_dl.errors import SdyError, UsageError
from sdy_dl.ir.traits import CUSTOM_CALL_OP
from sdy_dl.ir.walk import walk_model
from sdy_dl.resources import rules_dir, seal, unseal, write_cache_file
from sdy_dl.rules.instance import RuleInstance
from sdy_dl.text_input import read_input

if TYPE_CHECKING:
    from sdy_dl.rules.schema import Entry, RuleFile, Template

#: The environment variable with extra rule files or folders.
RULES_ENV = "SDY_DL_RULES"
#: The attribute an op may carry with its own rule (it wins over the database).
RULE_ATTR = "sdy.sharding_rule"


class CoveredOp(NamedTuple):
    """One line of ``rules list``: an op or custom-call target and where its rule is."""

    name: str          # op name, or '@target' for a custom call
    doc: str
    file: str
    line: int
    has_rule: bool     # False for entries that say the op has no rule


#: What an op's entry is, as :func:`rule_directory` records it: no rule (semantics
#: §3.7), a rule depending only on the op (kept per op signature), or one that
#: reads neighbouring ops (:data:`NEIGHBOUR_FIELDS`: made for each op).
NO_RULE, LOCAL, NEIGHBOURS = "no rule", "local", "neighbours"


class RuleDB:
    """Validated rule entries; :meth:`rule_for` instantiates them.

    ``files`` are the parsed rule files, validated (:func:`validate_rule_files`),
    or a function giving them, called when an entry is first read;
    ``directory`` is then :func:`rule_directory` of those files, which answers
    what an op's entry is without reading them."""

    def __init__(self, files: Sequence[RuleFile] | Callable[[], Sequence[RuleFile]],
                 conservative: bool = False, store: str | None = None,
                 directory: dict[str, dict[str, str]] | None = None):
        self.conservative = conservative
        #: The key of the instances kept in sdy-dl's cache for these files and this
        #: code (:class:`InstanceStore`), or None: none are kept.
        self.store = None if store is None else InstanceStore(f"{store}-{int(conservative)}")
        self._read_files = files if callable(files) else lambda: files
        #: Section ('ops' or 'custom_calls') -> entry key -> NO_RULE, LOCAL or NEIGHBOURS.
        self.directory = directory if directory is not None else rule_directory(self)
        self._cache: dict[tuple, RuleInstance | None] = {}

    @functools.cached_property
    def files(self) -> list[RuleFile]:
        """The parsed rule files, in load order."""
        return list(self._read_files())

    @functools.cached_property
    def _tables(self) -> tuple[dict[str, Template], dict[str, Entry], dict[str, Entry]]:
        """The templates, op entries and custom-call entries in effect
        (:func:`effective_tables`)."""
        return effective_tables(self.files)

    @property
    def templates(self) -> dict[str, Template]:
        return self._tables[0]

    @property
    def op_entries(self) -> dict[str, Entry]:
        return self._tables[1]

    @property
    def custom_call_entries(self) -> dict[str, Entry]:
        return self._tables[2]

    @property
    def generators(self) -> dict:
        """The named generators rules may call (:mod:`sdy_dl.rules.generators`)."""
        return _generators()

    def entries(self) -> list[Entry]:
        """Every effective entry (ops, then custom-call targets)."""
        return list(self.op_entries.values()) + list(self.custom_call_entries.values())

    def _place(self, op) -> tuple[str, str] | None:
        """(section, key) of the entry that would give ``op`` its rule: its name, or
        its custom-call target (None: a custom call without one)."""
        if op.name == CUSTOM_CALL_OP:
            target = op.attr("call_target_name")
            if target is None:
                return None
            from jaxlib.mlir import ir
            return "custom_calls", ir.StringAttr(target).value
        return "ops", op.name

    def entry_for(self, op) -> Entry | None:
        """The entry that gives ``op`` its rule (by name, or by custom-call target)."""
        place = self._place(op)
        if place is None:
            return None
        section, key = place
        return (self.custom_call_entries if section == "custom_calls"
                else self.op_entries).get(key)

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
        own = None if attrs is None else attrs.get(RULE_ATTR)
        if own is not None:
            from sdy_dl.rules.rule_attr import rule_of_attr

            return rule_of_attr(own)
        place = self._place(op)
        kind = None if place is None else self.directory[place[0]].get(place[1])
        if kind is None or kind == NO_RULE:
            return None
        if kind == NEIGHBOURS:
            return instantiate(self.entry_for(op), op, self.conservative, self.templates,
                               self.generators)
        key = _signature(op, attrs)
        # (one lookup: hashing a signature hashes its MLIR types and attributes)
        found = self._cache.get(key, _UNKNOWN)
        if found is _UNKNOWN:
            found = self._cache[key] = self._instance(op, key)
        return found

    def _instance(self, op, signature: tuple) -> RuleInstance | None:
        """The rule of ``op``, whose entry is local and signature ``signature``:
        kept from an earlier process when the store has it, else instantiated."""
        text = None if self.store is None else repr(signature)
        if text is not None:
            found = self.store.get(text)
            if found is not _UNKNOWN:
                return found
        rule = instantiate(self.entry_for(op), op, self.conservative, self.templates,
                           self.generators)
        if text is not None:
            self.store.add(text, rule)
        return rule

    def ops(self) -> list[CoveredOp]:
        """What the database covers (ops, then ``@target`` custom calls), by name."""
        out = [CoveredOp("@" + e.key if e.section == "custom_calls" else e.key, e.doc,
                         e.loc.file, e.loc.line, not e.no_rule) for e in self.entries()]
        return sorted(out, key=lambda c: (c.name.startswith("@"), c.name.lower()))


#: A signature not in the cache yet.
_UNKNOWN = object()


def effective_tables(files: Sequence[RuleFile]) -> tuple[dict[str, Template], dict[str, Entry],
                                                         dict[str, Entry]]:
    """The templates, op entries and custom-call entries in effect in ``files``
    (in load order: a later file's override an earlier one's)."""
    templates: dict[str, Template] = {}
    op_entries: dict[str, Entry] = {}
    custom_call_entries: dict[str, Entry] = {}
    for f in files:
        templates.update(f.templates)
        for entry in f.entries:
            table = custom_call_entries if entry.section == "custom_calls" else op_entries
            table[entry.key] = entry
    return templates, op_entries, custom_call_entries


def validate_rule_files(files: Sequence[RuleFile]) -> None:
    """Check every entry in effect in ``files`` against its op, the templates and
    the generators (:func:`~sdy_dl.rules.schema.validate_entry`); the first
    invalid one raises its located error.  An entry a later file overrides is
    not checked."""
    from sdy_dl.rules.schema import validate_entry

    templates, op_entries, custom_call_entries = effective_tables(files)
    generators = _generators()
    for entry in [*op_entries.values(), *custom_call_entries.values()]:
        validate_entry(entry, templates, generators)


def _generators() -> dict:
    from sdy_dl.rules.generators import GENERATORS

    return GENERATORS


def rule_directory(db: RuleDB) -> dict[str, dict[str, str]]:
    """What :meth:`RuleDB.rule_for` must know of each entry of ``db`` in effect
    before reading it (``{section: {key: NO_RULE | LOCAL | NEIGHBOURS}}``): a
    rule is local when neither its entry's source nor that of a template it
    names uses a field that looks at other ops."""
    def kind(entry: Entry) -> str:
        if entry.no_rule:
            return NO_RULE
        sources = [entry.source] + [t.source for name, t in db.templates.items()
                                    if name in entry.source]
        reads = any(word in text for text in sources for word in NEIGHBOUR_FIELDS)
        return NEIGHBOURS if reads else LOCAL

    return {"ops": {key: kind(e) for key, e in db.op_entries.items()},
            "custom_calls": {key: kind(e) for key, e in db.custom_call_entries.items()}}


def instantiate(entry: Entry, op, conservative: bool, templates: dict, generators: dict):
    """:func:`sdy_dl.rules.interp.instantiate` (the rule language, imported when a
    rule is first instantiated)."""
    from sdy_dl.rules.interp import instantiate as run_rule

    return run_rule(entry, op, conservative, templates, generators)


class InstanceStore:
    """The rule instances of local entries, kept in sdy-dl's cache between
    processes (``rule_instances/<key>``) by the printed form of the op
    signature they were made for (:func:`_signature`: MLIR types and attributes
    print as themselves, ``RankedTensorType(tensor<8x32xf32>)``).  Instantiating
    runs the rule's statements (~0.1 ms a rule, ~150 distinct signatures in a
    GPT step); a process reads the kept ones at its first lookup and writes the
    new ones when told (:func:`save_rule_instances`, after each propagation
    pass).  ``key`` names the rule files, the code that instantiates them and
    jaxlib, whose attributes the rules read."""

    #: Instances kept at most: a process reads them all (a GPT step meets ~150
    #: signatures; a test suite thousands).  Those last used are kept.
    LIMIT = 512

    def __init__(self, key: str):
        self.key = key
        self._kept: dict[str, RuleInstance | None] | None = None
        self._used: set[str] = set()   # the signatures this process looked up or added
        self._new = False

    def _path(self):
        from sdy_dl.resources import cache_root

        return cache_root() / "rule_instances" / self.key

    def _read(self) -> dict:
        import pickle

        try:
            kept = pickle.loads(unseal(self._path().read_bytes()))
        except Exception:   # (no entry yet, or a damaged one: made again)
            return {}
        return kept if isinstance(kept, dict) else {}

    def get(self, text: str):
        """The kept instance for the signature printed ``text`` (None: the op has
        no rule), or _UNKNOWN."""
        if self._kept is None:
            self._kept = self._read()
        found = self._kept.get(text, _UNKNOWN)
        if found is not _UNKNOWN:
            self._used.add(text)
        return found

    def add(self, text: str, rule: RuleInstance | None) -> None:
        """Keep ``rule``, made for the signature printed ``text``."""
        if " at 0x" in text or "dense_resource<" in text:
            return   # (printed by address, or by the name of a blob: another process's may differ)
        self._kept[text] = rule
        self._used.add(text)
        self._new = True
        _UNSAVED.add(self)

    def save(self) -> None:
        """Write the kept instances, those this process used first and at most
        :data:`LIMIT` (the file is replaced whole: an unwritable cache only costs
        the instantiations)."""
        import pickle

        if not self._new:
            return
        if len(self._kept) > self.LIMIT:
            used = [text for text in self._kept if text in self._used]
            others = [text for text in self._kept if text not in self._used]
            self._kept = {text: self._kept[text] for text in (used + others)[:self.LIMIT]}
        write_cache_file(self._path(),
                         seal(pickle.dumps(self._kept, protocol=pickle.HIGHEST_PROTOCOL)))
        self._new = False


#: Stores with instances not written yet.
_UNSAVED: set[InstanceStore] = set()


def save_rule_instances() -> None:
    """Write the rule instances made since the last call (see :class:`InstanceStore`)."""
    while _UNSAVED:
        _UNSAVED.pop().save()


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
    sources = tuple((str(p), read_input(str(p), "rule file"))
                    for p in rule_sources(extra_files))
    return _parsed_db(sources, conservative)


@functools.lru_cache(maxsize=8)
def _parsed_db(sources: tuple[tuple[str, str], ...], conservative: bool) -> RuleDB:
    """The database of ``sources``: its directory kept in the cache (as
    ``marshal`` data) beside the parsed files, which are read when first needed."""
    import marshal

    from sdy_dl.resources import cached_value

    key = _sources_key(sources)
    files = functools.cache(lambda: _validated_files(sources, key))
    directory = cached_value("rule_directories", key, lambda: RuleDB(files()).directory,
                             marshal.dumps, marshal.loads)
    return RuleDB(files, conservative, store=f"{key}-{_instance_code_key()}", directory=directory)


def _sources_key(sources: tuple[tuple[str, str], ...]) -> str:
    """The cache key of the rule files ``sources`` (path, text) parsed and validated
    by this code."""
    import sys

    from sdy_dl.resources import code_digest, sha256

    h = sha256()
    for path, text in sources:
        h.update(path.encode("utf-8", "surrogateescape") + b"\0" + text.encode("utf-8") + b"\0")
    language = [f"sdy_dl.rules.{name}" for name in ("attrs", "builder", "expr", "generators",
                                                     "instance", "notation", "schema", "view",
                                                     "yamlsrc")]
    return "-".join((h.hexdigest()[:32], code_digest(sys.modules[__name__], *language),
                     sys.implementation.cache_tag))


def _instance_code_key() -> str:
    """What instances depend on beyond the rule files and the code
    :func:`_sources_key` digests: the interpreter, the ops it reads (the model,
    op views, the op-trait table) and jaxlib's version."""
    from jaxlib import version

    from sdy_dl.ir import model, op_view, traits
    from sdy_dl.resources import code_digest

    return "-".join((code_digest("sdy_dl.rules.interp", model, op_view, traits), traits.table_key(),
                     version.__version__))


def _validated_files(sources: tuple[tuple[str, str], ...], key: str) -> list[RuleFile]:
    """The rule files ``sources`` (path, text) parsed and validated, kept in the
    cache (pickled) under ``key`` (:func:`_sources_key`); an invalid file raises
    its error and nothing is kept."""
    import pickle

    from sdy_dl.resources import cached_value
    from sdy_dl.rules.schema import parse_rule_file

    def compute() -> list[RuleFile]:
        files = [parse_rule_file(text, path) for path, text in sources]
        validate_rule_files(files)
        return files

    return cached_value("rules", key, compute,
                        lambda files: pickle.dumps(files, protocol=pickle.HIGHEST_PROTOCOL),
                        pickle.loads)
