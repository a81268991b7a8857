"""Typed pass options (``--pass-option``) and ``--allow-unregistered-dialect``.

The option table rejects what Shardy's pass-option parser rejects (unknown
keys, keys of other passes, badly typed values) with one usage line (exit 2);
accepted options change the output exactly as they change jaxlib's.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from oracle import assert_same, normalize, shardy
from sdy_dl.cli import main
from sdy_dl.errors import UsageError
import sdy_dl
from sdy_dl.passes import PassOptions, get_pass, options_of
from sdy_dl.passes.import_.import_pipeline import DEDUP_FUNCTIONS_FULLY
from sdy_dl.passes.options import resolve_options
from sdy_dl.pipeline import make_options, pipeline_options

MESH = 'sdy.mesh @mesh = <["a"=4, "b"=2]>\n'

CALLS = MESH + '''func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> tensor<8x8xf32> {
  %0 = call @f(%arg0) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = call @f(%0) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %2 = stablehlo.negate %1 : tensor<8x8xf32>
  return %2 : tensor<8x8xf32>
}
func.func private @f(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = stablehlo.abs %arg0 : tensor<8x8xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{}, {"b"}]> : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
'''

# Priorities and a dot: op-priority bands and the strategies give different results.
PRIORITIES = MESH + '''func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}p1, {?}]>},
                %arg1: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", ?}, {"a", ?}p0]>},
                %arg2: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %1 = stablehlo.add %0, %arg2 : tensor<8x8xf32>
  %2 = stablehlo.transpose %1, dims = [1, 0] : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %3 = stablehlo.broadcast_in_dim %2, dims = [0, 1] : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %3 : tensor<8x8xf32>
}
'''

UNREGISTERED = MESH + '''func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.negate %arg0 : tensor<8x8xf32>
  %1 = "foo.bar"(%0) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %2 = stablehlo.abs %1 : tensor<8x8xf32>
  return %2 : tensor<8x8xf32>
}
'''

#: The pipeline as its passes, with import-func-calls' option left open (%s).
PIPELINE = ("sdy-import-pipeline,sdy-flatten-call-graph,symbol-dce,"
            "sdy-import-func-calls{add-data-flow-edges-on-named-computations=%s},symbol-dce,"
            "sdy-apply-sharding-constraints,sdy-sharding-group-import,sdy-pre-order-funcs,"
            "sdy-user-priority-propagate{keep-sharding-rules=true},sdy-export-named-computations,"
            "sdy-propagate-to-func-results,sdy-unflatten-call-graph,symbol-dce,"
            "sdy-insert-func-call-reshards,sdy-export-pipeline")


def cli(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input)


def test_every_pipeline_option_is_declared_once_by_a_registered_pass():
    import sdy_dl.passes.all  # noqa: F401
    from sdy_dl.passes import PASSES

    names = [o.name for o in pipeline_options()]
    assert len(names) == len(set(names))
    declared = {o.name: o for spec in PASSES.values() for o in spec.options}
    for option in pipeline_options():
        assert option.parse(option.default_text()) == option.default
        if option.name != "enable-insert-explicit-collectives":   # the pipeline's own
            assert declared[option.name] is option, option.name
    # Passes that read one option share one declaration (one object).
    for spec in PASSES.values():
        for option in spec.options:
            assert declared[option.name] is option, (spec.name, option.name)



def test_each_pass_registers_in_the_module_named_after_it():
    import sdy_dl.passes.all  # noqa: F401
    from sdy_dl.passes import PASSES, module_of

    for name, spec in PASSES.items():
        assert spec.run.__module__ == module_of(name), name
    assert module_of("no-such-pass") is None and module_of("x.y") is None
    assert module_of("--init--") is None   # (not a package's own __init__ again)


def test_a_pipeline_run_imports_only_the_passes_it_runs(tmp_path):
    """(A fresh interpreter: the pass modules this process imported stay imported.
    It runs in ``tmp_path``: from the checkout, the source tree's ``sdy_dl`` would
    shadow an installed one, which holds ``sdy_dl.cli``.)"""
    import subprocess
    import sys

    path = tmp_path / "m.mlir"
    path.write_text(CALLS)
    code = ("import sys; from sdy_dl.cli import main\n"
            "try: main(['propagate', '--quiet', '--engine', 'python', sys.argv[1], '-o', sys.argv[2]])\n"
            "except SystemExit as e: assert not e.code, e.code\n"
            "print(sorted(m for m in sys.modules if m.startswith('sdy_dl.passes.')))")
    out = subprocess.run([sys.executable, "-c", code, str(path), str(tmp_path / "out.mlir")],
                         capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    loaded = eval(out)
    assert "sdy_dl.passes.import_.symbol_dce" in loaded
    for unused in ("sdy_dl.passes.all", "sdy_dl.passes.export.reshard_to_collectives",
                   "sdy_dl.passes.import_.add_func_data_flow_edges"):
        assert unused not in loaded


@pytest.mark.parametrize("item, error", [
    ("propagation-stratgy=basic", "has no option 'propagation-stratgy'"),
    ("dedup-functions-fully=maybe", "'maybe' is not a valid value (expected true or false)"),
    ("propagation-strategy=fast", "expected one of basic, aggressive, basic-then-aggressive"),
    ("dedup-functions-fully", "is not KEY=VALUE"),
    ("debug-sharding-origins=true", "only the default (false) is implemented"),
])
def test_bad_option_is_a_one_line_usage_error(tmp_path, item, error):
    path = tmp_path / "m.mlir"
    path.write_text(CALLS)
    out = tmp_path / "out.mlir"
    result = cli("propagate", "--quiet", str(path), "-o", str(out), "--pass-option", item)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sdy-dl: error: --pass-option")
    assert error in lines[0]
    assert not out.exists()


def test_option_of_another_pass_is_rejected_listing_the_valid_ones():
    with pytest.raises(UsageError, match=r"has no option 'dedup-functions-fully' \(valid: "
                                         "add-data-flow-edges-on-named-computations\\)"):
        PassOptions.create("import-func-calls", ["dedup-functions-fully=true"])
    # Shardy's basic propagation has no strategy option either.
    assert "propagation-strategy" not in {o.name for o in options_of("basic-propagate")}
    with pytest.raises(UsageError):
        PassOptions.create("basic-propagate", ["propagation-strategy=basic"])


def test_values_parse_as_mlir_parses_them():
    assert make_options(["dedup-functions-fully=True", "run-op-priority-propagation=0",
                         "propagation-strategy=basic"]).values == {
        "dedup-functions-fully": True, "run-op-priority-propagation": False,
        "propagation-strategy": "basic"}


def test_passes_lists_the_options():
    result = cli("passes")
    assert result.exit_code == 0
    assert "options: add-data-flow-edges-on-named-computations" in result.output
    assert "propagation-strategy=<basic|aggressive|basic-then-aggressive> (default aggressive)" \
        in result.output


@pytest.mark.parametrize("value", ["true", "false"])
def test_add_data_flow_edges_on_named_computations(tmp_path, value):
    path = tmp_path / "m.mlir"
    path.write_text(CALLS)
    result = cli("pass", "import-func-calls", str(path), "--pass-option",
                 f"add-data-flow-edges-on-named-computations={value}")
    assert result.exit_code == 0, result.output
    expected = shardy(CALLS, "sdy-import-func-calls{add-data-flow-edges-on-named-computations=%s}"
                      % value)
    assert_same(expected, normalize(result.output))
    assert ("sdy.data_flow_edge" in expected) == (value == "true")


def test_pipeline_without_data_flow_edges_on_named_computations(tmp_path):
    assert shardy(CALLS, PIPELINE % "true") == shardy(CALLS, "sdy-propagation-pipeline")
    path = tmp_path / "m.mlir"
    path.write_text(CALLS)
    result = cli("propagate", "--quiet", str(path), "--pass-option",
                 "add-data-flow-edges-on-named-computations=false")
    assert result.exit_code == 0, result.output
    assert_same(shardy(CALLS, PIPELINE % "false"), normalize(result.output))


@pytest.mark.parametrize("pass_name, options", [
    ("user-priority-propagate", "run-op-priority-propagation=false"),
    ("op-priority-propagate", "run-op-priority-propagation=false"),
    ("aggressive-propagate", "propagation-strategy=basic"),
    ("aggressive-propagate", "propagation-strategy=basic-then-aggressive"),
])
def test_propagation_options_equal_shardy(pass_name, options):
    from oracle import ours

    key, _, value = options.partition("=")
    expected = shardy(PRIORITIES, f"sdy-{pass_name}{{{options}}}")
    assert_same(expected, normalize(ours(PRIORITIES, pass_name, options=dict([(key, value)]))))


def test_allow_unregistered_dialect(tmp_path):
    from sdy_dl.ir.context import allow_unregistered_dialects

    path = tmp_path / "m.mlir"
    path.write_text(UNREGISTERED)
    rejected = cli("propagate", "--quiet", str(path))
    assert rejected.exit_code == 1
    assert "unregistered dialect" in rejected.output
    for command in (["propagate", "--quiet"], ["pass", "symbol-dce"], ["show"],
                    ["rules", "annotate"]):
        result = cli(*command, "--allow-unregistered-dialect", str(path))
        assert result.exit_code == 0, (command, result.output)
    result = cli("propagate", "--quiet", "--allow-unregistered-dialect", str(path))
    allow_unregistered_dialects(True)
    try:
        expected = shardy(UNREGISTERED, "sdy-propagation-pipeline")
        assert_same(expected, normalize(result.output))
    finally:
        allow_unregistered_dialects(False)
    assert PassOptions()[DEDUP_FUNCTIONS_FULLY] is False


@pytest.mark.parametrize("given, error", [
    ({"enable-full-version": "maybe"}, "'maybe' is not a valid value (expected true or false)"),
    ({"propagation-strategy": "bogus"}, "expected one of basic, aggressive, basic-then-aggressive"),
    ({"propagation-stratgy": "basic"}, "has no option 'propagation-stratgy' (valid: "),
    ({"": True}, "is not an option name"),
    ({"=": True}, "has no option '='"),
    ({1: True}, "is not an option name"),
    ({"dedup-functions-fully": 1}, "1 is not a valid value (expected true or false)"),
    ({"dedup-functions-fully": None}, "None is not a valid value"),
    ({"conservative-propagation": True, "conservative_propagation": False}, "given twice"),
    (["dedup-functions-fully=true"], "must be a mapping"),
    ({"debug-sharding-origins": True}, "only the default (false) is implemented"),
])
def test_python_api_rejects_what_the_cli_rejects(given, error):
    """``sdy_dl.propagate(pass_options=...)`` goes through the table the CLI
    uses: unknown keys and badly typed values are usage errors before anything runs."""
    with pytest.raises(UsageError) as info:
        sdy_dl.propagate(CALLS, engine="clingo", pass_options=given)
    assert error in info.value.message


@pytest.mark.parametrize("given, flag", [
    ({"enable-insert-explicit-collectives": "false"}, "--quiet"),
    ({"enable_insert_explicit_collectives": True}, "--explicit-collectives"),
    ({"conservative-propagation": True}, "--conservative"),
    ({"keep-sharding-rules": "true"}, "--keep-sharding-rules"),
    ({"propagation-strategy": "basic", "run-op-priority-propagation": False},
     "--pass-option=propagation-strategy=basic --pass-option=run-op-priority-propagation=false"),
])
def test_python_api_options_equal_the_cli(tmp_path, given, flag):
    """Every key given to ``sdy_dl.propagate`` behaves exactly like its
    ``--pass-option`` (text values parse as MLIR parses them: "false" is false)."""
    path = tmp_path / "m.mlir"
    path.write_text(PRIORITIES)
    result = cli("propagate", "--quiet", "--engine", "clingo", str(path), *flag.split())
    assert result.exit_code == 0, result.output
    assert sdy_dl.propagate(PRIORITIES, engine="clingo", pass_options=given).text == result.output


def test_python_api_rejects_an_unknown_engine():
    with pytest.raises(UsageError, match="unknown engine 'fast'"):
        sdy_dl.propagate(CALLS, engine="fast")


def test_an_option_given_as_flag_and_as_key_agrees():
    text = sdy_dl.propagate(PRIORITIES, engine="clingo", conservative=True,
                            pass_options={"conservative_propagation": "true"}).text
    assert text == sdy_dl.propagate(PRIORITIES, engine="clingo", conservative=True).text


def test_records_are_immutable_values():
    """Options, registered passes, stages, the rules a database covers, the
    sharding parser's tokens, stage decisions and group copies are records
    (named tuples, not dataclasses whose methods Python would compile at every
    start): fields read by name, assignment refused, equal and hashed alike by
    value, printed with their fields."""
    from sdy_dl.passes import Stage
    from sdy_dl.propagation.decisions import Decision
    from sdy_dl.propagation.groups import GroupCopy
    from sdy_dl.rules.db import load_rule_db
    from sdy_dl.sharding import _tokenize

    option = DEDUP_FUNCTIONS_FULLY
    spec = get_pass("symbol-dce")
    covered = load_rule_db().ops()[0]
    token = _tokenize("{1}")[1]
    decision = Decision("step", (), ())
    copy_to = GroupCopy(None, 1, 0, 2)
    for record in (option, spec, Stage("step"), covered, token, decision, copy_to):
        copy = type(record)(*record)
        assert copy == record and hash(copy) == hash(record) and copy is not record
        assert repr(record).startswith(f"{type(record).__name__}({record._fields[0]}=")
        with pytest.raises(AttributeError):
            record.name = "other"   # (a field of each, or none: refused alike)
    assert (option.name, option.default) == ("dedup-functions-fully", False)
    assert spec.name == "symbol-dce" and callable(spec.run)
    assert (token.kind, token.value, token.pos, token.end) == ("int", 1, 1, 2)
    assert (decision.stage, copy_to.k2) == ("step", 2)
