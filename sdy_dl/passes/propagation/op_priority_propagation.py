"""``op-priority-propagate`` (Shardy's ``sdy-op-priority-propagate``, semantics §7.1).

Aggressive propagation run as a schedule of op-priority bands
(:func:`sdy_dl.propagation.priorities.run_op_priority`); with the option
``run-op-priority-propagation=false`` it is one plain fixpoint.
"""

from __future__ import annotations

from sdy_dl.ir import Module
from sdy_dl.passes import PassOptions, register
from sdy_dl.passes.propagation.basic_propagation import run_strategy, strategy_option


@register("op-priority-propagate", "Shardy's op-priority propagation (sdy-op-priority-propagate)")
def op_priority_propagate(module: Module, options: PassOptions) -> Module:
    schedule = "op-priority" if options.option("run-op-priority-propagation") else "plain"
    return run_strategy(module, options, strategy_option(options), schedule)
