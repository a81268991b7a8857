"""The ordered stages of sdy-dl's pipeline, nothing else.

``propagate`` runs Shardy's propagation pipeline (§9.2) in its registered
form: the import pipeline; then (default mode) the call handling
flatten-call-graph, symbol-dce, import-func-calls (calls become named
computations with data-flow edges), symbol-dce, apply-sharding-constraints
and sharding-group-import; pre-order-funcs; user-priority propagation (the
op-priority bands with the aggressive strategy); export-named-computations
(default mode) and propagate-to-func-results; unflatten-call-graph and
symbol-dce; insert-func-call-reshards; and the export pipeline (§9.3) with
its registered defaults (its insert-explicit-reshards reshards call
operands to the callee's argument shardings).  In dedup-functions-fully mode
functions stay functions: add-func-data-flow-edges replaces the call
handling, and sink-func-data-flow-edges follows propagate-to-func-results
in place of export-named-computations.  The verifier
verify-unreduced-axes is not listed.
"""

from __future__ import annotations

import dataclasses

from sdy_dl.ir import Module
from sdy_dl.passes import PassOptions, get_pass


def stages(options: PassOptions) -> list[str]:
    """The pass names ``propagate`` runs, in order."""
    dedup = bool(options.option("dedup-functions-fully"))
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
    names += ["unflatten-call-graph", "symbol-dce", "insert-func-call-reshards"]
    names += EXPORT
    if not options.keep_sharding_rules:
        names.append("drop-sharding-rules")
    return names


#: The export pipeline (§9.3) up to dropping the sharding rules, with the
#: registered defaults (update-non-divisible-input-output-shardings on;
#: insert-explicit-reshards in its non-full version; canonicalize with the
#: sdy-collective patterns).
EXPORT = ["constant-or-scalar-merger", "sink-data-flow-edges", "remove-sharding-groups",
          "sharding-constraint-to-reshard", "update-non-divisible-input-output-shardings",
          "remove-sub-axes-in-input-output-shardings", "close-shardings",
          "insert-explicit-reshards", "canonicalize"]


def all_stage_names() -> list[str]:
    """Every pass name ``propagate`` may run (in any mode), with the import
    pipeline's passes."""
    from sdy_dl.passes.import_.import_pipeline import pipeline_passes

    names = []
    for dedup in (False, True):
        names += stages(PassOptions(extra={"dedup_functions_fully": dedup}))
        names += pipeline_passes(dedup)
    names += ["drop-sharding-rules"]
    return list(dict.fromkeys(names))


#: Options the pipeline fixes for a stage: Shardy's pipeline creates
#: unflatten-call-graph with its defaults, whatever dedup-functions-fully is.
def pipeline_options():
    """The options ``propagate`` reads: its own and those of every pass it may run."""
    from sdy_dl.passes.options import OPTIONS, PIPELINE

    names = set(all_stage_names()) | {PIPELINE}
    return tuple(o for o in OPTIONS if names & set(o.passes))


STAGE_OPTIONS = {"unflatten-call-graph": {"dedup_functions_fully": False}}


def stage_options(name: str, options: PassOptions) -> PassOptions:
    """``options`` as the pipeline gives them to stage ``name``."""
    fixed = STAGE_OPTIONS.get(name)
    if not fixed:
        return options
    return dataclasses.replace(options, extra={**options.extra, **fixed})


def propagate(module: Module, options: PassOptions, before=None) -> Module:
    """Run the pipeline stages in order; ``before(name, module)``, when given, is
    called before each stage (the audit tags values there)."""
    for name in stages(options):
        if before is not None:
            before(name, module)
        module = get_pass(name).run(module, stage_options(name, options))
    return module
