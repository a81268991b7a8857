"""A what-if's model index made from the first propagation's (``index_like``)
is the one ``index_module`` reads of the what-if's module, field by field."""

from __future__ import annotations

import pytest

import jax_programs
from sdy_dl import propagate
from sdy_dl.ir.context import mlir_context
from sdy_dl.ir.loader import module_of_op
from sdy_dl.ir.model import Module, index_like


def _place(block):
    """A block by its place: (owner op, region number, block number)."""
    region = block.region
    owner = region.owner
    return owner.oid, owner.regions.index(region), region.blocks.index(block)


def _assert_same_index(derived: Module, fresh: Module) -> None:
    assert list(derived.meshes.items()) == list(fresh.meshes.items())
    assert [op.oid for op in derived.mesh_ops] == [op.oid for op in fresh.mesh_ops]
    assert {n: op.oid for n, op in derived.funcs.items()} == {
        n: op.oid for n, op in fresh.funcs.items()}
    assert list(derived.funcs) == list(fresh.funcs)
    assert len(derived.ops) == len(fresh.ops) and len(derived.values) == len(fresh.values)
    for d, f in zip(derived.ops, fresh.ops):
        assert (d.oid, d.name, d.mlir) == (f.oid, f.name, f.mlir)
        assert [v.vid for v in d.operands] == [v.vid for v in f.operands]
        assert [v.vid for v in d.results] == [v.vid for v in f.results]
        assert (d.parent and d.parent.oid) == (f.parent and f.parent.oid)
        assert (d.block and _place(d.block)) == (f.block and _place(f.block))
        assert [[([a.vid for a in b.args], [o.oid for o in b.ops]) for b in r.blocks]
                for r in d.regions] == [[([a.vid for a in b.args], [o.oid for o in b.ops])
                                         for b in r.blocks] for r in f.regions]
        assert all(r.owner is d for r in d.regions)
    for i, (d, f) in enumerate(zip(derived.values, fresh.values)):
        assert d.vid == f.vid == i
        assert (d.shape, d.static, d.index, d.mlir, d.mlir_type, d.pointer) == (
            f.shape, f.static, f.index, f.mlir, f.mlir_type, f.pointer)
        assert (d.defining_op and d.defining_op.oid) == (f.defining_op and f.defining_op.oid)
        assert (d.block and _place(d.block)) == (f.block and _place(f.block))
        assert [(op.oid, k) for op, k in d.uses] == [(op.oid, k) for op, k in f.uses]
        assert d.name == f.name and d.type_text == f.type_text


@pytest.mark.parametrize("program", ["training_step", "grad_scan_helpers",
                                     "shard_map_scan_pipeline"])
def test_index_of_a_copy_of_the_imported_module_is_read_from_the_first(program):
    result = propagate(jax_programs.lowered(program), engine="python")
    audit = result.audit
    with mlir_context():
        derived = module_of_op(audit.imported.clone(), audit.file)
        assert index_like(derived, audit.propagated.index_model)
        fresh = Module(derived.mlir, audit.file)   # (the same MLIR, read again)
        _assert_same_index(derived, fresh)
        # (the use-list order is not program order: it is read, not copied)
        assert any([(op.oid, k) for op, k in v.uses] != sorted((op.oid, k) for op, k in v.uses)
                   for v in fresh.values)


def test_a_whatif_from_the_imported_module_takes_its_index_from_the_first():
    before = propagate(jax_programs.lowered("mlp"), engine="python")
    after, _ = before.whatif(set={"arg:0": '<@mesh, [{"model"}, {}]>'})
    assert after.audit.import_reused
    model, first = after.audit.propagated.index_model, before.audit.propagated.index_model
    assert model["ops"] is not first["ops"]
    # (made from the first's: the types are the first's, not read again)
    assert model["values"][0].mlir_type is first["values"][0].mlir_type
    with mlir_context():
        derived = module_of_op(after.audit.imported.clone(), after.audit.file)
        fresh = Module(derived.mlir, after.audit.file)
        assert index_like(derived, model)
        _assert_same_index(derived, fresh)


def test_a_module_of_another_structure_is_not_indexed_from_the_first():
    first = propagate(jax_programs.lowered("mlp"), engine="python").audit
    other = propagate(jax_programs.lowered("while_loop"), engine="python").audit
    with mlir_context():
        module = module_of_op(other.imported.clone(), other.file)
        assert not index_like(module, first.propagated.index_model)
        assert not module.is_indexed()


BARRIER = """func.func @main(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %0:2 = stablehlo.optimization_barrier %a, %b : tensor<8xf32>, tensor<8xf32>
  %1 = stablehlo.add %0#0, %0#1 : tensor<8xf32>
  return %1 : tensor<8xf32>
}
"""
ONE_RESULT = BARRIER.replace("%0:2 = stablehlo.optimization_barrier %a, %b : tensor<8xf32>, "
                             "tensor<8xf32>", "%0 = stablehlo.optimization_barrier %a : "
                             "tensor<8xf32>").replace("%0#0, %0#1", "%0, %b")


