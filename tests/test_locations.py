"""Which locations are lines of the module read: only those its parser made.

A location the text writes (``loc("x.mlir":1:1)``, ``loc("-":1:1)``), even naming
the module's own file or the name MLIR's parser gives its own locations, is not
known to be a line of that text: every answer prints it as a foreign location
(``location FILE:LINE``) and no error is located by it.
"""

from __future__ import annotations

import pytest

import sdy_dl
from sdy_dl.errors import SdyError

T = "tensor<8x8xf32>"
#: %0's op is at line 4 (3 without the module line); its location is LOC.
BODY = f'''sdy.mesh @mesh = <["a"=2]>
func.func @main(%arg0: {T} {{sdy.sharding = #sdy.sharding<@mesh, [{{"a"}}, {{}}]>}}) -> {T} {{
  %0 = stablehlo.negate %arg0 {{mhlo.frontend_attributes = {{x = WRITTEN}}}} : {T}LOC
  return %0 : {T}
}}
'''


def module(loc: str = "", written: str = '"y"', wrapped: bool = True) -> str:
    """The module with %0's op at ``loc`` (none: ""), an attribute string ``written``,
    its ops in a module op (``wrapped``) or at top level."""
    body = BODY.replace("LOC", f" loc({loc})" if loc else "").replace("WRITTEN", written)
    if not wrapped:
        return body
    return "module {\n" + "".join("  " + line + "\n" for line in body.splitlines()) + "}\n"


def negate_place(text: str, file: str = "x.mlir") -> str:
    """The place the explanation of %0 gives its op."""
    step = sdy_dl.propagate(text, file=file).explain("%0").children[0]
    assert step.op["name"] == "stablehlo.negate"
    return step.op["place"]


@pytest.mark.parametrize("wrapped", [True, False], ids=["module", "top-level"])
@pytest.mark.parametrize("loc, place", [('"x.mlir":1:1', "location x.mlir:1"),
                                        ('"-":1:1', "location -:1"),
                                        ('"model.py":9:3', "python model.py:9")])
def test_a_written_location_is_never_a_line_of_the_module(wrapped, loc, place):
    assert negate_place(module(loc, wrapped=wrapped)) == place


@pytest.mark.parametrize("written", ['"y"', '"-"', '"\\2d"'])
def test_the_parsers_locations_are_lines_of_the_module(written):
    """In a module op, whatever strings the text writes."""
    assert negate_place(module(written=written)) == "input line 4"


@pytest.mark.parametrize("written", ['"y"', '"-"', '"\\2d"'])
def test_top_level_ops_are_lines_of_the_module_whatever_strings_the_text_writes(written):
    """Ops at top level (no module op around them) are located as in a module op."""
    assert negate_place(module(written=written, wrapped=False)) == "input line 3"
    assert negate_place(module('"-":1:1', written=written, wrapped=False)) == "location -:1"


@pytest.mark.parametrize("written", ['"y"', '"-"'])
def test_top_level_ops_on_the_first_line_keep_their_columns(written):
    """A module written on one line, its ops at top level: the places of its ops
    and of its syntax errors are its columns."""
    one = " ".join(module(written=written, wrapped=False).splitlines())
    dynamic = one.replace(T, "tensor<?x8xf32>")
    comma = one.replace("return %0", "return %0,")
    for text, col in ((dynamic, dynamic.index("stablehlo.negate") + 1),
                      (comma, comma.index("return %0,") + len("return %0,") + 1)):
        with pytest.raises(SdyError) as e:
            sdy_dl.propagate(text, file="x.mlir")
        assert (e.value.line, e.value.col) == (1, col), str(e.value)


