"""The ordered stages of sdy-dl's pipeline, nothing else.

``propagate`` runs what exists of Shardy's propagation pipeline (§9.2):
the import pipeline, then (default mode) apply-sharding-constraints and
sharding-group-import, then user-priority propagation (which runs the
op-priority bands with the aggressive strategy).  Not yet here: calls to
named computations (flatten-call-graph, import-func-calls) and the export
passes, so the output keeps open dims, replicated axes and data-flow edges.
"""

from __future__ import annotations

from sdy_dl.ir import Module
from sdy_dl.passes import PassOptions, get_pass


def stages(options: PassOptions) -> list[str]:
    """The pass names ``propagate`` runs, in order."""
    dedup = bool(options.extra.get("dedup_functions_fully", False))
    names = ["import-pipeline"]
    if not dedup:
        names += ["apply-sharding-constraints", "sharding-group-import"]
    return names + ["user-priority-propagate"]


def propagate(module: Module, options: PassOptions) -> Module:
    """Run the pipeline stages in order."""
    for name in stages(options):
        module = get_pass(name).run(module, options)
    return module
