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
from sdy_dl.audit.report import MARK, anchor, unpacked
from sdy_dl.cli import main
from sdy_dl.ir import load_module, parse_module_text
from sdy_dl.pipeline import make_options
from test_conflicts import WITHIN
from test_explain import CHAIN

CLINGO = ["--engine", "clingo", "--quiet"]
VOID = {"meta", "br", "hr", "img", "input", "link"}


class _Checker(HTMLParser):
    """Tag balance, ids (all of them, to find duplicates), link targets and the
    embedded data of a page."""

    def __init__(self):
        super().__init__()
        self.stack, self.ids, self.hrefs, self.errors = [], [], [], []
        self.scripts, self.sections, self._data = [], [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.append(attrs["id"])
        if tag == "a" and "href" in attrs:
            self.hrefs.append(attrs["href"])
        if tag == "section":
            self.sections.append(attrs.get("id"))
        if tag == "script":
            self.scripts.append(attrs)
            self._data = [] if attrs.get("id") == "data" else None
        if tag not in VOID:
            self.stack.append(tag)

    def handle_data(self, data):
        if self._data is not None and self.stack and self.stack[-1] == "script":
            self._data.append(data)

    def handle_endtag(self, tag):
        if tag == "script" and self._data is not None:
            self.data = unpacked("".join(self._data))
            self._data = None
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]}")
        else:
            self.stack.pop()


def _report(tmp_path_factory, text: str, name: str):
    path = tmp_path_factory.mktemp("report") / f"{name}.mlir"
    path.write_text(text)
    out = path.with_suffix(".html")
    result = CliRunner().invoke(main, ["report", str(path), "-o", str(out), *CLINGO])
    assert result.exit_code == 0, result.output
    return out, Audit(load_module(str(path)), make_options(engine="clingo"))


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return _report(tmp_path_factory, WITHIN, "m")


def _check(out, audit) -> _Checker:
    page = out.read_text()
    checker = _Checker()
    checker.feed(page)
    checker.close()
    assert not checker.errors and checker.stack == []
    assert len(checker.ids) == len(set(checker.ids)), \
        sorted({i for i in checker.ids if checker.ids.count(i) > 1})
    # Named sections, the summary first; every local link has a target.
    assert checker.sections[0] == "sec-summary"
    assert {"sec-summary", "sec-conflicts", "sec-values", "sec-module"} <= set(checker.sections)
    for h in checker.hrefs:
        if h.startswith("#sec-"):
            assert h[1:] in checker.ids
    # Self-contained: no resource from elsewhere.
    assert all("src" not in attrs for attrs in checker.scripts)
    assert "http://" not in page and "https://" not in page and "<link" not in page
    data = checker.data
    strings, values, nodes = data["s"], data["v"], data["n"]
    names = [strings[v[0]] for v in values]
    assert names == [v.name for v in audit.outputs.values] and len(set(names)) == len(names)
    for v, out_value in zip(values, audit.outputs.values):
        printed = out_value.sharding.to_text() if out_value.sharding is not None else "(none)"
        assert strings[v[3]] == printed
        root = nodes[v[6]]
        assert strings[root[0]] == out_value.name and strings[root[1]] == printed
    assert data["m"] == audit.text
    for n in nodes:
        assert all(0 <= c < len(nodes) for c in n[7])
        assert strings[n[3]].count(MARK) == len(n[4])
    return checker


def test_report_is_well_formed_and_complete(report):
    out, audit = report
    checker = _check(out, audit)
    assert "conflicts" in checker.ids and "within-factor" in out.read_text()
    links = [h for h in checker.hrefs if h.startswith("#v-")]
    assert links and all(h[1:] in {anchor(v.name) for v in audit.outputs.values} for h in links)


def test_report_of_a_program_with_sibling_regions(tmp_path_factory):
    """A loop's cond and body print the same numbers: every value keeps its own row."""
    from jax_programs import lowered

    out, audit = _report(tmp_path_factory, lowered("grad_scan_helpers"), "scan")
    _check(out, audit)


def test_sections_can_be_added(report, tmp_path_factory):
    """A registered section appears, in its order, with a unique id."""
    from sdy_dl.audit import report as report_module

    section = report_module.Section("extra", "Extra", 25, lambda page: (
        f'<p id="{page.new_id("conflicts")}">{page.link("%0")}</p>'))
    report_module.register_section(section)
    try:
        out, audit = _report(tmp_path_factory, WITHIN, "extra")
    finally:
        report_module.SECTIONS.remove(section)
    checker = _check(out, audit)
    assert checker.sections.index("sec-extra") == checker.sections.index("sec-conflicts") + 1
    assert "conflicts-1" in checker.ids


@pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="chromium not installed")
def test_report_search_and_derivation_in_headless_chromium(tmp_path_factory):
    """In real headless Chromium: the table lists every value, a search finds one,
    clicking its row opens its derivation, a node expands on demand, and a link to
    a value opens that value."""
    from chromium import Browser

    out, audit = _report(tmp_path_factory, CHAIN, "chain")
    with Browser(out.resolve().as_uri()) as page:
        page.wait_for("performance.getEntriesByName('values-shown').length > 0")
        names = page.evaluate("[...document.querySelectorAll('#rows tr.r')]"
                              ".map(r => r.cells[0].textContent)")
        assert names == [v.name for v in audit.outputs.values]
        page.evaluate("""(() => { const f = document.querySelector('#values [data-col="0"]');
                          f.value = '%1'; f.dispatchEvent(new Event('input')); })()""")
        rows = page.evaluate("[...document.querySelectorAll('#rows tr.r')].map(r => r.id)")
        assert rows == [anchor("%1")]
        page.evaluate("document.querySelector('#rows tr.r').click()")
        opened = page.evaluate("document.querySelector('#rows tr.d').innerText")
        tree = audit.explain("%1")
        assert f"%1 = {tree.sharding}" in opened and f"because: {tree.because}" in opened
        # The derivation opens one level; the add below it expands when clicked.
        add = tree.children[0] if tree.kind == "export" else tree
        below = [c for c in add.children if c.what == "%0"]
        assert below and f"because: {below[0].because}" in opened
        deeper = [c.because for c in below[0].children]
        assert deeper and not any(f"because: {b}" in opened for b in deeper)
        page.evaluate("[...document.querySelectorAll('#rows tr.d .x')]"
                      ".filter(x => x.textContent.startsWith('\\u25b8')).forEach(x => x.click())")
        expanded = page.evaluate("document.querySelector('#rows tr.d').innerText")
        assert all(f"because: {b}" in expanded for b in deeper)
        # The module's text appears when its section is opened.
        page.evaluate("document.getElementById('module-box').open = true")
        page.wait_for("document.getElementById('module').textContent.length > 0")
        assert page.evaluate("document.getElementById('module').textContent") == audit.text
        # A link to a value (as the conflicts section has) opens that value's derivation.
        page.evaluate(f"location.hash = '#{anchor('%0')}'")
        page.wait_for("document.querySelector('#rows tr.d') !== null && "
                      "document.querySelector('#rows tr.r').id === " + json.dumps(anchor("%0")))


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


def test_diff_exits_as_diff_does(tmp_path, monkeypatch):
    """0 the same, 1 different, 2 an error: an error of diff is never taken for
    "the modules differ" (a bug in the comparison neither)."""
    from sdy_dl.cli import diff_cmd

    assert _diff(tmp_path, PROPAGATED, PROPAGATED).exit_code == 0
    assert _diff(tmp_path, PROPAGATED, DIFFERENT).exit_code == 1
    result = _diff(tmp_path, PROPAGATED, "func.func @main(")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.startswith("sdy-dl: error: ") and result.stderr.count("\n") == 1

    def broken(a, b):
        raise RuntimeError("a bug")

    monkeypatch.setattr(diff_cmd, "diff_modules", broken)
    result = _diff(tmp_path, PROPAGATED, PROPAGATED)
    assert (result.exit_code, result.stdout) == (2, "")
    assert "internal error (RuntimeError: a bug)" in result.stderr


def test_communication_and_memory_sections(tmp_path):
    """The report's Communication section is the collective ledger of an explicit
    propagation (its count and total bytes), and says how to get one otherwise;
    its Memory section lists each function's totals and the largest replicated
    or partly sharded values, linked to their derivations."""
    import re

    import sdy_dl
    from sdy_dl.audit.cost_model import human_bytes

    path = os.path.join(os.path.dirname(__file__), "..", "examples", "training_step.mlir")
    pages = {}
    for label, extra in (("plain", []), ("explicit", ["--pass-option",
                                                       "enable-insert-explicit-collectives=true"])):
        out = tmp_path / f"{label}.html"
        result = CliRunner().invoke(main, ["report", path, "-o", str(out), *CLINGO, *extra])
        assert result.exit_code == 0, result.output
        pages[label] = out.read_text()
    section = {label: dict(re.findall(r'<section id="sec-([a-z]+)">(.*?)</section>', page, re.S))
               for label, page in pages.items()}
    assert "needs a propagation with explicit collectives" in section["plain"]["communication"]
    ledger = sdy_dl.propagate(path, engine="clingo", explicit_collectives=True).collectives()
    total = ledger.totals()["all"]
    assert total["count"] > 0
    assert (f"<p>{total['count']} collectives, {human_bytes(total['bytes_per_device'])} per device"
            in section["explicit"]["communication"])
    memory = sdy_dl.propagate(path, engine="clingo").memory()
    assert memory.top and "peak of live intermediates" in section["explicit"]["memory"]
    for u in memory.top:
        assert f'href="#{anchor(u.value.name)}"' in section["plain"]["memory"]
