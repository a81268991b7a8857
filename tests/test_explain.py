"""``sdy-dl explain``: derivation trees of the shardings the output module prints."""

from __future__ import annotations

import functools
import json
import re
import shutil

import pytest
from click.testing import CliRunner

import import_programs
import jax_programs
import rules_programs
from sdy_dl.audit import Audit
from sdy_dl.cli import main
from sdy_dl.errors import SdyError
from sdy_dl.ir import parse_module_text
from sdy_dl.ir.context import mlir_context
from sdy_dl.ir.storage import is_shardable, stored_result_sharding, stored_sharding
from sdy_dl.ir.value_sharding import get_sharding
from sdy_dl.pipeline import make_options
from sdy_dl.pipeline import propagate

CLINGO = make_options(engine="clingo")

CHAIN = '''sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  %1 = stablehlo.dot_general %0, %arg1, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
'''

# Priorities: the p1 dim of %arg1 wins over %arg0's p2 on the shared factor.
PRIORITIES = '''sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}p2, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}p1, {?}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  %1 = stablehlo.multiply %0, %0 : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
'''


@pytest.fixture(scope="module")
def chain():
    return Audit(parse_module_text(CHAIN), CLINGO)


def test_explain_runs_the_whole_pipeline_once(chain):
    assert chain.text == propagate(parse_module_text(CHAIN), CLINGO).print()


def test_root_is_the_printed_sharding_and_steps_are_factor_level(chain):
    tree = chain.explain("%1")
    assert tree.sharding == '#sdy.sharding<@mesh, [{"a"}, {}]>'   # closed, as printed
    step = tree.children[0]
    assert step.sharding == '#sdy.sharding<@mesh, [{"a", ?}, {?}]>'  # as propagation left it
    assert step.op["name"] == "stablehlo.dot_general" and step.op["place"] == "input line 4"
    line = step.op["output_line"]   # where the output prints the op, beside its input line
    assert "stablehlo.dot_general" in chain.text.splitlines()[line - 1]
    assert f"at output line {line} (input line 4)" in step.because
    assert step.op["origin"].startswith("rules/") and ".yaml:" in step.op["origin"]
    assert step.strategy == "aggressive" and "band" in step.phase
    [factor] = step.factors
    assert factor["factor"] == "i" and factor["axes"] == ['"a"'] and factor["dim"] == 0
    assert factor["from"] == [{"value": "%0", "tensor": "operand 0", "dim": 0}]
    assert [c.what for c in step.children] == ["%0"]
    assert [leaf.what for leaf in tree.leaves()] == ["%arg0"]
    assert tree.leaves()[0].kind == "annotation"


def test_names_are_those_of_the_printed_module(chain):
    assert chain.explain("arg:0").what == "%arg0"
    assert chain.explain("result:0").sharding == '#sdy.sharding<@mesh, [{"a"}, {}]>'
    assert chain.explain("1").what == "%1"


def _model_names(module, value, main) -> list[str]:
    """The names of ``value`` read from the model (not through the audit's value
    table): ``%x`` in main, ``@f:%x`` elsewhere, plus ``arg:N`` for a function's
    arguments."""
    owner = value.block.region.owner if value.is_block_arg else value.defining_op
    func = owner
    while func is not None and func.name != "func.func":
        func = func.parent
    prefix = "" if func is None or func is main else f"@{func.attr_text('sym_name')[1:-1]}:"
    names = [prefix + value.name]
    if value.is_block_arg and owner is func:
        names.append(f"{prefix}arg:{value.index}")
    return names


