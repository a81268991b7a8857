"""The registry of passes, each ``module in -> module out`` (names as in Shardy, no ``sdy-``).

A pass module registers itself with :func:`register`; ``sdy-dl pass NAME``
and the pipelines look passes up here (:func:`get_pass` imports the module
:func:`module_of` names, so a run imports the passes it runs).  Importing
:mod:`sdy_dl.passes.all` loads every pass module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

from sdy_dl.errors import SdyError
from sdy_dl.frozen import Frozen
from sdy_dl.ir import Module


class RunContext(NamedTuple):
    """How a run evaluates, not what Shardy's passes compute: the Datalog engine,
    the rule files, progress, and the propagation's recorder, replay and tracer."""

    engine: str = "auto"
    compiled: bool = False
    # souffle --compiled: compile missing binaries in the background (clingo meanwhile)
    compile_in_background: bool = False
    rule_files: tuple[str, ...] = ()
    quiet: bool = True
    # Propagation only: record the evaluated steps (sdy-dl emit) or answer them
    # from relations derived by Soufflé from an emitted trace (a directory).
    recorder: object | None = None
    replay_dir: str | None = None
    # Propagation only: an audit.provenance.ProvenanceTracer that records why shardings change.
    tracer: object | None = None
    # Propagation only: step outputs already evaluated, shared between propagations
    # (a what-if reuses its first propagation's): the meshes' text -> {StepInput:
    # StepOutput}, filled as steps are evaluated.  A step's output depends on its
    # input and the meshes only, so a shared entry is exact.
    step_memo: dict | None = None
    # Datalog stages already evaluated, shared between propagations like
    # ``step_memo``: (stage, params, engine, facts as sets) -> derived relations
    # (:func:`run_analysis`).  A stage's relations depend on its program and its
    # facts only, so an entry found by equal facts is exact.
    stage_memo: dict | None = None
    # Propagation only: op number -> its rule (RuleInstance or None) in the module
    # user-priority propagation starts from, filled as rules are looked up.  A
    # what-if that starts from a copy of that module, only shardings changed
    # (``Audit(imported=...)``), shares it: a rule depends on the op's structure,
    # types and attributes other than shardings (``rules.db.rule_for``).
    rule_memo: dict | None = None
    # Propagation only: a propagation.replay.PassTrace.  Not yet recorded, the first
    # propagation pass records its fixpoints into it; recorded, a propagation pass
    # of the same name replays the visits it provably shares with the record
    # (a what-if from the first run's imported module, ``Audit(imported=...)``:
    # the same module with other shardings on main arguments).
    fixpoints: object | None = None

    def make_engine(self):
        """The Datalog engine this context names (:func:`sdy_dl.engines.get_engine`)."""
        from sdy_dl.engines import get_engine

        return get_engine(self.engine, compiled=self.compiled,
                          background=self.compile_in_background)


class PassOptions(Frozen):
    """What a pass is given: the run's :class:`RunContext` and the values of
    Shardy's pass options (``{option name: typed value}``, checked by
    :func:`~sdy_dl.passes.options.resolve_options`; an option not given has
    its declared default: ``options[OPTION]``)."""

    _fields = ("context", "values")

    def __init__(self, context: RunContext | None = None,
                 values: Mapping[str, object] | None = None):
        object.__setattr__(self, "context", RunContext() if context is None else context)
        object.__setattr__(self, "values", {} if values is None else values)

    @classmethod
    def create(cls, owner: str, given=None, valid: tuple | None = None,
               **context) -> "PassOptions":
        """Options for pass ``owner``: ``given`` (``KEY=VALUE`` items or a
        mapping, see :func:`~sdy_dl.passes.options.resolve_options`) checked
        against ``valid`` (default: the options ``owner`` declares; the pipeline's
        are :func:`sdy_dl.pipeline.make_options`'s), ``context`` the
        :class:`RunContext` fields.  The one path from the CLI and the Python API."""
        from sdy_dl.passes.options import resolve_options

        valid = options_of(owner) if valid is None else valid
        return cls(RunContext(**context), resolve_options(given, valid, owner))

    def __getitem__(self, option) -> object:
        """The value of ``option`` (an :class:`~sdy_dl.passes.options.Option`)."""
        return self.values.get(option.name, option.default)

    def with_values(self, values: Mapping[str, object]) -> "PassOptions":
        """The same options with ``values`` (option name -> typed value) set."""
        return self.replace(values={**self.values, **values})

    def with_context(self, **fields) -> "PassOptions":
        """The same options with the given :class:`RunContext` fields replaced."""
        return self.replace(context=self.context._replace(**fields))


class PassSpec(NamedTuple):
    """A registered pass: its name, one-line help, the function that runs it and
    the options it declares (:class:`~sdy_dl.passes.options.Option`)."""

    name: str
    help: str
    run: Callable[[Module, PassOptions], Module]
    options: tuple = ()


PASSES: dict[str, PassSpec] = {}

#: Passes registered by the module of another pass (a variant of it).
VARIANTS = {"constant-splitter": "constant-or-scalar-splitter"}


