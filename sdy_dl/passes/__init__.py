"""The registry of passes, each ``module in -> module out`` (names as in Shardy, no ``sdy-``).

A pass module registers itself with :func:`register`; ``sdy-dl pass NAME``
and the pipelines look passes up here.  Importing :mod:`sdy_dl.passes.all`
loads every pass module.
"""

from __future__ import annotations

from collections.abc import Callable
import dataclasses
from dataclasses import dataclass, field

from sdy_dl.errors import SdyError
from sdy_dl.ir import Module


@dataclass(frozen=True)
class PassOptions:
    """Options shared by passes (each pass reads the ones it knows)."""

    engine: str = "auto"
    compiled: bool = False
    # souffle --compiled: compile missing binaries in the background (clingo meanwhile)
    compile_in_background: bool = False
    conservative: bool = False
    keep_sharding_rules: bool = False
    strategy: str = "aggressive"
    rule_files: tuple[str, ...] = ()
    quiet: bool = True
    extra: dict = field(default_factory=dict)
    # Propagation only: record the evaluated steps (sdy-dl emit) or answer them
    # from relations derived by Soufflé from an emitted trace (a directory).
    recorder: object | None = None
    replay_dir: str | None = None
    # Propagation only: an audit.provenance.ProvenanceTracer that records why shardings change.
    tracer: object | None = None


    def make_engine(self):
        """The Datalog engine these options name (:func:`sdy_dl.engines.get_engine`)."""
        from sdy_dl.engines import get_engine

        return get_engine(self.engine, compiled=self.compiled,
                          background=self.compile_in_background)

    def option(self, name: str):
        """The value of the Shardy pass option ``name`` (e.g. ``dedup-functions-fully``),
        its declared default when not given (:mod:`sdy_dl.passes.options`)."""
        from sdy_dl.passes.options import option_value

        return option_value(self.extra, name)

    def with_recorder(self, recorder) -> "PassOptions":
        """The same options, recording the propagation steps with ``recorder``."""
        return dataclasses.replace(self, recorder=recorder)


@dataclass(frozen=True)
class PassSpec:
    """A registered pass: its name, one-line help and the function that runs it."""

    name: str
    help: str
    run: Callable[[Module, PassOptions], Module]


PASSES: dict[str, PassSpec] = {}


def register(name: str, help: str):
    """Decorator: register ``fn(module, options) -> module`` as pass ``name``."""
    def wrap(fn):
        PASSES[name] = PassSpec(name, help, fn)
        return fn
    return wrap


def get_pass(name: str) -> PassSpec:
    """The pass called ``name`` (error naming the known ones otherwise)."""
    import sdy_dl.passes.all  # noqa: F401  (registers every pass)

    spec = PASSES.get(name)
    if spec is None:
        raise SdyError(f"unknown pass {name!r} (known: {', '.join(sorted(PASSES))})")
    return spec


def rewrite(module: Module, edit: Callable[[], bool], attributes_only: bool = False) -> Module:
    """Run ``edit()``, which changes ``module.mlir`` in place and says whether it
    changed anything, in sdy-dl's MLIR context: the module, re-indexed if it did
    (``attributes_only``: ``edit`` changes attributes only, or adds top-level
    copies of ops too, see :func:`~sdy_dl.ir.mlir_ops.rebuild_attributes_only`)."""
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.mlir_ops import rebuild, rebuild_attributes_only

    with mlir_context():
        if not edit():
            return module
        return rebuild_attributes_only(module) if attributes_only else rebuild(module)


def run_analysis(stage: str, facts: dict, options: PassOptions, **params) -> dict[str, set[tuple]]:
    """Run the Datalog stage ``stage`` (rendered with ``params``) on ``facts``
    with the engine the options choose."""
    from sdy_dl.datalog.compiler import compile_stage

    program = compile_stage(stage, **params)
    engine = options.make_engine()
    return engine.run(program, {k: list(v) for k, v in facts.items()})
