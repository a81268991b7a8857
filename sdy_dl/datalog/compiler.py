"""Render the Jinja2 templates of ``datalog/`` into a Soufflé program.

A *stage* is a folder ``datalog/<stage>/`` whose ``main.dl.j2`` includes
the stage's parts in order.  Template parameters are plain values (flags such
as ``conservative``); names from modules and rule files never reach the
program text: they travel only in fact files.  Every compiled stage is
checked: stratified, every relation documented, and input relations, and
only they, named ``in_*``.
"""

from __future__ import annotations

import functools

from sdy_dl.datalog.program import Program, check_input_names, parse_declarations
from sdy_dl.errors import SdyError
from sdy_dl.resources import (cached_text, cached_value, code_digest, datalog_dir, file_stamp,
                               sha256)


MAIN = "main.dl.j2"


@functools.lru_cache(maxsize=None)
def _environment():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(datalog_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def available_stages() -> list[str]:
    """The stage names (folders with a ``main.dl.j2``) shipped in ``datalog/``."""
    return sorted(p.parent.name for p in datalog_dir().glob(f"*/{MAIN}"))


@functools.lru_cache(maxsize=None)
def _templates_digest() -> str:
    """A digest of every file under ``datalog/`` (by its ``file_stamp``), of this
    module and of Jinja2's package file (another Jinja2 may render other text;
    found without importing it): keys rendered programs in the cache."""
    import sys

    root = datalog_dir()
    h = sha256(code_digest(sys.modules[__name__], "jinja2").encode())
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(file_stamp(path))
    return h.hexdigest()[:16]


def _render(stage: str, params: tuple) -> str:
    import jinja2

    name = f"{stage}/{MAIN}"
    try:
        template = _environment().get_template(name)
    except jinja2.TemplateNotFound:
        raise SdyError(f"unknown Datalog stage {stage!r} "
                       f"(known: {', '.join(available_stages())})") from None
    return template.render(**dict(params))


@functools.lru_cache(maxsize=None)
def _compile_cached(stage: str, params: tuple) -> Program:
    name = f"{stage}/{MAIN}"
    if not (datalog_dir() / stage / MAIN).is_file():
        _render(stage, params)   # the unknown-stage error
    key = sha256(repr((stage, params)).encode()).hexdigest()[:24] + "-" + _templates_digest()
    text = cached_text("programs", key, lambda: _render(stage, params))
    _check_stratified_once(text, key, name)
    return Program(text=text, decls=_declarations_once(text, key, name), key=key)


def _declarations_once(text: str, key: str, name: str) -> dict:
    """``parse_declarations`` of the program ``text`` (cached under ``key``, with
    ``check_input_names``), remembered in the cache per key and parser code: the
    step program's hundreds of declarations are read again in every process."""
    import pickle

    from sdy_dl.datalog import program as program_module

    def parse() -> dict:
        decls = parse_declarations(text, source=name)
        check_input_names(decls, source=name)
        return decls
    return cached_value("declarations", key + "-" + code_digest(program_module), parse,
                        pickle.dumps, pickle.loads)


def _check_stratified_once(text: str, key: str, name: str) -> None:
    """``check_stratified`` of ``text``, the stage rendered under ``key``, remembered
    in the cache per key and checker code (the checker is imported only to check
    a program not in the cache)."""
    key = key + "-" + code_digest("sdy_dl.datalog.stratify", "sdy_dl.datalog.lexer")

    def check() -> str:
        from sdy_dl.datalog.stratify import check_stratified

        check_stratified(text, source=name)
        return "stratified\n"
    cached_text("checked", key, check)


def compile_stage(stage: str, **params) -> Program:
    """The Soufflé program of ``stage`` rendered with ``params``."""
    return _compile_cached(stage, tuple(sorted(params.items())))