def test_a_module_whose_blocks_have_other_arguments_is_not_indexed_from_the_first():
    """As many ops and results, but the function has two arguments where the first's
    has one."""
    from sdy_dl.ir import parse_module_text

    one = "func.func @main(%a: tensor<8xf32>) -> tensor<8xf32> {\n  return %a : tensor<8xf32>\n}\n"
    two = one.replace("%a: tensor<8xf32>)", "%a: tensor<8xf32>, %b: tensor<8xf32>)")
    first, other = parse_module_text(one, "a"), parse_module_text(two, "b")
    assert len(parse_module_text(two, "c").ops) == len(first.ops)
    with mlir_context():
        assert not index_like(other, first.index_fields())
        assert not other.is_indexed()


def test_a_module_whose_ops_have_other_names_is_not_indexed_from_the_first():
    """As many ops, results, regions, blocks and block arguments, but an op of
    another name."""
    from sdy_dl.ir import parse_module_text

    other_text = BARRIER.replace("stablehlo.add", "stablehlo.subtract")
    first, other = parse_module_text(BARRIER, "a"), parse_module_text(other_text, "b")
    again = parse_module_text(other_text, "c")
    assert [len(o.results) for o in again.ops] == [len(o.results) for o in first.ops]
    with mlir_context():
        assert not index_like(other, first.index_fields())
        assert not other.is_indexed()


def test_a_whatifs_clone_of_the_imported_module_is_indexed_without_reading_names(monkeypatch):
    """Its ops are the first's by construction (``Module.clone_of``), in a what-if of a
    what-if too; a module not known to be a clone has its names compared."""
    import sdy_dl.ir.model as model

    compared = []
    same_names = model._same_names
    monkeypatch.setattr(model, "_same_names", lambda *a: compared.append(1) or same_names(*a))
    before = propagate(jax_programs.lowered("mlp"), engine="python")
    after, _ = before.whatif(set={"arg:0": '<@mesh, [{"model"}, {}]>'})
    again, _ = after.whatif(set={"arg:0": '<@mesh, [{}, {"model"}]>'})
    assert after.audit.import_reused and again.audit.import_reused and compared == []
    assert after.audit.propagated._first is before.audit.propagated
    assert again.audit.propagated._first is after.audit.propagated
    with mlir_context():
        derived = module_of_op(before.audit.imported.clone(), before.audit.file)
        assert index_like(derived, before.audit.propagated.index_model) and compared == [1]


def test_a_module_whose_ops_have_other_result_counts_is_not_indexed_from_the_first():
    """As many ops, but one has one result where the first's has two: refused, and a
    propagation index given the first's indexes the module as its own."""
    from sdy_dl.audit.naming import InputIndex, PropagationIndex
    from sdy_dl.ir import parse_module_text

    assert ONE_RESULT != BARRIER
    first, other = parse_module_text(BARRIER, "a"), parse_module_text(ONE_RESULT, "b")
    with mlir_context():
        first_index = PropagationIndex(first, InputIndex(first))
        assert not index_like(other, first_index.index_model)
        assert not other.is_indexed()
        got = PropagationIndex(other, InputIndex(other), first=first_index)
        assert len(got.keys) == len(other.values) == len(Module(other.mlir, "b").values)


@pytest.mark.parametrize("program, nested", [("training_step", False),
                                             ("grad_scan_helpers", True)])
def test_a_clone_lists_its_uses_in_reverse_program_order(program, nested):
    """A clone's use lists, in reverse program order (not read), are what
    ``index_module`` reads of it, for a clone of a clone too (``nested``: with
    values used several times in a nested region); the module a what-if
    propagates is such a clone."""
    result = propagate(jax_programs.lowered(program), engine="python")
    audit = result.audit
    source = audit.imported
    with mlir_context():
        for _ in range(2):
            derived = module_of_op(source.clone(), audit.file)
            assert index_like(derived, audit.propagated.index_model, cloned=True)
            fresh = Module(derived.mlir, audit.file)
            _assert_same_index(derived, fresh)
            source = derived.mlir.operation
        several = [v for v in fresh.values if len(v.uses) > 1]
        assert several
        assert nested == any(op.parent is not None and op.parent.name != "func.func"
                             for v in several for op, _ in v.uses)


@pytest.mark.parametrize("ops_kept", [True, False])
def test_an_edited_clone_has_its_use_lists_read(ops_kept):
    """Writing an operand of a clone (an edit that keeps its ops) puts that use
    first in its value's list: once invalidated the module is no longer taken
    for a fresh clone, and its index made from the first reads the use lists."""
    audit = propagate(jax_programs.lowered("training_step"), engine="python").audit
    first = audit.propagated.index_model
    with mlir_context():
        module = module_of_op(audit.imported.clone(), audit.file)
        module.cloned = True
        value = next(v for v in first["values"] if len(v.uses) > 1)
        op, k = min(value.uses, key=lambda use: use[0].oid)   # (its first use)
        operation = module.ops[op.oid].mlir
        operation.operands[k] = operation.operands[k]
        module.invalidate(ops_kept=ops_kept)
        assert not module.cloned
        assert index_like(module, first, module.cloned)
        fresh = Module(module.mlir, audit.file)
        assert [(o.oid, n) for o, n in fresh.values[value.vid].uses][0] == (op.oid, k)
        _assert_same_index(module, fresh)
