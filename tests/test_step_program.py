"""The ``step`` program itself: syntactic stratification, documentation, Soufflé acceptance."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from sdy_dl.datalog.compiler import compile_stage
from sdy_dl.datalog.lexer import is_directive, split_statements, tokenize
from sdy_dl.datalog.stratify import check_stratified
from sdy_dl.engines.to_clingo import translate
from sdy_dl.errors import SdyError


@pytest.mark.parametrize("layers,basic,aggressive",
                         [(1, True, True), (4, True, True), (8, True, True), (4, True, False),
                          (4, False, True)])
def test_step_program_is_stratified(layers, basic, aggressive):
    program = compile_stage("step", max_factors=layers, basic=basic, aggressive=aggressive)
    check_stratified(program.text)  # compile_stage checks it too; be explicit


def test_checker_finds_negative_cycle():
    text = """
    // a(x): a
    .decl a(x: number)
    // b(x): b
    .decl b(x: number)
    a(X) :- b(X), !a(X).
    b(X) :- a(X).
    """
    with pytest.raises(SdyError):
        check_stratified(text)


def test_every_relation_is_documented_and_inputs_are_prefixed():
    program = compile_stage("step", max_factors=4)
    for decl in program.decls.values():
        assert decl.doc, decl.name
        assert decl.is_input == decl.name.startswith("in_"), decl.name
    outputs = {d.name for d in program.outputs}
    assert outputs == {"step_mesh", "step_updated", "step_dim", "step_dim_axis"}


#: The typed domains of the step program: a column named so holds that type.
STEP_DOMAINS = {"i": "Step", "a": "Axis", "ao": "Axis", "an": "Axis", "m": "Mesh", "mesh": "Mesh"}

#: The typed columns of the isEquivalent rules (is_equivalent/equivalence.dl.j2)
#: by relation, for a stage whose own column names mean other things.
EQUIVALENCE_DOMAINS = {
    **{f"{r}.s": "Side" for r in ("in_has_sharding", "in_mesh_ref", "in_rank", "in_dim_axis",
                                  "in_unreduced", "side", "has_dim_axis", "has_unreduced",
                                  "replicated", "replicated_for_equivalence")},
    "in_mesh_ref.m": "Mesh", "in_dim_axis.a": "Axis", "in_unreduced.a": "Axis"}


#: The stages with declared domains, rendered so, and the domain of their columns.
TYPED_STAGES = [
    ("step", {"max_factors": 4}, STEP_DOMAINS),
    ("insert_explicit_reshards", {"phase": "out"}, STEP_DOMAINS),
    ("collective_inserter", {}, {"a": "Axis", "b": "Axis"}),
    ("get_mesh", {}, {"m": "Mesh"}),
    ("insert_unreduced_collectives", {}, {"a": "Axis"}),
    ("find_common_axes_heuristic", {"picks": 2}, {"a": "Axis", "a2": "Axis", "m": "Mesh"}),
    ("is_equivalent", {}, {"s": "Side", "a": "Axis", "m": "Mesh"}),
    ("reshard_to_collectives", {}, {"s": "Side", "a": "Axis", "m": "Mesh"}),
    ("canonicalize", {}, {**EQUIVALENCE_DOMAINS, "in_collective_axis.a": "Axis",
                          **{f"{r}.{c}": typ for r in ("in_op", "in_pure_op", "in_effectful_op",
                                                       "in_recursive_op", "in_terminator_op")
                             for c, typ in (("d", "Dialect"), ("n", "OpName"))},
                          "in_effect_free_dialect.d": "Dialect", "in_axes_collective.n": "OpName"}),
    ("user_priority_propagation", {}, {"s": "Site", "a": "Axis"}),
    ("sharding_group_map", {}, {"g": "Group", "v": "Value", "s": "Sharding"}),
    ("is_on_full_version", {}, {"n": "OperationName", "s": "Sharding"}),
    ("op_priorities", {}, {"in_trait.t": "Trait", "c": "OpClass", "d": "Direction"}),
    ("unflatten_call_graph", {"dedup": False}, {"f": "Func", "k": "Key"}),
    ("unflatten_call_graph", {"dedup": True}, {"f": "Func", "k": "Key", "g": "Group"}),
    ("apply_sharding_constraints", {}, {"v": "Value", "x": "Value", "in_constraint.r": "Value",
                                        "s": "Sharding", "p": "Place", "o": "Op", "c": "Op",
                                        "h": "Op", "t": "Op", "c1": "Op", "c2": "Op"})]


@pytest.mark.parametrize("stage,params,domains", TYPED_STAGES)
def test_step_columns_are_typed(stage, params, domains):
    """Step ids, axis names and mesh symbols are declared domains (Soufflé subtypes,
    ``.type Axis <: symbol``) in every relation of the step program, of the
    stage that includes its schema, and of the other stages that hold them
    (a key ``relation.column`` names one column where the name means other
    things elsewhere in the stage)."""
    program = compile_stage(stage, **params)
    typed = 0
    for decl in program.decls.values():
        for (column, _), typ in zip(decl.columns, decl.type_names):
            want = domains.get(f"{decl.name}.{column}", domains.get(column))
            if want:
                assert typ == want, (decl.name, column, typ)
                typed += 1
    assert typed >= 3


@pytest.mark.souffle
@pytest.mark.skipif(shutil.which("souffle") is None, reason="souffle not on PATH")
@pytest.mark.parametrize("stage,params", [(stage, params) for stage, params, _ in TYPED_STAGES])
def test_souffle_type_checks_every_typed_stage(tmp_path, stage, params):
    """Soufflé's type checker accepts each stage with declared domains as rendered."""
    (tmp_path / "p.dl").write_text(compile_stage(stage, **params).text)
    proc = subprocess.run(["souffle", "-w", "--show=type-analysis", str(tmp_path / "p.dl")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


#: Rules of typed stages that mix domains, as Soufflé's type rules forbid: a
#: variable of one domain stands in a column of another (a plain ``number`` or
#: ``symbol`` may not flow into a domain's column either; a domain may flow
#: into its base type's), or meets another domain in a comparison.
MISUSES = [
    ("step", {"max_factors": 4}, "Axis", "bad(A) :- in_mesh(A, _, _).",
     "bad: variable A of type Mesh where column of type Axis is declared"),
    ("step", {"max_factors": 4}, "Axis", "bad(A) :- in_mesh_axis(_, A, N), A = N.",
     "comparison '=' of a Axis with a number"),
    ("step", {"max_factors": 4}, "Axis", "bad(K) :- in_step(_, K, _, _, _, _).",
     "bad: variable K of type symbol where column of type Axis is declared"),
    ("is_equivalent", {}, "Axis", "bad(A) :- in_dim_axis(_, A, _, _, A).",
     "variable A is used with types Axis and Side"),
    ("get_mesh", {}, "Mesh", "bad(A) :- in_mesh(_, A, _, _).",
     "bad: variable A of type symbol where column of type Mesh is declared"),
    ("find_common_axes_heuristic", {"picks": 2}, "Axis",
     "bad(A) :- in_op_mesh(_, A).", "bad: variable A of type Mesh where column of type Axis is declared"),
    ("sharding_group_map", {}, "Group", "bad(G) :- in_member(G, _, _), in_sharding(G, _).",
     "variable G is used with types Group and Value"),
    ("user_priority_propagation", {}, "Site", "bad(D) :- in_dim_priority(_, D, _).",
     "bad: variable D of type number where column of type Site is declared"),
    ("apply_sharding_constraints", {}, "Value", "bad(V) :- in_place(V, _), in_use(_, V, _).",
     "variable V is used with types Op and Value"),
]


def _with_bad_rule(stage, params, typ, rule) -> str:
    return compile_stage(stage, **params).text + (
        f"\n// bad(A): a misuse\n.decl bad(a: {typ})\n" + rule + "\n")


@pytest.mark.parametrize("engine", ["python", "clingo"])
@pytest.mark.parametrize("stage,params,typ,rule,what", MISUSES)
def test_a_misuse_of_a_domain_is_rejected(engine, stage, params, typ, rule, what):
    """Every embedded engine refuses, with one located error, a rule of a typed
    stage that mixes its domains."""
    from sdy_dl.datalog.program import Program, parse_declarations
    from sdy_dl.engines import get_engine

    text = _with_bad_rule(stage, params, typ, rule)
    with pytest.raises(SdyError) as info:
        get_engine(engine).run(Program(text, parse_declarations(text)), {})
    message = str(info.value)
    assert message.startswith("<program>:") and what in message, message


@pytest.mark.souffle
@pytest.mark.skipif(shutil.which("souffle") is None, reason="souffle not on PATH")
@pytest.mark.parametrize("stage,params,typ,rule,what", MISUSES)
def test_souffle_rejects_each_misuse_of_a_domain(tmp_path, stage, params, typ, rule, what):
    """Soufflé's type checker refuses the same rules (and accepts the stage without them)."""
    def souffle(text):
        (tmp_path / "p.dl").write_text(text)
        return subprocess.run(["souffle", "-w", "--show=type-analysis", str(tmp_path / "p.dl")],
                              capture_output=True, text=True)
    assert souffle(compile_stage(stage, **params).text).returncode == 0
    proc = souffle(_with_bad_rule(stage, params, typ, rule))
    assert proc.returncode != 0 and "Error:" in proc.stderr, proc.stderr


def test_step_program_translates_to_clingo():
    """clingo parses the translation: one rule per Soufflé clause (besides auxiliary
    ones: divisions after the rest of a body), a #show per output."""
    import clingo.ast

    program = compile_stage("step", max_factors=4)
    clauses = [s for s in split_statements(tokenize(program.text)) if not is_directive(s)]
    parsed = []
    clingo.ast.parse_string(translate(program), parsed.append)
    rules = [s for s in parsed if s.ast_type == clingo.ast.ASTType.Rule
             and not str(s.head).startswith("sdy_")]   # not the auxiliary relations
    shows = {(s.name, s.arity) for s in parsed if s.ast_type == clingo.ast.ASTType.ShowSignature}
    assert len(clauses) > 100
    assert len(rules) == len(clauses)
    assert shows == {(d.name, d.arity) for d in program.outputs}


@pytest.mark.souffle
@pytest.mark.skipif(shutil.which("souffle") is None, reason="souffle not on PATH")
@pytest.mark.parametrize("basic,aggressive", [(True, True), (True, False), (False, True)])
def test_souffle_accepts_step_program(tmp_path, basic, aggressive):
    program = compile_stage("step", max_factors=4, basic=basic, aggressive=aggressive)
    src = tmp_path / "step.dl"
    src.write_text(program.text)
    for d in program.inputs:
        (tmp_path / f"{d.name}.facts").write_text("")
    proc = subprocess.run(["souffle", "-w", "-F", str(tmp_path), "-D", str(tmp_path), str(src)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("factors,default,compiled,exact", [
    (3, 4, 8, 3), (4, 4, 8, 4), (5, 8, 8, 5), (8, 8, 8, 8), (9, 16, 16, 9), (0, 4, 8, 1)])
def test_unrolling_bound_by_engine(factors, default, compiled, exact):
    """Powers of two from 4 in general, from 8 for an engine that compiles each
    program (one compiled step program covers rules of up to 8 factors), the
    least number for one that grounds it."""
    from sdy_dl.propagation.driver import identity_rule
    from sdy_dl.propagation.step import StepInput
    from sdy_dl.propagation.step_eval import layers_for

    rule = identity_rule((2,) * factors, 1, 1)
    steps = [StepInput(rule, (None,), (None,), ("BOTH",) * factors, "basic", False, True)]
    assert len(rule.factors) == factors
    assert layers_for(steps) == default
    assert layers_for(steps, compiled=True) == compiled
    assert layers_for(steps, exact=True) == exact


def test_aggressive_layers_are_the_factors_of_dims_with_axes():
    """An aggressive step's layers are the sorted positions of the factors with a
    non-empty candidate: at most the factors of its tensors' dims with axes."""
    from sdy_dl.propagation.driver import identity_rule
    from sdy_dl.propagation.step import StepInput
    from sdy_dl.propagation.step_eval import layers_for, layers_needed
    from sdy_dl.sharding import AxisRef, DimSharding, TensorSharding

    rule = identity_rule((2,) * 5, 1, 1)
    sharded = TensorSharding("mesh", (DimSharding((AxisRef("x"),), False), DimSharding((), False),
                                      DimSharding((AxisRef("y"),), True), DimSharding((), True),
                                      DimSharding((), False)))
    step = StepInput(rule, (sharded,), (None,), ("BOTH",) * 5, "aggressive", False, True)
    assert layers_needed(step) == 2
    assert layers_for([step], exact=True) == 2
    assert layers_for([step]) == 4
    basic = StepInput(rule, (sharded,), (None,), ("BOTH",) * 5, "basic", False, True)
    assert layers_needed(basic) == 5
    assert layers_for([step, basic]) == 8


def test_engines_say_whether_they_compile_each_program():
    from sdy_dl.engines import AutoEngine, get_engine

    assert not get_engine("python").compiles()
    assert not get_engine("clingo").compiles()
    assert AutoEngine().compiles() == (shutil.which("souffle") is not None)
    if shutil.which("souffle") is not None:
        assert get_engine("souffle", compiled=True).compiles()
        assert not get_engine("souffle").compiles()
