"""``import-pipeline`` (Shardy's ``sdy-import-pipeline``, semantics §9.1).

The passes, in Shardy's order::

    symbol-dce
    lift-inlined-meshes
    remove-size-one-axes
    propagate-sharding-from-func-to-call
    constant-or-scalar-splitter
    symbol-dce
    manual-axes-cleanup
    add-data-flow-edges
    apply-sharding-constraints    (only with dedup-functions-fully)
    sharding-group-import         (only with dedup-functions-fully)

It declares the option ``dedup-functions-fully`` (default false), which
``unflatten-call-graph`` and the whole pipeline read too.
"""

from __future__ import annotations

from sdy_dl.ir.model import Module
from sdy_dl.passes import PassOptions, get_pass, register
from sdy_dl.passes.options import Option

BASE_PASSES = ("symbol-dce", "lift-inlined-meshes", "remove-size-one-axes",
               "propagate-sharding-from-func-to-call", "constant-or-scalar-splitter",
               "symbol-dce", "manual-axes-cleanup", "add-data-flow-edges")
DEDUP_PASSES = ("apply-sharding-constraints", "sharding-group-import")


def pipeline_passes(dedup_functions_fully: bool = False) -> tuple[str, ...]:
    """The pass names of the import pipeline."""
    return BASE_PASSES + (DEDUP_PASSES if dedup_functions_fully else ())


DEDUP_FUNCTIONS_FULLY = Option(
    "dedup-functions-fully", "bool", False,
    "Keep one function per callee (func data-flow edges instead of named computations).")


@register("import-pipeline", "Shardy's import pipeline (symbol-dce, lift meshes, ..., data-flow "
                             "edges; constraints and groups with dedup-functions-fully).",
          (DEDUP_FUNCTIONS_FULLY,))
def run(module: Module, options: PassOptions) -> Module:
    for name in pipeline_passes(options[DEDUP_FUNCTIONS_FULLY]):
        module = get_pass(name).run(module, options)
    return module
