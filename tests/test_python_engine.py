"""The Python engine evaluates every construct of the shared subset as clingo does,
and every shipped stage on real facts gives clingo's relations."""

from __future__ import annotations

import os

import pytest

from sdy_dl.datalog.program import Program, parse_declarations
from sdy_dl.engines import get_engine
from sdy_dl.errors import SdyError

SUBSET = '''
// e(x, y, w): an edge from x to y of weight w
.decl e(x: number, y: number, w: number)
.input e
// tag(x, s): node x is tagged s
.decl tag(x: number, s: symbol)
.input tag
// reach(x, y): y is reachable from x (recursion)
.decl reach(x: number, y: number)
.output reach
// cyc(x): x reaches itself (a repeated variable in one atom)
.decl cyc(x: number)
.output cyc
// weights(x, n, s): n edges leave x, of total weight s ('_' positions counted)
.decl weights(x: number, n: number, s: number)
.output weights
// heavy(x, m): the heaviest edge leaving x, if any (max over a two-atom body)
.decl heavy(x: number, m: number)
.output heavy
// untagged_sink(x): x has no successor and no tag (negation with '_')
.decl untagged_sink(x: number)
.output untagged_sink
// arith(x, y): integer arithmetic with precedence and parentheses
.decl arith(x: number, y: number)
.output arith
// const(s, n): facts and constants in heads
.decl const(s: symbol, n: number)
.output const
// none_tagged(n): how many tags a missing node has (count over nothing is 0)
.decl none_tagged(n: number)
.output none_tagged
// no_min(m): the smallest weight of an edge from node 99 (none: no tuple)
.decl no_min(m: number)
.output no_min
reach(X, Y) :- e(X, Y, _).
reach(X, Z) :- reach(X, Y), reach(Y, Z).
cyc(X) :- reach(X, X).
weights(X, N, S) :- e(X, _, _), N = count : { e(X, _, _) }, S = sum W : { e(X, _, W) }.
heavy(X, M) :- e(X, _, _), M = max W : { e(X, Y, W), tag(Y, _) }.
untagged_sink(Y) :- e(_, Y, _), !e(Y, _, _), !tag(Y, _).
arith(X, Y) :- e(X, _, W), Y = (X + W * 2) / 3 - X % 2.
const("k", 7).
const(S, N + 1) :- tag(N, S), N > 1, S != "skip".
none_tagged(N) :- N = count : { tag(99, _) }.
no_min(M) :- M = min W : { e(99, _, W) }.
'''
FACTS = {"e": [(1, 2, 5), (2, 3, 1), (3, 1, 4), (3, 4, 4), (1, 4, 9), (4, 6, 2)],
         "tag": [(2, "two"), (4, "four"), (3, "skip"), (6, "six")]}


def test_subset_as_clingo_evaluates_it():
    program = Program(SUBSET, parse_declarations(SUBSET))
    ours = get_engine("python").run(program, FACTS)
    assert ours == get_engine("clingo").run(program, FACTS)
    assert ours["weights"] >= {(1, 2, 14), (3, 2, 8)}
    assert ours["heavy"] == {(1, 9), (2, 1), (3, 4), (4, 2)}
    assert ours["cyc"] == {(1,), (2,), (3,)}
    assert ours["none_tagged"] == {(0,)} and ours["no_min"] == set()
    assert ours["const"] == {("k", 7), ("two", 3), ("four", 5), ("six", 7)}



