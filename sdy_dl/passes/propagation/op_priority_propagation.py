"""``op-priority-propagate`` (Shardy's ``sdy-op-priority-propagate``, semantics §7.1).

Aggressive propagation run as a schedule of op-priority bands
(:func:`sdy_dl.propagation.priorities.run_op_priority`); with the option
``run-op-priority-propagation=false`` it is one plain fixpoint.
"""

from __future__ import annotations

from sdy_dl.ir import Module
from sdy_dl.passes import PassOptions, register
from sdy_dl.passes.options import Option
from sdy_dl.passes.propagation.aggressive_propagation import (
    AGGRESSIVE_PROPAGATION_OPTIONS, PROPAGATION_STRATEGY)
from sdy_dl.passes.propagation.basic_propagation import run_strategy

RUN_OP_PRIORITY_PROPAGATION = Option("run-op-priority-propagation", "bool", True,
                                     "Run the op-priority bands (false: one plain propagation).")

#: Aggressive propagation's options and whether to run the bands.
OP_PRIORITY_PROPAGATION_OPTIONS = AGGRESSIVE_PROPAGATION_OPTIONS + (RUN_OP_PRIORITY_PROPAGATION,)


@register("op-priority-propagate", "Shardy's op-priority propagation (sdy-op-priority-propagate)",
          OP_PRIORITY_PROPAGATION_OPTIONS)
def op_priority_propagate(module: Module, options: PassOptions) -> Module:
    schedule = "op-priority" if options[RUN_OP_PRIORITY_PROPAGATION] else "plain"
    return run_strategy(module, options, options[PROPAGATION_STRATEGY], schedule)
