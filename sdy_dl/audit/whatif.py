"""What if an annotation changes: edits of the input, re-propagated, and what changed.

An :class:`Edit` names a value as the propagated output prints it (``%3``,
``%arg0``, ``arg:0``, ``result:0``, ``@f:%2``; a JAX argument path such as
``params['w1']``) and says what to do with the *input* annotation that value
comes from:

* ``set``: the value's input annotation becomes the given sharding (a func
  argument or result's ``sdy.sharding``, an op result's ``sdy.sharding``, a
  constraint's own sharding);
* ``unset``: the annotation is removed;
* ``drop``: the ``sdy.sharding_constraint`` that defines the value is removed
  (its uses read its operand).

The output name is mapped to its input value through the audit's location
tags (:mod:`sdy_dl.audit.naming`), the edit is applied to a copy of the input
module as read, and the copy is propagated by the same pipeline with the same
options: the what-if's output *is* a full propagation of the edited input.
The steps the first propagation evaluated are reused (``Audit.step_memo``:
looked up by full step input), and so are its Datalog stages
(``Audit.stage_memo``: looked up by equal facts), so only steps and stages
whose inputs the edit changed reach the engine; edits of main's argument
shardings start from the first propagation's imported module, edited, when
the import stages would make exactly that of the edited input
(:mod:`sdy_dl.audit.whatif_import`).
:class:`WhatIf` lists what changed: the values whose sharding differs (aligned
by dataflow, :func:`sdy_dl.audit.diff.diff_modules`), the conflicts that
appeared or disappeared, each function's bytes per device before and after
(:mod:`sdy_dl.audit.memory`), and, for a propagation with explicit
collectives, the collectives added and removed with their bytes
(:mod:`sdy_dl.audit.collectives`).  When the edited output is proven to be the
first output with other shardings (:mod:`sdy_dl.audit.same_structure`), the
diff and the memory totals come from the ops whose attributes differ and the
first propagation's signatures and memory table (the same answer, read where
the outputs differ); when the export made it from the first output with
broadcasts made and erased too, from what the export did
(:mod:`sdy_dl.audit.edited_output`).

A sharding is sdy text (``<@mesh, [{"data"}, {}]>``) or, for JAX users,
``PartitionSpec`` text (``P('data', None)``; :mod:`sdy_dl.audit.partition_spec`).
A bad edit (unknown value, wrong rank, unknown mesh or axis, a constraint to
drop that is not one) is one :class:`~sdy_dl.errors.SdyError` listing the
valid choices.
"""

from __future__ import annotations

import contextlib
import functools
import re
from dataclasses import dataclass, field

from sdy_dl.audit.naming import input_position
from sdy_dl.errors import InvalidModule, SdyError, UsageError

#: Edit kinds, as the command line spells their options.
KINDS = {"set": "--set", "unset": "--unset", "drop": "--drop-constraint"}


@dataclass(frozen=True)
class Edit:
    """One edit: ``kind`` (set, unset, drop) of the input annotation of output value ``value``."""

    kind: str
    value: str
    sharding: str | None = None   # set: the new sharding (sdy or PartitionSpec text)

    @staticmethod
    def parse_set(text: str) -> "Edit":
        """``VALUE=SHARDING`` (the first ``=`` outside brackets and quotes splits)."""
        depth, quote = 0, None
        for i, c in enumerate(text):
            if quote:
                if c == "\\":
                    continue
                if c == quote:
                    quote = None
            elif c in "\"'":
                quote = c
            elif c in "[(<{":
                depth += 1
            elif c in "])>}":
                depth -= 1
            elif c == "=" and depth == 0:
                value, sharding = text[:i].strip(), text[i + 1:].strip()
                if value and sharding:
                    return Edit("set", value, sharding)
                break
        raise UsageError(f"--set {text!r}: expected VALUE=SHARDING, e.g. "
                       "arg:0=<@mesh, [{\"data\"}, {}]> or params['w1']=P('data', None)")

    def to_text(self) -> str:
        return f"{KINDS[self.kind]} {self.value}" + (f"={self.sharding}" if self.sharding else "")


@dataclass
class Applied:
    """An edit resolved against the input module: what it changed there."""

    edit: Edit
    target: str                  # the input value it edits, as the input prints it
    before: str | None           # its input annotation before (sdy text; None: none)
    after: str | None            # ... and after (None: removed)
    source: str = ""             # where in the program: python file.py:12, FILE:line,
                                 # argument PATH, a main result's JAX name or main result N
    place: str = "op"            # arg (main argument), result (main result), op (op result)
    op_name: str = ""            # the op defining the input value
    jax_line: str = ""           # for JAX programs: the line to write
    position: tuple | None = None   # (line, column) of its op in the input file, if known

    def to_json(self) -> dict:
        return {"edit": self.edit.to_text(), "target": self.target, "before": self.before,
                "after": self.after, "source": self.source, "jax": self.jax_line}


