"""Packaging: every package directory is listed, and the data folders ship."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_directory_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    mapped = config["package-dir"]
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "sdy_dl").rglob("__init__.py")}
    found |= set(mapped)
    assert found == listed


def test_data_folders_are_found():
    from sdy_dl.resources import datalog_dir, rules_dir

    from sdy_dl.datalog.compiler import available_stages

    shipped = {p.name for p in rules_dir().glob("*.yaml")}
    assert {"templates.yaml", "elementwise.yaml", "no_rule.yaml"} <= shipped
    assert any(datalog_dir().rglob("*.dl.j2"))
    assert "step" in available_stages()
