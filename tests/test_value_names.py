"""One name per value of the output, on JAX programs whose printed modules reuse names.

On every program of ``naming_programs`` (several loops, conds, calls and
shard_maps in one function): every value and function result of the output
has a name no other has; the name resolves to exactly that value; a name
several values print is an error listing them all; ``explain``'s root is the
sharding the output prints; ``values()`` and ``explain --all`` give the same
distinct names in module order, and the report's static HTML ids are distinct.
"""

from __future__ import annotations

import re

import naming_programs
import pytest

import sdy_dl
from sdy_dl.errors import SdyError

DEFAULT = ["two_loops", "cond", "shard_map_loops", "cond_in_loop"]
SLOW = [n for n in naming_programs.PROGRAMS if n not in DEFAULT]


def _definition(text_lines: list[str], out) -> None:
    """The output line a qualified name cites declares the value under its printed name."""
    m = re.fullmatch(r"(?:@[^:]+:)?(%[\w$.\-]+?)(?:#\d+)?@L(\d+)(:\w+)?", out.name)
    assert m, out.name
    printed, line = re.escape(m.group(1)), int(m.group(2))
    assert line == out.line
    if out.value is not None and out.op != "func.func" and m.group(3) is None \
            and not hasattr(out.value, "arg_number"):
        # (the ops of a region printed in short form, a reduce's ``applies``, are not
        # printed: their line is their region op's)
        assert re.match(rf"\s*{printed}(:\d+)? = ", text_lines[line - 1]) or \
            re.match(r"\s*%[\w$.\-]+(:\d+)? = .* applies ", text_lines[line - 1]), out.name
    else:   # a block argument: declared on its region op's line (a reduce's are not printed)
        assert re.match(r"\s*%[\w$.\-]+(:\d+)? = ", text_lines[line - 1]), out.name


def _check(name: str) -> None:
    result = sdy_dl.propagate(naming_programs.lowered(name), engine="python")
    audit = result.audit
    outs = audit.outputs.values
    names = result.values()
    assert names == [o.name for o in outs]
    assert len(set(names)) == len(names) > 0
    text_lines = result.text.splitlines()
    printed_twice = 0
    for out in outs:
        assert audit.value(out.name) is out, out.name
        if re.search(r"@L\d+", out.name):
            printed_twice += 1
            _definition(text_lines, out)
            plain = re.sub(r"@L\d+(:\w+)?$", "", out.name)
            with pytest.raises(SdyError) as e:
                audit.value(plain)
            message = str(e.value)
            assert "\n" not in message and out.describe() in message
        expected = "(none)" if out.sharding is None else out.sharding.to_text()
        assert result.sharding(out.name) == (None if out.sharding is None else expected)
        assert result.explain(out.name).sharding == expected, out.name
    assert printed_twice, "the program should print some name twice"
    trees = audit.explain_all(depth=100)
    assert [t.what for t in trees] == names
    for tree in trees:
        for node in tree.walk():
            _says_whose_lines(node.because)
            # a factor's sources are named as the children below the step name them
            if node.factors and not node.truncated:
                below = {c.what for c in node.children} | {node.what}
                assert all(s["value"] in below for f in node.factors for s in f["from"]), node.what
    for conflict in result.conflicts():
        _says_whose_lines(conflict.place)
    from sdy_dl.audit.report import html_chunks

    page = "".join(html_chunks(audit))
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))   # every HTML id once


def _says_whose_lines(text: str) -> None:
    """Every line ``text`` cites says whose: the output's, the input's or Python's."""
    for m in re.finditer(r"(\w+) line \d+", text):
        assert m.group(1) in ("output", "input"), text
    assert not re.search(r"(\.mlir|<string>|<jax>):\d+", text), text


@pytest.mark.parametrize("name", DEFAULT)
def test_every_value_has_one_name(name):
    _check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_every_value_has_one_name_more_programs(name):
    _check(name)


def test_sibling_regions_values_are_told_apart():
    """A cond whose branches both print %9, and main's own %9: three values, three names."""
    result = sdy_dl.propagate(naming_programs.lowered("cond"), engine="python")
    with pytest.raises(SdyError, match=r"'%9' names 3 values of the output .*say which: "
                       r"%9@L\d+ \(stablehlo\.add, output line \d+\), %9@L\d+ \(sdy\.constant, "
                       r"output line \d+\), %9@L\d+ \(stablehlo\.dot_general, output line \d+\)$"):
        result.explain("%9")
    shared = result.audit.outputs.ambiguous["%9"]
    assert len({o.value for o in shared}) == 3
    assert [o.op for o in shared] == ["stablehlo.add", "sdy.constant", "stablehlo.dot_general"]


