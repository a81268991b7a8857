"""Record the steps a propagation evaluates, and replay them from derived relations.

``sdy-dl emit`` runs propagation with a :class:`StepRecorder` and writes one
standalone Soufflé program plus the facts of *every* step it evaluated
(instance ids in evaluation order).  Running that program with Soufflé gives
the derived relations of all steps at once; :class:`StepReplay` feeds them
back to the driver, which then rebuilds exactly the same module: the
schedule is deterministic, so the driver asks for the same steps in the same
order.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from sdy_dl.datalog.facts import read_relation_file, write_facts_dir
from sdy_dl.datalog.program import parse_declarations
from sdy_dl.errors import SdyError
from sdy_dl.propagation.step import StepInput, StepOutput
from sdy_dl.propagation.step_eval import read_outputs, step_program
from sdy_dl.propagation.step_facts import mesh_facts, step_facts
from sdy_dl.sharding import Mesh

Evaluate = Callable[[list[StepInput]], list[StepOutput]]
PROGRAM_FILE = "program.dl"


class StepRecorder:
    """Wraps an evaluator and remembers every step it was asked for, in order."""

    def __init__(self):
        self.steps: list[StepInput] = []

    def wrap(self, evaluate: Evaluate) -> Evaluate:
        def recorded(steps: list[StepInput]) -> list[StepOutput]:
            self.steps.extend(steps)
            return evaluate(steps)
        return recorded

    def write(self, directory: str, meshes: Mapping[str, Mesh]) -> None:
        """``program.dl`` and one ``.facts`` file per input relation into ``directory``."""
        if not self.steps:
            raise SdyError("nothing to emit: propagation evaluated no step "
                           "(no value of the module has a sharding)")
        program = step_program(self.steps)
        write_facts_dir(program, step_facts(self.steps, meshes), directory)
        with open(os.path.join(directory, PROGRAM_FILE), "w", encoding="utf-8") as f:
            f.write(program.text)


class StepReplay:
    """An evaluator answering from the relations Soufflé derived for an emitted trace.

    The directory must hold every file the emitted program reads and writes.
    Each step propagation asks for is checked against the step recorded under
    its instance id (the ``.facts`` files), and each answer for being a change:
    relations that were edited, or derived from another module's program, stop
    the replay at the first step that is not the recorded one (or beyond the
    last recorded step), never in a loop."""

    def __init__(self, directory: str, meshes: Mapping[str, Mesh]):
        from sdy_dl.text_input import read_input

        path = os.path.join(directory, PROGRAM_FILE)
        decls = parse_declarations(read_input(path, "the emitted program"), source=path)
        missing = [f"{d.name}.{'csv' if d.is_output else 'facts'}" for d in decls.values()
                   if (d.is_input or d.is_output) and not os.path.exists(
                       os.path.join(directory, f"{d.name}.{'csv' if d.is_output else 'facts'}"))]
        if missing:
            raise SdyError(f"missing {', '.join(missing)}: 'sdy-dl emit' writes the .facts "
                           "files, 'souffle -F D -D D D/program.dl' the .csv files",
                           file=directory)
        self.relations = {d.name: read_relation_file(d, os.path.join(directory, f"{d.name}.csv"))
                          for d in decls.values() if d.is_output}
        #: relation -> instance id -> the recorded rows of that step (without the id)
        self.recorded: dict[str, dict[int, list[tuple]]] = {}
        for d in decls.values():
            if d.is_input and d.name not in MESH_RELATIONS:
                rows = read_relation_file(d, os.path.join(directory, f"{d.name}.facts"))
                self.recorded[d.name] = _by_instance(rows)
        self.count = len(self.recorded.get("in_step", ()))
        self.meshes = meshes
        self.directory = directory
        self.next_id = 0

    def __call__(self, steps: Sequence[StepInput]) -> list[StepOutput]:
        first, end = self.next_id, self.next_id + len(steps)
        self.next_id = end
        if end > self.count:
            raise SdyError(f"propagation asks for step {end - 1}, but the emitted program "
                           f"recorded {self.count} steps: the relations do not lead where the "
                           "recorded run went (they were changed, or derived from another "
                           "module's program)", file=self.directory)
        self._check_recorded(steps, first)
        window = {name: {(row[0] - first,) + row[1:] for row in rows if first <= row[0] < end}
                  for name, rows in self.relations.items()}
        if not window.get("step_mesh") and any(_has_sharding(s) for s in steps):
            raise SdyError(f"the relations hold no result for step {first}: "
                           "they were not derived from this module's emitted program",
                           file=self.directory)
        try:
            outputs = read_outputs(steps, self.meshes, window)
        except (KeyError, IndexError, ValueError, TypeError, SdyError) as e:
            what = e.message if isinstance(e, SdyError) else f"{type(e).__name__}: {e}"
            raise SdyError(f"the relations of steps {first}..{end - 1} are inconsistent "
                           f"({what}): they were not derived from this module's emitted "
                           "program", file=self.directory) from None
        for i, (step, output) in enumerate(zip(steps, outputs)):
            old = step.operands + step.results
            for t, new in enumerate(output.operands + output.results):
                if new is not None and new == old[t]:
                    raise SdyError(f"step {first + i}: relation step_updated marks tensor {t} "
                                   "updated, but its sharding is unchanged: the relations are "
                                   "inconsistent", file=os.path.join(self.directory,
                                                                      "step_updated.csv"))
        return outputs

    def check_complete(self) -> None:
        """After propagation: every recorded step was asked for (fewer means the
        relations ended the run early)."""
        if self.next_id != self.count:
            raise SdyError(f"propagation asked for {self.next_id} of the {self.count} recorded "
                           "steps: the relations do not lead where the recorded run went "
                           "(they were changed, or derived from another module's program)",
                           file=self.directory)

    def _check_recorded(self, steps: Sequence[StepInput], first: int) -> None:
        """Every step of the batch is the step recorded under its instance id."""
        try:
            facts = step_facts(steps, self.meshes)
        except SdyError as e:
            raise SdyError(f"propagation asks for steps from {first} on that cannot be recorded "
                           f"ones ({e.message}): the relations are inconsistent",
                           file=self.directory) from None
        for name, rows in facts.items():
            if name in MESH_RELATIONS:
                continue
            asked = _by_instance(rows)
            recorded = self.recorded.get(name, {})
            for i in range(len(steps)):
                if sorted(asked.get(i, ())) != recorded.get(first + i, []):
                    raise SdyError(f"propagation asks for a step {first + i} that is not the "
                                   f"recorded one (its {name} facts differ): the relations do "
                                   "not lead where the recorded run went (they were changed, "
                                   "or derived from another module's program)",
                                   file=os.path.join(self.directory, f"{name}.facts"))


#: The input relations about meshes, not about one step.
MESH_RELATIONS = frozenset(mesh_facts((), {}))


def _by_instance(rows) -> dict[int, list[tuple]]:
    """Rows whose first column is an instance id, grouped by it (each group sorted)."""
    out: dict[int, list[tuple]] = {}
    for row in rows:
        out.setdefault(row[0], []).append(tuple(row[1:]))
    for group in out.values():
        group.sort()
    return out


def _has_sharding(step: StepInput) -> bool:
    return any(s is not None for s in step.operands + step.results)
