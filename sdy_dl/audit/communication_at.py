"""What the output does at an op: the reshards and collectives on its operands and results.

An op of the propagated module is found by its ``px:`` tag (see
:mod:`sdy_dl.audit.naming`).  Around it, the output module has

* ``sdy.reshard`` ops (sharding constraints the export passes turned into
  reshards, and the reshards of the non-full ``insert-explicit-reshards``);
* with ``--explicit-collectives``, the collectives every sharding change
  became (``sdy.all_gather``, ``sdy.all_slice``, ``sdy.all_to_all``,
  ``sdy.collective_permute``, ``sdy.all_reduce``, ...).

Without ``--explicit-collectives`` the partitioner still communicates where
shardings disagree; what it will insert is learnt by running the pipeline's
explicit-collectives stages (``insert-explicit-reshards{enable-full-version=true}``
and ``reshard-to-collectives``: sdy-dl's own passes) on a copy of the output,
once, when first asked.
"""

from __future__ import annotations

from sdy_dl.audit.naming import EXPORT_RENAMES, first_tag
from sdy_dl.ir.traits import COLLECTIVE_OPS

#: Ops that move data between devices, as the output prints them.
MOVES = frozenset(COLLECTIVE_OPS) | {"sdy.reshard"}


def describe(mop) -> str:
    """A collective as one short text: its name and attributes (``sdy.all_gather
    gathering_axes=[{}, {"data"}] out_sharding=<@mesh, [{}, {}]>``)."""
    attrs = " ".join(f"{name}={mop.attributes[name]}" for name in mop.attributes)
    return f"{mop.name} {attrs}".strip()