@dataclass
class WhatIf:
    """What changed between a propagation (``before``, an Audit) and the propagation
    of its edited input (``after``).

    The values that changed are compared at once; the rest when first asked for:
    which conflicts appeared and disappeared (found from each op's last step, a
    step's conflicts computed once per step input and kept for later what-ifs;
    ``conflicts_appeared`` and ``conflicts_disappeared`` give them whole, with
    their origins and the output's communication at the op), each function's
    bytes per device (``memory``) and the collectives added and removed."""

    applied: list[Applied]
    changed: list = field(default_factory=list)        # diff.Difference, before (A) / after (B)
    unchanged: int = 0
    before: object = field(default=None, repr=False)   # the two Audits
    after: object = field(default=None, repr=False)
    #: the values whose shardings changed, when the edited output is proven to be the
    #: first with other shardings (:mod:`sdy_dl.audit.same_structure`; None: not proven)
    same: object = field(default=None, repr=False)
    #: the edited output read where the export by difference made it differ from the
    #: first, when it has made or erased ops (:mod:`sdy_dl.audit.edited_output`)
    edited: object = field(default=None, repr=False)

    @functools.cached_property
    def _conflict_changes(self) -> tuple[list, list, list]:
        return _conflict_changes(self.before, self.after, _Names(self.before),
                                 _Names(self.after, self))

    @property
    def conflict_keys(self) -> tuple[list, list]:
        """(the conflicts that appeared, those that disappeared), each a
        :class:`ConflictKey`, in the order of their propagation's conflicts; found
        at the ops whose last steps differ only (:func:`_conflict_changes`)."""
        return self._conflict_changes[:2]

    @property
    def conflicts_not_compared(self) -> list:
        """The places whose ops' conflicts are not compared (:class:`Uncompared`):
        ops the two propagations do not tell apart there (see :class:`_OpIds`)."""
        return self._conflict_changes[2]

    @property
    def conflicts_appeared(self) -> list:
        """The conflicts of the edited propagation that the first did not have."""
        return _conflicts_with(self.after, self.conflict_keys[0])

    @property
    def conflicts_disappeared(self) -> list:
        """The conflicts of the first propagation that the edited one does not have."""
        return _conflicts_with(self.before, self.conflict_keys[1])

    @functools.cached_property
    def memory(self) -> list:
        """Per function: (function, before FunctionMemory, after FunctionMemory), bytes
        per device."""
        return _memory(self.before, self.after, self.same, self.edited)

    @functools.cached_property
    def _collectives(self) -> tuple:
        return _collectives(self.before, self.after)

    @property
    def collectives_added(self) -> list | None:
        """Explicit-collectives propagations only (else None): the collectives.Collective
        entries the edited output has and the first has not."""
        return self._collectives[0]

    @property
    def collectives_removed(self) -> list | None:
        return self._collectives[1]

    @property
    def collective_bytes(self) -> tuple | None:
        """(before, after) bytes per device of every collective (None: no explicit collectives)."""
        return self._collectives[2]

    def to_json(self) -> dict:
        """The what-if as JSON: what :meth:`lines` says (a conflict by its op, value,
        place, factor, axis, kind and kept axes, as text gives it,
        :meth:`ConflictKey.to_json`; ``conflicts_appeared`` has the whole conflicts)."""
        out = {"edits": [a.to_json() for a in self.applied],
               "changed": [d.to_json() for d in self.changed], "unchanged": self.unchanged,
               "conflicts_appeared": [k.to_json() for k in self.conflict_keys[0]],
               "conflicts_disappeared": [k.to_json() for k in self.conflict_keys[1]],
               "conflicts_not_compared": [u.to_json() for u in self.conflicts_not_compared],
               "memory": [{"function": f, "before": b.to_json() if b else None,
                           "after": a.to_json() if a else None} for f, b, a in self.memory]}
        if self.collectives_added is not None:
            out["collectives_added"] = [c.to_json() for c in self.collectives_added]
            out["collectives_removed"] = [c.to_json() for c in self.collectives_removed]
            out["collective_bytes_per_device"] = {"before": self.collective_bytes[0],
                                                  "after": self.collective_bytes[1]}
        return out

    def lines(self) -> list[str]:
        """The what-if as text, one fact a line."""
        out = []
        for a in self.applied:
            out.append(f"edit {a.edit.to_text()}: input {a.target} "
                       f"{a.before or '(none)'} -> {a.after or '(none)'}"
                       + (f" ({a.source})" if a.source else ""))
            if a.jax_line:
                out.append(f"  jax: {a.jax_line}")
        for d in self.changed:
            if d.kind == "different":
                name = d.a if d.a == d.b else f"{d.a} -> {d.b}"
                out.append(f"changed {name}: {d.a_sharding or '(none)'} -> {d.b_sharding or '(none)'}")
            elif d.a is not None:
                out.append(f"gone ({d.kind}) {d.a} = {d.a_sharding or '(none)'}")
            else:
                out.append(f"new ({d.kind}) {d.b} = {d.b_sharding or '(none)'}")
        appeared, disappeared = self.conflict_keys
        for word, keys in (("appeared", appeared), ("disappeared", disappeared)):
            out += [k.line(word) for k in keys]
        out += [u.line() for u in self.conflicts_not_compared]
        for fn, b, a in self.memory:
            if b is None or a is None or (b.arguments, b.results, b.peak_intermediates) != (
                    a.arguments, a.results, a.peak_intermediates):
                out.append(f"memory {fn} (bytes per device): " + "; ".join(
                    f"{what} {_num(b, attr)} -> {_num(a, attr)}" for what, attr in (
                        ("arguments", "arguments"), ("results", "results"),
                        ("peak intermediates (estimate)", "peak_intermediates"))))
        if self.collectives_added is not None:
            for word, found in (("added", self.collectives_added),
                                ("removed", self.collectives_removed)):
                for c in found:
                    out.append(f"collective {word}: {c.kind} {c.name} in {c.function} over "
                               f"[{', '.join(c.axes)}], {c.bytes or 0} bytes per device "
                               f"({c.in_sharding} -> {c.out_sharding}; for {c.input_place})")
            out.append(f"collectives: {self.collective_bytes[0]} -> {self.collective_bytes[1]} "
                       "bytes per device in all")
        out.append(f"{len(self.changed)} values changed, {self.unchanged} unchanged, "
                   f"{len(appeared)} conflicts appeared, {len(disappeared)} disappeared"
                   + (f", {len(self.conflicts_not_compared)} places not compared"
                      if self.conflicts_not_compared else ""))
        return out


# -- resolving an edit ----------------------------------------------------------

@dataclass
class _Target:
    """Where an edit lands in the input: op ``op`` (its number in the input's pre-order
    walk), result/argument ``index``; ``kind`` says which place holds the sharding."""

    place: str                 # "arg" (func argument), "result" (main result), "op" (op result)
    op: int                    # pre-order number (-1: the main function)
    index: int
    name: str                  # the input's name for it
    op_name: str
    rank: int
    current: object            # TensorSharding or None
    where: str
    position: tuple | None = None   # (line, column) of its op in the input file, if known


def resolve(audit, edit: Edit) -> _Target:
    """The input value ``edit`` targets (an error naming the valid choices if none)."""
    file = audit.file
    erased = _ERASED.match(edit.value.strip())
    if erased is not None:
        return _origin_target(audit, edit, _erased_origin(audit, erased.group(1)))
    out = audit.value(edit.value)   # unknown names: an error with close matches
    if out.value is None:   # a function result
        if out.func != "main":
            raise SdyError(f"{edit.value!r} is a result of {out.func}, which the pipeline may "
                           "clone or inline; edit the main function's results (result:N) or the "
                           "values inside", file=file)
        index = int(out.names[0].rsplit(":", 1)[1])
        return _main_result_target(audit, index)
    origin = _origin(audit, out)
    if origin is None:
        raise SdyError(f"{edit.value!r} has no value in the input module (the pipeline made it); "
                       "edit the value it was made from", file=file)
    return _origin_target(audit, edit, origin)


