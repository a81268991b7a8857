"""``aggressive-propagate`` (Shardy's ``sdy-aggressive-propagate``, semantics §6).

Basic propagation with the step strategy of the ``propagation-strategy``
option (default aggressive), one fixpoint over the whole module.
"""

from __future__ import annotations

from sdy_dl.ir import Module
from sdy_dl.passes import PassOptions, register
from sdy_dl.passes.options import Option
from sdy_dl.passes.propagation.basic_propagation import BASIC_PROPAGATION_OPTIONS, run_strategy

PROPAGATION_STRATEGY = Option("propagation-strategy", ("basic", "aggressive", "basic-then-aggressive"),
                              "aggressive", "The factor propagation strategy.")

#: Basic propagation's options and the strategy.
AGGRESSIVE_PROPAGATION_OPTIONS = BASIC_PROPAGATION_OPTIONS + (PROPAGATION_STRATEGY,)


@register("aggressive-propagate", "Shardy's aggressive propagation (sdy-aggressive-propagate)",
          AGGRESSIVE_PROPAGATION_OPTIONS)
def aggressive_propagate(module: Module, options: PassOptions) -> Module:
    return run_strategy(module, options, options[PROPAGATION_STRATEGY])
