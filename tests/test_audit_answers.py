"""The audit's answers on real JAX programs (``audit_programs``) agree with the
propagated output: every value an answer names is one the output prints, every
origin of a conflict's axis is an input annotation holding that axis that the
value's derivation reaches, and the causes say what happened."""

from __future__ import annotations

import re

import pytest

import audit_programs
import sdy_dl


def _result(name: str):
    return sdy_dl.propagate(audit_programs.lowered(name))


def _nodes(node) -> list:
    out = [node]
    for child in node.children:
        out += _nodes(child)
    return out


ANNOTATION = re.compile(r"(.*?) = (#sdy\.sharding<.*>)$")


@pytest.mark.parametrize("name", sorted(audit_programs.PROGRAMS))
def test_conflict_origins_are_annotations_reaching_the_value(name):
    result = _result(name)
    values = set(result.values())
    for c in result.conflicts():
        for comp in c.competitors:
            assert comp["value"] in values, comp
            tree = {n.what for n in _nodes(result.explain(comp["value"], 100))}
            for origin in comp["origins"]:
                assert origin["from"], (c.op, comp)
                for annotation in origin["from"]:
                    m = ANNOTATION.match(annotation)
                    assert m, annotation
                    assert m[1] in values and m[1] in tree, (comp["value"], annotation)
                    assert f'"{origin["axis"]}"' in m[2], (comp["value"], annotation)


def test_an_axis_reaching_a_loop_carry_backwards_is_traced_to_its_annotation():
    """In the scanned layer's matmul "model" is contested between the weight's output
    dim and the carry's contracting dim.  The carry's "model" comes from the head
    weight's annotation (its contracting dim), backwards through the head matmul,
    the cond, the loop's data-flow edge and the calls; the weight's from the scanned
    weights."""
    result = _result("scan_layers_cond")
    (c,) = [c for c in result.conflicts() if c.value == "@_layer:%0"]
    assert c.kind == "across-factor" and c.axis == "model"
    origins = {comp["value"]: comp["origins"] for comp in c.competitors}
    assert origins["@_layer:%arg0"] == [{"axis": "model", "from": [
        '%arg0 = #sdy.sharding<@mesh, [{"model"}, {}]>']}]
    assert origins["@_layer:%arg1"] == [{"axis": "model", "from": [
        '%arg1 = #sdy.sharding<@mesh, [{}, {}, {"model"}]>']}]
