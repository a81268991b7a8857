"""sdy attributes read and built through jaxlib's bindings (``ir/sdy_attrs.py``,
``rules/rule_attr.py``): what is read is what jaxlib parsed, what is built
prints as jaxlib prints the text, also for names that need escaping, and a
module with such names propagates as in Shardy."""

from __future__ import annotations

import pytest

from oracle import normalize, shardy
from sdy_dl.ir.context import mlir_context
from sdy_dl.sharding import (AxisRef, DimSharding, Mesh, MeshAxis, TensorSharding,
                             format_symbol_ref, quote_string)

#: Axis and mesh names that the printer must escape.
AWKWARD = ['x"y', "back\\slash", "new\nline", "tab\there", "ünï ☃", "{braces}, [x]", "a=b:(1)2",
           "p1", "?"]


def _parse(text: str):
    from jaxlib.mlir import ir

    return ir.Attribute.parse(text)


@pytest.mark.parametrize("name", AWKWARD)
def test_awkward_names_round_trip(name):
    from sdy_dl.ir import sdy_attrs

    other = name + "2"
    mesh = Mesh((MeshAxis(name, 4), MeshAxis(other, 2)), (7, 6, 5, 4, 3, 2, 1, 0))
    shardings = [
        TensorSharding(name, (DimSharding((AxisRef(name, 1, 2),), True, 1),
                              DimSharding((AxisRef(other),), False)),
                       (AxisRef(name, 2, 2),)),
        TensorSharding(mesh, (DimSharding((AxisRef(other), AxisRef(name)), True),),
                       (), ()),
    ]
    with mlir_context():
        mesh_attr = _parse("#sdy.mesh" + mesh.to_text())
        assert sdy_attrs.mesh_of_attr(mesh_attr) == mesh
        assert sdy_attrs.mesh_attr(mesh) == mesh_attr
        for sharding in shardings:
            attr = _parse(sharding.to_text())
            assert sdy_attrs.sharding_of_attr(attr) == sharding
            built = sdy_attrs.sharding_attr(sharding)
            assert built == attr and str(built) == sharding.to_text()
        per_value = sdy_attrs.per_value_attr(tuple(shardings))
        assert sdy_attrs.per_value_of_attr(per_value) == tuple(shardings)
        manual = sdy_attrs.manual_axes_attr((name, other))
        assert manual == _parse("#sdy<manual_axes{" + quote_string(name) + ", "
                                + quote_string(other) + "}>")
        assert [a.name for a in sdy_attrs.axes_of_list(manual)] == [name, other]
        lists = _parse("#sdy<list_of_axis_ref_lists[{" + AxisRef(name, 1, 2).to_text() + "}, {}, {"
                       + AxisRef(other).to_text() + "}]>")
        assert sdy_attrs.axis_lists_of(lists) == ((AxisRef(name, 1, 2),), (), (AxisRef(other),))


@pytest.mark.parametrize("name", AWKWARD)
def test_awkward_names_propagate_as_in_shardy(name):
    """A module whose mesh and axes have awkward names, through the whole pipeline."""
    from sdy_dl.ir import parse_module_text
    from sdy_dl.pipeline import make_options, propagate

    mesh_name = format_symbol_ref(name)
    axis, other = quote_string(name), quote_string(name + "2")
    text = (f"sdy.mesh {mesh_name} = <[{axis}=4, {other}=2]>\n"
            f"func.func @main(%a: tensor<8x8xf32> {{sdy.sharding = #sdy.sharding<{mesh_name}, "
            f"[{{{axis}}}, {{}}]>}}, %b: tensor<8x8xf32>) -> tensor<8x8xf32> {{\n"
            f"  %0 = stablehlo.add %a, %b : tensor<8x8xf32>\n"
            f"  %1 = sdy.sharding_constraint %0 <{mesh_name}, [{{?}}, {{{other}}}]> : tensor<8x8xf32>\n"
            f"  %2 = stablehlo.dot_general %1, %b, contracting_dims = [1] x [0] : "
            f"(tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>\n"
            f"  return %2 : tensor<8x8xf32>\n}}\n")
    expected = shardy(text, "sdy-propagation-pipeline")
    out = propagate(parse_module_text(text, "<test>"), make_options(engine="clingo"))
    assert normalize(out.print()) == expected


def test_sharding_rules_round_trip():
    from sdy_dl.rules.rule_attr import is_custom_rule, rule_attr, rule_of_attr

    texts = ["#sdy.op_sharding_rule<([i, j], [j, k])->([i, k]) {i=8, j=16, k=4} reduction={j}>",
             "#sdy.op_sharding_rule<([ij, k])->([i, j, k]) {i=2, j=4, k=3} need_replication={k} "
             "permutation={i} blocked_propagation={j}, custom>",
             "#sdy.op_sharding_rule<([], [])->([]), custom>"]
    with mlir_context():
        for text in texts:
            attr = _parse(text)
            rule = rule_of_attr(attr)
            assert rule.to_text() == str(attr)
            assert rule_attr(rule) == attr
            assert is_custom_rule(attr) == text.endswith("custom>")


def test_huge_mesh_is_read_without_its_text():
    """A mesh of 2^20 devices is read field by field (its text, 9 MB, is never
    parsed by sdy-dl; timings are in benchmarks/big_inputs.py)."""
    from sdy_dl.ir import sdy_attrs

    ids = list(range(1 << 20))
    ids[0], ids[1] = 1, 0
    mesh = Mesh((MeshAxis("x", 1024), MeshAxis("y", 1024)), tuple(ids))
    with mlir_context():
        attr = sdy_attrs.mesh_attr(mesh)
        assert sdy_attrs.mesh_of_attr(attr) == mesh