#: ``input %3``: an input value the pipeline erased, as ``explain`` names it
#: (``input %3 (erased by the pipeline)``).
_ERASED = re.compile(r"^input (\S+)(?: \(erased by the pipeline\))?$")


def _erased_origin(audit, name: str):
    """The input value the propagation saw that the input prints as ``name``."""
    found = {}
    for records in audit.propagated.by_key.values():
        for r in records:
            origin = r.origin
            if origin is not None and not r.is_edge and name in origin.names:
                found[origin.key] = origin
    if len(found) != 1:
        what = "no value" if not found else f"{len(found)} values"
        raise SdyError(f"{what} of the input print as {name} ('input NAME' names an input value "
                       "the pipeline erased, as explain names it; name other values as the output "
                       "prints them)", file=audit.file)
    return next(iter(found.values()))


def _origin_target(audit, edit: Edit, origin) -> _Target:
    """The target of ``edit`` on the input value ``origin``."""
    file = audit.file
    tag, res = origin.key
    op = int(tag[1:].split(".")[0])
    rank, current = _input_value_info(audit, origin.key)
    name = origin.names[0]
    if tag.startswith("a"):
        if origin.op != "func.func":
            raise SdyError(f"{edit.value!r} is a block argument of {origin.op}, which holds no "
                           "sharding; edit the value it is bound to", file=file)
        return _Target("arg", op, int(tag.split(".")[1]), name, origin.op, rank, current,
                       origin.place, input_position(origin.where))
    return _Target("op", op, res, name, origin.op, rank, current, origin.place,
                   input_position(origin.where))


def _input_value_info(audit, key) -> tuple[int, object]:
    """(rank, input sharding) of the input value tagged ``key``."""
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.mlir_ops import tensor_rank
    from sdy_dl.ir.storage import read_stored

    with mlir_context():
        owner, value, index, is_arg = audit.inputs.place(key)
        return tensor_rank(value.type), read_stored(owner, index, is_arg)


def _main_result_target(audit, index: int) -> _Target:
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.mlir_ops import func_result_types, tensor_rank
    from sdy_dl.ir.storage import read_func_attr

    from sdy_dl.audit.naming import result_info

    main = audit.inputs.main
    with mlir_context():
        types = func_result_types(main)
        if index >= len(types):
            raise SdyError(f"the input's main function has {len(types)} results", file=audit.file)
        # (where: JAX's name of the result, else its number)
        where = next((n for n in result_info(main, index) if n), f"main result {index}")
        return _Target("result", -1, index, f"result:{index}", "func.func",
                       tensor_rank(types[index]), read_func_attr(main, "res_attrs", index), where)


def parse_sharding(text: str, target: _Target, meshes: dict, file: str):
    """The sharding an edit gives (sdy or ``P(...)`` text), read and bound to a mesh of
    the module; whether it fits the value (rank, axes) is the MLIR verifier's
    question once it is written (:func:`_verified`)."""
    from sdy_dl.sharding import Mesh, format_symbol_ref, parse_tensor_sharding

    if text.lstrip().startswith(("P(", "PartitionSpec(")):
        from sdy_dl.audit.partition_spec import spec_to_sdy

        text = spec_to_sdy(text, target.rank, _mesh_for(target, meshes, file))
    try:
        sharding = parse_tensor_sharding(text)
    except SdyError as e:
        raise SdyError(f"sharding {text!r} for {target.name}: {e.message} (write sdy syntax, "
                       f"e.g. <@mesh, [{{\"data\"}}, {{}}]>, or P('data', None))", file=file) from None
    if not isinstance(sharding.mesh, Mesh) and sharding.mesh not in meshes:
        raise SdyError(f"sharding of {target.name}: unknown mesh "
                       f"{format_symbol_ref(sharding.mesh)}; meshes: "
                       f"{_choices(meshes)}", file=file)
    return sharding


def _verified(op, target: _Target, sharding, meshes: dict, file: str) -> None:
    """The edited op ``op`` verified by MLIR (a function's argument or result
    annotation: :func:`_verify_signature`; an sdy op, whose shardings are checked
    against the meshes with its symbol uses: with the module it is in); a failure
    is one error naming the value's rank and the mesh's axes."""
    from jaxlib.mlir import ir

    from sdy_dl.sharding import Mesh

    try:
        if target.place in ("arg", "result"):
            _verify_signature(op)
        else:
            op.verify()
            if op.name.startswith("sdy."):
                # (an sdy op checks its shardings against the meshes as a symbol user:
                # only verifying the module around it asks it)
                _module_of(op).verify()
    except ir.MLIRError as e:
        diags = list(getattr(e, "error_diagnostics", []) or [])
        message = diags[0].message.splitlines()[0] if diags else str(e).splitlines()[-1]
        mesh = sharding.mesh if isinstance(sharding.mesh, Mesh) else meshes.get(sharding.mesh)
        axes = ", ".join(a.to_text() for a in mesh.axes) if mesh is not None else ""
        raise SdyError(f"sharding of {target.name}: {message} (the value has rank {target.rank}; "
                       f"mesh {sharding.mesh_text()} has axes {axes or 'none'})", file=file) from None


def _module_of(op):
    """The outermost op around raw op ``op`` (the module copy it was written in)."""
    while op.parent is not None:
        op = op.parent
    return op


def _verify_signature(func) -> None:
    """Verify function ``func``'s attributes as verifying ``func`` does, without its
    body: on a copy declared without one (private, as a declaration must be) in a
    module of the meshes of ``func``'s module.  An argument or result annotation is
    verified from the function type and the meshes alone (the first failure, with
    its argument or result number, is the one ``func.verify()`` gives: the
    function's own attributes are verified before its body)."""
    from jaxlib.mlir import ir

    module = ir.Module.create(loc=func.location)
    for top in func.parent.regions[0].blocks[0].operations:
        if top.operation.name == "sdy.mesh":
            module.body.append(top.operation.clone())
    attributes = {name: func.attributes[name] for name in func.attributes}
    attributes["sym_visibility"] = ir.StringAttr.get("private")
    declared = ir.Operation.create("func.func", regions=1, attributes=attributes,
                                   loc=func.location)
    module.body.append(declared)
    declared.verify()