def _printed_in_order(text: str) -> list[tuple[list[str], str]]:
    """(names, printed sharding) of every value, then of every function result, in
    the order of the module, read independently."""
    module = parse_module_text(text)
    main_func = module.main_func()
    out = []
    for v in module.values:
        if v.is_block_arg and v.block.region.owner.name in ("stablehlo.while",
                                                             "sdy.manual_computation"):
            with mlir_context():
                # the matching while result's (§1.5); a manual computation's local view (§8.6)
                s = get_sharding(v.mlir)
        else:
            s = stored_sharding(v) if is_shardable(v) else None
        out.append((_model_names(module, v, main_func), "(none)" if s is None else s.to_text()))
    for fname, func in module.funcs.items():
        prefix = "" if func is main_func else f"@{fname}:"
        for i in range(len(func.mlir.attributes["function_type"].value.results)):
            s = stored_result_sharding(func, i)
            out.append(([f"{prefix}result:{i}"], "(none)" if s is None else s.to_text()))
    return out


# Calls, while/scan/cond, shard_map, sharding groups, constraints, priorities.
DEFAULT_PROGRAMS = [("jax", "mlp"), ("jax", "while_loop"), ("jax", "shard_map"),
                    ("jax", "sharding_constraint"), ("import", "scan"), ("import", "cond"),
                    ("import", "nested_jit"), ("import", "shard_alike"),
                    ("import", "constraint_chain"), ("jax", "gather_scatter"), ("text", "priorities")]
SLOW_PROGRAMS = [("jax", n) for n in jax_programs.PROGRAMS if ("jax", n) not in DEFAULT_PROGRAMS] + \
    [("import", n) for n in import_programs.PROGRAMS if ("import", n) not in DEFAULT_PROGRAMS] + \
    [("rules", n) for n in sorted(rules_programs.RULE_PROGRAMS)]


def _text(kind: str, name: str) -> str:
    if kind == "text":
        return PRIORITIES
    if kind == "rules":
        program = rules_programs.RULE_PROGRAMS[name]
        return program() if callable(program) else program
    return (jax_programs if kind == "jax" else import_programs).lowered(name)


def _check_every_value(kind: str, name: str) -> None:
    text = _text(kind, name)
    audit = Audit(parse_module_text(text), CLINGO)
    trees = audit.explain_all(depth=100)
    # Every value and function result of the printed module, in order, read
    # independently (by position: names that sibling regions share, such as a
    # while's %iterArg, stand for several values).
    expected = _printed_in_order(audit.text)
    assert len(trees) == len(audit.outputs.values) == len(expected) > 0
    lines = audit.text.splitlines()
    assert len({out.name for out in audit.outputs.values}) == len(audit.outputs.values)
    for out, tree, (names, sharding) in zip(audit.outputs.values, trees, expected):
        assert tree.what == out.name
        qualified = re.fullmatch(r"(.+)@L(\d+)(:\w+)?", out.name)
        if qualified:
            # a name several values print, with the line that defines it (a block
            # argument: its region op's line, and its region when it has several)
            name, line = qualified.group(1), int(qualified.group(2))
            assert name == names[0], (out.name, names)
            printed = re.escape(name[name.rfind("%"):].split("#")[0])
            if " applies " in lines[line - 1] and not re.search(printed, lines[line - 1]):
                # a value of a body the compact form elides (``stablehlo.reduce(...)
                # applies stablehlo.maximum``): named after the op that holds it
                pass
            elif (re.search(rf"{printed}: ", lines[line - 1])
                  or re.match(rf"\s*\^bb\d+\(.*{printed}: ", lines[line])):
                # a block argument of the op's only region, declared on its line
                # (sdy.manual_computation) or in the block header after it
                pass
            elif qualified.group(3):   # a block argument, declared on its region op's line
                assert re.search(rf"{printed}(: | = )", lines[line - 1]), out.name
            else:
                assert re.match(rf"\s*{printed}(:\d+)? = ", lines[line - 1]), out.name
            assert audit.value(out.name) is out
        else:
            assert out.name in names, (out.name, names)
        assert tree.sharding == sharding, out.name
        for node in tree.walk():
            assert "created and erased" not in node.what, (out.name, node.what)
            assert not node.what.startswith("(")
        for leaf in tree.leaves():
            assert leaf.kind in ("annotation", "unsharded"), (out.name, leaf.what, leaf.because)
            if leaf.kind == "annotation":
                given = leaf.because.split(" = ", 1)[1].split(" (")[0]
                assert given in audit.inputs.annotations, (out.name, given)
                assert given.split("<", 1)[1][:-1] in text or given.startswith("#sdy.sharding<@mesh")