def module_of(name: str) -> str | None:
    """The module named after pass ``name``, which registers it if such a pass
    exists (None: no module has that name; :func:`get_pass` checks the rest):
    the file named as Shardy names its file (``aggressive-propagate`` in
    ``aggressive_propagation``), in one of the folders named after Shardy's
    (``tests/test_pass_options.py`` checks it for every registered pass)."""
    from importlib.util import find_spec

    stem = VARIANTS.get(name, name).replace("-", "_")
    if not stem.isidentifier() or stem.startswith("_"):
        return None
    if stem.endswith("_propagate"):
        stem = stem.removesuffix("propagate") + "propagation"
    for folder in ("import_", "propagation", "export"):
        module = f"{__name__}.{folder}.{stem}"
        if find_spec(module) is not None:
            return module
    return None


def register(name: str, help: str, options: tuple = ()):
    """Decorator: register ``fn(module, options) -> module`` as pass ``name``,
    reading the declared ``options`` (:class:`~sdy_dl.passes.options.Option`)."""
    def wrap(fn):
        PASSES[name] = PassSpec(name, help, fn, tuple(options))
        return fn
    return wrap


def options_of(name: str) -> tuple:
    """The options pass ``name`` declares."""
    return get_pass(name).options


def get_pass(name: str) -> PassSpec:
    """The pass called ``name``, its module imported first (error naming the
    known ones otherwise)."""
    spec = PASSES.get(name)
    module = module_of(name) if spec is None else None
    if module is not None:
        import importlib

        importlib.import_module(module)
        spec = PASSES.get(name)
    if spec is None:
        import sdy_dl.passes.all  # noqa: F401  (registers every pass, to list them)

        spec = PASSES.get(name)
    if spec is None:
        raise SdyError(f"unknown pass {name!r} (known: {', '.join(sorted(PASSES))})")
    return spec


def split_stage(stage: str) -> tuple[str, dict]:
    """(pass name, the options fixed for it) of a pipeline stage
    ``name{key=value ...}`` (Shardy's syntax)."""
    from sdy_dl.passes.options import resolve_options

    name, _, rest = stage.partition("{")
    items = rest.rstrip("}").split()
    if not items:
        return name, {}
    return name, resolve_options(items, get_pass(name).options, name, only_implemented=False)


def rewrite(module: Module, edit: Callable[[], object], ops_kept: bool = False,
            names: frozenset[str] | None = None) -> Module:
    """Run ``edit()``, which changes ``module.mlir`` in place and says whether it
    changed anything, in sdy-dl's MLIR context: the module, invalidated if it did
    (``Module.invalidate`` with ``ops_kept`` and ``names``).  An edit that alone
    knows how it changed the ops returns those keywords instead of True (a
    dict, e.g. ``{"ops_kept": not inserted}``; an empty one still invalidates)."""
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        changed = edit()
        invalidation = {"ops_kept": ops_kept, "names": names}
        if isinstance(changed, dict):   # (even empty: the edit changed the module)
            invalidation.update(changed)
        elif not changed:
            return module
        return module.invalidate(**invalidation)


def run_analysis(stage: str, facts: dict, options: PassOptions, **params) -> dict[str, set[tuple]]:
    """Run the Datalog stage ``stage`` (rendered with ``params``) on ``facts``
    with the engine the options choose; with ``RunContext.stage_memo``, the
    relations of an earlier evaluation of the same program on equal facts are
    reused (:func:`stage_key`)."""
    from sdy_dl.datalog.compiler import compile_stage

    program = compile_stage(stage, **params)
    rows = {k: list(v) for k, v in facts.items()}
    memo = options.context.stage_memo
    key = None if memo is None else stage_key(stage, params, options.context.engine, rows)
    if key is not None:
        found = memo.get(key)
        if found is not None:
            return {name: set(tuples) for name, tuples in found.items()}
    out = options.context.make_engine().run(program, rows)
    if key is not None:
        memo[key] = {name: frozenset(tuples) for name, tuples in out.items()}
    return out


def stage_key(stage: str, params: dict, engine: str, facts: dict) -> tuple | None:
    """What a stage's derived relations are a function of: the stage and its
    parameters (its program), the engine, and each fact relation as a set of
    tuples (the engines read relations as sets).  None when a parameter or a
    fact is not hashable (such a run is not memoised)."""
    try:
        key = (stage, tuple(sorted(params.items())), engine,
               frozenset((name, frozenset(map(tuple, rows))) for name, rows in facts.items()))
        hash(key)
    except TypeError:
        return None
    return key


class Stage(NamedTuple):
    """A Datalog stage, ``datalog/<name>/main.dl.j2``, declared by the pass module
    that runs it (``STAGE = Stage("constant_or_scalar_splitter")``) and named after
    that pass, or, for a part of a pass, after the Shardy class it stands for."""

    name: str

    def run(self, facts: dict, options: PassOptions, **params) -> dict[str, set[tuple]]:
        """The stage's derived relations on ``facts`` (:func:`run_analysis`)."""
        return run_analysis(self.name, facts, options, **params)