def _choices(meshes: dict) -> str:
    from sdy_dl.sharding import format_symbol_ref

    return "; ".join(f"{format_symbol_ref(n)} = {m.to_text()}"
                     for n, m in sorted(meshes.items())) or "none"


def _mesh_for(target: _Target, meshes: dict, file: str) -> str:
    """The mesh name a PartitionSpec edit means: the module's only mesh, or the
    mesh of the value's current annotation."""
    if target.current is not None and isinstance(target.current.mesh, str):
        return target.current.mesh
    if len(meshes) == 1:
        return next(iter(meshes))
    raise SdyError(f"P(...) for {target.name}: the module has meshes "
                   f"{', '.join('@' + n for n in sorted(meshes)) or '(none)'}; write the sharding "
                   "in sdy syntax to say which", file=file)


# -- applying edits to a copy of the input ----------------------------------------

def _planned(audit, edit: Edit, target: _Target, meshes: dict, seen: dict) -> tuple:
    """(edit, target, new sharding or None), once ``edit`` is checked against its target
    and the edits before it (``seen``: target -> edit)."""
    key = (target.place, target.op, target.index)
    if key in seen:
        raise SdyError(f"{edit.to_text()} and {seen[key].to_text()} edit the same input "
                       f"value {target.name}", file=audit.file)
    seen[key] = edit
    new = None
    if edit.kind == "set":
        new = parse_sharding(edit.sharding, target, meshes, audit.file)
    elif edit.kind == "unset":
        if target.current is None:
            raise SdyError(f"--unset {edit.value}: its input value {target.name} has no "
                           f"annotation to remove ({_annotated(audit)})", file=audit.file)
        if target.op_name == "sdy.sharding_constraint":
            raise SdyError(f"--unset {edit.value}: {target.name} is a sharding constraint; "
                           "use --drop-constraint to remove it", file=audit.file)
    elif edit.kind == "drop":
        if target.op_name != "sdy.sharding_constraint":
            raise SdyError(f"--drop-constraint {edit.value}: {target.name} is defined by "
                           f"{target.op_name}, not a sharding constraint; constraints: "
                           f"{_constraints(audit)}", file=audit.file)
    else:
        raise ValueError(f"edit kind {edit.kind!r}")
    return edit, target, new


@contextlib.contextmanager
def _located_at(target: _Target):
    """An error about an edit of ``target`` is located at its op in the input file
    (when the parser located it there)."""
    try:
        yield
    except SdyError as e:
        if target.position is not None:
            e.located(line=target.position[0], col=target.position[1])
        raise


@contextlib.contextmanager
def _located_at_main(audit):
    """An error about an edit that names no op of the input (a value it does not know, a
    main result) is located at the input's main function: an edit is typed on the
    command line, and main's signature is where arguments and results are annotated."""
    try:
        yield
    except SdyError as e:
        main = audit.inputs.main
        if e.line is None and not isinstance(e, UsageError) and main is not None:
            from sdy_dl.ir.context import mlir_context

            with mlir_context():
                at = input_position(main.location)
            if at is not None:
                e.located(line=at[0], col=at[1])
        raise


def edit_input(audit, edits: list[Edit]):
    """(the edited copy of the input module as an MLIR op, the applied edits, a
    function making an edited copy of ``audit``'s imported module when the import
    stages would make exactly it of the edited input, else None:
    :func:`~sdy_dl.audit.whatif_import.imported_edit`); nothing is edited in
    ``audit``'s modules."""
    from sdy_dl.audit.whatif_import import imported_edit
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.mlir_ops import main_of
    from sdy_dl.ir.walk import walk_pre

    if not edits:
        raise UsageError("no edit given (--set VALUE=SHARDING, --unset VALUE, "
                         "--drop-constraint VALUE)")
    meshes = audit.propagated.meshes
    planned, seen = [], {}
    with _located_at_main(audit):
        for edit in edits:
            target = resolve(audit, edit)
            with _located_at(target):
                planned.append(_planned(audit, edit, target, meshes, seen))
    with mlir_context():
        copy = audit.inputs.copy()
        tops = [op.operation for op in copy.regions[0].blocks[0].operations]
        main = main_of([op for op in tops if op.name == "func.func"])
        walked = []

        def op_at(n: int):
            """The copy's op ``n`` (pre-order; a top-level op found without a walk)."""
            at = audit.inputs.top_level_position(n)
            if at is not None:
                return tops[at]
            if not walked:
                walked.append(walk_pre(copy)[1:])
            return walked[0][n]

        applied = []
        drops = []
        for edit, target, new in planned:
            before = target.current.to_text() if target.current is not None else None
            applied.append(Applied(edit, target.name, before,
                                   None if edit.kind != "set" else new.to_text(), target.where,
                                   target.place, target.op_name, position=target.position))
            if edit.kind == "drop":
                drops.append(op_at(target.op))
            else:
                op = op_at(target.op) if target.op >= 0 else main
                _write(op, target, new)
                # (an unset too: a computation's result keeps its body's local shape)
                with _located_at(target):
                    _verified(op, target, new if new is not None else target.current, meshes,
                              audit.file)
        make_imported = None if drops else imported_edit(audit, planned, op_at, main)
        for op in drops:
            op.results[0].replace_all_uses_with(op.operands[0])
            op.erase()
    return copy, applied, make_imported


def _write(op, target: _Target, sharding) -> None:
    """Store (None: remove) ``sharding`` at ``target`` on the raw op ``op``."""
    from sdy_dl.ir.mlir_ops import tensor_rank
    from sdy_dl.ir.storage import (SHARDING_ATTR, read_per_value, results_attr, write_func_attr,
                                   write_stored)
    from sdy_dl.sharding import TensorSharding

    if target.place == "arg":
        write_func_attr(op, "arg_attrs", target.index, sharding)
    elif target.place == "result":
        write_func_attr(op, "res_attrs", target.index, sharding)
    elif sharding is not None:
        write_stored(op, target.index, False, [tensor_rank(r.type) for r in op.results], sharding)
    else:
        # Unset one result of an op's per-value sharding (a computation's
        # out_shardings): open and empty (what an op without the attribute has); an
        # op's sdy.sharding goes when no entry says more.
        attr = results_attr(op.name)
        current = read_per_value(op, attr)
        current[target.index] = TensorSharding.open_empty(current[target.index].mesh,
                                                          target.rank)
        if attr == SHARDING_ATTR and all(s.is_fully_open_empty for s in current):
            del op.attributes[SHARDING_ATTR]
        else:
            write_stored(op, target.index, False, [], current[target.index])


