"""The options of the Shardy passes sdy-dl runs, declared once.

Each :class:`Option` has Shardy's spelling (``dedup-functions-fully``), a
type, its default and the passes that read it (sdy-dl's pass names; the
pipeline ``propagate`` reads every option of a pass it runs).  Values are
parsed as MLIR's pass-option parser parses them (booleans ``true/True/TRUE/1``
and ``false/False/FALSE/0``, integers, enum names, strings).  An option
sdy-dl declares but does not implement (Shardy's debug dumps) accepts only
its default.

``--pass-option KEY=VALUE`` goes through :func:`parse_option_items`; an
unknown key, a key no pass of the command reads, or a bad value is a
:class:`~sdy_dl.errors.UsageError` that lists what is valid.
"""

from __future__ import annotations

from dataclasses import dataclass

from sdy_dl.errors import UsageError

#: The propagation passes (Shardy's ``sdy-*-propagate``).
PROPAGATION = ("basic-propagate", "aggressive-propagate", "op-priority-propagate",
               "user-priority-propagate")
#: The pseudo pass name of the whole pipeline (``sdy-dl propagate``).
PIPELINE = "propagate"

_TRUE = ("true", "True", "TRUE", "1")
_FALSE = ("false", "False", "FALSE", "0")


@dataclass(frozen=True)
class Option:
    """One pass option: Shardy's name, type (``bool``, ``int``, ``string`` or a
    tuple of enum names), default, the passes reading it, whether sdy-dl
    implements values other than the default, and a line of help."""

    name: str
    type: object
    default: object
    passes: tuple[str, ...]
    help: str
    implemented: bool = True

    @property
    def key(self) -> str:
        """The key in :attr:`PassOptions.extra` (``-`` becomes ``_``)."""
        return self.name.replace("-", "_")

    def type_text(self) -> str:
        return "|".join(self.type) if isinstance(self.type, tuple) else self.type

    def default_text(self) -> str:
        if isinstance(self.default, bool):
            return "true" if self.default else "false"
        return str(self.default)

    def parse(self, text: str):
        """The typed value of ``text`` (:class:`UsageError` when it is not one)."""
        if self.type == "bool":
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            expected = "true or false"
        elif self.type == "int":
            try:
                return int(text)
            except ValueError:
                expected = "an integer"
        elif isinstance(self.type, tuple):
            if text in self.type:
                return text
            expected = "one of " + ", ".join(self.type)
        else:
            return text
        raise UsageError(f"--pass-option {self.name}: {text!r} is not a valid value "
                         f"(expected {expected})")


OPTIONS: tuple[Option, ...] = (
    Option("dedup-functions-fully", "bool", False,
           ("import-pipeline", "unflatten-call-graph", PIPELINE),
           "Keep one function per callee (func data-flow edges instead of named computations)."),
    Option("enable-insert-explicit-collectives", "bool", False, (PIPELINE,),
           "End with insert-explicit-reshards{enable-full-version=true} and "
           "reshard-to-collectives (same as --explicit-collectives)."),
    Option("add-data-flow-edges-on-named-computations", "bool", True, ("import-func-calls",),
           "Add sdy.data_flow_edge ops on the named computations calls become."),
    Option("enable-full-version", "bool", False, ("insert-explicit-reshards",),
           "Reshard every op whose operand and result shardings conflict (not only calls)."),
    Option("keep-redundant-reshards", "bool", False, ("reshard-to-collectives",),
           "Keep reshards whose input sharding is equivalent to their own (false: erase them)."),
    Option("enable-patterns", ("sdy-collective",), "sdy-collective", ("canonicalize",),
           "The pattern labels the canonicalizer runs (sdy-dl has the set the pipeline runs)."),
    Option("conservative-propagation", "bool", False, PROPAGATION + (PIPELINE,),
           "Disallow split axes and non-divisible sharding axes (same as --conservative)."),
    Option("keep-sharding-rules", "bool", False, PROPAGATION + (PIPELINE,),
           "Keep existing and created sdy.sharding_rule attributes (same as --keep-sharding-rules)."),
    Option("propagation-strategy", ("basic", "aggressive", "basic-then-aggressive"), "aggressive",
           PROPAGATION[1:], "The factor propagation strategy."),
    Option("run-op-priority-propagation", "bool", True, PROPAGATION[2:],
           "Run the op-priority bands (false: one plain propagation)."),
    Option("module-dump-directory", "string", "", PROPAGATION,
           "Where Shardy dumps rewritten modules.", implemented=False),
    Option("debug-sharding-origins", "bool", False, PROPAGATION + ("apply-sharding-constraints",),
           "Record where each sharding came from.", implemented=False),
    Option("debug-propagation-edge-sharding", "bool", False,
           PROPAGATION + ("apply-sharding-constraints",),
           "Record the edges shardings propagated along.", implemented=False),
    Option("sink-debug-sharding-origins", "bool", False, ("sink-data-flow-edges",),
           "Sink the sharding origins onto the owners.", implemented=False),
    Option("sink-debug-propagation-edge-sharding", "bool", False, ("sink-data-flow-edges",),
           "Sink the propagation edges onto the owners.", implemented=False),
)

BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}
BY_KEY: dict[str, Option] = {o.key: o for o in OPTIONS}


def options_of(pass_name: str) -> tuple[Option, ...]:
    """The options pass ``pass_name`` reads (the pipeline's are
    :func:`sdy_dl.pipeline.pipeline_options`)."""
    return tuple(o for o in OPTIONS if pass_name in o.passes)


def parse_option_items(items, pass_name: str, valid_options=None, *,
                       only_implemented: bool = True) -> dict:
    """``KEY=VALUE`` strings for ``pass_name`` as ``{key: typed value}`` (keys with ``_``);
    the valid options are those ``pass_name`` reads unless ``valid_options`` are given.
    ``only_implemented=False`` (values a pipeline fixes) also takes values of
    options sdy-dl does not implement yet (the pass runs as with the default)."""
    valid = {o.name: o for o in (options_of(pass_name) if valid_options is None
                                 else valid_options)}
    listing = ", ".join(sorted(valid)) or "none"
    values = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UsageError(f"--pass-option {item!r} is not KEY=VALUE "
                             f"(valid keys for {pass_name}: {listing})")
        option = valid.get(name) or valid.get(name.replace("_", "-"))
        if option is None:
            raise UsageError(f"--pass-option: {pass_name} has no option {name!r} "
                             f"(valid: {listing})")
        value = option.parse(text.strip().strip("{}") if isinstance(option.type, tuple)
                             else text.strip())
        if only_implemented and not option.implemented and value != option.default:
            raise UsageError(f"--pass-option {option.name}={text}: only the default "
                             f"({option.default_text()}) is implemented by sdy-dl")
        values[option.key] = value
    return values


def option_value(extra: dict | None, name: str):
    """The value of option ``name`` in ``extra`` (its default when absent)."""
    option = BY_NAME[name]
    if extra and option.key in extra:
        return extra[option.key]
    if extra and option.name in extra:
        return extra[option.name]
    return option.default
