"""Typed pass options: the :class:`Option` type and the one way options are read.

A pass declares the options it reads beside its code, as Shardy declares
them in ``passes.td``: each pass module defines its :class:`Option` values
and hands them to :func:`sdy_dl.passes.register` (``options=``).  An option
several passes read (``conservative-propagation``) is one :class:`Option`
object, defined where Shardy first declares it and imported by the others.

Values are given either as text (``--pass-option KEY=VALUE``, or a string in
``sdy_dl.propagate(pass_options=...)``), parsed as MLIR's pass-option parser
parses it (booleans ``true/True/TRUE/1`` and ``false/False/FALSE/0``,
integers, enum names, strings), or as a typed Python value (``True``, ``4``),
checked against the declared type.  :func:`resolve_options` is the single
path from the command line and the Python API; an unknown key, a key the pass
does not read, or a badly typed value is a :class:`~sdy_dl.errors.UsageError`
that lists what is valid.  An option sdy-dl declares but does not implement
(Shardy's debug dumps) accepts only its default.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from sdy_dl.errors import UsageError

_TRUE = ("true", "True", "TRUE", "1")
_FALSE = ("false", "False", "FALSE", "0")


class Option(NamedTuple):
    """One pass option: Shardy's name, type (``bool``, ``int``, ``string`` or a
    tuple of enum names), default, a line of help, and whether sdy-dl
    implements values other than the default."""

    name: str
    type: object
    default: object
    help: str
    implemented: bool = True

    def type_text(self) -> str:
        return "|".join(self.type) if isinstance(self.type, tuple) else self.type

    def default_text(self) -> str:
        return value_text(self.default)

    def parse(self, text: str):
        """The typed value of ``text`` (:class:`UsageError` when it is not one)."""
        if self.type == "bool":
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
        elif self.type == "int":
            try:
                return int(text)
            except ValueError:
                pass
        elif isinstance(self.type, tuple):
            text = text.strip("{}")
            if text in self.type:
                return text
        else:
            return text
        raise UsageError(f"--pass-option {self.name}: {text!r} is not a valid value "
                         f"(expected {self.expected()})")

    def check(self, value):
        """``value`` given from Python: text is parsed as :meth:`parse` parses it,
        anything else must already have the declared type."""
        if isinstance(value, str):
            return self.parse(value.strip())
        ok = {"bool": isinstance(value, bool),
              "int": isinstance(value, int) and not isinstance(value, bool)}.get(
                  self.type if isinstance(self.type, str) else "", False)
        if not ok:
            raise UsageError(f"pass option {self.name}: {value!r} is not a valid value "
                             f"(expected {self.expected()})")
        return value

    def expected(self) -> str:
        if self.type == "bool":
            return "true or false"
        if self.type == "int":
            return "an integer"
        if isinstance(self.type, tuple):
            return "one of " + ", ".join(self.type)
        return "a string"


def value_text(value) -> str:
    """A typed option value as the command line writes it (``true``, ``4``, ``name``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def given_items(values: Mapping[str, object]) -> list[str]:
    """Typed option ``values`` as the ``KEY=VALUE`` items :func:`resolve_options`
    reads back, sorted by key."""
    return [f"{name}={value_text(value)}" for name, value in sorted(values.items())]


def resolve_options(given: Iterable[str] | Mapping[str, object] | None,
                    valid: Iterable[Option], owner: str, *,
                    only_implemented: bool = True) -> dict[str, object]:
    """The options ``given`` for ``owner`` (a pass or pipeline name) as
    ``{option name: typed value}``.

    ``given`` is either ``KEY=VALUE`` strings (the command line, a pipeline's
    fixed ``name{key=value}``) or a mapping from keys to text or typed values
    (the Python API); keys are Shardy's names, ``_`` standing for ``-`` too.
    ``only_implemented=False`` (values a pipeline fixes) also takes values of
    options sdy-dl does not implement (the pass runs as with the default)."""
    valid = {o.name: o for o in valid}
    listing = ", ".join(sorted(valid)) or "none"
    if given is None:
        return {}
    if isinstance(given, Mapping):
        pairs = list(given.items())
        items = [(k, v, False) for k, v in pairs]
    elif isinstance(given, (str, bytes)):
        raise UsageError(f"pass options for {owner} must be a mapping or KEY=VALUE items, "
                         f"not {type(given).__name__}")
    else:
        items = []
        for item in given:
            name, sep, text = str(item).partition("=")
            if not sep or not name.strip():
                raise UsageError(f"--pass-option {item!r} is not KEY=VALUE "
                                 f"(valid keys for {owner}: {listing})")
            items.append((name, text, True))
    values = {}
    for name, value, from_text in items:
        if not isinstance(name, str) or not name.strip():
            raise UsageError(f"pass option key {name!r} is not an option name "
                             f"(valid for {owner}: {listing})")
        name = name.strip()
        option = valid.get(name) or valid.get(name.replace("_", "-"))
        if option is None:
            raise UsageError(f"--pass-option: {owner} has no option {name!r} (valid: {listing})")
        typed = option.parse(value.strip()) if from_text else option.check(value)
        if only_implemented and not option.implemented and typed != option.default:
            raise UsageError(f"--pass-option {option.name}={value}: only the default "
                             f"({option.default_text()}) is implemented by sdy-dl")
        if values.get(option.name, typed) != typed:
            raise UsageError(f"pass option {option.name} is given twice, with different values")
        values[option.name] = typed
    return values