def _annotated(audit) -> str:
    """The output names of the values annotated in the input (for an error)."""
    names = [out.name for out in audit.outputs.values
             if (origin := _origin(audit, out)) is not None and origin.sharding is not None
             and origin.op != "sdy.sharding_constraint"
             # (a computation's block argument: an edit of it is refused)
             and not (origin.key[0].startswith("a") and origin.op != "func.func")]
    names += [f"result:{i}" for i, s in sorted(audit.inputs.results.items()) if s is not None]
    return "annotated: " + _few(names)


def _constraints(audit) -> str:
    """The output names of the values the input's sharding constraints define."""
    return _few([out.name for out in audit.outputs.values
                 if (origin := _origin(audit, out)) is not None
                 and origin.op == "sdy.sharding_constraint"])


def _few(names: list[str]) -> str:
    return ", ".join(names[:12]) + (", ..." if len(names) > 12 else "") if names else "none"


def _origin(audit, out):
    """The input value output value ``out`` comes from (None: none, or a function result)."""
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.mlir_ops import value_place

    if out.value is None:
        return None
    with mlir_context():
        owner, index, is_arg = value_place(out.value)
        site = (out.value.location, -1, None) if is_arg else (owner.location, index, owner.name)
        record = audit.propagated.lookup_at(*site)
    return record.origin if record is not None else None


# -- running a what-if ---------------------------------------------------------------

def print_input(copy) -> str:
    """The edited input module as text (as the module printer prints it, without locations)."""
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        return str(copy)


def whatif(audit, edits: list[Edit]):
    """(the :class:`~sdy_dl.audit.Audit` of the edited input, the :class:`WhatIf`)."""
    from sdy_dl.audit import Audit
    from sdy_dl.audit.diff import diff_edited, diff_modules
    from sdy_dl.audit.edited_output import edited_output
    from sdy_dl.audit.same_structure import sharding_changes, written_changes
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.loader import module_of_op

    copy, applied, make_imported = edit_input(audit, edits)
    imported = make_imported() if make_imported is not None else None
    with mlir_context():
        if imported is None:
            edited = module_of_op(copy.clone(), audit.file)   # (the pipeline edits its input)
        else:   # (propagation starts from ``imported``: the edited input is only read)
            edited = module_of_op(copy, audit.file)
            copy = edited.mlir.operation
            imported = module_of_op(imported, audit.file)
            imported.cloned = True   # (of ``audit.imported``, as every what-if's from it)
            imported.clone_of = audit.imported_index
    try:
        after = Audit(edited, audit.options, step_memo=audit.step_memo,
                      stage_memo=audit.stage_memo, imported=imported, rule_memo=audit.rule_memo,
                      places=audit.tracer.describe_op.places, fixpoints=audit.fixpoints,
                      propagated=audit.propagated, exported=audit.exported,
                      imported_again=make_imported)
    except InvalidModule as e:
        raise _refused(e, applied) from None
    except SdyError as e:
        if e.line is None or e.file != edited.file:
            raise   # (not a pass refusing an op of the edited input, but a rule file's line...)
        raise _refused(e, applied, "cannot be propagated") from None
    after.edited_input = copy
    after.like = audit
    after.whatif_memo = _Memo.of(audit).shared()
    _jax_lines(audit, applied)
    edits = getattr(after.module, "output_edits", None)   # (made from the first output)
    same = output = None
    if edits is not None and not edits.restructured:
        same = written_changes(audit.signatures, edits.written)
    elif edits is not None:
        output = edited_output(audit.signatures, edits, after.module.mlir.operation)
    if same is None and output is None:
        same = sharding_changes(audit.signatures, lambda: audit.text, after.module,
                                lambda: after.text)
    diffed = output.diff() if output is not None else None
    if diffed is not None:
        equal, changed = diffed
    elif same is not None:
        equal, changed = diff_edited(audit.signatures, same)
    else:   # other ops too: the edited output's signatures, made like the first's
        equal, changed = diff_modules(audit.module, after.module, audit.signatures,
                                      signatures_b=after.signatures)
    return after, WhatIf(applied, changed, equal, audit, after, same, output)


class _Memo:
    """What a propagation's what-ifs reuse besides its signatures and memory layouts
    (the Audit's): its collective ledger, each op's and data-flow edge's last step and
    each function's memory totals, and, shared by
    the what-ifs made from it, the conflicts of each step input (``steps``:
    meshes' text -> {StepInput: the conflicts' (factors, axis, kind, kept
    axes)}; a step's conflicts depend only on its input and the meshes)."""

    def __init__(self, steps: dict | None = None):
        self.steps = steps if steps is not None else {}
        self.ledger = None
        self.last_steps = None
        self.tags = None     # its op keys' tag of each op description (conflicts.OpKeys)
        self.totals = None   # each function's memory totals (its memory layouts')
        self.by_name = None  # its module's ops, data-flow edges by name (_tags_at)
        self.tags_by_place = {}   # (edge, name) -> place -> its tags there (_tags_at)
        self.last_edges = None   # edge tag -> its last visit (_last_edges)
        self.first_values = None   # tracer key -> its output value (naming.first_values)

    @staticmethod
    def of(audit) -> "_Memo":
        memo = getattr(audit, "whatif_memo", None)
        if memo is None:
            memo = audit.whatif_memo = _Memo()
        return memo

    def shared(self) -> "_Memo":
        """A memo for a what-if's propagation: its own, sharing the step conflicts."""
        return _Memo(self.steps)


def _last_steps(audit, like=None) -> dict:
    """Each op's last step by op (:func:`~sdy_dl.audit.conflicts.last_visit_by_op`),
    kept for later what-ifs.  ``like``: a propagation whose tags name the same ops
    (the same ``tags_made``) and whose last steps were found: the tags of the op
    descriptions the two share are its (:class:`~sdy_dl.audit.conflicts.OpKeys`),
    not read again."""
    from sdy_dl.audit.conflicts import OpKeys, last_visit_by_op

    memo = _Memo.of(audit)
    if memo.last_steps is None:
        known = _Memo.of(like).tags if like is not None else None
        memo.tags = dict(known) if known is not None else {}
        memo.last_steps = last_visit_by_op(audit.explainer, OpKeys(audit.explainer, memo.tags))
    return memo.last_steps