@pytest.mark.parametrize("kind,name", DEFAULT_PROGRAMS, ids=[n for _, n in DEFAULT_PROGRAMS])
def test_every_value_of_real_programs(kind, name):
    _check_every_value(kind, name)


@pytest.mark.slow
@pytest.mark.parametrize("kind,name", SLOW_PROGRAMS, ids=[n for _, n in SLOW_PROGRAMS])
def test_every_value_of_more_programs(kind, name):
    _check_every_value(kind, name)


def test_explain_cli_json_and_all(tmp_path):
    path = tmp_path / "m.mlir"
    path.write_text(CHAIN)
    result = CliRunner().invoke(main, ["explain", str(path), "result:0", "--format", "json",
                                       "--engine", "clingo", "--quiet"])
    assert result.exit_code == 0, result.output
    tree = json.loads(result.output)
    assert tree["value"] == "result:0" and tree["from"]
    result = CliRunner().invoke(main, ["explain", str(path), "--all", "--format", "json",
                                       "--engine", "clingo", "--quiet"])
    assert result.exit_code == 0, result.output
    names = [t["value"] for t in json.loads(result.output)]
    assert names == ["%arg0", "%arg1", "%0", "%1", "result:0"]


def test_explain_all_writes_explain_alls_trees_as_one_document(tmp_path):
    """``--all`` writes tree by tree: the same bytes as the whole list printed at once."""
    from sdy_dl.audit.render import text_lines
    from sdy_dl.ir import load_module

    path = tmp_path / "m.mlir"
    path.write_text(CHAIN)
    trees = Audit(load_module(str(path)), CLINGO).explain_all()
    for fmt, expected in (("json", json.dumps([t.to_json() for t in trees], indent=2)),
                          ("text", "\n\n".join("\n".join(text_lines(t)) for t in trees))):
        result = CliRunner().invoke(main, ["explain", str(path), "--all", "--format", fmt,
                                           "--engine", "clingo", "--quiet"])
        assert result.exit_code == 0, result.output
        assert result.output == expected + "\n"


def test_steps_reading_a_value_are_the_steps_whose_inputs_hold_it(chain):
    steps = chain.tracer.steps
    keys = {k for c in steps for k, _ in c.inputs}
    assert keys
    for key in keys:
        assert chain.explainer.steps_reading(key) == [
            c for c in steps if any(k == key for k, _ in c.inputs)]
    assert chain.explainer.steps_reading(("result", 99)) == []


def test_ambiguous_name_lists_the_values_by_line():
    audit = Audit(parse_module_text(jax_programs.lowered("while_loop")), CLINGO)
    with pytest.raises(SdyError, match=r"'%2' names 2 values of the output.*: "
                       r"%2@L(\d+) \(sdy\.constant, output line \1\), %2@L(\d+) \(func\.call, "
                       r"output line \2\)$"):
        audit.explain("%2")
    shared = audit.outputs.ambiguous["%2"]
    for out in shared:
        assert audit.text.splitlines()[out.line - 1].lstrip().startswith("%2 = ")
        assert audit.explain(out.name).what == out.name
        assert audit.value(out.name.replace("@L", "@")) is out   # %2@7 reads as %2@L7
    assert shared[0].line < shared[1].line


