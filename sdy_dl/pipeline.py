"""The ordered stages of sdy-dl's pipeline, nothing else.

``propagate`` runs what exists of Shardy's propagation pipeline (§9.2):
the import pipeline, then aggressive propagation.  (The op-priority and
user-priority stages and the export passes come with later work.)
"""

from __future__ import annotations

from sdy_dl.ir import Module
from sdy_dl.passes import PASSES, PassOptions, get_pass

STAGES = ("import-pipeline", "aggressive-propagate")


def propagate(module: Module, options: PassOptions) -> Module:
    """Run the pipeline stages that are registered, in order."""
    get_pass(STAGES[-1])  # loads the registry
    for name in STAGES:
        if name in PASSES:
            module = PASSES[name].run(module, options)
    return module
