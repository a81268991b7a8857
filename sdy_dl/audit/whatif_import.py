"""When a what-if may start from the first propagation's imported module.

``propagate`` runs the import stages (the import pipeline, the call handling,
apply-sharding-constraints, sharding-group-import, pre-order-funcs) before
user-priority propagation, and the first propagation keeps a copy of what they
made (``Audit.imported``).  A what-if whose edits only give arguments of the
main function other shardings leaves what those stages do unchanged, when:

* each edit *sets* an argument that already has a sharding: apply-sharding-
  constraints reads only whether a value has one (``in_initially_sharded``),
  and a main argument is never a data-flow edge or its owner;
* the new sharding names the same mesh symbol as the old: symbol-dce keeps the
  same meshes, lift-inlined-meshes lifts and renames nothing more;
* the main function is not called: only called functions' argument shardings
  are read by propagate-sharding-from-func-to-call, flatten-call-graph and
  import-func-calls (add-func-data-flow-edges with dedup-functions-fully);
* the copy still holds the argument's input sharding (no stage rewrote it:
  remove-size-one-axes, a deduplicated mesh), and remove-size-one-axes would
  leave the new one as it is (its mesh has no axis of size one, no closed
  empty dim has a priority).

The other stages (constant-or-scalar-splitter, manual-axes-cleanup,
add-data-flow-edges, sharding-group-import, pre-order-funcs) read no argument
sharding of main.  Then the edited input's imported module is the copy with
the new shardings on main's arguments, and propagation starts from it
(:func:`imported_edit`); any other edit runs every stage.
"""

from __future__ import annotations


def imported_edit(audit, planned: list, op_at, main):
    """A function making a new copy of ``audit``'s imported module with the
    ``planned`` edits ((edit, target, new sharding),
    :func:`sdy_dl.audit.whatif.edit_input`'s) written, as the import stages would
    make it of the edited input; None when that is not known to hold (see the
    module docstring).  ``op_at``: the edited copy's op N (its pre-order number,
    ``_Target.op``), ``main``: its main function."""
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.mlir_ops import symbol_name
    from sdy_dl.ir.storage import read_func_attr, write_func_attrs

    if audit.imported is None or main is None or not planned:
        return None
    meshes = audit.propagated.meshes
    for edit, target, new in planned:
        old = target.current
        if (edit.kind != "set" or target.place != "arg" or target.op < 0
                or op_at(target.op) != main or old is None or new is None
                or not isinstance(new.mesh, str) or new.mesh != old.mesh
                or new.mesh not in meshes
                or any(axis.size == 1 for axis in meshes[new.mesh].axes)
                or any(not d.axes and d.is_closed and d.priority is not None for d in new.dims)):
            return None
    name = symbol_name(main)
    if audit.inputs.calls(name):   # (the edits change no call)
        return None
    with mlir_context():
        imported_main = _main_named(audit.imported, name)
        if imported_main is None:
            return None
        for _, target, _ in planned:
            if read_func_attr(imported_main, "arg_attrs", target.index) != target.current:
                return None
    shardings = {target.index: new for _, target, new in planned}

    def make():
        with mlir_context():
            copy = audit.imported.clone()
            write_func_attrs(_main_named(copy, name), "arg_attrs", shardings)
        return copy
    return make


def _main_named(module, name: str):
    """The main function of raw module ``module`` when it is named ``name`` (else None)."""
    from sdy_dl.ir.mlir_ops import main_of, symbol_name

    main = main_of([op.operation for op in module.regions[0].blocks[0].operations
                    if op.operation.name == "func.func"])
    return main if main is not None and symbol_name(main) == name else None
