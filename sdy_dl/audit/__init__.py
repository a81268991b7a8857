"""Auditing a propagation: why every value of the output has its sharding.

One :class:`Audit` runs the whole ``propagate`` pipeline once with a
provenance tracer and keeps what it needs to explain any value of the
printed output module:

| module       | job |
|--------------|-----|
| `provenance` | the tracer: every sharding write and its cause |
| `naming`     | names of the input, propagated and output modules (location tags) |
| `steps`      | factor-level detail of steps, read from the step program's relations |
| `explain`    | named derivation trees |
| `reasons`    | why a value is unsharded or blocked |
| `conflicts`  | where propagation could not agree, what decided, what the output does; grouped |
| `communication_at` | the reshards and collectives at an op of the output (or of its explicit copy) |
| `render`     | trees as text and Graphviz dot |
| `report`     | the HTML report: named sections, the values' data, derivations as a DAG |
| `proofs`     | Datalog derivations of a step's derived tuples (proof search) |
| `souffle_proofs` | the same from Soufflé's provenance (souffle engine) |
| `souffle_rules` | which program clause a rule number of Soufflé's provenance names |
| `step_proofs` | proofs for the step nodes of trees, from the engine the audit ran |
| `decision_proofs` | proofs for the rewrite nodes a Datalog stage decided (user priorities, group syncs) |
| `diff`       | two annotated modules compared value by value, aligned by dataflow |
| `same_structure` | two outputs that differ in shardings only, and the values that differ |
| `edited_output` | a what-if's output made by difference, read where the export made it differ |
| `collectives` | the collective ledger: every collective, its bytes per device and its cause |
| `cost_model` | bytes per device of tensors and collectives; bandwidth and latency per mesh axis |
| `memory`     | bytes per device of every value, per-function totals, the largest unsharded tensors |
| `whatif`     | edits of the input annotations, re-propagated, and what changed |
| `whatif_import` | when a what-if may start from the first propagation's imported module |
| `why_not`    | why a value has no axis: where it stopped, the cause, the Datalog answer |
| `dataflow`   | the data flow propagation follows (ops and data-flow edges), as tracer keys |
| `negation`   | negation provenance: why a program derives no tuple matching a pattern |
| `partition_spec` | JAX ``PartitionSpec`` text and sdy shardings; the JAX line of an edit |
"""

from __future__ import annotations

import functools

from sdy_dl.audit.explain import Explainer, Node
from sdy_dl.audit.naming import InputIndex, OutputIndex, OutputValue, PropagationIndex
from sdy_dl.audit.provenance import ProvenanceTracer
from sdy_dl.audit.steps import OpDescriber
from sdy_dl.progress import Display

#: The pipeline stage right before which the propagated values are tagged.
PROPAGATION_STAGE = "user-priority-propagate"