class OpCommunication:
    """The moves (reshards, collectives) next to each op of one output module."""

    def __init__(self, module, predicted: bool):
        """``module``: a module whose ops carry ``px:`` tags; ``predicted``: it is a
        copy made explicit here (the moves are what the partitioner will do)."""
        from sdy_dl.ir.context import mlir_context
        from sdy_dl.ir.walk import walk_pre

        self.predicted = predicted
        self._module = module
        self._by_tag: dict[str, list] = {}
        self._calls: dict[str, list] | None = None    # callee -> its calls, when first asked
        with mlir_context():
            for mop in walk_pre(module.mlir.operation)[1:]:
                t = first_tag(mop.location, "px")
                if t is not None:
                    self._by_tag.setdefault(t, []).append(mop)

    @classmethod
    def of_output(cls, module, options) -> "OpCommunication":
        """The moves of ``module`` (the pipeline's output, run with ``options``): its
        own when it has explicit collectives, else those of an explicit copy."""
        from sdy_dl.ir import parse_module_text
        from sdy_dl.ir.context import mlir_context
        from sdy_dl.passes import get_pass
        from sdy_dl.pipeline import (ENABLE_INSERT_EXPLICIT_COLLECTIVES, EXPLICIT_COLLECTIVES,
                                     split_stage, stage_options)

        if options[ENABLE_INSERT_EXPLICIT_COLLECTIVES]:
            return cls(module, predicted=False)
        with mlir_context():
            text = module.mlir.operation.get_asm(enable_debug_info=True)
        copy = parse_module_text(text, module.file, checked=False)
        for stage in EXPLICIT_COLLECTIVES:
            copy = get_pass(split_stage(stage)[0]).run(copy, stage_options(stage, options))
        return cls(copy, predicted=True)

    def op(self, tag: str | None, name: str):
        """The one op tagged ``tag`` named ``name`` (or as the export passes renamed
        it).  A sharding constraint became a reshard, which the explicit stages lower
        to collectives carrying its tag: the first of those in data-flow order.  None:
        no such op, or several (:meth:`absent` says which)."""
        found = self._candidates(tag, name)
        return found[0] if len(found) == 1 else None

    def _candidates(self, tag: str | None, name: str) -> list:
        """The ops :meth:`op` may mean (see there)."""
        ops = self._by_tag.get(tag, ()) if tag else ()
        found = [mop for mop in ops if mop.name == name or (name, mop.name) in EXPORT_RENAMES]
        if not found and name == "sdy.sharding_constraint":
            moves = [mop for mop in ops if mop.name in MOVES]
            found = [mop for mop in moves
                     if not any(mop.operands[0] == other.result for other in moves)]
        return found

    def _calls_of(self, func) -> list:
        """The ``func.call`` ops of the module calling ``func``."""
        from sdy_dl.ir.mlir_ops import symbol_name
        from sdy_dl.passes.call_graph import callee_name

        if self._calls is None:
            self._calls = {}
            for ops in self._by_tag.values():
                for mop in ops:
                    if mop.name == "func.call":
                        self._calls.setdefault(callee_name(mop), []).append(mop)
        return self._calls.get(symbol_name(func), [])

    def absent(self, tag: str | None, name: str | None = None) -> str:
        """Why the output has no one op for the one tagged ``tag`` named ``name`` (see
        :meth:`op`)."""
        ops = self._by_tag.get(tag, ()) if tag else ()
        if name is not None and len(found := self._candidates(tag, name)) > 1:
            return ("several ops of the output carry its tag as this op (" + ", ".join(
                m.name for m in found) + "): which one is this op's is not known")
        if ops:
            return ("the output's ops from this one (" + ", ".join(m.name for m in ops)
                    + ") are not the op asked for")
        return ("no op of the output carries its tag (its function is printed once for the "
                "calls whose shardings agree, or the export passes erased the op)")

    def at(self, tag: str | None, name: str, returns: bool = False) -> list[dict] | None:
        """The moves on the operands (the chain feeding each) and results (the chains
        each feeds) of the op tagged ``tag``: ``{"tensor": "operand 1", "ops": [...]}``,
        ops in data-flow order; [] when there are none, None when the output has no
        such op (:meth:`absent` says why).  A constraint lowered to moves: those moves
        are its ``result 0`` chain.
        ``returns``: also those on the values its regions return (``"region 1
        return 0"``: where a data-flow edge of the op meets its sources), and of a
        function, per argument the chains feeding it at its calls and those it feeds
        (``"argument 0"``: its function data-flow edges)."""
        from jaxlib.mlir import ir

        from sdy_dl.ir.context import mlir_context

        def feeding(v) -> list:
            chain = []
            while isinstance(v, ir.OpResult) and v.owner.name in MOVES:
                chain.append(describe(v.owner))
                v = v.owner.operands[0]
            return chain[::-1]

        def following(v) -> list:
            chain = []
            frontier = [v]
            while frontier:
                v = frontier.pop(0)
                for use in v.uses:
                    user = use.owner
                    if user.name in MOVES:
                        chain.append(describe(user))
                        frontier.extend(user.results)
            return chain

        out = []
        with mlir_context():
            mop = self.op(tag, name)
            if mop is None:
                return None
            for k, operand in enumerate(mop.operands):
                chain = feeding(operand)
                if chain:
                    out.append({"tensor": f"operand {k}", "ops": chain})
            for r, region in enumerate(mop.regions if returns else ()):
                for block in region.blocks:
                    ops = list(block.operations)
                    for k, operand in enumerate(ops[-1].operands if ops else ()):
                        chain = feeding(operand)
                        if chain:
                            out.append({"tensor": f"region {r} return {k}", "ops": chain})
            if returns and mop.name == "func.func" and mop.regions[0].blocks:
                calls = self._calls_of(mop)
                for k, arg in enumerate(mop.regions[0].blocks[0].arguments):
                    chain = [op for call in calls for op in feeding(call.operands[k])]
                    chain += following(arg)
                    if chain:
                        out.append({"tensor": f"argument {k}", "ops": chain})
            own = [describe(mop)] if mop.name in MOVES and mop.name != name else []
            for k, result in enumerate(mop.results):
                chain = (list(own) if k == 0 else []) + following(result)
                if chain:
                    out.append({"tensor": f"result {k}", "ops": chain})
        return out
