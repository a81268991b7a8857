"""Render the Jinja2 templates of ``datalog/`` into a Soufflé program.

A *stage* is a top template ``datalog/<stage>.dl.j2`` that includes the
concern templates it needs, in order.  Template parameters are plain values
(flags such as ``conservative``); names from modules and rule files never
reach the program text: they travel only in fact files.
"""

from __future__ import annotations

import functools

import jinja2

from sdy_dl.datalog.program import Program, parse_declarations
from sdy_dl.datalog.stratify import check_stratified
from sdy_dl.errors import SdyError
from sdy_dl.resources import datalog_dir


@functools.lru_cache(maxsize=None)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(datalog_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def available_stages() -> list[str]:
    """The stage names (top templates) shipped in ``datalog/``."""
    return sorted(p.name[: -len(".dl.j2")] for p in datalog_dir().glob("*.dl.j2"))


@functools.lru_cache(maxsize=None)
def _compile_cached(stage: str, params: tuple) -> Program:
    name = f"{stage}.dl.j2"
    try:
        template = _environment().get_template(name)
    except jinja2.TemplateNotFound:
        raise SdyError(f"unknown Datalog stage {stage!r} "
                       f"(known: {', '.join(available_stages())})") from None
    text = template.render(**dict(params))
    check_stratified(text, source=name)
    return Program(text=text, decls=parse_declarations(text, source=name))


def compile_stage(stage: str, **params) -> Program:
    """The Soufflé program of ``stage`` rendered with ``params``."""
    return _compile_cached(stage, tuple(sorted(params.items())))
