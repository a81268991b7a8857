"""Fact and relation folders as Soufflé reads and writes them, for tests that
stand in for ``souffle -F DIR -D DIR`` with another engine."""

from __future__ import annotations

import os

from sdy_dl.datalog.facts import Facts, fact_lines, read_relation_file
from sdy_dl.datalog.program import Program


def read_facts_dir(program: Program, directory: str) -> dict[str, set[tuple]]:
    """The ``<relation>.facts`` files of every input relation of ``program``."""
    return {d.name: read_relation_file(d, os.path.join(directory, f"{d.name}.facts"))
            for d in program.inputs}


def write_relations_dir(program: Program, relations: Facts, directory: str) -> None:
    """Write output relations as Soufflé does with ``-D``: ``<relation>.csv``, tab-separated."""
    for decl in program.outputs:
        rows = sorted(relations.get(decl.name, ()))
        with open(os.path.join(directory, f"{decl.name}.csv"), "w", encoding="utf-8") as f:
            f.write(fact_lines(decl, rows))