def _changed_steps(before, after) -> tuple[list, list] | None:
    """(the last steps of ``before``'s ops whose last step differs in ``after``, and
    those of ``after``'s ops whose last step differs in ``before``), each in
    first-visit order; an op only one has, or an untagged op's step, differs.
    None when the two propagations' tags may name other ops
    (:attr:`~sdy_dl.audit.naming.PropagationIndex.tags_made`: a what-if that
    did not start from the first's imported module) or their meshes differ.

    A step's conflicts depend only on its input and the meshes: an op whose last
    step is the same on both sides has the same conflicts there."""
    from sdy_dl.passes.propagation.basic_propagation import mesh_key

    if (before.propagated.tags_made is not after.propagated.tags_made
            or mesh_key(before.propagated) != mesh_key(after.propagated)):
        return None
    b = _last_steps(before)
    a = _last_steps(after, like=before)

    def differing(mine: dict, theirs: dict) -> list:
        # (a replayed visit's step is the first's own cause: most are the same object)
        keys = list(mine)
        if set(map(type, keys)) == {str}:
            others = map(theirs.get, keys)
        else:   # (an untagged op's step, keyed by its id: differs)
            others = (theirs.get(k) if isinstance(k, str) else None for k in keys)
        return [cause for cause, other in zip(mine.values(), others)
                if other is not cause and (other is None or (
                    other.step is not cause.step and other.step != cause.step))]
    return differing(b, a), differing(a, b)


def _conflict_changes(before, after, names_b, names_a) -> tuple[list, list, list]:
    """(:attr:`WhatIf.conflict_keys`, :attr:`WhatIf.conflicts_not_compared`): the
    conflicts at the ops whose last steps differ
    (:func:`_changed_steps`; all ops when that is not known) on each side, each a
    :class:`ConflictKey`, compared by what names the op in both propagations
    (:class:`_OpIds`) and what conflicts there: an op whose last step is the same
    on both sides has the same conflicts on both.  The data-flow edges'
    conflicts likewise (:func:`_edge_conflict_changes`).  The conflicts of ops
    not told apart are not compared: their places are listed instead.
    ``names_b``, ``names_a``: each side's :class:`_Names`."""
    ids = _OpIds(before, after, (names_b, names_a))
    changed = _changed_steps(before, after)
    if changed is None:
        changed = list(_last_steps(before).values()), list(_last_steps(after).values())
    ops = _compared(_keyed(before, changed[0], ids), _keyed(after, changed[1], ids))
    edges = _edge_conflict_changes(before, after, ids)
    return ops[0] + edges[0], ops[1] + edges[1], list(ids.uncompared.values())


@dataclass(frozen=True, eq=False)
class ConflictKey:
    """A conflict as a what-if compares and prints it: at op ``op`` (at ``place``),
    on ``factor`` (``axis``), of ``kind``, ``kept`` the axes every tensor kept.
    ``same``: what it is compared by: what names the op in both propagations
    (:class:`_OpIds`) and the conflict's parts.  ``tag``: the op's (a data-flow
    edge's, ``edge``) ``px:`` tag in its own propagation."""

    op: str
    place: str
    factor: str
    axis: str
    kind: str
    kept: tuple
    same: tuple
    tag: str
    edge: bool = False
    names: object = field(default=None, repr=False)   # its propagation's _Names
    cause: object = field(default=None, repr=False)   # the op's last step there

    @functools.cached_property
    def value(self) -> str:
        """The op's first result (else operand) as its propagation's output names it,
        as ``conflicts`` names the op."""
        from sdy_dl.audit.conflicts import op_value

        return op_value(self.names, self.cause)

    def line(self, word: str) -> str:
        """The what-if's text line of the conflict (``word``: appeared, disappeared)."""
        axis = f" axis {self.axis}" if self.axis else ""
        kept = "; ".join(f"{f}: [{', '.join(a)}]" for f, a in self.kept)
        return (f"conflict {word}: {self.op} at {self.value} ({self.place}): "
                f"factor {self.factor}{axis} "
                f"({self.kind}), kept {kept or 'nothing'}")

    def to_json(self) -> dict:
        """What :meth:`line` says."""
        return {"op": self.op, "value": self.value, "place": self.place,
                "factor": self.factor, "axis": self.axis, "kind": self.kind,
                "kept": {f: list(axes) for f, axes in self.kept}}


@dataclass
class Uncompared:
    """A place whose ops' (data-flow edges') conflicts a what-if does not compare:
    op ``op`` at ``place`` has ``ops`` ops there in (before, after), not told apart
    (:class:`_OpIds`), with ``conflicts`` conflicts in all."""

    op: str
    place: str
    ops: tuple
    conflicts: list = field(default_factory=lambda: [0, 0])

    def line(self) -> str:
        return (f"conflicts not compared: {self.op} at {self.place}: its ops there are not "
                f"told apart ({self.ops[0]} -> {self.ops[1]} ops, with {self.conflicts[0]} "
                f"-> {self.conflicts[1]} conflicts)")

    def to_json(self) -> dict:
        return {"op": self.op, "place": self.place, "ops": list(self.ops),
                "conflicts": list(self.conflicts)}


class _Names:
    """A tracer key's name in a propagation's output (``audit``), as
    :meth:`~sdy_dl.audit.explain.Explainer.key_name` gives it, without indexing a
    what-if's output (``whatif``: the :class:`WhatIf` whose edited propagation
    ``audit`` is) when the first's names it: a what-if from the first's imported
    module (the same tracer keys) whose output is proven the first's with other
    shardings (``same``) names a key as the first does, and one whose export
    made and erased ops (``edited``) as the edits moved the first's name of it
    (:meth:`~sdy_dl.audit.edited_output.EditedOutput.name`); one whose output's
    signatures were made (the diff's) by their value table
    (:func:`~sdy_dl.audit.naming.first_values`)."""

    def __init__(self, audit, whatif: "WhatIf | None" = None):
        self.audit, self.whatif = audit, whatif

    def __call__(self, key) -> str:
        audit, w = self.audit, self.whatif
        if w is None or "outputs" in vars(audit) or (
                isinstance(key, tuple) and key[:1] == ("result",)):   # (result:N: not indexed)
            return audit.explainer.key_name(key)
        shared = w.before.propagated.tags_made is audit.propagated.tags_made
        if shared and w.same is not None:
            return w.before.explainer.key_name(key)
        if shared and w.edited is not None:
            from sdy_dl.audit.edited_output import Shared

            outs = w.before.outputs.by_key.get(key)
            value = outs[0].table_key if outs else None
            if value is not None and value[1] != -2 and value not in w.edited.erased:
                with contextlib.suppress(Shared):
                    return w.edited.name(value)
        elif "signatures" in vars(audit):
            from sdy_dl.audit.naming import first_values

            memo = _Memo.of(audit)
            if memo.first_values is None:
                memo.first_values = first_values(audit.value_table, audit.propagated)
            value = memo.first_values.get(key)
            if value is not None:
                return audit.signatures.name(value)
        return audit.explainer.key_name(key)