SERVED = '''
// dim(i, t, d, n): dim d of tensor t in step i has n axes
.decl dim(i: number, t: number, d: number, n: number)
.input dim
// ask(i, t, d): a question about dim d of tensor t in step i
.decl ask(i: number, t: number, d: number)
.input ask
// of_tensor(i, t, n): some dim of tensor t has n axes (a scan by i, t)
.decl of_tensor(i: number, t: number, n: number)
.output of_tensor
// of_dim(i, t, d, n): the dim asked about has n axes (a scan by i, t, d)
.decl of_dim(i: number, t: number, d: number, n: number)
.output of_dim
// unsharded(i, t, d): the dim asked about has no axes (a scan with a constant)
.decl unsharded(i: number, t: number, d: number)
.output unsharded
// known(i, t, d): the dim asked about exists (a test by i, t, d)
.decl known(i: number, t: number, d: number)
.output known
// unknown(i, t, d): it does not (a negated test by i, t, d)
.decl unknown(i: number, t: number, d: number)
.output unknown
// counted(i, t, d, c): how many dims of tensor t have d's axes (an aggregate's scan)
.decl counted(i: number, t: number, d: number, c: number)
.output counted
of_tensor(I, T, N) :- ask(I, T, _), dim(I, T, _, N).
of_dim(I, T, D, N) :- ask(I, T, D), dim(I, T, D, N).
unsharded(I, T, D) :- ask(I, T, D), dim(I, T, D, 0).
known(I, T, D) :- ask(I, T, D), dim(I, T, D, _).
unknown(I, T, D) :- ask(I, T, D), !dim(I, T, D, _).
counted(I, T, D, C) :- ask(I, T, D), dim(I, T, D, N), C = count : { dim(I, T, _, N) }.
'''


def test_scans_by_a_longer_key_look_up_the_shorter_keys_index():
    """``dim`` is scanned by (i, t) and by (i, t, d): one index by (i, t) serves
    both, the dim and the axes compared in the loop, and a test by (i, t, d)
    too; a negated test keeps its own index."""
    from sdy_dl.engines.python_codegen import program_source

    program = Program(SERVED, parse_declarations(SERVED))
    source = program_source(program)
    assert "X_dim_0_1.get((v_I, v_T), ())" in source
    assert "in X_dim_0_1_2" not in source
    assert "if X_dim_0_1_2.get((v_I, v_T, v_D), ()): continue" in source   # the negated test
    facts = {"dim": [(1, 7, 0, 2), (1, 7, 1, 0), (1, 8, 0, 0), (2, 7, 0, 1)],
             "ask": [(1, 7, 0), (1, 7, 1), (1, 7, 2), (2, 7, 0), (3, 9, 0)]}
    ours = get_engine("python").run(program, facts)
    assert ours == get_engine("clingo").run(program, facts)
    assert ours["of_tensor"] == {(1, 7, 2), (1, 7, 0), (2, 7, 1)}
    assert ours["of_dim"] == {(1, 7, 0, 2), (1, 7, 1, 0), (2, 7, 0, 1)}
    assert ours["unsharded"] == {(1, 7, 1)}
    assert ours["known"] == {(1, 7, 0), (1, 7, 1), (2, 7, 0)}
    assert ours["unknown"] == {(1, 7, 2), (3, 9, 0)}
    assert ours["counted"] == {(1, 7, 0, 1), (1, 7, 1, 1), (2, 7, 0, 1)}


def test_a_key_expression_is_evaluated_by_the_lookup_as_souffle_does():
    """A scan whose key holds a division at a position the shorter key's index does
    not hold keeps its own index: the division is evaluated by the lookup, found
    tuples or not, and a division by zero stops the run as in Soufflé (compared
    in the loop, it would never be evaluated for the empty bucket of (2, 2))."""
    from sdy_dl.engines.python_codegen import program_source

    text = '''
// a(x, y, z, w): input
.decl a(x: number, y: number, z: number, w: number)
.input a
// b(x, z): input
.decl b(x: number, z: number)
.input b
// pairs(x, w): a holds x twice, with w
.decl pairs(x: number, w: number)
.output pairs
pairs(X, W) :- b(X, _), a(X, X, _, W).
// divided(w): a's w at x, x, 7 / z
.decl divided(w: number)
.output divided
divided(W) :- b(X, Z), a(X, X, 7 / Z, W).
'''
    program = Program(text, parse_declarations(text))
    assert "X_a_0_1_2.get(" in program_source(program)
    facts = {"a": [(1, 1, 7, 5)], "b": [(1, 1), (2, 0)]}
    with pytest.raises(SdyError, match="division by zero"):
        get_engine("python").run(program, facts)
    assert get_engine("python").run(program, {"a": facts["a"], "b": [(1, 1)]}) == \
        {"pairs": {(1, 5)}, "divided": {(5,)}}