def test_block_arguments_of_sibling_regions_are_named_by_their_ops_line_and_region():
    # a manual computation's and a reduce's body both name an argument %arg2; a
    # while's %iterArg is declared once, on the while's line, for cond and do
    audit = Audit(parse_module_text(jax_programs.lowered("shard_map_scan_pipeline")), CLINGO)
    with pytest.raises(SdyError, match=r"'%arg2' names 2 values.*%arg2@L\d+ \(sdy.manual_computation"):
        audit.explain("%arg2")
    lines = audit.text.splitlines()
    for out in audit.outputs.ambiguous["%arg2"]:
        assert re.match(r"\s*%\w+(:\d+)? = ", lines[out.line - 1])   # its region op's line
        assert audit.value(out.name) is out
    with pytest.raises(SdyError, match=r"'%iterArg' names 2 values.*%iterArg@L(\d+):cond "
                       r"\(stablehlo.while, output line \1\), %iterArg@L\1:do"):
        audit.explain("%iterArg")
    cond, body = audit.outputs.ambiguous["%iterArg"]
    assert cond.value != body.value and cond.value.owner.owner == body.value.owner.owner


def test_unknown_value_is_one_line_with_close_matches(tmp_path):
    path = tmp_path / "m.mlir"
    path.write_text(CHAIN)
    result = CliRunner().invoke(main, ["explain", str(path), "%11", "--engine", "clingo",
                                                       "--quiet"])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sdy-dl: error:")
    assert "'%11'" in lines[0] and "close matches: %1" in lines[0]


UNSHARDED = '''sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {?}]>}, %arg2: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>) {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  %1 = stablehlo.negate %arg2 : tensor<8x8xf32>
  %2 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<8x8xf32>, tensor<f32>) -> tensor<8xf32>
  return %0, %1, %2 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>
}
'''.replace("%2 = stablehlo.reduce", "%cst = stablehlo.constant dense<0.0> : tensor<f32>\n  %2 = stablehlo.reduce")


def test_why_values_are_unsharded_or_blocked():
    audit = Audit(parse_module_text(UNSHARDED), CLINGO)
    unreached = audit.explain("%1")
    assert unreached.sharding == "(none)" and unreached.kind == "unsharded"
    assert unreached.because.startswith("no annotation reaches it")
    closed = audit.explain("%arg1")
    assert closed.sharding == '#sdy.sharding<@mesh, [{}, {"b"}]>'
    assert any("factor i (dim 0)" in r and "the dim is closed" in r for r in closed.reasons)


@functools.lru_cache(maxsize=None)
def _proof_of_the_add_step():
    audit, tree, step = _proof_of_the_add_step_tree()
    return audit, step


@functools.lru_cache(maxsize=None)
def _proof_of_the_add_step_tree():
    audit = Audit(parse_module_text(CHAIN), CLINGO)
    tree = audit.explain("%0")
    audit.attach_proofs([tree])
    [step] = [n for n in tree.walk() if n.kind == "step"]
    return audit, tree, step


def _check_proof(proof, height_above=None):
    if height_above is not None:
        assert proof.height < height_above
    if not proof.children:
        assert proof.rule == "" and proof.relation.startswith("in_")   # an input fact
        return
    assert re.fullmatch(r"datalog/step/[a-z_]+\.dl\.j2:\d+( \(macro call\))?", proof.rule), proof.rule
    assert proof.height == 1 + max(c.height for c in proof.children)
    for c in proof.children:
        _check_proof(c, proof.height)


def test_proof_of_a_step_goes_down_to_input_facts():
    _, step = _proof_of_the_add_step()
    [proof] = step.proof
    assert proof.atom().startswith("step_dim_axis(") and '"a"' in proof.atom()
    _check_proof(proof)
    text = "\n".join(proof.lines())
    assert "[input fact]" in text and "in_dim_axis(" in text
    assert step.to_json()["proof"][0]["tuple"] == proof.atom()


def _provenance_proofs(audit, tree, steps):
    """Soufflé's provenance proofs of the tuples ``steps`` were proved by, over the same
    program and facts as the proof search (the tree's steps, numbered in tree order)."""
    from sdy_dl.audit.proofs import proof_program
    from sdy_dl.audit.souffle_proofs import SouffleProvenance

    _, _, _, program, facts = proof_program(audit, [tree])
    with SouffleProvenance(program, facts) as provenance:
        return [[provenance.proof(p.relation, p.args) for p in s.proof] for s in steps]


