"""Locate the shipped data directories (``rules/`` and ``datalog/``).

Installed, they are the packages ``sdy_dl.rules_data`` and
``sdy_dl.datalog_data``; in a source checkout they are the top-level folders
next to ``sdy_dl/``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path


def _data_dir(package: str, folder: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(__file__).resolve().parent.parent / folder


def rules_dir() -> Path:
    """The folder of the shipped YAML rule files."""
    return _data_dir("sdy_dl.rules_data", "rules")


def datalog_dir() -> Path:
    """The folder of the shipped Datalog templates."""
    return _data_dir("sdy_dl.datalog_data", "datalog")
