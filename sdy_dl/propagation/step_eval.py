"""Evaluate a batch of propagation steps with an engine (stage ``step``).

``evaluate_steps`` renders the ``step`` program for the batch, converts the
StepInputs to facts, runs the engine once and turns the output relations back
into StepOutputs.  The program's unrolling bound ``max_factors`` is the
batch's largest number of layers a step needs (:func:`layers_needed`: a
basic step's factor count, an aggressive step's number of factors on dims
with axes) rounded up to a power of two, at least
:data:`MIN_LAYERS` (:data:`COMPILED_MIN_LAYERS` on an engine that compiles
each program: a compiled Soufflé binary), so that few distinct programs
exist — except on an engine that grounds the program (clingo), which pays
for every rule on every call and gets exactly as many layers as the batch
needs.  Any bound at least that number gives the same outputs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from sdy_dl.datalog.compiler import compile_stage
from sdy_dl.datalog.program import Program
from sdy_dl.propagation.step import StepInput, StepOutput
from sdy_dl.propagation.step_facts import step_facts
from sdy_dl.sharding import DimSharding, Mesh, TensorSharding, interned, make_sub_axis

#: The smallest unrolling bound used.  An unused layer still costs the Python
#: engine and Soufflé's interpreter (and its provenance) time on every call.
MIN_LAYERS = 4

#: The smallest bound on an engine that compiles each program.  Rules of JAX
#: programs have up to 8 factors (a batched dot_general), so with a bound of 4
#: a module needs two step programs (4 and 8 layers), at 8 only one: on a cold
#: Soufflé binary cache one compilation less (the 4-layer program is ~28% of
#: the compile CPU), while a binary's call costs the same with 8 layers.
COMPILED_MIN_LAYERS = 8


def layers_needed(step: StepInput) -> int:
    """The unrolled layers ``step`` needs: a basic step one per factor of its rule
    (layer k is factor k); an aggressive step one per factor that can have a
    non-empty candidate (its layers are the sorted positions of those factors),
    and only a factor of a dim with axes can."""
    if step.strategy != "aggressive":
        return len(step.rule.factors)
    factors = set()
    for mapping, sharding in zip(step.rule.operands + step.rule.results, step.operands + step.results):
        if sharding is not None and len(sharding.dims) == len(mapping):
            for factor_ids, dim in zip(mapping, sharding.dims):
                if dim.axes:
                    factors.update(factor_ids)
    return len(factors)


def layers_for(steps: Sequence[StepInput], exact: bool = False, compiled: bool = False) -> int:
    """The unrolling bound for ``steps``: a power of two, at least
    :data:`MIN_LAYERS` (``compiled``: :data:`COMPILED_MIN_LAYERS`), or with
    ``exact`` the least number (at least 1), >= every step's :func:`layers_needed`."""
    need = max((layers_needed(s) for s in steps), default=0)
    if exact:
        return max(need, 1)
    layers = COMPILED_MIN_LAYERS if compiled else MIN_LAYERS
    while layers < need:
        layers *= 2
    return layers


def step_program(steps: Sequence[StepInput], exact: bool = False,
                 compiled: bool = False) -> Program:
    """The ``step`` program able to evaluate ``steps`` (only the strategies they use;
    ``exact`` and ``compiled``: see :func:`layers_for`)."""
    used = {s.strategy for s in steps}
    return compile_stage("step", max_factors=layers_for(steps, exact, compiled),
                         basic="basic" in used, aggressive="aggressive" in used)


def evaluate_steps(engine, steps: Sequence[StepInput],
                   meshes: Mapping[str, Mesh]) -> list[StepOutput]:
    """One StepOutput per StepInput, computed in one engine call."""
    if not steps:
        return []
    program = step_program(steps, compiled=engine.compiles())
    if engine.grounds(program):
        program = step_program(steps, exact=True)
    out = engine.run(program, step_facts(steps, meshes))
    return read_outputs(steps, meshes, out)


def read_outputs(steps: Sequence[StepInput], meshes: Mapping[str, Mesh],
                 out: Mapping[str, set[tuple]]) -> list[StepOutput]:
    """StepOutputs from the output relations of stage ``step``."""
    mesh_of = {i: m for i, m in out["step_mesh"]}
    closed: dict[tuple[int, int], dict[int, int]] = defaultdict(dict)
    for i, t, d, c in out["step_dim"]:
        closed[i, t][d] = c
    axes: dict[tuple[int, int, int], dict[int, tuple]] = defaultdict(dict)
    for i, t, d, o, a, p, s in out["step_dim_axis"]:
        axes[i, t, d][o] = (a, p, s)
    updated = {(i, t) for i, t in out["step_updated"]}
    results = []
    for i, step in enumerate(steps):
        old = tuple(step.operands) + tuple(step.results)
        new: list[TensorSharding | None] = [None] * len(old)
        for t, sharding in enumerate(old):
            if (i, t) not in updated:
                continue
            sym = mesh_of[i]
            mesh = meshes[sym]
            dims = []
            for d in range(len(closed[i, t])):
                refs = axes.get((i, t, d), {})
                dims.append(DimSharding(tuple(make_sub_axis(*refs[o], mesh) for o in range(len(refs))),
                                        bool(closed[i, t][d])))
            new[t] = interned(TensorSharding(sym, tuple(dims),
                                             sharding.replicated if sharding is not None else (),
                                             sharding.unreduced if sharding is not None else ()))
        n = len(step.operands)
        results.append(StepOutput(tuple(new[:n]), tuple(new[n:])))
    return results
