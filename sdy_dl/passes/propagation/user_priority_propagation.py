"""``user-priority-propagate`` (Shardy's ``sdy-user-priority-propagate``, semantics §7.2).

Op-priority propagation run once per user priority (``p0``, ``p1``, ...)
(:func:`sdy_dl.propagation.priorities.run_user_priority`); the pass
``propagate`` runs in its pipeline.
"""

from __future__ import annotations

from sdy_dl.ir import Module
from sdy_dl.passes import PassOptions, register
from sdy_dl.passes.propagation.aggressive_propagation import PROPAGATION_STRATEGY
from sdy_dl.passes.propagation.basic_propagation import run_strategy
from sdy_dl.passes.propagation.op_priority_propagation import (
    OP_PRIORITY_PROPAGATION_OPTIONS, RUN_OP_PRIORITY_PROPAGATION)


@register("user-priority-propagate", "Shardy's user-priority propagation (sdy-user-priority-propagate)",
          OP_PRIORITY_PROPAGATION_OPTIONS)
def user_priority_propagate(module: Module, options: PassOptions) -> Module:
    return run_strategy(module, options, options[PROPAGATION_STRATEGY], "user-priority",
                        options[RUN_OP_PRIORITY_PROPAGATION])
