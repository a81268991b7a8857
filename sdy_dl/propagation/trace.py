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
from sdy_dl.propagation.step_facts import step_facts
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
    """An evaluator answering from the relations Soufflé derived for an emitted trace."""

    def __init__(self, directory: str, meshes: Mapping[str, Mesh]):
        path = os.path.join(directory, PROGRAM_FILE)
        try:
            with open(path, encoding="utf-8") as f:
                decls = parse_declarations(f.read(), source=path)
        except OSError as e:
            raise SdyError(f"cannot read the emitted program: {e.strerror}", file=path) from None
        self.relations = {d.name: read_relation_file(d, os.path.join(directory, f"{d.name}.csv"))
                          for d in decls.values() if d.is_output}
        self.meshes = meshes
        self.directory = directory
        self.next_id = 0

    def __call__(self, steps: Sequence[StepInput]) -> list[StepOutput]:
        first, end = self.next_id, self.next_id + len(steps)
        self.next_id = end
        window = {name: {(row[0] - first,) + row[1:] for row in rows if first <= row[0] < end}
                  for name, rows in self.relations.items()}
        if not window.get("step_mesh") and any(_has_sharding(s) for s in steps):
            raise SdyError(f"the relations hold no result for step {first}: "
                           "they were not derived from this module's emitted program",
                           file=self.directory)
        try:
            return read_outputs(steps, self.meshes, window)
        except (KeyError, IndexError, ValueError, TypeError) as e:
            raise SdyError(f"the relations of steps {first}..{end - 1} are inconsistent "
                           f"({type(e).__name__}: {e}): they were not derived from this "
                           "module's emitted program", file=self.directory) from None


def _has_sharding(step: StepInput) -> bool:
    return any(s is not None for s in step.operands + step.results)