@pytest.mark.souffle
@pytest.mark.skipif(not shutil.which("souffle"), reason="souffle not on PATH")
def test_souffle_provenance_gives_the_proof_search_proofs():
    audit, tree, step = _proof_of_the_add_step_tree()
    [proof] = step.proof
    [[theirs]] = _provenance_proofs(audit, tree, [step])
    assert theirs.height == proof.height
    assert theirs.lines() == proof.lines()
    assert " (proof search)" not in "\n".join(theirs.lines())   # all of it from Soufflé


@pytest.mark.slow
@pytest.mark.souffle
@pytest.mark.skipif(not shutil.which("souffle"), reason="souffle not on PATH")
@pytest.mark.parametrize("text, value", [(PRIORITIES, "%1"), (CHAIN, "%1")])
def test_souffle_provenance_on_more_steps(text, value):
    audit = Audit(parse_module_text(text), CLINGO)
    tree = audit.explain(value)
    audit.attach_proofs([tree])
    steps = [n for n in tree.walk() if n.kind == "step" and n.proof]
    assert steps
    theirs = _provenance_proofs(audit, tree, steps)
    for step, proofs in zip(steps, theirs):
        assert [p.height for p in proofs] == [p.height for p in step.proof]
        assert [p.lines() for p in proofs] == [p.lines() for p in step.proof]


@pytest.mark.slow
@pytest.mark.souffle
@pytest.mark.skipif(not shutil.which("souffle"), reason="souffle not on PATH")
def test_explain_proof_on_the_souffle_engine_uses_its_provenance():
    _, clingo_step = _proof_of_the_add_step()
    audit = Audit(parse_module_text(CHAIN), make_options(engine="souffle"))
    tree = audit.explain("%0")
    audit.attach_proofs([tree])
    [step] = [n for n in tree.walk() if n.kind == "step"]
    assert [p.lines() for p in step.proof] == [p.lines() for p in clingo_step.proof]


def test_explain_cli_proof(tmp_path):
    path = tmp_path / "m.mlir"
    path.write_text(CHAIN)
    result = CliRunner().invoke(main, ["explain", str(path), "%0", "--proof", *["--engine", "clingo", "--quiet"]])
    assert result.exit_code == 0, result.output
    assert "proof: step_dim_axis(" in result.output and "[input fact]" in result.output


def test_rule_origin_names_a_rules_file_or_the_ops_own_rule(tmp_path):
    user = tmp_path / "user.yaml"
    user.write_text("description: Override.\nops:\n  stablehlo.add: {doc: Overridden sum., use: pointwise}\n")
    audit = Audit(parse_module_text(CHAIN), make_options(engine="clingo", rule_files=(str(user),)))
    [step] = [n for n in audit.explain("%0").walk() if n.kind == "step"]
    assert step.op["origin"] == f"--rules {user}:3"
    own = CHAIN.replace("%0 = stablehlo.add %arg0, %arg1 :", "%0 = stablehlo.add %arg0, %arg1 "
                        "{sdy.sharding_rule = #sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) "
                        "{i=8, j=8}, custom>} :")
    audit = Audit(parse_module_text(own), CLINGO)
    [step] = [n for n in audit.explain("%0").walk() if n.kind == "step"]
    assert step.op["origin"] == "the op's own sdy.sharding_rule attribute"


def test_the_detail_evaluation_keeps_the_step_programs_plan(chain, monkeypatch):
    """The detail evaluates the step program's text with more relations shown: its
    plan is the step program's, found in the cache under the step program's key
    (the text is never hashed, no second plan is kept)."""
    import sdy_dl.audit.steps as steps_module
    from sdy_dl.datalog.program import Program
    from sdy_dl.engines import python_engine

    def hashed(program):
        raise AssertionError("a rendered program's text was hashed")

    monkeypatch.setattr(python_engine, "_PLANS", {})
    monkeypatch.setattr(Program, "digest", property(hashed))
    rel = steps_module.evaluate_with_details([c.step for c in chain.tracer.steps],
                                             chain.propagated.meshes)
    assert set(steps_module.DETAIL_RELATIONS) <= set(rel) and rel["rec_axis"]