def test_an_unsafe_rule_is_an_error():
    text = '''
// a(x): input
.decl a(x: number)
.input a
// b(x, y): y is never bound
.decl b(x: number, y: number)
.output b
b(X, Y) :- a(X), Y > X.
'''
    with pytest.raises(SdyError, match="not bound"):
        get_engine("python").run(Program(text, parse_declarations(text)), {"a": [(1,)]})


def test_shipped_stages_on_a_module_as_clingo():
    """Every engine call of a propagation (the step stage, op priorities, the
    import and export analyses) gives clingo's relations."""
    from jax_programs import lowered
    from sdy_dl.engines import clingo_engine
    from sdy_dl.ir import parse_module_text
    from sdy_dl.pipeline import make_options
    from sdy_dl.pipeline import propagate

    calls = []
    run = clingo_engine.ClingoEngine.run

    def recording(self, program, facts):
        calls.append((program, {k: list(v) for k, v in facts.items()}))
        return run(self, program, facts)
    clingo_engine.ClingoEngine.run = recording
    try:
        propagate(parse_module_text(lowered("training_step"), "<training_step>"), make_options(engine="clingo"))
    finally:
        clingo_engine.ClingoEngine.run = run
    stages = {p.text.splitlines()[0] for p, _ in calls}
    assert len(calls) > 10 and len(stages) >= 3
    python = get_engine("python")
    for program, facts in calls:
        assert python.run(program, facts) == run(clingo_engine.ClingoEngine(), program, facts)


@pytest.mark.parametrize("name", ["mlp", "while_loop", "shard_map", "gather_scatter"])
def test_whole_pipeline_python_equals_clingo(name):
    from jax_programs import lowered
    from sdy_dl.ir import parse_module_text
    from sdy_dl.pipeline import make_options
    from sdy_dl.pipeline import propagate

    def run(engine, **extra):
        options = make_options(extra, engine=engine)
        return propagate(parse_module_text(lowered(name)), options).print()
    assert run("python") == run("clingo")
    assert run("python", enable_insert_explicit_collectives=True) == \
        run("clingo", enable_insert_explicit_collectives=True)


BIG_AXIS_MODULE = '''
sdy.mesh @mesh = <["a"=4096, "b"=2]>
func.func @main(%arg0: tensor<64x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a":(1)4}, {"b"}]>},
                %arg1: tensor<32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"a":(4)8}], replicated={"b"}>})
    -> tensor<64x16xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<64x32xf32>, tensor<32x16xf32>) -> tensor<64x16xf32>
  %1 = stablehlo.negate %0 : tensor<64x16xf32>
  %2 = stablehlo.add %1, %0 : tensor<64x16xf32>
  %3 = stablehlo.transpose %2, dims = [1, 0] : (tensor<64x16xf32>) -> tensor<16x64xf32>
  %4 = stablehlo.transpose %3, dims = [1, 0] : (tensor<16x64xf32>) -> tensor<64x16xf32>
  return %4 : tensor<64x16xf32>
}
'''


