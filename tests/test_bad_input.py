"""Bad input never crashes: one case per kind of input that once ended in a traceback.

Every case runs a command through the CLI in-process and checks the exact
exit status (1 for bad input, 2 for usage errors, 0 where sdy-dl works as
Shardy does), exactly one ``sdy-dl: error:`` line on stderr naming the place,
no traceback, no output file and untouched existing targets.
"""

from __future__ import annotations

import os
import stat
import threading

import pytest
from click.testing import CliRunner

from sdy_dl.cli import main

T = "tensor<8xf32>"
MESH = 'sdy.mesh @mesh = <["a"=2]>\n'
SHARDED_ARG = f'%arg0: {T} {{sdy.sharding = #sdy.sharding<@mesh, [{{"a"}}]>}}'


def module(body: str, extra: str = "", mesh: str = MESH) -> str:
    return (f"{mesh}func.func @main({SHARDED_ARG}) -> {T} {{\n{body}\n}}\n{extra}")


def nested_whiles(depth: int, sharded: bool = True) -> str:
    """``depth`` while loops nested in each other's bodies (the argument sharded or not)."""
    head, tail = [], []
    for d in range(depth):
        x = "%arg0" if d == 0 else f"%it{d - 1}"
        head += [f"%w{d} = stablehlo.while(%it{d} = {x}) : {T}", " cond {",
                 f"%c{d} = stablehlo.constant dense<true> : tensor<i1>",
                 f"stablehlo.return %c{d} : tensor<i1>", "} do {"]
        tail = [f"stablehlo.return %w{d + 1} : {T}" if d + 1 < depth else
                f"stablehlo.return %n : {T}", "}"] + tail
    inner = [f"%n = stablehlo.negate %it{depth - 1} : {T}"]
    text = module("\n".join(head + inner + tail + [f"return %w0 : {T}"]))
    return text if sharded else text.replace(SHARDED_ARG, f"%arg0: {T}")


CALLS_EACH_OTHER = module(f"%0 = call @f(%arg0) : ({T}) -> {T}\nreturn %0 : {T}", f"""
func.func private @f(%arg0: {T}) -> {T} {{
  %0 = call @g(%arg0) : ({T}) -> {T}
  return %0 : {T}
}}
func.func private @g(%arg0: {T}) -> {T} {{
  %0 = call @f(%arg0) : ({T}) -> {T}
  return %0 : {T}
}}""")

CALL_WITHOUT_BODY = module(f"%0 = call @ext(%arg0) : ({T}) -> {T}\nreturn %0 : {T}",
                           f"func.func private @ext(%arg0: {T}) -> {T}")

COMPLEX_CONSTANT = module(
    "%c = stablehlo.constant dense<(2.0,1.0)> : tensor<complex<f32>>\n"
    "%b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<complex<f32>>) -> tensor<8xcomplex<f32>>\n"
    f"%r = stablehlo.real %b : (tensor<8xcomplex<f32>>) -> {T}\n"
    f"%s = stablehlo.add %arg0, %r : {T}\nreturn %s : {T}")

QUOTED_SYMBOL = module(f'%0 = call @"f\\22q\\\\"(%arg0) : ({T}) -> {T}\nreturn %0 : {T}',
                       f'func.func private @"f\\22q\\\\"(%arg0: {T}) -> {T} {{\n'
                       f'  return %arg0 : {T}\n}}')

NON_UTF8_SYMBOL = QUOTED_SYMBOL.replace("\\22q", "\\FFq")

DYNAMIC = f"""func.func @main(%arg0: tensor<?x8xf32>, %arg1: tensor<8x4xf32>) -> tensor<?x4xf32> {{
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<?x8xf32>, tensor<8x4xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}}
"""

PLAIN = f"func.func @main(%arg0: {T}) -> {T} {{\n  return %arg0 : {T}\n}}\n"
SHARDED = module(f"%0 = stablehlo.negate %arg0 : {T}\nreturn %0 : {T}")

BILLION_LAUGHS = "\n".join(
    ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]) + "\n"

RULE_WITH = """description: test
custom_calls:
  my_op:
    doc: x
    let:
      n: {expr}
    factors:
      - size: operands[0].shape[0] + n
        dims: {{all: 0}}
"""

CUSTOM_CALL = (f"func.func @main(%arg0: {T}) -> {T} {{\n"
               f"  %0 = stablehlo.custom_call @my_op(%arg0) : ({T}) -> {T}\n"
               f"  return %0 : {T}\n}}\n")