class _OpIds:
    """What names an op (or data-flow edge) in both propagations of a what-if: its
    ``px:`` tag, when the two share their tags (both start from the first's
    imported module: :attr:`~sdy_dl.audit.naming.PropagationIndex.tags_made`);
    else its name, place and number among all the ops of that name at that place
    in the module each propagated, in its order (:func:`_tags_at`), when both
    have as many there: the import passes keep the order of the ops at a place
    when only annotations differ; else none (:meth:`of` gives None; an untagged
    op too): not told apart, and the conflicts there are not compared
    (``uncompared``: (edge, name, place) -> its :class:`Uncompared`, filled as
    they are found)."""

    def __init__(self, before, after, names: tuple = (None, None)):
        """``names``: each side's :class:`_Names` (for the keys' values)."""
        self.audits = (before, after)
        self.names = names
        self.shared = before.propagated.tags_made is after.propagated.tags_made
        self._groups: dict = {}   # (edge, name, place) -> each side's tags there, numbered
        self.uncompared: dict = {}

    def of(self, side: int, tag: str | None, edge: bool, name: str, place: str):
        """The identity of the op (``edge``: data-flow edge) tagged ``tag`` (None:
        untagged) of propagation ``side`` (0: before, 1: after); None: not told apart."""
        if self.shared:
            return None if tag is None else ("edge", tag) if edge else tag
        group = self.group(edge, name, place)
        if tag not in group[side] or len(group[0]) != len(group[1]):
            return None
        return (edge, name, place, group[side][tag])

    def group(self, edge: bool, name: str, place: str) -> tuple:
        """Each side's tags of all its ops (edges) of ``name`` at ``place``, each with
        its number there (the order of :func:`_tags_at`)."""
        at = (edge, name, place)
        if at not in self._groups:
            self._groups[at] = tuple({t: n for n, t in enumerate(_tags_at(a, *at))}
                                     for a in self.audits)
        return self._groups[at]


def _tags_at(audit, edge: bool, name: str, place: str) -> list:
    """The tags of all the ops (data-flow edges, named as
    :func:`~sdy_dl.audit.conflicts.last_edge_visits` names them) of ``name`` at
    ``place`` in the module ``audit`` propagated, visited or not, in its order:
    each name's ops are sorted by place once, kept for later what-ifs."""
    from sdy_dl.audit.conflicts import edge_name
    from sdy_dl.audit.naming import place_in
    from sdy_dl.ir.context import mlir_context

    memo = _Memo.of(audit)
    if memo.by_name is None:
        ops, edges = {}, {}     # name -> its (tag, location)s
        for tag, op_name, loc in audit.propagated.op_locations:
            ops.setdefault(op_name, []).append((tag, loc))
        for link in audit.propagated.links:
            if link.owner:
                edges.setdefault(edge_name(link.owner, link.edge), []).append(
                    (link.tag, link.owner_loc))
        memo.by_name = ops, edges
    places = memo.tags_by_place.get((edge, name))
    if places is None:
        places = memo.tags_by_place[(edge, name)] = {}
        with mlir_context():
            for tag, loc in memo.by_name[edge].get(name, ()):
                places.setdefault(place_in(loc), []).append(tag)
    return places.get(place, [])


def _keyed(audit, causes: list, ids: _OpIds, edges: list | None = None) -> dict:
    """The :class:`ConflictKey` of every conflict at the last steps ``causes`` (of
    the data-flow edges whose last visits are ``edges``, when given), by what it
    is compared by, in the order of ``causes``; those of ops not told apart
    counted in ``ids.uncompared`` instead."""
    side = ids.audits.index(audit)
    found = _conflicts_by_step(audit, causes)
    out = {}
    for n, cause in enumerate(causes):
        parts = found[cause.step]
        if not parts:
            continue
        e = edges[n] if edges is not None else None
        name, place = (e.name, e.place) if e is not None else (cause.op["name"],
                                                               cause.op["place"])
        tag = cause.op.get("tag") if cause.op is not None else None
        ident = ids.of(side, tag, e is not None, name, place)
        if ident is None:
            at = (e is not None, name, place)
            if at not in ids.uncompared:
                ids.uncompared[at] = Uncompared(name, place, tuple(map(len, ids.group(*at))))
            ids.uncompared[at].conflicts[side] += len(parts)
            continue
        for part in parts:
            same = (ident,) + tuple(part)
            out.setdefault(same, ConflictKey(name, place, *part, same, tag, e is not None,
                                             ids.names[side], cause))
    return out


def _conflicts_by_step(audit, causes: list) -> dict:
    """Each step input of the last steps ``causes`` -> its conflicts' parts
    (factors, axis, kind, kept axes), without their values, origins, order or
    communication: looked up by step input (and meshes) first; only steps no
    propagation of the what-ifs evaluated before are evaluated for their factor
    records."""
    from sdy_dl.audit.conflicts import step_conflicts
    from sdy_dl.audit.steps import StepRecords
    from sdy_dl.passes.propagation.basic_propagation import mesh_key

    memo = _Memo.of(audit)
    known = memo.steps.setdefault(mesh_key(audit.propagated), {})
    missing = {}    # step input -> a cause that evaluated it
    for cause in causes:
        if cause.step not in known:
            missing.setdefault(cause.step, cause)
    if missing:
        records = StepRecords(list(missing), audit.propagated.meshes)
        for step, cause in missing.items():
            known[step] = [(c.factor, c.axis, c.kind, _kept(c))
                           for c in step_conflicts(audit.explainer, cause, records, named=False)]
    return {cause.step: known[cause.step] for cause in causes}


def _last_edges(audit) -> dict:
    """Each data-flow edge's last visit by tag
    (:func:`~sdy_dl.audit.conflicts.last_edge_visits`), kept for later what-ifs."""
    from sdy_dl.audit.conflicts import last_edge_visits

    memo = _Memo.of(audit)
    if memo.last_edges is None:
        memo.last_edges = {e.cause.op["tag"]: e for e in last_edge_visits(audit.explainer)}
    return memo.last_edges