def test_component_memo_gives_the_relations_it_would_derive():
    """The step program's tables of axis refs depend only on the meshes: the calls of a
    propagation after the first take them from the memo (an axis of 4096 has 78
    sub-axis refs), and every call's relations are those a plan without a memo derives."""
    from sdy_dl.engines import python_engine
    from sdy_dl.ir import parse_module_text
    from sdy_dl.pipeline import make_options, propagate

    python_engine._PLANS.clear()   # memos without the keys of earlier tests
    calls = []
    run = python_engine.PythonEngine.run

    def recording(self, program, facts):
        facts = {k: list(v) for k, v in facts.items()}
        out = run(self, program, facts)
        calls.append((program, facts, out))
        return out
    python_engine.PythonEngine.run = recording
    try:
        propagate(parse_module_text(BIG_AXIS_MODULE, "<big axis>"), make_options(engine="python"))
    finally:
        python_engine.PythonEngine.run = run
    steps = [c for c in calls if "ref_pwo" in c[0].decls]
    assert len(steps) >= 3
    plans = {python_engine._plan(program) for program, _, _ in steps}
    hits = sum(plan.memo.hits[cid] for plan in plans
               for cid, (members, *_) in enumerate(plan.components) if "ref_pwo" in members)
    assert hits >= len(steps) - len(plans)
    # A first call that uses no mesh (empty axis tables, as cheap to derive as to
    # key) does not keep the memo from keeping the big axis's tables after it.
    python_engine._PLANS.clear()
    engine = python_engine.PythonEngine()
    for program in {program.text: program for program, _, _ in steps}.values():
        engine.run(program, {})
    for program, facts, out in steps:
        assert engine.run(program, facts) == out
    plans = {python_engine._plan(program) for program, _, _ in steps}
    assert sum(plan.memo.hits[cid] for plan in plans for cid, (members, *_)
               in enumerate(plan.components) if "ref_pwo" in members) >= len(steps) - len(plans)
    for program, facts, out in calls:
        fresh = python_engine._Plan(program)
        fresh.memo.off = [True] * len(fresh.components)
        rel = {name: set() for name in program.decls}
        for name, rows in facts.items():
            rel[name].update(map(tuple, rows))
        assert fresh.evaluate(rel, list(out)) == out


def test_a_process_with_every_plan_cached_loads_no_code_generator(tmp_path):
    """The plans of programs met before are read from the cache: a process that
    meets only those loads neither the code generator nor the Datalog checker
    and stratifier it runs; one with an empty cache generates them."""
    import os
    import subprocess
    import sys

    from rules_cases import op

    path = tmp_path / "in.mlir"
    path.write_text(op(["tensor<8x16xf32>"], ["tensor<8x16xf32>"],
                       "stablehlo.add %arg0, %arg0 : tensor<8x16xf32>"))
    program = """if True:
        import sys
        from sdy_dl.ir import load_module
        from sdy_dl.pipeline import make_options, propagate
        propagate(load_module(sys.argv[1]), make_options({}, engine="python"))
        print(sorted(m for m in sys.modules if m.startswith("sdy_dl.")))
    """
    env = {**os.environ, "SDY_DL_CACHE": str(tmp_path / "cache")}
    generator = {"sdy_dl.engines.python_codegen", "sdy_dl.datalog.check",
                 "sdy_dl.datalog.clauses", "sdy_dl.datalog.stratify"}
    loaded = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", program, str(path)], env=env,
                              capture_output=True, text=True, check=True)
        loaded.append(set(eval(done.stdout)))
    assert generator <= loaded[0] and not generator & loaded[1]


MUTUAL = '''
// e(x, y): input
.decl e(x: number, y: number)
.input e
// odd(x, y): a path of odd length
.decl odd(x: number, y: number)
.output odd
// even(x, y): a path of even length
.decl even(x: number, y: number)
.output even
// zeta(x, y): a third member of the component
.decl zeta(x: number, y: number)
.output zeta
odd(X, Y) :- e(X, Y).
odd(X, Z) :- even(X, Y), e(Y, Z).
even(X, Z) :- odd(X, Y), e(Y, Z).
zeta(X, Y) :- even(X, Y), odd(Y, X).
odd(X, Y) :- zeta(X, Y).
'''


def test_the_generated_source_is_the_same_in_every_process():
    """The members of a recursive component are written in one order whatever the
    process's hash seed (the compiled rules are cached as their text's code)."""
    import subprocess
    import sys

    script = ("import sys; from sdy_dl.datalog.program import Program, parse_declarations; "
              "from sdy_dl.engines.python_codegen import program_source; "
              "text = sys.stdin.read(); "
              "sys.stdout.write(program_source(Program(text, parse_declarations(text))))")
    sources = {subprocess.run([sys.executable, "-c", script], input=MUTUAL, text=True, check=True,
                              capture_output=True, env={**os.environ, "PYTHONHASHSEED": seed}).stdout
               for seed in ("1", "2", "3", "4")}
    assert len(sources) == 1
    assert "{'even', 'odd', 'zeta'}" in sources.pop()
