"""What each pass after propagation reads of an op, stated per op: the ground of
the export by difference (:mod:`sdy_dl.passes.export.by_difference`).

A what-if's propagated module differs from the first run's in the shardings of
a few ops.  The passes after propagation (export-named-computations ... the
export pipeline) turn a propagated module into the output; the output of the
edited module is the first output with those ops exported again *when no pass
reads the changed shardings anywhere else*.  Each pass states here, per op
name, where it reads shardings beyond rewriting an op's own:

* ``reads_own``: ops whose own changed shardings the pass decides more from
  than their rewritten form (a merge, a reshard, a call's callee);
* ``reads_operands``: ops at which the pass reads the shardings of their
  operands (a changed value used by one is not local);
* ``unreduced``: the pass reads whether any sharding of the module has
  unreduced axes; ``meshes``: which meshes the module's shardings name;
  ``every_op``: it reads every op's shardings (never local);
* ``rewrite_op``: how it rewrites an op's result shardings (a list of
  shardings, ``sdy.sharding``), ``rewrite_main``: the main function's argument
  and result shardings (``(items, module, options)``, each item a (sharding or
  None, type)); a pass without one leaves them alone;
* ``merges``: ops it merges by groups of equal attribute dictionary, region,
  result type and operand (constant-or-scalar-merger's scalar broadcasts): the
  groups a changed one leaves and joins are decided again by the pass's own
  stage (:mod:`sdy_dl.passes.export.merge_groups`);
* ``creates``: the op names it creates (an op of the output with such a name
  may be new, not an op of the propagated module).

Only the main function's top-level ops are handled by difference (the driver
checks that), so a pass that works on the other functions only (their results,
their clones, their call sites) states nothing for main's ops.  A stage without
an entry here is never local: the whole export runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sdy_dl.ir.traits import (COLLECTIVE_OPS, COMPUTATION_OPS, CONSTANT_OPS, DATA_FLOW_OPS,
                              OWN_SHARDING_OPS)
from sdy_dl.passes.export.explicit_reshards_util import DOT_OPS


@dataclass(frozen=True)
class Reads:
    """What one pass after propagation reads of an op (see the module docstring)."""

    reads_own: frozenset = frozenset()
    reads_operands: frozenset = frozenset()
    unreduced: bool = False
    meshes: bool = False
    every_op: bool = False
    rewrite_op: Callable | None = None
    rewrite_main: Callable | None = None
    merges: frozenset = frozenset()
    creates: frozenset = frozenset()


class NotLocal(Exception):
    """A change is not provably local: the passes after propagation run in full."""


def _closed_all(shardings: list) -> list:
    from sdy_dl.passes.export.close_shardings import closed_like

    return [closed_like(s) for s in shardings]


def _closed_main(items: list, module, options) -> list:
    from sdy_dl.passes.export.close_shardings import closed_like

    return [None if s is None else closed_like(s) for s, _ in items]


def _evenly_sharded(items: list, module, options) -> list:
    from sdy_dl.passes.export.update_non_divisible_input_output_shardings import evenly_sharded

    return evenly_sharded(items, module, options)


def _without_sub_axes(items: list, module, options) -> list:
    from sdy_dl.passes.export.remove_sub_axes_in_input_output_shardings import without_sub_axes

    return without_sub_axes([s for s, _ in items], options)


_NAMED = frozenset({"sdy.named_computation", "sdy.data_flow_edge"})
_CALLS = frozenset({"func.call"})
_RESHARDS = frozenset({"sdy.reshard"})
#: The ops insert-explicit-reshards (not in full) reads the operands and results of:
#: dots (``processDot``), ops it may treat in full (calls, ragged dots, concatenates
#: sharded unlike their result), data-flow ops' edges and reshards to unreduced axes.
_EXPLICIT = (DOT_OPS | DATA_FLOW_OPS | _CALLS | _RESHARDS
             | {"stablehlo.concatenate", "mhlo.ragged_dot"})
_COLLECTIVES_MADE = COLLECTIVE_OPS | _RESHARDS

#: The passes after propagation, by stage (as the pipelines name them).
READS: dict[str, Reads] = {
    # named computations take their edges' shardings and become functions; main's
    # other ops are not read
    "export-named-computations": Reads(reads_own=_NAMED, reads_operands=_NAMED,
                                       creates=frozenset({"func.func", "func.call",
                                                          "func.return"})),
    # the results of every function but main
    "propagate-to-func-results": Reads(),
    # function keys: callees' argument and result shardings (main is no callee here:
    # the driver checks that main is not called)
    "unflatten-call-graph": Reads(reads_own=_CALLS),
    # the symbols any attribute names: meshes among them
    "symbol-dce": Reads(meshes=True),
    "insert-func-call-reshards": Reads(reads_own=_CALLS, creates=_RESHARDS),
    # groups of constants and of scalar broadcasts by attribute dictionary
    "constant-or-scalar-merger": Reads(reads_own=CONSTANT_OPS,
                                       merges=frozenset({"stablehlo.broadcast_in_dim"})),
    "sink-data-flow-edges": Reads(reads_own=DATA_FLOW_OPS | _NAMED,
                                  reads_operands=DATA_FLOW_OPS | _NAMED),
    "remove-sharding-groups": Reads(reads_own=frozenset({"sdy.sharding_group"})),
    "sharding-constraint-to-reshard": Reads(reads_own=frozenset({"sdy.sharding_constraint"}),
                                            creates=_RESHARDS),
    "update-non-divisible-input-output-shardings": Reads(
        reads_own=_CALLS | {"sdy.manual_computation"}, rewrite_main=_evenly_sharded),
    "remove-sub-axes-in-input-output-shardings": Reads(rewrite_main=_without_sub_axes),
    # every stored sharding, closed; the walker's other places are own shardings and
    # computations' (the driver handles ``sdy.sharding`` only)
    "close-shardings": Reads(reads_own=OWN_SHARDING_OPS | COMPUTATION_OPS,
                             rewrite_op=_closed_all, rewrite_main=_closed_main),
    # returned values only with unreduced axes (not in full)
    "insert-explicit-reshards": Reads(reads_own=_EXPLICIT, reads_operands=_EXPLICIT,
                                      unreduced=True, creates=_COLLECTIVES_MADE),
    # dead code (unchanged by a change of shardings alone) and collectives' folds
    "canonicalize": Reads(reads_own=COLLECTIVE_OPS, reads_operands=COLLECTIVE_OPS,
                          creates=frozenset({"sdy.all_gather"})),
    "drop-sharding-rules": Reads(),
    "insert-explicit-reshards{enable-full-version=true}": Reads(every_op=True,
                                                                creates=_COLLECTIVES_MADE),
    "reshard-to-collectives": Reads(every_op=True, creates=_COLLECTIVES_MADE),
}


def stage_reads(stages: list[str]) -> list[Reads] | None:
    """The statements of ``stages`` in order (None when one has none, or reads every op)."""
    found = [READS.get(stage) for stage in stages]
    if any(r is None or r.every_op for r in found):
        return None
    return found


def created_names(reads: list[Reads]) -> frozenset:
    """The op names the passes create."""
    return frozenset().union(*(r.creates for r in reads))