class Audit:
    """One propagation of ``module`` with provenance; explains any output value."""

    def __init__(self, module, options, step_memo: dict | None = None,
                 stage_memo: dict | None = None, imported=None, rule_memo: dict | None = None,
                 places: dict | None = None, fixpoints=None,
                 propagated: PropagationIndex | None = None, exported=None,
                 imported_again=None):
        """``step_memo``: step outputs to reuse and keep (``RunContext.step_memo``;
        None: the steps are not kept after the propagation, nor the module
        propagation started from); ``stage_memo``: the same for the relations of
        Datalog stages (``RunContext.stage_memo``).  ``imported``: exactly the
        module the stages before propagation make of ``module`` (a what-if's,
        :mod:`sdy_dl.audit.whatif_import`): those stages are not run; then
        ``rule_memo`` may be the rules of the propagation ``imported`` was copied
        from (``RunContext.rule_memo``; kept as ``self.rule_memo`` with
        ``step_memo``).  ``places``: what an earlier audit of the same file read
        of its ops' locations (:class:`~sdy_dl.audit.steps.OpDescriber`; a
        what-if's first audit's).  ``fixpoints``: the record of the fixpoints of the
        propagation ``imported`` was copied from (its ``self.fixpoints``), whose
        visits are replayed where provably this propagation's
        (:mod:`sdy_dl.propagation.replay`).  ``propagated``: the propagation index
        of the audit ``imported`` was copied from (its values and tags are those of
        ``imported``, :class:`PropagationIndex`).  ``exported``: the export record
        of that audit (its ``self.exported``), from which the output of
        ``imported`` (a module of the same structure) is made by difference
        where provably the same
        (:mod:`sdy_dl.passes.export.by_difference`).  ``imported_again``: a function
        making another copy of ``imported`` as given (kept as :attr:`imported` is,
        and called when a what-if of this audit first asks for it)."""
        from sdy_dl.pipeline import propagate, stages_after_propagation
        from sdy_dl.propagation.replay import PassTrace, ReplayOf

        self.file = module.file
        self.options = options
        self.inputs = InputIndex(module, tag=imported is None)
        from sdy_dl.passes.propagation.basic_propagation import CONSERVATIVE_PROPAGATION

        self.tracer = ProvenanceTracer(OpDescriber(module.file, options.context.rule_files,
                                                   options[CONSERVATIVE_PROPAGATION], places))
        self.propagated: PropagationIndex | None = None

        self._imported = None   # (see ``imported``)
        self._imported_again = None
        #: The index fields of the module :attr:`imported` is a clone of: the module
        #: propagation starts from, as indexed then (``imported_again``'s clones are of
        #: a module of the same ops)
        self.imported_index: dict | None = None
        #: Whether the stages before propagation were not run (``imported`` given).
        self.import_reused = imported is not None

        #: The record of this propagation's export, for what-ifs (with ``step_memo``).
        self.exported = None
        record = imported is None and step_memo is not None

        def before(name, m):
            if record and self.exported is None and self.propagated is not None \
                    and name != PROPAGATION_STAGE:
                from sdy_dl.passes.export.by_difference import ExportRecord

                self.exported = ExportRecord(m)
            if name == PROPAGATION_STAGE:
                self.propagated = PropagationIndex(m, self.inputs,
                                                   propagated if imported is not None else None)
                # (op N of the index as tagged is tagged oN: its steps' descriptions
                # know their tags without reading locations)
                self.tracer.describe_op.tagged_ops = self.propagated.index_model["ops"]
                self.imported_index = self.propagated.index_model
                if step_memo is not None and imported_again is not None \
                        and self.propagated.tags_made is propagated.tags_made:
                    # (not tagged again: ``imported`` is still as made)
                    self._imported_again = imported_again
                elif step_memo is not None:   # (tagged: a what-if from it keeps the tags)
                    from sdy_dl.ir.context import mlir_context

                    with mlir_context():
                        self._imported = m.mlir.operation.clone()

        self.step_memo, self.stage_memo = step_memo, stage_memo
        if imported is None or step_memo is None:
            rule_memo = {} if step_memo is not None else None
        self.rule_memo = rule_memo
        #: The record of this propagation's fixpoints, for what-ifs (with ``step_memo``).
        self.fixpoints = PassTrace() if imported is None and step_memo is not None else None
        replay = ReplayOf(fixpoints) if imported is not None and fixpoints is not None else None
        run_options = options.with_context(
            tracer=self.tracer, step_memo=step_memo, stage_memo=stage_memo, rule_memo=rule_memo,
            fixpoints=self.fixpoints or replay)
        self.module = propagate(
            module if imported is None else imported, run_options, before=before,
            start=None if imported is None else PROPAGATION_STAGE,
            export=None if exported is None or imported is None
            else self._export_by_difference(exported, run_options, replay))
        if self.exported is not None:
            self.exported.finish(self.module, stages_after_propagation(options))
        #: The replay of ``fixpoints`` (a :class:`~sdy_dl.propagation.replay.Replay`:
        #: how many visits it replayed; None: none).
        self.replay = replay.replay if replay is not None else None
        #: What user-priority propagation left different from the first propagation's
        #: (a what-if's replaying propagation: values, slots, main results and ops,
        #: :class:`~sdy_dl.propagation.replay.ReplayedPassChanges`, numbered as the model
        #: propagation ran on, whose tags both outputs carry); None: not known.
        self.sharding_changes = self.replay.changes if self.replay is not None else None
        self._text: str | None = None
        #: The audit whose output this one's mostly equals (a what-if's first audit; set
        #: before ``signatures`` is first asked for): the values of ops that are twins
        #: of its ops take its memory rows (:class:`~sdy_dl.audit.diff.Signatures`).
        self.like: Audit | None = None
        self.explainer = Explainer(self.tracer, self.inputs, self.propagated,
                                   lambda: self.outputs)

    @property
    def imported(self):
        """A copy of the module propagation started from, as the stages before it
        left it (raw ``builtin.module``; kept for what-ifs, with ``step_memo``; a
        what-if's, when its module was made by ``imported_again``: made by it
        when first asked for)."""
        if self._imported is None and self._imported_again is not None:
            self._imported, self._imported_again = self._imported_again(), None
        return self._imported

    @staticmethod
    def _export_by_difference(exported, options, replay):
        """``export(module)`` for the pipeline: the output by difference, given the
        replay's hand-over of the ops whose shardings differ when it has one."""
        from sdy_dl.passes.export.by_difference import export_by_difference
        from sdy_dl.pipeline import stages_after_propagation

        stages = stages_after_propagation(options)

        def export(m):
            changes = getattr(getattr(replay, "replay", None), "changes", None)
            return export_by_difference(exported, m, options, stages, changes)
        return export

    @functools.cached_property
    def outputs(self) -> OutputIndex:
        """Every value of the output module (indexed when first asked for: a what-if
        whose outputs differ in shardings only does not ask)."""
        return OutputIndex(self.module, self.propagated, lambda: self.text, self.value_table)

    @functools.cached_property
    def value_table(self):
        """The output module's values as its MLIR holds them
        (:class:`~sdy_dl.audit.naming.ValueTable`; ``outputs`` reads it)."""
        from sdy_dl.audit.naming import ValueTable

        return ValueTable(self.module.mlir.operation, lambda: self.text)

    @functools.cached_property
    def signatures(self):
        """The output's values by signature (:class:`~sdy_dl.audit.diff.Signatures`,
        made like ``like``'s when it is set)."""
        from sdy_dl.audit.diff import signatures
        from sdy_dl.ir.context import mlir_context

        with mlir_context():
            return signatures(self.module, self.value_table,
                              like=self.like.signatures if self.like is not None else None)

    @functools.cached_property
    def memory_layouts(self) -> list:
        """Each function's memory layout (:func:`~sdy_dl.audit.memory.signature_layouts`
        of ``signatures``; a twin op's values with ``like``'s rows)."""
        from sdy_dl.audit.memory import signature_layouts

        return signature_layouts(self, self.signatures,
                                 self.like.memory_layouts if self.like is not None else None)

    @functools.cached_property
    def display(self) -> Display:
        return Display(self.outputs.op_count, self.options.context.quiet)

    @property
    def text(self) -> str:
        """The output module as printed (printed once, when first asked for)."""
        if self._text is None:
            self._text = self.module.print()
        return self._text

    def value(self, name: str) -> OutputValue:
        """The output value called ``name`` (error with close matches if unknown)."""
        return self.outputs.find(name)

    def explain(self, name: str, depth: int = 8) -> Node:
        """The derivation tree of output value ``name``."""
        return self.explainer.explain(self.value(name), depth)

    @functools.cached_property
    def step_walk(self):
        """The propagation's steps indexed for why-not answers
        (:class:`sdy_dl.audit.why_not.StepWalk`, built when first asked for)."""
        from sdy_dl.audit.why_not import StepWalk

        return StepWalk(self)

    def conflicts(self, at: set | None = None) -> list:
        """Every place propagation could not agree (see :mod:`sdy_dl.audit.conflicts`),
        each saying what the output does there; ``at``: a set of (op name, place),
        only the conflicts of the ops there (in the same order, each as the whole
        list has it; the whole list is not made for them)."""
        from sdy_dl.audit.conflicts import find_conflicts

        if not hasattr(self, "_conflicts"):
            self._step_records("conflicts")
            if at is not None:
                return find_conflicts(self.explainer, self._communication, at)
            with self.display.stage(f"conflicts: comparing the factors of "
                                    f"{len(self.tracer.steps)} steps"):
                self._conflicts = find_conflicts(self.explainer, self._communication)
        if at is None:
            return self._conflicts
        return [c for c in self._conflicts if (c.op, c.place) in at]

    def _communication(self):
        """What the output does at each op (an
        :class:`~sdy_dl.audit.communication_at.OpCommunication`, made once)."""
        from sdy_dl.audit.communication_at import OpCommunication

        if not hasattr(self, "_op_communication"):
            self._op_communication = OpCommunication.of_output(self.module, self.options)
        return self._op_communication

    def _step_records(self, what: str) -> None:
        """Evaluate the factor records of every step (once), shown as a stage of ``what``."""
        if not hasattr(self.explainer, "_records"):
            with self.display.stage(f"{what}: factor records of {len(self.tracer.steps)} steps"):
                self.explainer.step_records()

    def conflict_groups(self) -> list:
        """:meth:`conflicts` grouped by pattern (one entry per pattern, with its members)."""
        from sdy_dl.audit.conflicts import group_conflicts

        return group_conflicts(self.conflicts())

    def collectives(self, cost_model=None):
        """The collective ledger of the output (see :mod:`sdy_dl.audit.collectives`;
        the propagation must have run with explicit collectives)."""
        from sdy_dl.audit.collectives import ledger

        return ledger(self, cost_model)

    def memory(self, top: int = 10):
        """Bytes per device of every value (see :mod:`sdy_dl.audit.memory`)."""
        from sdy_dl.audit.memory import memory_table

        return memory_table(self, top)

    def attach_proofs(self, trees: list[Node]) -> None:
        """Give every step node of ``trees``, and every rewrite node a Datalog stage
        decided, its Datalog proof (``Node.proof``)."""
        from sdy_dl.audit.decision_proofs import attach_decision_proofs
        from sdy_dl.audit.step_proofs import attach_proofs

        attach_proofs(self, trees)
        attach_decision_proofs(self, trees)

    def explain_all(self, depth: int = 8) -> list[Node]:
        """The trees of every value of the output module, in module order."""
        return list(self.iter_explain_all(depth))

    def iter_explain_all(self, depth: int = 8):
        """:meth:`explain_all`'s trees one at a time, each made when asked for (the
        trees of every value of a large module at once are gigabytes)."""
        self._step_records("explaining every value")
        with self.display.stage("explaining every value: the steps' detail"):
            self.explainer.prepare_all()
        values = self.outputs.values
        with self.display.stage("explaining every value", total=len(values)) as stage:
            for out in values:
                yield self.explainer.explain(out, depth)
                stage.advance()


__all__ = ["Audit", "Node"]
