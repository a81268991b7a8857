"""Every "§N.M" mark in the project names a section of docs/semantics.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SEMANTICS = ROOT / "docs" / "semantics.md"
#: Where the marks live: the code, the Datalog templates, the rule files, the
#: CLI, the tests and the top-level docs (docs/research has its own numbering).
SCANNED = ["sdy_dl", "cli", "datalog", "rules", "tests", "README.md", "docs/design.md"]
SUFFIXES = {".py", ".j2", ".md", ".yaml", ".dl"}

MARK = re.compile(r"§\s*(\d+(?:\.\d+)*)([a-z]?)")
HEADING = re.compile(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", re.MULTILINE)


def headings(text: str) -> set[str]:
    return set(HEADING.findall(text))


def lines(root: Path = ROOT, scanned=SCANNED):
    """(file, line number, text) of every line of the scanned files."""
    for entry in scanned:
        path = root / entry
        files = [path] if path.is_file() else sorted(
            p for p in path.rglob("*") if p.suffix in SUFFIXES and "__pycache__" not in p.parts)
        for f in files:
            if f == Path(__file__).resolve():
                continue  # this file's examples are not marks
            for lineno, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
                yield str(f.relative_to(root)), lineno, line


def marks(root: Path = ROOT, scanned=SCANNED) -> list[tuple[str, int, str]]:
    """(file, line, section) of every mark under ``scanned``."""
    return [(f, n, m.group(1) + m.group(2))
            for f, n, line in lines(root, scanned) for m in MARK.finditer(line)]


def test_semantics_has_numbered_sections():
    sections = headings(SEMANTICS.read_text(encoding="utf-8"))
    # the top-level sections 0-11 and, e.g., the subsections the step program cites
    assert {str(n) for n in range(12)} <= sections
    assert {"4.1", "4.2", "5.1", "5.2", "5.3", "5.4", "7.3", "8.6", "11.8"} <= sections


def test_marks_are_found():
    found = marks()
    # the code cites the semantics everywhere; a broken scan would find nothing
    assert len(found) > 100
    assert any(f.startswith("datalog/") for f, _, _ in found)
    assert any(f.startswith("rules/") for f, _, _ in found)


def test_every_mark_names_a_section():
    sections = headings(SEMANTICS.read_text(encoding="utf-8"))
    broken = [f"{f}:{line}: §{s}" for f, line, s in marks() if s not in sections]
    assert not broken, "marks without a section in docs/semantics.md:\n" + "\n".join(broken)


def test_no_reference_leaves_the_repository():
    outside = [f"{f}:{n}" for f, n, line in lines() if "shardy-semantics" in line]
    assert not outside, outside


@pytest.mark.parametrize("text, expected", [
    ("see §5.1–§6 and §11.4", ["5.1", "6", "11.4"]),
    ("semantics § 3.3", ["3.3"]),
    ("research §3b", ["3b"]),
])
def test_mark_pattern(tmp_path, text, expected):
    (tmp_path / "x.py").write_text(text + "\n")
    assert [s for _, _, s in marks(tmp_path, ["."])] == expected


def test_pass_catalog_is_current():
    """docs/passes.md is what ``sdy-dl passes --format markdown`` prints."""
    from sdy_dl.catalog import catalog_markdown

    current = (ROOT / "docs" / "passes.md").read_text()
    assert current == catalog_markdown(), \
        "regenerate: sdy-dl passes --format markdown > docs/passes.md"


def test_pass_catalog_lists_every_pass_with_its_folder():
    import sdy_dl.passes.all  # noqa: F401
    from sdy_dl.passes import PASSES
    from sdy_dl.catalog import catalog_markdown, folder

    text = catalog_markdown()
    for name in PASSES:
        assert f"| `{name}` | {folder(name)} |" in text
    assert folder("sink-data-flow-edges") == "export"
    assert folder("lift-inlined-meshes") == "import"
    assert folder("user-priority-propagate") == "propagation"
