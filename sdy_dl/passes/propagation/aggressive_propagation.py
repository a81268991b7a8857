"""``aggressive-propagate`` (Shardy's ``sdy-aggressive-propagate``, semantics §6).

Basic propagation with the step strategy of the ``propagation-strategy``
option (default aggressive), one fixpoint over the whole module.
"""

from __future__ import annotations

from sdy_dl.ir import Module
from sdy_dl.passes import PassOptions, register
from sdy_dl.passes.propagation.basic_propagation import run_strategy, strategy_option


@register("aggressive-propagate", "Shardy's aggressive propagation (sdy-aggressive-propagate)")
def aggressive_propagate(module: Module, options: PassOptions) -> Module:
    return run_strategy(module, options, strategy_option(options))