def run(args, files: dict[str, str | bytes], tmp_path, stdin: bytes | None = None):
    """Write ``files`` under ``tmp_path``, run ``sdy-dl ARGS`` ({name} = a file's path)."""
    paths = {}
    for name, content in files.items():
        p = tmp_path / name
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
        paths[name] = str(p)
    paths["out"] = str(tmp_path / "out.mlir")
    paths["tmp"] = str(tmp_path)
    argv = [a.format(**paths) for a in args]
    return CliRunner().invoke(main, argv, input=stdin), paths


def assert_error(result, code: int, *place_and_words: str):
    """Exit ``code``, one ``sdy-dl: error:`` line on stderr containing the words, no traceback."""
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), (
        f"exception {result.exception!r}")
    assert result.exit_code == code, (result.exit_code, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sdy-dl: error: "), result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert not any(c < " " or "\x7f" <= c <= "\x9f" for c in lines[0]), "control characters"
    for w in place_and_words:
        assert w in lines[0], (w, lines[0])


# (id, args, files, stdin, exit code, words the error line contains; {x} = path of file x)
CASES = [
    ("recursive-calls", ["propagate", "{m}", "-o", "{out}", "--quiet"],
     {"m": CALLS_EACH_OTHER}, None, 1, ["{m}:12:8:", "recursive call graph (@f -> @g -> @f)"]),
    ("recursive-calls-one-pass", ["pass", "flatten-call-graph", "{m}", "-o", "{out}"],
     {"m": CALLS_EACH_OTHER}, None, 1, ["{m}:12:8:", "recursive call graph"]),
    ("call-without-body", ["propagate", "{m}", "-o", "{out}", "--quiet"],
     {"m": CALL_WITHOUT_BODY}, None, 1, ["{m}:3:6:", "call to @ext, a function without a body"]),
    ("dynamic-shape-annotate", ["rules", "annotate", "{m}", "-o", "{out}"],
     {"m": DYNAMIC}, None, 1, ["{m}:2:8:", "expected a ranked tensor with a static shape"]),
    ("dynamic-shape-explicit-reshards",
     ["pass", "insert-explicit-reshards", "{m}", "-o", "{out}", "--pass-option",
      "enable-full-version=true"],
     {"m": 'sdy.mesh @mesh = <["x"=2]>\n' + DYNAMIC.replace(
         "%arg0: tensor<?x8xf32>", '%arg0: tensor<?x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}')},
     None, 1, ["{m}:3:8:", "tensors without a static shape are not supported"]),
    ("non-utf8-symbol", ["propagate", "{m}", "-o", "{out}", "--quiet"],
     {"m": NON_UTF8_SYMBOL}, None, 1, ["{m}:3:14:", "is not valid UTF-8"]),
    ("non-utf8-axis-name", ["show", "{m}"],
     {"m": SHARDED.replace('[{"a"}]>', '[{"a\\FFb"}]>')}, None, 1,
     ["{m}:2:79:", 'string "a\\FFb" is not valid UTF-8']),
    ("non-utf8-mesh-axis", ["propagate", "{m}", "-o", "{out}", "--quiet"],
     {"m": SHARDED.replace('"a"=2]', '"a\\C3("=2]')}, None, 1, ["{m}:1:22:", "not valid UTF-8"]),
    ("non-utf8-result-info", ["explain", "{m}", "--all"],
     {"m": SHARDED.replace(f") -> {T} {{", f') -> ({T} {{jax.result_info = "r\\FF"}}) {{')},
     None, 1, ["{m}:2:", "not valid UTF-8"]),
    ("non-utf8-custom-call-target", ["conflicts", "{m}"],
     {"m": SHARDED.replace("stablehlo.negate %arg0", 'stablehlo.custom_call @"t\\80"(%arg0)')
      .replace(f"%arg0 : {T}", f"%arg0) : ({T}) -> {T}").replace("(%arg0)) :", "(%arg0) :")},
     None, 1, ["{m}:3:", "not valid UTF-8"]),
    ("non-utf8-named-computation", ["report", "{m}", "-o", "{out}"],
     {"m": module(f'%0 = sdy.named_computation<"n\\FF">(%arg0) (%a: {T}) {{\n'
                  f'  sdy.return %a : {T}\n}} : ({T}) -> {T}\nreturn %0 : {T}')},
     None, 1, ["{m}:3:", "not valid UTF-8"]),
    ("nul-axis-name-after-a-comment", ["propagate", "{m}", "-o", "{out}", "--quiet"],
     {"m": SHARDED.replace('"a"', '// backend_config =\n"a\\00"')}, None, 1,
     ["{m}:2:3:", "holds a NUL character"]),
    ("non-utf8-axis-name-after-a-comment", ["show", "{m}"],
     {"m": SHARDED.replace('[{"a"}]>', '[{// {backend_config =\n"a\\FFb"}]>')}, None, 1,
     ["{m}:3:3:", 'string "a\\FFb" is not valid UTF-8']),
    ("location-file-of-the-parser", ["explain", "{m}", "%0"],
     {"m": SHARDED.replace(f"stablehlo.negate %arg0 : {T}", f"stablehlo.negate %arg0 : {T} "
                           'loc(// backend_config =\n"\\00module text":77:5)')}, None, 1,
     ["{m}:4:2:", "holds a NUL character"]),
    ("nul-axis-name", ["propagate", "{m}", "-o", "{out}", "--quiet"],
     {"m": SHARDED.replace('"a"', '"a\\00"')}, None, 1, ["{m}:1:22:", "holds a NUL character"]),
    ("non-utf8-stdin", ["show", "-"], {}, b"func.func @main() {\n  return\n}\xff\n", 1,
     ["<stdin>:3:2:", "not UTF-8"]),
    ("non-utf8-file", ["propagate", "{m}", "-o", "{out}"], {"m": b"\xfe\xff"}, None, 1,
     ["{m}:1:1:", "not UTF-8"]),
    ("nul-byte-file", ["show", "{m}"], {"m": b"func.func @main() {\n  re\0turn\n}\n"}, None, 1,
     ["{m}:2:5: a NUL byte (inputs are text)"]),
    ("nul-byte-stdin", ["propagate", "-", "-o", "{out}", "--quiet"], {},
     SHARDED.encode().replace(b"negate", b"negate\0"), 1, ["<stdin>:3:22: a NUL byte"]),
    ("nul-byte-rule-file", ["propagate", "{m}", "--rules", "{r}", "-o", "{out}", "--quiet"],
     {"m": CUSTOM_CALL, "r": RULE_WITH.format(expr="1").encode() + b"\0"}, None, 1,
     ["{r}:10:1: a NUL byte"]),
    ("nul-byte-cost-model", ["comms", "{m}", "--cost-model", "{c}", "-o", "{out}", "--quiet"],
     {"m": SHARDED, "c": b"default: {bandwidth: 1, latency: 0}\0\n"}, None, 1,
     ["{c}:1:36: a NUL byte"]),
    ("cost-model-empty-name", ["comms", "{m}", "--cost-model", "", "-o", "{out}", "--quiet"],
     {"m": SHARDED}, None, 2, ["the cost model file name is empty (--cost-model '')"]),
    ("mesh-2^33", ["propagate", "{m}", "-o", "{out}", "--quiet"],
     {"m": SHARDED.replace('"a"=2]', '"a"=8589934592]')}, None, 1,
     ["{m}:1:1:", "8589934592 devices; at most 2147483647"]),
    ("mesh-2^16x2^16", ["show", "{m}"],
     {"m": SHARDED.replace('"a"=2]', '"a"=65536, "b"=65536]')}, None, 1, ["{m}:1:1:", "devices"]),
    ("dim-2^32", ["propagate", "{m}", "-o", "{out}", "--quiet"],
     {"m": SHARDED.replace("8xf32", "4294967296xf32")}, None, 1,
     ["{m}", "beyond the 32-bit numbers"]),
    ("yaml-recursive-alias", ["rules", "check", "{r}"], {"r": "a: &x [*x]\n"}, None, 1,
     ["{r}:1:4:", "alias refers to itself"]),
    ("yaml-python-tag", ["rules", "check", "{r}"],
     {"r": "description: x\ncustom_calls:\n  foo: !!python/name:os.system\n"}, None, 1,
     ["{r}:3:8:", "python/name"]),
    ("yaml-billion-laughs", ["rules", "check", "{r}"], {"r": BILLION_LAUGHS}, None, 1,
     ["{r}:", "expand to more than"]),
    ("yaml-nested-too-deeply", ["rules", "check", "{r}"],
     {"r": "a: " + "[" * 3000 + "]" * 3000 + "\n"}, None, 1, ["{r}", "nested too deeply"]),
    ("nested-too-deeply", ["propagate", "{m}", "-o", "{out}", "--quiet"],
     {"m": nested_whiles(2100, False)}, None, 1,
     ["{m}:9995:34: nested more than 2000 brackets deep (the parser would overflow the stack)"]),
    ("nested-too-deeply-unclosed", ["show", "{m}"],
     {"m": f"func.func @main() {{\n  %0 = stablehlo.constant {{x = {'[' * 5000}\n"}, None, 1,
     ["{m}:2:2030: nested more than 2000 brackets deep"]),
    ("rule-expression-too-large", ["rules", "annotate", "{m}", "--rules", "{r}", "-o", "{out}"],
     {"m": CUSTOM_CALL, "r": RULE_WITH.format(expr="len([0]*99999999999)")}, None, 1,
     ["{r}:8:", "99999999999 items"]),
    ("rule-expression-too-many-steps",
     ["rules", "annotate", "{m}", "--rules", "{r}", "-o", "{out}"],
     {"m": CUSTOM_CALL, "r": RULE_WITH.format(
         expr="len([i for i in range(60000) for j in range(60000) if i == j])")}, None, 1,
     ["{r}:8:", "comprehension steps"]),
    ("rule-factor-size-beyond-int64", ["rules", "annotate", "{m}", "--rules", "{r}", "-o", "{out}"],
     {"m": CUSTOM_CALL, "r": RULE_WITH.format(expr="99999999999999999999")}, None, 1,
     ["{r}:8:15:", "factor size 100000000000000000007 does not fit in 64 bits"]),
    ("rule-factor-size-below-int64", ["propagate", "{m}", "--rules", "{r}", "-o", "{out}"],
     {"m": CUSTOM_CALL, "r": RULE_WITH.format(expr="-99999999999999999999")}, None, 1,
     ["{r}:8:15:", "does not fit in 64 bits"]),
    ("rule-factor-size-negative", ["propagate", "{m}", "--rules", "{r}", "-o", "{out}"],
     {"m": CUSTOM_CALL, "r": RULE_WITH.format(expr="-11")}, None, 1,
     ["{r}:8:15: factor size -3 is negative (while building the rule of "
      "stablehlo.custom_call at line 2)"]),
    ("rule-factor-size-zero", ["rules", "annotate", "{m}", "--rules", "{r}", "-o", "{out}"],
     {"m": CUSTOM_CALL, "r": RULE_WITH.format(expr="-8")}, None, 1,
     ["{r}:8:15: factor size 0 on operand 0 dim 0 of size 8 (a factor of size 0 maps only "
      "dims of size 0)"]),
    ("rule-expression-nested", ["rules", "annotate", "{m}", "--rules", "{r}", "-o", "{out}"],
     {"m": CUSTOM_CALL, "r": RULE_WITH.format(expr="+".join(["1"] * 5000))}, None, 1,
     ["{r}:", "nested too deeply"]),
    ("emit-out-dir-under-a-file", ["emit", "{m}", "--out-dir", "{m}/sub", "--quiet"],
     {"m": SHARDED}, None, 1, ["{m}/sub:", "cannot write the output directory"]),
    ("emit-nothing", ["emit", "{m}", "--out-dir", "{tmp}/emitted", "--quiet"],
     {"m": PLAIN}, None, 1, ["{m}:", "nothing to emit"]),
    ("missing-file", ["propagate", "{tmp}/nope.mlir", "-o", "{out}"], {}, None, 1,
     ["{tmp}/nope.mlir:", "No such file"]),
    ("empty-file", ["propagate", "{m}", "-o", "{out}"], {"m": ""}, None, 1,
     ["{m}:", "empty module file"]),
    ("parse-error", ["propagate", "{m}", "-o", "{out}"], {"m": "func.func @main( {\n"}, None, 1,
     ["{m}:1:"]),
    ("unknown-pass", ["pass", "no-such-pass", "{m}", "-o", "{out}"], {"m": PLAIN}, None, 2,
     ["'NAME'", "unknown pass 'no-such-pass'"]),
    ("unknown-command", ["no-such-command"], {}, None, 2, ["No such command"]),
    ("bad-pass-option", ["propagate", "{m}", "--pass-option", "novalue"], {"m": PLAIN}, None, 2,
     ["--pass-option", "not KEY=VALUE"]),
    ("whatif-empty-output-name", ["whatif", "{m}", "--unset", "%arg0", "-o", "", "--quiet"],
     {"m": SHARDED}, None, 2, ["the output file name is empty"]),
    ("whatif-empty-input-name", ["whatif", "{m}", "--unset", "%arg0", "--save-input", "",
                                 "-o", "{out}", "--quiet"],
     {"m": SHARDED}, None, 2, ["the output file name is empty"]),
    ("whatif-second-output-fails", ["whatif", "{m}", "--unset", "%arg0", "--save-input", "{out}",
                                    "-o", "{tmp}/no/such/dir/x.mlir", "--quiet"],
     {"m": SHARDED}, None, 1, ["{tmp}/no/such/dir/x.mlir:", "No such file or directory"]),
    ("whatif-outputs-same-file", ["whatif", "{m}", "--unset", "%arg0", "--save-input", "{out}",
                                  "-o", "{tmp}/./out.mlir", "--quiet"],
     {"m": SHARDED}, None, 2, ["two outputs name the same file: {out} and {tmp}/./out.mlir"]),
    ("why-not-axes-as-mlir-strings", ["explain", "{m}", "%0", "--why-not", "a", "--quiet"],
     {"m": SHARDED.replace('"a"', '"a\\0Ab"').replace('=2]', '=2, ""=2]')}, None, 1,
     ["{m}:", 'no axis "a" in the module\'s meshes; axes: "", "a\\0Ab"']),
    ("whatif-mesh-names-as-symbols", ["whatif", "{m}", "--set", "%arg0=<@mesh, [{{}}]>", "--quiet"],
     {"m": SHARDED.replace("@mesh", '@"m\\22). x(1"')}, None, 1,
     ["{m}:", 'unknown mesh @mesh; meshes: @"m\\22). x(1" = <["a"=2]>']),
    ("diff-missing-file", ["diff", "{m}", "{tmp}/nope.mlir"], {"m": PLAIN}, None, 2,
     ["{tmp}/nope.mlir: cannot read module: No such file"]),
    ("diff-parse-error", ["diff", "-", "{m}"], {"m": PLAIN}, b"func.func @main( {\n", 2,
     ["<stdin>:1:"]),
    ("whatif-partition-spec-nested-too-deeply",
     ["whatif", "{m}", "--set", "%arg0=P(" + "+".join(["1"] * 20000) + ")", "--quiet"],
     {"m": SHARDED}, None, 1, ["{m}:2:", "as a PartitionSpec", "): nested too deeply"]),
    ("whatif-partition-spec-entry-nested-too-deeply",
     ["whatif", "{m}", "--set", "%arg0=P(" + "-" * 20000 + "1)", "--quiet"],
     {"m": SHARDED}, None, 1, ["{m}:2:", "as a PartitionSpec", "): nested too deeply"]),
    ("control-characters-escaped", ["whatif", "{m}", "--set", '%arg0=<@mesh, [{{"\x1b[2Ja"}}]>',
                                    "--quiet"],
     {"m": SHARDED}, None, 1, ['unknown axis name: "\\x1b[2Ja"']),
    ("diff-stdin-twice", ["diff", "-", "-"], {}, PLAIN.encode(), 2,
     ["A and B cannot both be standard input"]),
    ("whatif-module-without-functions", ["whatif", "{m}", "--unset", "%arg0", "--quiet"],
     {"m": MESH}, None, 1, ["{m}: no value '%arg0' in the output; close matches: none"]),
    ("error-at-an-op-located-elsewhere", ["propagate", "{m}", "-o", "{out}", "--quiet"],
     {"m": SHARDED.replace(f"%0 = stablehlo.negate %arg0 : {T}",
                           f'%0 = stablehlo.negate %arg0 {{sdy.sharding = #sdy.sharding_per_value'
                           f'<[<@mesh, [{{"zz"}}]>]>}} : {T} loc("model.py":99:7)')},
     None, 1, ["{m}: 'stablehlo.negate' op result - unknown axis name"]),
    ("compiled-without-souffle", ["propagate", "{m}", "--compiled", "-o", "{out}"],
     {"m": PLAIN}, None, 2, ["--compiled applies to --engine souffle, not auto"]),
    ("wait-without-compiled", ["whatif", "{m}", "--unset", "%arg0", "--engine", "souffle",
                               "--wait-for-compile", "-o", "{out}"],
     {"m": SHARDED}, None, 2, ["--wait-for-compile applies with --compiled"]),
    ("output-is-a-directory", ["propagate", "{m}", "-o", "{tmp}", "--quiet"], {"m": PLAIN}, None,
     2, ["is a directory"]),
]


@pytest.mark.parametrize("args, files, stdin, code, words", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_is_one_located_line(tmp_path, args, files, stdin, code, words):
    result, paths = run(args, files, tmp_path, stdin)
    assert_error(result, code, *[w.format(**paths) for w in words])
    assert not os.path.exists(paths["out"])
    assert not os.path.exists(os.path.join(paths["tmp"], "emitted"))
    assert sorted(os.listdir(tmp_path)) == sorted(files), "no stray temporary files"


# -- inputs sdy-dl must handle as Shardy does ----------------------------------------------------

OPAQUE_BACKEND_CONFIG = SHARDED.replace(
    f"stablehlo.negate %arg0 : {T}",
    f'stablehlo.custom_call @foo(%arg0) {{backend_config = "\\00\\FF\\80"}} : ({T}) -> {T}')
#: The same, its attribute spelt over comments and lines, after another attribute.
OPAQUE_BACKEND_CONFIG_SPELT_OVER_LINES = SHARDED.replace(
    f"stablehlo.negate %arg0 : {T}",
    f'stablehlo.custom_call @foo(%arg0) {{has_side_effect = true, // x\n backend_config'
    f' // "y"\n = // z\n "\\00\\FF\\80"}} : ({T}) -> {T}')


@pytest.mark.parametrize("text", [COMPLEX_CONSTANT, QUOTED_SYMBOL, nested_whiles(1100, False),
                                  SHARDED.replace('"a"=2]', '"a"=2147483647]'),
                                  OPAQUE_BACKEND_CONFIG, OPAQUE_BACKEND_CONFIG_SPELT_OVER_LINES],
                         ids=["complex-constant", "quoted-symbol", "1100-nested-whiles",
                              "mesh-2^31-1", "opaque-backend-config",
                              "opaque-backend-config-over-lines"])
def test_inputs_that_work(tmp_path, text):
    check_works_as_shardy(tmp_path, text)


@pytest.mark.slow
def test_deep_nesting_with_shardings(tmp_path):
    """1100 nested while loops whose values all get a sharding."""
    check_works_as_shardy(tmp_path, nested_whiles(1100))


def check_works_as_shardy(tmp_path, text):
    from oracle import assert_same, normalize, shardy

    result, paths = run(["propagate", "{m}", "-o", "{out}", "--quiet"], {"m": text}, tmp_path)
    assert result.exit_code == 0, result.stderr
    with open(paths["out"]) as f:
        assert_same(shardy(text, "sdy-propagation-pipeline"), normalize(f.read()))


def test_a_factor_of_size_0_on_an_empty_dim(tmp_path):
    """A rule's factor of size 0 on a dim of size 0 (an empty tensor) is a factor."""
    empty = CUSTOM_CALL.replace("8xf32", "0xf32")
    result, paths = run(["rules", "annotate", "{m}", "--rules", "{r}", "-o", "{out}"],
                        {"m": empty, "r": RULE_WITH.format(expr="0")}, tmp_path)
    assert result.exit_code == 0, result.stderr
    with open(paths["out"]) as f:
        assert "#sdy.op_sharding_rule<([i])->([i]) {i=0}>" in f.read()


@pytest.mark.parametrize("command", [["memory"], ["report"], ["suggest", "--jobs", "1"]])
def test_functions_in_a_nested_module(tmp_path, command):
    """A module whose functions are in a module inside it has no main function."""
    text = "module {\n  module {\n    func.func @main() {\n      return\n    }\n  }\n}\n"
    result, _ = run([command[0], "{m}", *command[1:], "--quiet"], {"m": text}, tmp_path)
    assert (result.exit_code, result.stderr) == (0, ""), result.stderr


# -- malformed --relations directories ------------------------------------------------------------

@pytest.fixture(scope="module")
def emitted_once(tmp_path_factory):
    """An emitted program directory for SHARDED: program.dl, facts and the relations
    the program derives (by the Python engine, as Soufflé would write them)."""
    from facts_dirs import read_facts_dir, write_relations_dir
    from sdy_dl.datalog.program import Program, parse_declarations
    from sdy_dl.engines import get_engine

    tmp = tmp_path_factory.mktemp("emit")
    result, paths = run(["emit", "{m}", "--out-dir", "{tmp}/emitted", "--quiet"],
                        {"m": SHARDED}, tmp)
    assert result.exit_code == 0, result.stderr
    out = os.path.join(paths["tmp"], "emitted")
    with open(os.path.join(out, "program.dl")) as f:
        text = f.read()
    program = Program(text, parse_declarations(text))
    write_relations_dir(program, get_engine("python").run(program, read_facts_dir(program, out)),
                        out)
    return paths


@pytest.fixture
def emitted(emitted_once, tmp_path):
    """A copy of the emitted directory, with the module, in ``tmp_path``."""
    import shutil

    shutil.copytree(os.path.join(emitted_once["tmp"], "emitted"), tmp_path / "emitted")
    shutil.copy(emitted_once["m"], tmp_path / "m")
    return {"m": str(tmp_path / "m"), "tmp": str(tmp_path), "out": str(tmp_path / "out.mlir")}


@pytest.mark.parametrize("relations, words", [
    ({"step_mesh": "0\n"}, ["step_mesh.csv:1:1:", "has 2 columns, this line has 1"]),
    ({"step_dim": "0\tx\t0\t1\n"}, ["step_dim.csv:1:3:", "is a number"]),
    ({"step_mesh": "0\tnomesh\n", "step_updated": "0\t0\n"}, ["emitted:", "inconsistent"]),
    ({"step_mesh": b"0\t\xff\n"}, ["step_mesh.csv:", "not UTF-8"]),
    ({"step_mesh": b"0\tme\0sh\n"}, ["step_mesh.csv:1:5: a NUL byte (inputs are text)"]),
    ({"in_dim.facts": b"0\t0\0\n"}, ["in_dim.facts:1:4: a NUL byte (inputs are text)"]),
    ({"step_dim_axis": None}, ["emitted:", "missing step_dim_axis.csv"]),
    ({"in_dim.facts": None}, ["emitted:", "missing in_dim.facts"]),
    ({"step_updated": ""}, ["emitted:", "asked for 1 of the 4 recorded steps"]),
    ({"step_dim": ""}, ["emitted:", "inconsistent", "has 0 dims"]),
    ({"step_dim_axis": ""}, ["in_dim.facts:", "not the recorded one"]),
    ({"step_updated": "0\t0\n0\t1\n1\t1\n", "step_dim": "0\t0\t0\t1\n0\t1\t0\t0\n1\t1\t0\t0\n",
      "step_dim_axis": "0\t0\t0\t0\ta\t1\t2\n0\t1\t0\t0\ta\t1\t2\n1\t1\t0\t0\ta\t1\t2\n"},
     ["step_updated.csv:", "unchanged"]),
    ({"in_dim.facts": "0\t0\t0\t1\t0\t1\t0\n"}, ["in_dim.facts:", "not the recorded one"]),
], ids=["columns", "number", "inconsistent", "not-utf8", "nul", "nul-facts", "deleted-relation",
        "deleted-facts", "emptied-updated", "emptied-dims", "emptied-dim-axes", "unchanged", "changed-facts"])
def test_malformed_relations(emitted, relations, words):
    """A replay of changed relations stops with one error naming the file (never loops)."""
    for relation, content in relations.items():
        name = relation if relation.endswith(".facts") else f"{relation}.csv"
        path = os.path.join(emitted["tmp"], "emitted", name)
        if content is None:
            os.unlink(path)
            continue
        with open(path, "wb") as f:
            f.write(content if isinstance(content, bytes) else content.encode())
    result = CliRunner().invoke(main, ["propagate", emitted["m"], "--relations",
                                       os.path.join(emitted["tmp"], "emitted"),
                                       "-o", emitted["out"], "--quiet"])
    assert_error(result, 1, *words)
    assert not os.path.exists(emitted["out"])


# -- outputs ------------------------------------------------------------------------------------------

def test_dash_writes_stdout(tmp_path):
    result, _ = run(["propagate", "{m}", "-o", "-", "--quiet"], {"m": SHARDED}, tmp_path)
    assert result.exit_code == 0 and "sdy.sharding_per_value" in result.stdout


def test_new_file_gets_umask_permissions(tmp_path):
    old = os.umask(0o027)
    try:
        result, paths = run(["propagate", "{m}", "-o", "{out}", "--quiet"], {"m": SHARDED},
                            tmp_path)
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.stderr
    assert stat.S_IMODE(os.stat(paths["out"]).st_mode) == 0o640


def test_replaced_file_keeps_its_permissions(tmp_path):
    out = tmp_path / "out.mlir"
    out.write_text("old")
    os.chmod(out, 0o604)
    result, _ = run(["propagate", "{m}", "-o", "{out}", "--quiet"], {"m": SHARDED}, tmp_path)
    assert result.exit_code == 0
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o604 and "sdy.sharding" in out.read_text()


def test_symlink_is_written_through(tmp_path):
    target, link = tmp_path / "target.mlir", tmp_path / "link.mlir"
    target.write_text("old")
    link.symlink_to(target)
    result, _ = run(["propagate", "{m}", "-o", str(link), "--quiet"], {"m": SHARDED}, tmp_path)
    assert result.exit_code == 0, result.stderr
    assert link.is_symlink() and "sdy.sharding" in target.read_text()


def test_fifo_is_written_through(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()))
    reader.start()
    result, _ = run(["propagate", "{m}", "-o", str(fifo), "--quiet"], {"m": SHARDED}, tmp_path)
    reader.join(30)
    assert result.exit_code == 0, result.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and "sdy.sharding" in got[0]


def test_device_is_written_through(tmp_path):
    result, _ = run(["propagate", "{m}", "-o", os.devnull, "--quiet"], {"m": SHARDED}, tmp_path)
    assert result.exit_code == 0 and stat.S_ISCHR(os.stat(os.devnull).st_mode)


@pytest.mark.skipif(not os.path.isfile("/proc/version"), reason="needs Linux's /proc")
def test_target_in_a_directory_that_takes_no_file(tmp_path):
    """A regular file whose directory takes no new file: the error is about the file
    given, saying its directory refused (not the temporary file's error alone)."""
    result, _ = run(["propagate", "{m}", "-o", "/proc/version", "--quiet"], {"m": SHARDED},
                    tmp_path)
    assert_error(result, 1, "sdy-dl: error: /proc/version: cannot write output: no new file "
                            "can be made in its directory /proc (")


def test_failed_run_leaves_existing_target_untouched(tmp_path):
    out = tmp_path / "out.mlir"
    out.write_text("precious")
    result, _ = run(["propagate", "{m}", "-o", "{out}", "--quiet"], {"m": CALLS_EACH_OTHER},
                    tmp_path)
    assert result.exit_code == 1 and out.read_text() == "precious"
    assert sorted(os.listdir(tmp_path)) == ["m", "out.mlir"]


def test_input_beyond_the_limit_is_refused(tmp_path, monkeypatch):
    """An input longer than the limit (a stream that never ends) is refused, not
    read until memory runs out."""
    from sdy_dl import text_input

    monkeypatch.setattr(text_input, "CHUNK", 64)
    monkeypatch.setattr(text_input, "MAX_INPUT_BYTES", 1000)
    result, paths = run(["propagate", "-", "-o", "{out}", "--quiet"], {}, tmp_path,
                        b"// x\n" * 201)
    assert_error(result, 1, "<stdin>: more than 1000 bytes (the largest input read)")
    assert not os.path.exists(paths["out"])
    result, _ = run(["show", "-"], {}, tmp_path, SHARDED.encode())
    assert result.exit_code == 0, result.stderr


def test_a_failed_stream_leaves_no_file(tmp_path):
    """whatif's outputs are all or none: a device that fails (a full disk) leaves
    the other output unwritten."""
    result, paths = run(["whatif", "{m}", "--unset", "%arg0", "--save-input", "{out}",
                         "-o", "/dev/full", "--quiet"], {"m": SHARDED}, tmp_path)
    assert_error(result, 1, "/dev/full: cannot write output: No space left on device")
    assert sorted(os.listdir(tmp_path)) == ["m"]


@pytest.mark.parametrize("first_existed", [True, False])
def test_a_failed_rename_puts_back_the_files_renamed_before(tmp_path, monkeypatch, first_existed):
    """The second output's rename fails: the first, already renamed into place, is
    put back as it was (removed when it is new), and no temporary file stays."""
    from sdy_dl import output

    first, second = tmp_path / "input.mlir", tmp_path / "out.mlir"
    if first_existed:
        first.write_text("first, as it was")
    second.write_text("second, as it was")
    replace = os.replace

    def failing_replace(src, dst):
        if os.fspath(dst) == str(second):
            raise PermissionError(1, "Operation not permitted")
        return replace(src, dst)

    monkeypatch.setattr(output.os, "replace", failing_replace)
    result, _ = run(["whatif", "{m}", "--unset", "%arg0", "--save-input", str(first),
                     "-o", str(second), "--quiet"], {"m": SHARDED}, tmp_path)
    monkeypatch.undo()
    assert_error(result, 1, f"{second}: cannot write output: Operation not permitted")
    assert second.read_text() == "second, as it was"
    assert (first.read_text() if first.exists() else None) == (
        "first, as it was" if first_existed else None)
    assert sorted(os.listdir(tmp_path)) == sorted(["m", "out.mlir"]
                                                  + (["input.mlir"] if first_existed else []))
