"""The ordered stages of sdy-dl's pipeline, nothing else.

``propagate`` runs Shardy's propagation pipeline (§9.2) for modules without
function calls: the import pipeline, then (default mode)
apply-sharding-constraints and sharding-group-import, then user-priority
propagation (which runs the op-priority bands with the aggressive
strategy), then propagate-to-func-results and the export pipeline (§9.3)
with its registered defaults.  The passes of the registered pipeline that
do nothing without calls or named computations are not listed
(flatten-call-graph, import-func-calls, export-named-computations,
unflatten-call-graph, insert-func-call-reshards, the symbol-dce runs after
them), nor is the verifier verify-unreduced-axes.
"""

from __future__ import annotations

from sdy_dl.ir import Module
from sdy_dl.passes import PassOptions, get_pass


def stages(options: PassOptions) -> list[str]:
    """The pass names ``propagate`` runs, in order (without the export passes
    when a provenance tracer is attached, i.e. for ``sdy-dl explain``)."""
    dedup = bool(options.extra.get("dedup_functions_fully", False))
    names = ["import-pipeline"]
    if not dedup:
        names += ["apply-sharding-constraints", "sharding-group-import"]
    names.append("user-priority-propagate")
    if options.tracer is not None:
        # explain: the derivation trees name the values of the propagated
        # module, which the export passes would renumber (edges removed).
        return names
    names.append("propagate-to-func-results")
    names += EXPORT
    if not options.keep_sharding_rules:
        names.append("drop-sharding-rules")
    return names


#: The export pipeline (§9.3) up to dropping the sharding rules, with the
#: registered defaults (update-non-divisible-input-output-shardings on).
EXPORT = ["constant-or-scalar-merger", "sink-data-flow-edges", "remove-sharding-groups",
          "sharding-constraint-to-reshard", "update-non-divisible-input-output-shardings",
          "remove-sub-axes-in-input-output-shardings", "close-shardings"]


def propagate(module: Module, options: PassOptions) -> Module:
    """Run the pipeline stages in order."""
    for name in stages(options):
        module = get_pass(name).run(module, options)
    return module
