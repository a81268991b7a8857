"""The Python API: ``sdy_dl.propagate(text_or_path, **options)``.

One call runs the whole propagation pipeline once, with provenance; the
result answers every question about its output without running it again::

    result = sdy_dl.propagate("model.mlir", engine="clingo")
    result.text                 # the annotated module, as `sdy-dl propagate` prints it
    result.sharding("%3")       # its printed sharding (None: unsharded)
    result.explain("result:0")  # the derivation tree (sdy_dl.audit.Node)
    result.conflicts()          # where propagation could not agree
"""

from __future__ import annotations

import os

from sdy_dl.audit import Audit, Node
from sdy_dl.ir import load_module, parse_module_text
from sdy_dl.passes import PassOptions


class PropagationResult:
    """The output of one propagation and its audit."""

    def __init__(self, audit: Audit):
        self.audit = audit

    @property
    def text(self) -> str:
        """The propagated module, printed."""
        return self.audit.text

    def values(self) -> list[str]:
        """The names of every value of the output module."""
        return [v.name for v in self.audit.outputs.values]

    def sharding(self, value: str) -> str | None:
        """The sharding the output prints for ``value`` (None: it has none)."""
        s = self.audit.value(value).sharding
        return None if s is None else s.to_text()

    def explain(self, value: str, depth: int = 8) -> Node:
        """Why ``value`` has its printed sharding."""
        return self.audit.explain(value, depth)

    def conflicts(self) -> list:
        """Every place propagation could not agree."""
        return self.audit.conflicts()


def propagate(module: str, *, engine: str = "auto", conservative: bool = False,
              keep_sharding_rules: bool = False, rules=(), pass_options: dict | None = None,
              file: str | None = None) -> PropagationResult:
    """Propagate ``module`` (module text, or the path of a module file).

    ``rules`` are extra YAML rule files; ``pass_options`` are Shardy's pass
    options with ``_`` or ``-`` (``{"propagation_strategy": "basic"}``).
    """
    if "\n" not in module and os.path.isfile(module):
        parsed = load_module(module)
    else:
        parsed = parse_module_text(module, file or "<string>")
    extra = {k.replace("-", "_"): v for k, v in (pass_options or {}).items()}
    options = PassOptions(engine=engine, conservative=conservative,
                          keep_sharding_rules=keep_sharding_rules, rule_files=tuple(rules),
                          quiet=True, extra=extra)
    return PropagationResult(Audit(parsed, options))
