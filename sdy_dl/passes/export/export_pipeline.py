"""``export-pipeline`` (Shardy's ``sdy-export-pipeline``, semantics §9.3).

The passes, in Shardy's order (registered defaults)::

    constant-or-scalar-merger
    sink-data-flow-edges
    remove-sharding-groups
    sharding-constraint-to-reshard
    update-non-divisible-input-output-shardings
    remove-sub-axes-in-input-output-shardings
    close-shardings
    insert-explicit-reshards            (its non-full version)
    canonicalize                        (the sdy-collective patterns)
    drop-sharding-rules                 (unless keep-sharding-rules)
    insert-explicit-reshards{enable-full-version=true}   (with
    reshard-to-collectives               enable-insert-explicit-collectives)

Shardy's export pipeline with explicit collectives also runs the
``sdy-reshard`` and ``sdy-collective`` canonicalization patterns that fuse
collectives, which sdy-dl does not have.  A pass of the pipeline gets the
pipeline's options, with the ones a stage fixes (``name{key=value}``).
"""

from __future__ import annotations

from sdy_dl.ir.model import Module
from sdy_dl.passes import PassOptions, get_pass, register, split_stage
from sdy_dl.passes.options import Option
from sdy_dl.passes.propagation.basic_propagation import KEEP_SHARDING_RULES

ENABLE_INSERT_EXPLICIT_COLLECTIVES = Option(
    "enable-insert-explicit-collectives", "bool", False,
    "End with insert-explicit-reshards{enable-full-version=true} and "
    "reshard-to-collectives (same as --explicit-collectives).")

#: The export passes up to dropping the sharding rules.
BASE_PASSES = ("constant-or-scalar-merger", "sink-data-flow-edges", "remove-sharding-groups",
               "sharding-constraint-to-reshard", "update-non-divisible-input-output-shardings",
               "remove-sub-axes-in-input-output-shardings", "close-shardings",
               "insert-explicit-reshards", "canonicalize")

#: The stages that make every sharding change an explicit collective.
EXPLICIT_COLLECTIVES = ("insert-explicit-reshards{enable-full-version=true}",
                        "reshard-to-collectives")


def pipeline_passes(keep_sharding_rules: bool = False,
                    explicit_collectives: bool = False) -> tuple[str, ...]:
    """The stages of the export pipeline (pass names, some with fixed options)."""
    return (BASE_PASSES + (() if keep_sharding_rules else ("drop-sharding-rules",))
            + (EXPLICIT_COLLECTIVES if explicit_collectives else ()))


@register("export-pipeline", "Shardy's export pipeline (merge constants, sink edges, close "
                             "shardings, explicit reshards, drop rules; explicit collectives "
                             "with enable-insert-explicit-collectives).",
          (KEEP_SHARDING_RULES, ENABLE_INSERT_EXPLICIT_COLLECTIVES))
def run(module: Module, options: PassOptions) -> Module:
    for stage in pipeline_passes(options[KEEP_SHARDING_RULES],
                                 options[ENABLE_INSERT_EXPLICIT_COLLECTIVES]):
        name, fixed = split_stage(stage)
        module = get_pass(name).run(module, options.with_values(fixed) if fixed else options)
    return module
