"""Named derivation trees: why a value of the output module has its printed sharding.

:class:`Explainer` turns the tracer's :class:`~sdy_dl.audit.provenance.Derivation`
trees into :class:`Node` trees whose values carry the names of the printed
output module (or of the input module, for values the pipeline erased),
whose steps name the op, its source place, its rule and the rule's origin,
the strategy and band, and per changed factor the axes and the operand or
result dims they came from; whose leaves are annotations of the input.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sdy_dl.audit.naming import InputIndex, OutputIndex, OutputValue, PropagationIndex
from sdy_dl.audit.provenance import Cause, Derivation, ProvenanceTracer
from sdy_dl.audit.steps import step_details, tensor_name
from sdy_dl.audit.tree_text import one_per_annotation


@dataclass
class Node:
    """A node of a named derivation tree."""

    what: str
    sharding: str
    because: str
    kind: str = "step"        # step, edge, barrier, result, group, priority, sync, annotation,
                              # import, export, unsharded
    op: dict | None = None    # name, place, rule, origin
    strategy: str = ""
    phase: str = ""
    factors: list[dict] = field(default_factory=list)
    children: list["Node"] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)   # unsharded / blocked: why
    cause: int | None = None  # the tracer's cause index (links proofs and reports)
    truncated: str = ""       # "seen": derived earlier in this tree; "depth": cut at --depth
    key: object = field(default=None, repr=False)       # the tracer key
    proof: list = field(default_factory=list)            # proofs.Proof of the step (--proof)
    #: an annotation leaf: the input annotation as written (name = sharding (op at
    #: place)), and the value the import passes moved it onto ("": not moved)
    cited: str = field(default="", repr=False)
    moved: str = field(default="", repr=False)

    def to_json(self) -> dict:
        out = {"value": self.what, "sharding": self.sharding, "because": self.because,
               "kind": self.kind}
        if self.op:
            out["op"] = {k: v for k, v in self.op.items() if k != "tag"}
        if self.strategy:
            out["strategy"] = self.strategy
        if self.phase:
            out["phase"] = self.phase
        if self.factors:
            out["factors"] = self.factors
        if self.reasons:
            out["reasons"] = self.reasons
        if self.truncated:
            out["truncated"] = self.truncated
        if self.proof:
            out["proof"] = [p.to_json() for p in self.proof]
        out["from"] = [c.to_json() for c in self.children]
        return out

    def leaves(self) -> list["Node"]:
        """The leaves (nodes cut as derived elsewhere in the tree excluded)."""
        if self.truncated == "seen":
            return []
        return [self] if not self.children else [x for c in self.children for x in c.leaves()]

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()

    def __str__(self) -> str:
        """The tree as ``sdy-dl explain`` prints it."""
        from sdy_dl.audit.tree_text import text_lines

        return "\n".join(text_lines(self))

    def _repr_html_(self) -> str:
        from sdy_dl.audit.tree_text import tree_html

        return f"<ul style='list-style:none'>{tree_html(self)}</ul>"


def shown_children(key, factors: list, children: list) -> list:
    """The children (anything with a ``key``) the step node of tracer key ``key`` shows:
    when the step changed ``factors`` (with their sources' keys), the tensors they came
    from and the value's own past; else all."""
    if not factors:
        return children
    wanted = {key} | {s["key"] for f in factors for s in f["from"]}
    return [child for child in children if child.key in wanted] or children


#: How a value of another call's copy of a function is named after the output's value
#: (the output prints one function for the calls whose shardings agree).
ANOTHER_CALL = " (in another call of its function)"

#: What the export passes do to a call result whose propagated axes the callee's
#: result sharding does not have.
CALL_RESULT_EXPORT = ("the export pass insert-func-call-reshards prints the callee's result "
                      "sharding on the call and reshards the result to the propagated one for "
                      "its users (the sdy.reshard after the call)")
#: Why a value prints other than propagated when no call reshard is the cause.
EXPORT_PASSES = ("the export passes (close-shardings and the input/output sharding passes) "
                 "print it so")


def _axes(sharding) -> list:
    """The axes of each dim of ``sharding`` (open or closed alike; None: no sharding)."""
    return None if sharding is None else [d.axes for d in sharding.dims]


def _has_axes(sharding) -> bool:
    return bool(sharding.replicated) or any(d.axes for d in sharding.dims)


#: Sharding -> its text (shardings are interned and hash once; a report prints each
#: of them thousands of times).
_TEXTS: dict = {}


def _text(sharding) -> str:
    if sharding is None:
        return "(none)"
    text = _TEXTS.get(sharding)
    if text is None:
        if len(_TEXTS) > 1 << 16:
            _TEXTS.clear()
        text = _TEXTS[sharding] = sharding.to_text()
    return text


class Explainer:
    """Builds named trees from one propagation's tracer and indexes."""

    def __init__(self, tracer: ProvenanceTracer, inputs: InputIndex, propagated: PropagationIndex,
                 outputs):
        """``outputs``: the :class:`OutputIndex`, or a function giving it (called when
        first needed)."""
        self.tracer = tracer
        self.inputs = inputs
        self.propagated = propagated
        self._outputs = outputs
        self._details: dict[int, list] = {}
        self._all_prepared = False   # every write's step detail is in _details
        self._steps_reading: dict | None = None
        # What every tree containing a step repeats, made once: names by key, a
        # cause's text, a step's factors (with and without the sources' keys).
        self._names: dict = {}
        self._becauses: dict[int, str] = {}
        self._factor_lists: dict[tuple, tuple[list, list]] = {}
        self._manual_of_funcs: dict | None = None   # function -> manual axes around its calls

    @property
    def outputs(self) -> OutputIndex:
        if callable(self._outputs):
            self._outputs = self._outputs()
        return self._outputs

    def manual_axes_around(self, out: OutputValue) -> set[str]:
        """The manual axes around output value ``out`` (:mod:`manual_scope`)."""
        from sdy_dl.audit.manual_scope import manual_axes_around, manual_axes_of_funcs
        from sdy_dl.ir.context import mlir_context

        if out.value is None:
            return set()
        if self._manual_of_funcs is None:
            with mlir_context():
                self._manual_of_funcs = manual_axes_of_funcs(self.outputs.module)
        return manual_axes_around(out.value, self._manual_of_funcs)

    def callee_returned(self, out: OutputValue):
        """The tracer key of the value the callee of the ``func.call`` result ``out``
        returns for it (its result sharding, which insert-func-call-reshards prints
        on the call), or None: not known."""
        from sdy_dl.ir.context import mlir_context
        from sdy_dl.passes.call_graph import callee_name

        if out.value is None:
            return None
        with mlir_context():
            name = callee_name(out.value.owner)
            index = out.value.maybe_downcast().result_number
        result = self.outputs.named(f"@{name}:result:{index}")
        returned = result.result_of if result is not None else None
        return returned.key if returned is not None else None

    def call_resharded(self, out: OutputValue, given) -> bool | None:
        """Whether the callee's result sharding that insert-func-call-reshards prints
        on the call result ``out`` has other axes than ``given`` (its propagated
        sharding; None: not known)."""
        key = self.callee_returned(out)
        if key is None:
            return None
        callee = self.tracer.final(key)
        return _axes(given) != (_axes(callee) if callee is not None
                                else [() for _ in given.dims])

    # -- names ------------------------------------------------------------

    def key_name(self, key) -> str:
        """The name of a tracer key: an output value, else an input value, else internal."""
        try:
            return self._names[key]
        except KeyError:
            name = self._names[key] = self._key_name(key)
            return name

    def _key_name(self, key) -> str:
        if isinstance(key, tuple) and key and key[0] == "result":
            return f"result:{key[1]}"
        outs = self.outputs.by_key.get(key)
        if outs:
            return outs[0].name
        for record in self.propagated.by_key.get(key, ()):
            if record.origin is not None and not record.is_edge:
                name = self._name_in_its_call(record)
                if name is not None:
                    return name + ANOTHER_CALL
                return f"input {record.origin.names[0]} (erased by the pipeline)"
        return "(a value the pipeline created and erased)"

    def _name_in_its_call(self, record) -> str | None:
        """The output's name of the value the erased ``record`` was in its call: a
        function called several times propagates on a copy per call, and the output
        prints one function for the copies that agree, called by the call each copy
        became.  The value from ``record``'s input value, of another copy, in the
        function that call calls (when the output has it; else, the call being
        erased too, the one such value in any function).  None: ``record`` is in
        no call's copy, or there is not exactly one such value."""
        copy = self.propagated.call_copy(record)
        if copy is None:
            return None
        others = [(name, func) for name, func, other in
                  self._printed_origins().get(record.origin.key, ()) if other != copy]
        callee = self.outputs.callee_of_tag(f"o{copy}")
        names = list(dict.fromkeys(name for name, func in others
                                   if callee is None or func == callee))
        return names[0] if len(names) == 1 else None

    def _printed_origins(self) -> dict:
        """Input value (by key) -> (the output's name, its function's label, its call
        copy, :meth:`PropagationIndex.call_copy`) of each value propagated from it
        (not data-flow edges)."""
        from sdy_dl.ir.context import mlir_context

        if not hasattr(self, "_printed"):
            self._printed = {}
            call_copy, record_of = self.propagated.call_copy, self.outputs.record_of
            outputs = self.outputs.by_key
            with mlir_context():
                for key, records in self.propagated.by_key.items():
                    outs = outputs.get(key)
                    if not outs:
                        continue
                    # (one value of the key printed and one propagated: they are one)
                    pairs = [(outs[0], records[0])] if len(outs) == len(records) == 1 \
                        else [(out, record_of(out)) for out in outs]
                    for out, record in pairs:
                        if record is not None and record.origin is not None \
                                and not record.is_edge:
                            self._printed.setdefault(record.origin.key, []).append(
                                (out.name, out.func, call_copy(record)))
        return self._printed

    def steps_reading(self, key) -> list:
        """The op steps (tracer causes, in order) that read tracer key ``key``: one
        index over every step, built when first asked for (``report`` asks once
        per value)."""
        if self._steps_reading is None:
            index: dict = {}
            for cause in self.tracer.steps:
                for k in dict.fromkeys(k for k, _ in cause.inputs):
                    index.setdefault(k, []).append(cause)
            self._steps_reading = index
        return self._steps_reading.get(key, [])

    def step_records(self):
        """The factor records of every op step the propagation applied (one evaluation)."""
        from sdy_dl.audit.steps import StepRecords

        if not hasattr(self, "_records"):
            self._records = StepRecords([c.step for c in self.tracer.steps], self.propagated.meshes)
        return self._records

    def records_for(self, steps: list):
        """Factor records covering ``steps``: the whole propagation's when already
        evaluated, else just these steps'."""
        from sdy_dl.audit.steps import StepRecords

        if hasattr(self, "_records"):
            return self._records
        return StepRecords(steps, self.propagated.meshes)

    def annotations(self, key, before: int) -> list[str]:
        """The input annotations ``key``'s sharding came from before write ``before``."""
        d = self.tracer.tree(key, 100, before=before)
        if d is None:
            return []
        return sorted(one_per_annotation((leaf, f"{leaf.what} = {leaf.sharding}")
                                         for leaf in self._node(d).leaves()
                                         if leaf.kind == "annotation"))

    # -- trees ------------------------------------------------------------

    def explain(self, out: OutputValue, depth: int = 8) -> Node:
        """The tree of output value ``out``: its root carries the printed sharding."""
        printed = _text(out.sharding)
        if out.held_by is not None:
            holder = out.held_by
            line = f" (output line {holder.line})" if holder.line else ""
            return Node(out.name, printed, f"a block argument of stablehlo.while{line}: its "
                        f"sharding is the one the while prints for {holder.name}", kind="edge",
                        children=[self.explain(holder, depth)])
        if out.result_of is not None and out.key is not None and not isinstance(out.key, tuple):
            if out.sharding is None or not _has_axes(out.sharding):
                node = self.explain(out.result_of, depth)
                node = Node(out.name, printed, f"function result: the returned value "
                            f"{out.result_of.name} has no axes", kind="unsharded",
                            reasons=node.reasons or [node.because])
                return node
            inner = self._tree(out.key, depth)
            node = Node(out.name, printed, "function result: propagate-to-func-results gives it "
                        f"the sharding of the returned value {out.result_of.name}", kind="export")
            if inner is not None:
                node.children.append(inner)
            return node
        if out.key is None:
            return self._export_created(out, depth)
        derivation = self.tracer.tree(out.key, depth)
        if derivation is None:
            if out.sharding is None or not _has_axes(out.sharding):
                node = self._unsharded(out)
                if out.sharding is not None:
                    node.sharding = printed
                    node.reasons.append("the export passes print an empty sharding on it because "
                                        "another value of its op has one")
                return node
            return Node(out.name, printed, "set by the export passes (nothing was propagated "
                        "to it)", kind="export")
        self._prepare([derivation])
        node = self._node(derivation)
        node.what = out.name
        reasons = []
        if out.sharding is not None and any(not d.axes for d in out.sharding.dims):
            from sdy_dl.audit.reasons import unsharded_reasons
            reasons = [r for r in unsharded_reasons(self, out) if not r.startswith("no annotation")]
        propagated = _text(derivation.sharding)
        if propagated != printed:
            resharded = (self.call_resharded(out, derivation.sharding) if out.op == "func.call"
                         else False)
            passes = (CALL_RESULT_EXPORT if resharded else EXPORT_PASSES if resharded is False
                      else "the export passes print it so (insert-func-call-reshards, which "
                      "prints the callee's result sharding on the call, or close-shardings and "
                      "the input/output sharding passes: which, not known here, the callee's "
                      "result not being found)")
            node = Node(out.name, printed, f"propagated as {propagated}; {passes}",
                        kind="export", children=[node])
            node.children[0].what = out.name
        node.reasons = reasons
        return node

    def _tree(self, key, depth: int) -> Node | None:
        d = self.tracer.tree(key, depth)
        if d is None:
            return None
        self._prepare([d])
        return self._node(d)

    def _export_created(self, out: OutputValue, depth: int) -> Node:
        at = f" at output line {out.line}" if out.line else ""
        op = {"name": out.op, "place": f"output line {out.line}" if out.line else out.place}
        if out.line:
            op["output_line"] = out.line
        node = Node(out.name, _text(out.sharding), f"{out.op}{at} created by the export passes",
                    kind="export", op=op)
        if out.op == "sdy.reshard":
            node.because = (f"sdy.reshard{at} inserted by the export passes (insert-explicit-"
                            "reshards, insert-func-call-reshards): the operand is resharded to what "
                            "its user needs")
        for src in self.operand_values(out):
            if depth > 1:
                node.children.append(self.explain(src, depth - 1))
            else:
                node.truncated = "depth"
        return node

    def operand_values(self, out: OutputValue) -> list[OutputValue]:
        """The output values an op result ``out`` reads (its op's operands)."""
        from jaxlib.mlir.ir import OpResult

        value = out.value
        if value is None or not isinstance(value, OpResult):
            return []
        found = (self.outputs.by_value.get(operand) for operand in value.owner.operands)
        return [src for src in found if src is not None]

    def _unsharded(self, out: OutputValue) -> Node:
        from sdy_dl.audit.reasons import unsharded_reasons

        reasons = unsharded_reasons(self, out)
        return Node(out.name, "(none)", reasons[0], kind="unsharded", reasons=reasons)

    def _prepare(self, derivations: list[Derivation]) -> None:
        """Evaluate the factor-level detail of every step in ``derivations`` at once."""
        if self._all_prepared:
            return
        todo: dict[int, Cause] = {}
        stack = list(derivations)
        while stack:
            d = stack.pop()
            stack.extend(d.children)
            c = d.write.cause if d.write is not None else None
            if c is not None and c.step is not None and c.index not in self._details:
                todo[c.index] = c
        if not todo:
            return
        causes = list(todo.values())
        records = getattr(self, "_records", None)
        by_step = {}
        if records is not None:   # steps the whole propagation's records already hold
            by_step = {c.step: records.changes(records.index[c.step]) for c in causes
                       if c.step in records.index}
        steps = list({c.step: None for c in causes if c.step not in by_step})
        by_step.update(zip(steps, step_details(steps, self.propagated.meshes)))
        for c in causes:
            self._details[c.index] = by_step[c.step]

    def prepare_all(self) -> None:
        """Evaluate the detail of every step the propagation took (``--all``, ``report``):
        the op steps' from the whole propagation's records, the rest in one call."""
        self.step_records()
        self._prepare([Derivation(w.key, w.sharding, w) for w in self.tracer.writes])
        self._all_prepared = True

    def _node(self, d: Derivation) -> Node:
        """The named node of ``d`` and its subtree.  The tracer expands each write once
        in a tree (later: "seen"); a node shows only the children its step took axes
        from (:func:`shown_children`), so where the expanded occurrence is not shown,
        the first shown one is expanded instead."""
        expanded = {}
        stack = [d]
        while stack:
            x = stack.pop()
            if x.write is not None and not x.truncated:
                expanded.setdefault((x.key, id(x.write)), x)
            stack.extend(x.children)
        return self._shown_node(d, expanded, set())

    def _shown_node(self, d: Derivation, expanded: dict, shown: set) -> Node:
        """:meth:`_node` of ``d``; ``expanded``: the expanded derivation of each write
        (by key and write), ``shown``: the writes shown expanded so far."""
        if d.write is not None:
            marker = (d.key, id(d.write))
            if d.truncated == "seen" and marker not in shown and marker in expanded:
                d = expanded[marker]
            if not d.truncated:
                shown.add(marker)
        name = self.key_name(d.key)
        if d.write is None:
            return self.leaf(d, name)
        c = d.write.cause
        op = c.op
        line = self.outputs.line_of_tag(op.get("tag"), op.get("name")) if op is not None else 0
        if line:
            op = {**op, "output_line": line}
        node = Node(name, _text(d.sharding), self._because(c), kind=c.kind, op=op,
                    strategy=c.strategy, phase=c.phase, cause=c.index, truncated=d.truncated,
                    key=d.key)
        plain = []
        if c.step is not None:
            node.factors, plain = self._factor_pair(c, d.key)
        if d.truncated == "seen":
            node.because += " (derived above)"
        node.children = [self._shown_node(child, expanded, shown)
                         for child in shown_children(d.key, node.factors, d.children)]
        node.factors = plain
        return node

    def _factor_pair(self, c: Cause, key) -> tuple[list, list]:
        """:meth:`_factors` of a step, with the sources' keys and without (made once per
        step and key, shared by every tree showing it: not to be modified)."""
        marker = (c.index, key)
        pair = self._factor_lists.get(marker)
        if pair is None:
            keyed = self._factors(c, key)
            plain = [dict(f, **{"from": [{k: v for k, v in x.items() if k != "key"}
                                         for x in f["from"]]}) for f in keyed]
            pair = (keyed, plain)
            if c.index in self._details:
                self._factor_lists[marker] = pair
        return pair

    def op_place(self, op) -> str:
        """Where the op a step ran on is: ``output line 52 (input line 48)``, or its
        input place alone when the pipeline erased it."""
        line = self.outputs.line_of_tag(op.get("tag"), op.get("name"))
        place = op.get("place")
        if place.endswith("(no line)"):
            place = ""
        if line:
            return f"output line {line}" + (f" ({place})" if place else "")
        return place

    def _because(self, c: Cause) -> str:
        text = self._becauses.get(c.index)
        if text is None:
            text = self._becauses[c.index] = self._cause_text(c)
        return text

    def _cause_text(self, c: Cause) -> str:
        if c.kind in ("step", "edge", "barrier") and c.op is not None:
            op = c.op
            what = {"edge": "data-flow edge", "barrier": "propagation barrier"}.get(c.kind, op["name"])
            rule = f"rule {c.step.rule.to_text()}" if c.kind == "step" and c.step is not None else ""
            parts = [p for p in (rule, f"from {op.get('origin')}" if c.kind == "step" else "",
                                 c.strategy, c.phase) if p]
            place = self.op_place(op)
            return what + (f" at {place}" if place else "") + (f" [{', '.join(parts)}]" if parts else "")
        return c.label + (f" [{c.detail}]" if c.detail else "")

    def _factors(self, c: Cause, key) -> list[dict]:
        changes = self._details.get(c.index, [])
        n = len(c.step.operands)
        keys = [k for k, _ in c.inputs]
        out = []
        for ch in changes:
            if ch.tensor >= len(keys) or keys[ch.tensor] != key:
                continue
            out.append({
                "tensor": tensor_name(ch.tensor, n), "dim": ch.dim, "factor": ch.factor,
                "kind": ch.kind, "axes": ch.axes,
                "from": [{"value": self.key_name(keys[u]), "tensor": tensor_name(u, n), "dim": dim,
                          "key": keys[u]} for u, dim in ch.sources if u < len(keys)],
                "source": (tensor_name(ch.source_of_factor, n)
                           if ch.source_of_factor is not None else None),
            })
        return out

    def leaf(self, d: Derivation, name: str) -> Node:
        """A leaf: the annotation of the input a key's first sharding is.  The node is
        named as the output names the value (``input %9`` when the output has no such
        value); the annotation is cited with the input's own name and place."""
        text = _text(d.sharding)
        if isinstance(d.key, tuple):
            given = self.inputs.results.get(d.key[1])
            return Node(name, text, f"annotation in the input: {name} = {given}", kind="annotation")
        records = self.propagated.by_key.get(d.key, ())
        in_output = bool(self.outputs.by_key.get(d.key))

        def named(o) -> str:
            return name if in_output else f"input {o.names[0]}"
        for record in records:
            o = record.origin
            if o is not None and o.sharding is not None:
                cited = f"{o.names[0]} = {o.sharding} ({o.op} at {o.place})"
                return Node(named(o), text, f"annotation in the input: {cited}",
                            kind="annotation", cited=cited)
        origin = next((r.origin for r in records if r.origin is not None), None)
        for record in records:
            for rel in (record.origin.related if record.origin is not None else ()):
                if rel.sharding is not None:
                    cited = f"{rel.names[0]} = {rel.sharding} ({rel.op} at {rel.place})"
                    return Node(named(record.origin), text, f"annotation in the input: {cited}, "
                                f"moved onto {record.origin.names[0]} by the import passes",
                                kind="annotation", cited=cited, moved=record.origin.names[0])
        where = f" from {origin.names[0]} ({origin.op} at {origin.place})" if origin else ""
        if origin is None:
            made = next((m for r in records if (m := self.inputs.made_at(*r.tag_site[:2]))), None)
            where = f" from the {made.op} at {made.place}" if made is not None else ""
        return Node(name, text, f"set by the import passes{where}", kind="import")