def test_detail_batches_number_instances_like_one_batch(chain, monkeypatch):
    import sdy_dl.audit.steps as steps_module

    steps = [c.step for c in chain.tracer.steps]
    whole = steps_module.StepRecords(steps, chain.propagated.meshes)
    monkeypatch.setattr(steps_module, "DETAIL_BATCH", 1)
    batched = steps_module.StepRecords(steps, chain.propagated.meshes)
    assert len(whole.steps) > 1 and whole.rec and (whole.rec, whole.fin) == (batched.rec, batched.fin)


@pytest.mark.parametrize("kind,name", DEFAULT_PROGRAMS)
def test_value_table_lists_values_as_the_model_does(kind, name):
    """The audit's value table, read straight from the MLIR, lists the values in the
    order the model numbers them, each with its owner,
    its number and the names the model gives it."""
    from sdy_dl.audit.naming import ValueTable
    from sdy_dl.ir.context import mlir_context

    module = parse_module_text(_text(kind, name))
    main = module.main_func()
    with mlir_context():
        table = ValueTable(module.mlir.operation, module.print)
        assert len(table.places) == len(module.values) > 0
        for v, (key, (owner, value, index, is_arg)) in zip(module.values, table.places.items()):
            model_owner = v.block.region.owner if v.is_block_arg else v.defining_op
            assert (is_arg, index, owner) == (v.is_block_arg, v.index, model_owner.mlir), key
            assert value == v.mlir, key
            assert table.names.names[key] == _model_names(module, v, main), key


def test_a_tree_cut_by_depth_says_so_in_text_dot_and_json(tmp_path):
    from sdy_dl.audit.render import CUT_TEXT, text_lines, to_dot

    audit = Audit(parse_module_text(jax_programs.lowered("mlp")), CLINGO)
    whole, cut = audit.explain("result:0", depth=100), audit.explain("result:0", depth=1)
    assert not any(n.truncated == "depth" for n in whole.walk())
    assert any(n.truncated == "depth" for n in cut.walk())
    assert CUT_TEXT["depth"] in "\n".join(text_lines(cut))
    assert CUT_TEXT["depth"] not in "\n".join(text_lines(whole))
    assert CUT_TEXT["depth"] in to_dot([cut]) and CUT_TEXT["depth"] not in to_dot([whole])
    assert '"truncated": "depth"' in json.dumps(cut.to_json())


def test_explain_writes_its_output_file_whole_or_not_at_all(tmp_path):
    path = tmp_path / "m.mlir"
    path.write_text(CHAIN)
    out = tmp_path / "tree.json"
    args = ["explain", str(path), "%1", "--format", "json", "--engine", "clingo", "--quiet"]
    printed = CliRunner().invoke(main, args)
    written = CliRunner().invoke(main, args + ["-o", str(out)])
    assert written.exit_code == 0 and written.output == ""
    assert out.read_text() == printed.output and json.loads(out.read_text())["value"] == "%1"
    everything = CliRunner().invoke(main, ["explain", str(path), "--all", "--engine", "clingo",
                                           "--quiet", "-o", str(out)])
    assert everything.exit_code == 0 and out.read_text().startswith("%arg0 = ")
    kept = out.read_text()
    failed = CliRunner().invoke(main, args[:2] + ["%7"] + args[3:] + ["-o", str(out)])
    assert failed.exit_code == 1 and "no value '%7'" in failed.stderr
    assert out.read_text() == kept   # untouched
    missing = tmp_path / "new.txt"
    CliRunner().invoke(main, args[:2] + ["%7"] + args[3:] + ["-o", str(missing)])
    assert not missing.exists()