def _edge_conflict_changes(before, after, ids: _OpIds) -> tuple[list, list]:
    """The conflicts at data-flow edges (their last visits,
    :func:`~sdy_dl.audit.conflicts.last_edge_visits`) that appeared and
    disappeared, as :func:`_conflict_changes` finds the ops': only the edges
    whose last step differs when the two propagations share their tags and
    meshes."""
    from sdy_dl.passes.propagation.basic_propagation import mesh_key

    b, a = _last_edges(before), _last_edges(after)
    compare = ids.shared and mesh_key(before.propagated) == mesh_key(after.propagated)

    def differing(mine: dict, theirs: dict) -> list:
        return [e for tag, e in mine.items() if not compare or tag not in theirs
                or theirs[tag].cause.step != e.cause.step]
    changed_b, changed_a = differing(b, a), differing(a, b)
    return _compared(_keyed(before, [e.cause for e in changed_b], ids, changed_b),
                     _keyed(after, [e.cause for e in changed_a], ids, changed_a))


def _compared(b: dict, a: dict) -> tuple[list, list]:
    """(the keys of ``a`` not in ``b``, those of ``b`` not in ``a``)."""
    return [k for s, k in a.items() if s not in b], [k for s, k in b.items() if s not in a]


def _conflicts_with(audit, keys: list) -> list:
    """The conflicts of ``audit`` (whole, :meth:`Audit.conflicts`) of these keys, one
    per key: only those of the ops the keys name are made."""
    if not keys:
        return []
    wanted = {(k.tag, k.edge, k.factor, k.axis, k.kind, k.kept): k for k in keys}
    found = {}
    for c in audit.conflicts(at={(k.op, k.place) for k in keys}):
        k = wanted.get((c.tag, c.edge_of is not None, c.factor, c.axis, c.kind, _kept(c)))
        if k is not None:
            found.setdefault(id(k), c)
    return [found[id(k)] for k in keys if id(k) in found]


def _num(row, attr) -> str:
    return "-" if row is None else str(getattr(row, attr))


def _memory(before, after, same=None, edited=None) -> list:
    """(function, before row, after row) of the two audits' per-function memory;
    ``same``: the values whose shardings changed, when the two outputs have the same
    structure (the after rows are the before rows with those values' remade);
    ``edited``: the edited output as the export by difference made it
    (:class:`~sdy_dl.audit.edited_output.EditedOutput`: the before layouts with
    its edits); else the after rows are those of its memory layouts (the before
    rows of the values on twin ops, the others' made)."""
    from sdy_dl.audit.memory import functions_with_shardings

    memo = _Memo.of(before)
    if memo.totals is None:
        memo.totals = [x.totals() for x in before.memory_layouts]
    b = {f.function: f for f in memo.totals}
    rows = edited.functions(before, before.memory_layouts, memo.totals) \
        if edited is not None else None
    if rows is None and same is not None:
        rows = functions_with_shardings(before, before.memory_layouts, same.shardings,
                                        memo.totals)
    elif rows is None:
        rows = [x.totals() for x in after.memory_layouts]
    a = {f.function: f for f in rows}
    return [(fn, b.get(fn), a.get(fn)) for fn in list(b) + [f for f in a if f not in b]]


def _ledger_entries(audit) -> list:
    """The entries of ``audit``'s collective ledger (kept for later what-ifs: a
    ``suggest`` candidate is one)."""
    memo = _Memo.of(audit)
    if memo.ledger is None:
        memo.ledger = audit.collectives().entries
    return memo.ledger


def _collectives(before, after) -> tuple:
    """The collectives an explicit-collectives what-if added and removed: matched by
    (function, kind, axes, operand and result shardings, shape, input place)."""
    from sdy_dl.pipeline import ENABLE_INSERT_EXPLICIT_COLLECTIVES

    if not before.options[ENABLE_INSERT_EXPLICIT_COLLECTIVES]:
        return None, None, None

    def key(c):
        return (c.function, c.kind, tuple(c.axes), c.in_sharding, c.out_sharding, c.shape,
                c.input_place)

    old, new = _ledger_entries(before), after.collectives().entries
    rest = {}
    for c in new:
        rest.setdefault(key(c), []).append(c)
    removed = []
    for c in old:
        if rest.get(key(c)):
            rest[key(c)].pop()
        else:
            removed.append(c)
    left = {id(x) for xs in rest.values() for x in xs}
    return ([c for c in new if id(c) in left], removed,
            (sum(c.bytes or 0 for c in old), sum(c.bytes or 0 for c in new)))


def _conflict_key(c, ids: _OpIds | None = None, side: int = 0) -> tuple | None:
    """What a what-if compares conflict ``c`` (a whole
    :class:`~sdy_dl.audit.conflicts.Conflict` of propagation ``side`` of ``ids``)
    by, as :attr:`ConflictKey.same`: its op's identity and its factors, axis,
    kind and kept axes; None: its op is not told apart.  ``ids`` None: its op's
    identity is its tag (propagations sharing their tags)."""
    edge = c.edge_of is not None
    ident = (ids.of(side, c.tag, edge, c.op, c.place) if ids is not None
             else ("edge", c.tag) if edge else c.tag)
    return None if ident is None else (ident, c.factor, c.axis, c.kind, _kept(c))


def _kept(c) -> tuple:
    return tuple(sorted((f, tuple(axes)) for f, axes in c.kept.items()))


def _refused(e: SdyError, applied: list[Applied], what: str = "is invalid once propagated"
             ) -> SdyError:
    """A propagation of the edited input the verifier refused (after the passes), or
    a pass refused at an op: the edits' error, at the op named when it is a line of
    the input, else at the first edited op."""
    edits = "; ".join(a.edit.to_text() for a in applied)
    at = next((a.position for a in applied if a.position is not None), None)
    out = SdyError(f"the edited input ({edits}) {what}: {e.message}",
                   file=e.file, line=e.line, col=e.col)
    return out.located(*((None,) + tuple(at) if at is not None else ()))


def _jax_lines(audit, applied: list[Applied]) -> None:
    """For JAX programs (ops at python source lines, arguments with paths), the line
    each edit asks the user to write."""
    from sdy_dl.audit.partition_spec import edit_line

    for a in applied:
        a.jax_line = edit_line(a) or ""
