"""``sdy-dl report`` (HTML), ``explain --format dot|svg`` and ``sdy-dl diff``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from html.parser import HTMLParser

import pytest
from click.testing import CliRunner

from sdy_dl.audit import Audit
from sdy_dl.audit.render import anchor
from sdy_dl.cli import main
from sdy_dl.ir import parse_module_text
from sdy_dl.pipeline import make_options
from test_conflicts import WITHIN
from test_explain import CHAIN

CLINGO = ["--engine", "clingo", "--quiet"]
VOID = {"meta", "br", "hr", "img", "input", "link"}


class _Checker(HTMLParser):
    """Tag balance, ids and link targets of a page."""

    def __init__(self):
        super().__init__()
        self.stack, self.ids, self.hrefs, self.errors = [], set(), [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "a" and "href" in attrs:
            self.hrefs.append(attrs["href"])
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]}")
        else:
            self.stack.pop()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "m.mlir"
    path.write_text(WITHIN)
    out = path.with_suffix(".html")
    result = CliRunner().invoke(main, ["report", str(path), "-o", str(out), *CLINGO])
    assert result.exit_code == 0, result.output
    return out, Audit(parse_module_text(WITHIN), make_options(engine="clingo"))


def test_report_is_well_formed_and_complete(report):
    out, audit = report
    page = out.read_text()
    checker = _Checker()
    checker.feed(page)
    checker.close()
    assert not checker.errors and checker.stack == []
    for value in audit.outputs.values:
        assert anchor(value.name) in checker.ids, value.name
    assert checker.hrefs and all(h[1:] in checker.ids for h in checker.hrefs if h.startswith("#"))
    assert "conflicts" in checker.ids and "within-factor" in page
    assert "<script" not in page and "http" not in page   # self-contained


@pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="chromium not installed")
def test_report_renders_in_headless_chromium(report, tmp_path):
    out, audit = report
    done = subprocess.run(
        ["/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--no-first-run", f"--user-data-dir={tmp_path}",
         "--dump-dom", out.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert 'id="values"' in dom and 'id="conflicts"' in dom
    for value in audit.outputs.values:
        assert f'id="{anchor(value.name)}"' in dom


def test_explain_dot_and_svg(tmp_path):
    path = tmp_path / "m.mlir"
    path.write_text(CHAIN)
    result = CliRunner().invoke(main, ["explain", str(path), "--all", "--format", "dot", *CLINGO])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("digraph sharding {") and "->" in result.output
    assert 'label="stablehlo.dot_general"' in result.output
    if shutil.which("dot"):
        svg = CliRunner().invoke(main, ["explain", str(path), "%1", "--format", "svg", *CLINGO])
        assert svg.exit_code == 0 and "<svg" in svg.output


PROPAGATED = '''sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>} : tensor<8x8xf32>
  %1 = stablehlo.abs %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>} : tensor<8x8xf32>
  %2 = stablehlo.add %0, %1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>} : tensor<8x8xf32>
  return %2, %1 : tensor<8x8xf32>, tensor<8x8xf32>
}
'''
REORDERED = PROPAGATED.replace(
    "  %0 = stablehlo.negate %arg0", "  %9 = stablehlo.abs %arg0 TMP\n  %0 = stablehlo.negate %arg0"
).replace("  %1 = stablehlo.abs %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"a\"}, {}]>]>} : tensor<8x8xf32>\n", ""
).replace("TMP", '{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>} : tensor<8x8xf32>'
).replace("%0, %1 {", "%0, %9 {").replace("return %2, %1", "return %2, %9")
RESHARDED = PROPAGATED.replace(
    "  %2 = stablehlo.add %0, %1",
    '  %r = sdy.reshard %1 <@mesh, [{}, {"b"}]> : tensor<8x8xf32>\n  %2 = stablehlo.add %0, %r')
DIFFERENT = PROPAGATED.replace('%1 = stablehlo.abs %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>}',
                               '%1 = stablehlo.abs %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"b"}]>]>}')


def _diff(tmp_path, a: str, b: str, *extra):
    pa, pb = tmp_path / "a.mlir", tmp_path / "b.mlir"
    pa.write_text(a)
    pb.write_text(b)
    return CliRunner().invoke(main, ["diff", str(pa), str(pb), *extra])


def test_diff_identical_and_reordered_are_equal(tmp_path):
    assert REORDERED != PROPAGATED and "%9 = stablehlo.abs" in REORDERED
    for other in (PROPAGATED, REORDERED):
        result = _diff(tmp_path, PROPAGATED, other)
        assert result.exit_code == 0, result.output
        assert result.output.strip() == "6 values equal, 0 different"


def test_diff_different_and_inserted_reshard(tmp_path):
    result = _diff(tmp_path, PROPAGATED, DIFFERENT, "--format", "json")
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert [(d["kind"], d["a"], d["b"]) for d in data["differences"]] == [("different", "%1", "%1")]
    result = _diff(tmp_path, PROPAGATED, RESHARDED, "--format", "json")
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["equal"] == 6   # the reshard misaligns nothing
    assert [d["kind"] for d in data["differences"]] == ["reshard in B"]
