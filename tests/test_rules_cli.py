"""``sdy-dl rules``: list, show, check, annotate (annotate vs Shardy's attributes)."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

import rules_programs
from oracle_rules import TAG, context, shardy_rules, tag_module
from rules_cases import CASES, MATMUL, USER_RULES, write_rules as write
from sdy_dl.cli import main
from sdy_dl.rules.db import RULE_ATTR


def run(*args):
    return CliRunner().invoke(main, list(args))


def annotated_rules(text: str) -> dict[int, str | None]:
    """Tag -> sdy.sharding_rule text of every tagged op of a printed module."""
    from jaxlib.mlir import ir
    out = {}
    with context():
        module = ir.Module.parse(text)

        def walk(op):
            for region in op.regions:
                for block in region.blocks:
                    for child in block.operations:
                        attrs = child.attributes
                        if TAG in attrs:
                            out[ir.IntegerAttr(attrs[TAG]).value] = (
                                str(attrs[RULE_ATTR]) if RULE_ATTR in attrs else None)
                        walk(child)
        walk(module.operation)
    return out


def test_list(tmp_path):
    result = run("rules", "list")
    assert result.exit_code == 0, result.output
    assert re.search(r"^stablehlo\.dot_general\s+\S*contraction\.yaml:\d+", result.output, re.M)
    assert re.search(r"^@Eigh\s+\S*custom_calls\.yaml", result.output, re.M)
    result = run("rules", "list", "--format", "json", "--rules", write(tmp_path, USER_RULES))
    rows = {r["name"]: r for r in json.loads(result.output)}
    assert rows["@my_matmul"]["file"].endswith("user.yaml") and rows["stablehlo.while"][
        "has_rule"] is False


def test_show_prints_the_yaml_and_templates():
    result = run("rules", "show", "@Qr")
    assert result.exit_code == 0, result.output
    assert "Qr: {doc: QR decomposition" in result.output
    assert "# template qr:" in result.output and "# template pointwise:" in result.output
    result = run("rules", "show", "stablehlo.nothing")
    assert result.exit_code == 1 and "no rule entry for 'stablehlo.nothing'" in result.output


def test_show_with_a_module(tmp_path):
    path = tmp_path / "m.mlir"
    path.write_text(CASES["dot_general_batching"])
    result = run("rules", "show", "stablehlo.dot_general", "--module", str(path))
    assert result.exit_code == 0, result.output
    assert (f"{path}:2:" in result.output and "#sdy.op_sharding_rule<([i, j, l], [i, l, k])"
            "->([i, j, k]) {i=3, j=6, k=10, l=24} reduction={l}>" in result.output)


def test_check(tmp_path):
    result = run("rules", "check")
    assert result.exit_code == 0 and result.output.startswith("ok:"), result.output
    bad = write(tmp_path, "description: x\nops:\n  stablehlo.add: {doc: A., use: nope}\n",
                "bad.yaml")
    result = run("rules", "check", bad)
    assert result.exit_code == 1
    assert result.output.strip() == (f"sdy-dl: error: {bad}:3:33: unknown template 'nope' "
                                     "(known: approx_top_k, pointwise, pointwise_mismatch, qr)")


@pytest.mark.parametrize("conservative", [False, True], ids=["normal", "conservative"])
@pytest.mark.parametrize("source", ["transformer_training_step", "convnet_training_step",
                                    "concat_slices_of_one_tensor_and_it", "conv_batch_groups"])
def test_annotate_equals_shardy(tmp_path, source, conservative):
    text = rules_programs.lowered(source) if source in rules_programs.RULE_PROGRAMS \
        else CASES[source]
    tagged = tag_module(text)
    path, out = tmp_path / "in.mlir", tmp_path / "out.mlir"
    path.write_text(tagged)
    result = run("rules", "annotate", str(path), "-o", str(out),
                 *(["--conservative"] if conservative else []))
    assert result.exit_code == 0, result.output
    ours = annotated_rules(out.read_text())
    theirs = shardy_rules(tagged, conservative)
    compared = [tag for tag in theirs if tag in ours]
    assert len(compared) == len(theirs) and sum(v is not None for v in theirs.values()) > 0
    assert {t: ours[t] for t in compared} == theirs


def test_annotate_with_a_user_rule(tmp_path):
    path, out = tmp_path / "in.mlir", tmp_path / "out.mlir"
    path.write_text(MATMUL)
    assert run("rules", "annotate", str(path), "-o", str(out)).exit_code == 0
    assert RULE_ATTR not in out.read_text()
    result = run("rules", "annotate", str(path), "-o", str(out), "--rules",
                 write(tmp_path, USER_RULES))
    assert result.exit_code == 0, result.output
    assert ("sdy.sharding_rule = #sdy.op_sharding_rule<([i, j, k], [k, l])->([i, j, l]) "
            "{i=2, j=8, k=16, l=32} reduction={k}>") in out.read_text()
