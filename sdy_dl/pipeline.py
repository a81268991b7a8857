"""The ordered stages of sdy-dl's pipeline, nothing else.

``propagate`` runs Shardy's propagation pipeline (§9.2) in its registered
form: the import pipeline; then (default mode) the call handling
flatten-call-graph, symbol-dce, import-func-calls (calls become named
computations with data-flow edges), symbol-dce, apply-sharding-constraints
and sharding-group-import; pre-order-funcs; user-priority propagation (the
op-priority bands with the aggressive strategy); export-named-computations
(default mode) and propagate-to-func-results; unflatten-call-graph and
symbol-dce; insert-func-call-reshards; and ``export-pipeline`` (§9.3,
:mod:`sdy_dl.passes.export.export_pipeline`) with its registered defaults
(its insert-explicit-reshards reshards call operands to the callee's
argument shardings).  In dedup-functions-fully mode
functions stay functions: add-func-data-flow-edges replaces the call
handling, and sink-func-data-flow-edges follows propagate-to-func-results
in place of export-named-computations.  The verifier
verify-unreduced-axes is not listed.

With ``enable-insert-explicit-collectives`` (``sdy-dl propagate
--explicit-collectives``; the export pipeline's option of that name) the
export pipeline ends with ``insert-explicit-reshards{enable-full-version=true}``
and ``reshard-to-collectives``: every sharding change becomes an explicit
collective.

A stage is a pass name, optionally with options the pipeline fixes for it in
Shardy's syntax (``name{key=value}``).  The pipeline reads every option of
the passes it may run (:func:`pipeline_options`); :func:`make_options`
checks them.
"""

from __future__ import annotations


from sdy_dl.ir import Module
from sdy_dl.passes import PassOptions, get_pass, split_stage
from sdy_dl.passes.export import export_pipeline
from sdy_dl.passes.export.export_pipeline import (ENABLE_INSERT_EXPLICIT_COLLECTIVES,
                                                  EXPLICIT_COLLECTIVES)
from sdy_dl.passes.import_ import import_pipeline
from sdy_dl.passes.import_.import_pipeline import DEDUP_FUNCTIONS_FULLY
from sdy_dl.passes.options import Option
from sdy_dl.passes.propagation.basic_propagation import KEEP_SHARDING_RULES

#: The name the pipeline's options are checked under (``sdy-dl propagate``).
PIPELINE = "propagate"

__all__ = ["ENABLE_INSERT_EXPLICIT_COLLECTIVES", "EXPLICIT_COLLECTIVES", "PIPELINE",
           "all_stage_names", "make_options", "pipeline_options", "propagate",
           "split_stage", "stage_options", "stages", "stages_after_propagation"]


def stages(options: PassOptions) -> list[str]:
    """The pass names ``propagate`` runs, in order."""
    dedup = options[DEDUP_FUNCTIONS_FULLY]
    names = ["import-pipeline"]
    if dedup:
        names.append("add-func-data-flow-edges")
    else:
        names += ["flatten-call-graph", "symbol-dce", "import-func-calls", "symbol-dce",
                  "apply-sharding-constraints", "sharding-group-import"]
    names += ["pre-order-funcs", "user-priority-propagate"]
    if dedup:
        names += ["propagate-to-func-results", "sink-func-data-flow-edges"]
    else:
        names += ["export-named-computations", "propagate-to-func-results"]
    names += ["unflatten-call-graph", "symbol-dce", "insert-func-call-reshards",
              "export-pipeline"]
    return names


def stages_after_propagation(options: PassOptions) -> list[str]:
    """The stages ``propagate`` runs after user-priority propagation, the export
    pipeline's passes one by one (what the export by difference reads the
    statements of, :mod:`sdy_dl.passes.export.export_reads`)."""
    names = stages(options)
    out = []
    for stage in names[[split_stage(s)[0] for s in names].index("user-priority-propagate") + 1:]:
        if split_stage(stage)[0] == "export-pipeline":
            out += export_pipeline.pipeline_passes(options[KEEP_SHARDING_RULES],
                                                   options[ENABLE_INSERT_EXPLICIT_COLLECTIVES])
        else:
            out.append(stage)
    return out


def all_stage_names() -> list[str]:
    """Every pass name ``propagate`` may run (in any mode), with the passes
    of the import and export pipelines."""
    names = []
    for dedup in (False, True):
        names += stages(PassOptions(values={DEDUP_FUNCTIONS_FULLY.name: dedup}))
        names += import_pipeline.pipeline_passes(dedup)
    names += export_pipeline.pipeline_passes(False, True)
    return list(dict.fromkeys(split_stage(name)[0] for name in names))


def pipeline_options() -> tuple[Option, ...]:
    """The options ``propagate`` reads: those of every pass it may run."""
    found = {}
    for name in all_stage_names():
        for option in get_pass(name).options:
            found.setdefault(option.name, option)
    return tuple(found.values())


def make_options(given=None, **context) -> PassOptions:
    """The pipeline's options: ``given`` (``KEY=VALUE`` items or a mapping)
    checked against :func:`pipeline_options`, ``context`` the
    :class:`~sdy_dl.passes.RunContext` fields (the CLI and the Python API).
    (Options are looked up only when some are given: that imports every pass.)"""
    return PassOptions.create(PIPELINE, given, pipeline_options() if given else (), **context)


#: Options the pipeline fixes for a stage: Shardy's pipeline creates
#: unflatten-call-graph with its defaults, whatever dedup-functions-fully is.
STAGE_OPTIONS = {"unflatten-call-graph": {DEDUP_FUNCTIONS_FULLY.name: False}}


def stage_options(stage: str, options: PassOptions) -> PassOptions:
    """``options`` as the pipeline gives them to ``stage``."""
    name, fixed = split_stage(stage)
    fixed = {**STAGE_OPTIONS.get(name, {}), **fixed}
    if not fixed:
        return options
    return options.with_values(fixed)


def propagate(module: Module, options: PassOptions, before=None, start: str | None = None,
              export=None) -> Module:
    """Run the pipeline stages in order; ``before(name, module)``, when given, is
    called before each stage (the audit tags values there); ``start``: the stages
    before the first one named so are not run (``module`` is what they made);
    ``export(module)``, when given, is called after user-priority propagation and
    may return the output the stages after it would make (a what-if's export by
    difference, :mod:`sdy_dl.passes.export.by_difference`; None: they run).
    The result is verified (``verify_module``, which sets ``module.verified``:
    ``sdy-dl propagate`` prints it without verifying it again)."""
    from sdy_dl.ir.loader import verify_module

    exported = False
    for stage in stages(options):
        name = split_stage(stage)[0]
        if start is not None:
            if name != start:
                continue
            start = None
        if exported:
            continue
        if before is not None:
            before(name, module)
        module = get_pass(name).run(module, stage_options(stage, options))
        if export is not None and name == "user-priority-propagate":
            made = export(module)
            if made is not None:
                module, exported = made, True
    verify_module(module)
    return module