def test_top_level_ops_after_or_before_aliases_are_lines_of_the_module():
    """A type alias before the ops, a location alias after them (which no module op
    may hold): the ops are still located, whatever strings the text writes."""
    for written in ('"y"', '"-"'):
        text = "!t = tensor<8x8xf32>\n" + module(written=written, wrapped=False)
        assert negate_place(text) == "input line 4"
    text = module("#loc1", wrapped=False) + '#loc1 = loc("model.py":9:3)\n'
    assert negate_place(text) == "python model.py:9"
    text = "!t = tensor<8x8xf32>\n" + module('"-" // a comment\n :1:1', wrapped=False)
    assert negate_place(text) == "location -:1"


@pytest.mark.parametrize("wrapped", [True, False], ids=["module", "top-level"])
def test_a_module_text_is_parsed_once(monkeypatch, wrapped):
    from jaxlib.mlir import ir

    from sdy_dl.ir.loader import parse_module_text

    parses = []
    for cls in (ir.Module, ir.Operation):
        monkeypatch.setattr(cls, "parse", staticmethod(
            lambda *args, _parse=cls.parse, **kwargs: parses.append(1) or _parse(*args, **kwargs)))
    parse_module_text(module(wrapped=wrapped))
    assert len(parses) == 1


@pytest.mark.parametrize("loc", ['"model.py":99:7', '"x.mlir":99:7', '"-":99:7'])
def test_an_error_at_an_op_located_elsewhere_has_no_line(loc):
    text = module(loc).replace(T, "tensor<?x8xf32>")
    with pytest.raises(SdyError) as e:
        sdy_dl.propagate(text, file="x.mlir")
    assert (e.value.file, e.value.line, e.value.col) == ("x.mlir", None, None), str(e.value)
    with pytest.raises(SdyError) as e:
        sdy_dl.propagate(module().replace(T, "tensor<?x8xf32>"), file="x.mlir")
    assert (e.value.line, e.value.col) == (4, 10), str(e.value)


@pytest.mark.parametrize("wrapped", [True, False], ids=["module", "top-level"])
def test_a_syntax_error_keeps_its_line_when_the_text_writes_the_parsers_name(wrapped):
    text = module(written='"-"', wrapped=wrapped).replace("return %0", "return %0,")
    with pytest.raises(SdyError) as e:
        sdy_dl.propagate(text, file="x.mlir")
    assert e.value.line == (5 if wrapped else 4), str(e.value)


REDUCE = """module {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  func.func @main(%arg0: tensor<5x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y":(2)2}]>}, %arg1: tensor<16x7xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y":(2)2}, {}]>}) -> (tensor<5x7xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<5x16xf32>, tensor<16x7xf32>) -> tensor<5x7xf32>LOC
    return %0 : tensor<5x7xf32>
  }
}
"""


def test_the_ledger_places_a_collective_by_the_parsers_location_only():
    def reduce(loc: str):
        text = REDUCE.replace("LOC", f" loc({loc})" if loc else "")
        ledger = sdy_dl.propagate(text, explicit_collectives=True, file="x.mlir").collectives()
        (found,) = [e for e in ledger if e.kind == "all_reduce"]
        return found

    assert reduce("").had.place == "input line 4"
    assert reduce('"x.mlir":1:1').had.place == "location x.mlir:1"
    assert reduce('"-":1:1').had.place == "location -:1"


def test_an_op_description_reads_a_location_other_ops_share_once(monkeypatch):
    """Ops of one location (a layer's Python line) share what was read of it: the
    second description takes the first's place, tag and line by the location's
    identity, without reading its text again."""
    from jaxlib.mlir import ir

    from sdy_dl.audit import steps
    from sdy_dl.ir.context import mlir_context

    read = []
    located = steps.located
    monkeypatch.setattr(steps, "located", lambda text: read.append(text) or located(text))
    with mlir_context():
        loc = ir.Location.file("model.py", 7, 3)
        places: dict = {}
        first = steps.OpInfo("stablehlo.add", "", loc, places)
        second = steps.OpInfo("stablehlo.add", "", ir.Location.file("model.py", 7, 3), places)
        assert first["place"] == second["place"] == "python model.py:7"
    assert len(read) == 1