def test_block_arguments_of_a_whiles_cond_and_do_are_two_values():
    result = sdy_dl.propagate(naming_programs.lowered("two_loops"), engine="python")
    names = [n for n in result.values() if n.startswith("%iterArg@")]
    assert names and all(re.fullmatch(r"%iterArg@L\d+:(cond|do)", n) for n in names)
    assert len(names) == 6   # three loops, each with a cond and a do
    for n in names:
        out = result.audit.value(n)
        assert out.value.owner.owner.name == "stablehlo.while"


#: main's second argument has the JAX argument path ``arg0``, which is also how the
#: first prints (``%arg0``, read from the bare ``arg0``); its second result has JAX's
#: result name ``result:0``, the first result's own name.
ALIASES = """module {
  sdy.mesh @mesh = <["a"=2]>
  func.func @main(%arg0: tensor<8xf32> loc("y"), %arg1: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>} loc("arg0")) -> (tensor<8xf32> {jax.result_info = "x"}, tensor<8xf32> {jax.result_info = "result:0"}) {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8xf32>
    %1 = stablehlo.negate %arg1 : tensor<8xf32>
    return %1, %0 : tensor<8xf32>, tensor<8xf32>
  }
}
"""


@pytest.mark.parametrize("name, candidates", [("arg0", ["%arg1", "%arg0"]),
                                              ("result:0", ["result:0", "result:1"])])
def test_a_name_that_reads_as_two_values_is_refused_listing_them(name, candidates):
    """A JAX name and another value's name (or its spelling without ``%``) are read
    alike: neither is picked."""
    result = sdy_dl.propagate(ALIASES)
    with pytest.raises(SdyError) as e:
        result.explain(name)
    listed = re.findall(r"(\S+) \(func\.func, output line \d+\)", str(e.value))
    assert f"{name!r} names 2 values" in str(e.value) and sorted(listed) == sorted(candidates)
    for unique in ("%arg0", "%arg1", "y", "x", "result:1"):
        result.explain(unique)


def test_names_the_audit_makes_are_read_as_its_own():
    """``result:N`` of a function's result, read by the memory table, the ledger and
    the suggestions, is that result, whatever JAX names the others."""
    result = sdy_dl.propagate(ALIASES, explicit_collectives=True)
    memory = result.memory()
    assert [v.name for v in memory.values if v.name.startswith("result:")] == [
        "result:0", "result:1"]
    assert memory.value("result:1").out is result.audit.outputs.named("result:1")
    assert result.audit.outputs.named("result:0").names == ["result:0", "x"]
    result.collectives()
    result.suggest(jobs=1)


#: main's %arg0 has the JAX argument path ``iterArg``, which the block arguments of
#: two while loops print as (``%iterArg``, shared by their conds and dos).
ITER_ARG = """sdy.mesh @mesh = <["x"=2]>
func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>} loc("iterArg"), %arg1: tensor<i32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %0:2 = stablehlo.while(%a = %arg0, %i = %arg1) : tensor<8xf32>, tensor<i32>
    cond {
      %c = stablehlo.compare LT, %i, %i : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    } do {
      %n = stablehlo.add %a, %a : tensor<8xf32>
      stablehlo.return %n, %i : tensor<8xf32>, tensor<i32>
    }
  %1:2 = stablehlo.while(%a = %arg0, %i = %arg1) : tensor<8xf32>, tensor<i32>
    cond {
      %c = stablehlo.compare LT, %i, %i : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    } do {
      %n = stablehlo.multiply %a, %a : tensor<8xf32>
      stablehlo.return %n, %i : tensor<8xf32>, tensor<i32>
    }
  return %0#0, %1#0 : tensor<8xf32>, tensor<8xf32>
}
"""


def test_a_name_sibling_regions_share_and_another_value_holds_is_refused():
    """``iterArg`` is main's %arg0 (its JAX name) and, read as ``%iterArg``, the four
    block arguments the loops print so: five candidates, none picked."""
    result = sdy_dl.propagate(ITER_ARG)
    for name, count in (("iterArg", 5), ("%iterArg", 4)):
        with pytest.raises(SdyError) as e:
            result.explain(name)
        listed = re.findall(r"(%\S+) \((?:func\.func|stablehlo\.while), output line \d+\)",
                            str(e.value))
        assert f"{name!r} names {count} values" in str(e.value)
        assert sorted(listed) == sorted((["%arg0"] if count == 5 else []) + [
            f"%iterArg@L{line}:{region}" for line in (4, 12) for region in ("cond", "do")])
    assert result.audit.value("%arg0").op == "func.func"
