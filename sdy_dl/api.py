"""The Python API: ``sdy_dl.propagate(text_or_path, **options)``.

One call runs the whole propagation pipeline once, with provenance; the
result answers every question about its output without running it again::

    result = sdy_dl.propagate("model.mlir", engine="clingo")
    result.text                 # the annotated module, as `sdy-dl propagate` prints it
    result.values()             # every value's name, as the output prints it
    result.sharding("%3")       # its printed sharding (None: unsharded)
    print(result.explain("result:0"))   # the derivation tree (sdy_dl.audit.Node)
    print(result.conflicts())   # where propagation could not agree
    result.why_not("%3", "x")   # why %3 has no axis "x": where it stopped and why
    after, changes = result.whatif(set={"arg:0": '<@mesh, [{"data"}, {}]>'})

    result = sdy_dl.propagate("model.mlir", explicit_collectives=True)
    result.collectives()        # the collective ledger (bytes per device, causes)
    result.memory()             # bytes per device of every value, top unsharded
    print(result.suggest(top=5))  # edits that save bytes, each verified by a what-if

Values are named as ``sdy-dl propagate`` prints them (``%3``, ``%arg0``,
``@func:%2``, ``arg:0``, ``result:0``; ``%3@L16`` when several values print as
``%3``): see :mod:`sdy_dl.audit.naming`.  ``str()`` of a result, a tree or the
conflicts is readable text, and Jupyter shows them as HTML.
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping

from sdy_dl.audit import Audit, Node
from sdy_dl.ir import load_module, parse_module_text

#: Rows a result's HTML shows (Jupyter); ``values()`` lists all.
HTML_ROWS = 200


class PropagationResult:
    """The output of one propagation and its audit."""

    def __init__(self, audit: Audit):
        self.audit = audit

    @property
    def text(self) -> str:
        """The propagated module, printed."""
        return self.audit.text

    def values(self) -> list[str]:
        """The names of every value of the output module, in module order (each
        names one value: see :mod:`sdy_dl.audit.naming`)."""
        return [v.name for v in self.audit.outputs.values]

    def sharding(self, value: str) -> str | None:
        """The sharding the output prints for ``value`` (None: it has none)."""
        s = self.audit.value(value).sharding
        return None if s is None else s.to_text()

    def explain(self, value: str, depth: int = 8) -> Node:
        """Why ``value`` has its printed sharding (``print()`` it for the tree as text)."""
        return self.audit.explain(value, depth)

    def conflicts(self) -> "Conflicts":
        """Every place propagation could not agree (``print()`` them for the groups)."""
        return Conflicts(self.audit.conflicts(), self.audit.conflict_groups())

    def conflict_groups(self) -> list:
        """:meth:`conflicts` grouped by pattern, each group with its count and members."""
        return self.audit.conflict_groups()

    def collectives(self, cost_model=None):
        """The collective ledger (:class:`sdy_dl.audit.collectives.Ledger`) of a result
        propagated with ``explicit_collectives=True`` (else an ``SdyError``).

        ``ledger.entries`` lists every collective of the output, largest first, as
        :class:`~sdy_dl.audit.collectives.Collective`: ``kind``, ``function``, ``name``,
        ``shape``, ``element_type``, ``axes``, ``devices``, ``bytes`` (per device),
        ``in_sharding``/``out_sharding`` and the cause ``had``/``needed``
        (:class:`~sdy_dl.audit.collectives.Side`: values, shardings, annotations);
        ``ledger.groups()`` groups them by pattern; ``ledger.totals()`` sums bytes in
        all, per function, per mesh axis and per kind; ``ledger.to_json()`` is what
        ``sdy-dl comms --format json`` prints.  ``cost_model``: None (no times), a
        YAML file's path, or a :class:`~sdy_dl.audit.cost_model.CostModel`
        (``load_cost_model()`` is the shipped one): entries get ``seconds``."""
        from sdy_dl.audit.cost_model import load_cost_model

        if isinstance(cost_model, str):
            cost_model = load_cost_model(cost_model)
        return self.audit.collectives(cost_model)

    def memory(self, top: int = 10):
        """The memory table (:class:`sdy_dl.audit.memory.MemoryTable`): ``values`` (every
        value's ``bytes_per_device``, ``global_bytes``, ``devices``), ``functions``
        (per function ``arguments``, ``results`` and ``peak_intermediates``, an
        estimate) and ``top``, the ``top`` largest replicated or partly sharded values
        with ``why`` and ``shardable`` (mesh axis -> dims it divides)."""
        return self.audit.memory(top)

    def why_not(self, value: str, axis: str, dim: int | None = None):
        """Why ``value`` has no ``axis`` (on ``dim``): :class:`sdy_dl.audit.why_not.WhyNot`."""
        from sdy_dl.audit.why_not import why_not

        return why_not(self.audit, value, axis, dim)

    def whatif(self, edits=(), *, set: dict | None = None, unset=(), drop_constraints=()):
        """Re-propagate with edited input annotations: ``(new result, WhatIf)``.

        ``set``: value name -> sharding (sdy text or ``P(...)``); ``unset``: values
        whose input annotation goes; ``drop_constraints``: constraint values to
        remove; ``edits``: :class:`~sdy_dl.audit.whatif.Edit` objects.  Values are
        named as this result's output prints them.  ``new.edited_input`` is the
        edited input module's text."""
        from sdy_dl.audit.whatif import Edit, whatif

        all_edits = (list(edits) + [Edit("set", k, v) for k, v in (set or {}).items()]
                     + [Edit("unset", v) for v in unset]
                     + [Edit("drop", v) for v in drop_constraints])
        after, changes = whatif(self.audit, all_edits)
        return PropagationResult(after), changes

    def suggest(self, top: int = 5, jobs: int | None = None):
        """Annotation edits that save communication or memory, each verified by a
        what-if: :class:`sdy_dl.audit.suggest.Suggestions`, best first (``print()`` it
        as ``sdy-dl suggest`` does).  The result must come from
        ``propagate(..., explicit_collectives=True)``; ``jobs``: processes evaluating
        the candidates (None: the usable CPUs, at most 4)."""
        from sdy_dl.audit.suggest import suggest

        return suggest(self.audit, top, jobs)

    @property
    def edited_input(self) -> str | None:
        """The input module a what-if propagated (None: not a what-if's result)."""
        from sdy_dl.audit.whatif import print_input

        copy = getattr(self.audit, "edited_input", None)
        return None if copy is None else print_input(copy)

    def __str__(self) -> str:
        """The propagated module, as ``sdy-dl propagate`` prints it."""
        return self.text

    def __repr__(self) -> str:
        outs = self.audit.outputs.values
        sharded = sum(1 for o in outs
                      if o.sharding is not None and any(d.axes for d in o.sharding.dims))
        return (f"<PropagationResult of {self.audit.file}: {len(outs)} values, "
                f"{sharded} sharded>")

    def _repr_html_(self) -> str:
        esc = html.escape
        outs = self.audit.outputs.values
        rows = "".join(
            f"<tr><td><code>{esc(o.name)}</code></td><td>{esc(o.func)}</td><td>{esc(o.op)}</td>"
            f"<td>{o.line or ''}</td><td><code>{esc(o.sharding.to_text() if o.sharding else '')}"
            "</code></td></tr>" for o in outs[:HTML_ROWS])
        more = (f"<p>{len(outs) - HTML_ROWS} more: <code>values()</code> lists all.</p>"
                if len(outs) > HTML_ROWS else "")
        return (f"<p>{esc(repr(self))}</p><table><tr><th>value</th><th>function</th><th>op</th>"
                f"<th>output line</th><th>sharding</th></tr>{rows}</table>{more}")


class Conflicts(list):
    """The conflicts of a propagation (a list of
    :class:`~sdy_dl.audit.conflicts.Conflict`), printed and shown grouped by
    pattern as ``sdy-dl conflicts`` prints them."""

    def __init__(self, conflicts: list, groups: list):
        super().__init__(conflicts)
        self.groups = groups

    def __str__(self) -> str:
        from sdy_dl.audit.conflicts import groups_text

        return groups_text(self.groups)

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(str(self))}</pre>"


def propagate(module: str, *, engine: str = "auto", conservative: bool = False,
              keep_sharding_rules: bool = False, rules=(), pass_options: dict | None = None,
              file: str | None = None, explicit_collectives: bool = False) -> PropagationResult:
    """Propagate ``module`` (module text, or the path of a module file).

    ``rules`` are extra YAML rule files; ``pass_options`` are Shardy's pass
    options exactly as ``--pass-option`` takes them: keys with ``-`` or ``_``,
    values typed (``True``) or as text (``"true"``), checked against the
    options the pipeline reads (an unknown key or a bad value raises
    :class:`~sdy_dl.errors.UsageError` listing the valid ones).
    ``conservative`` and ``keep_sharding_rules`` are the options
    ``conservative-propagation`` and ``keep-sharding-rules``.
    ``explicit_collectives`` ends the pipeline as ``propagate --explicit-collectives``
    does (needed by :meth:`PropagationResult.collectives`).
    """
    from sdy_dl.engines import ENGINE_NAMES
    from sdy_dl.errors import UsageError
    from sdy_dl.pipeline import make_options

    if engine not in ENGINE_NAMES:
        raise UsageError(f"unknown engine {engine!r} (valid: {', '.join(ENGINE_NAMES)})")
    if pass_options is not None and not isinstance(pass_options, Mapping):
        raise UsageError(f"pass_options must be a mapping of option names to values, "
                         f"not {type(pass_options).__name__}")
    given = dict(pass_options or {})
    for name, flag in (("conservative-propagation", conservative),
                       ("keep-sharding-rules", keep_sharding_rules),
                       ("enable-insert-explicit-collectives", explicit_collectives)):
        if flag:
            given[name] = True
    if isinstance(rules, (str, bytes)):
        rules = (rules,)
    options = make_options(given, engine=engine, rule_files=tuple(rules), quiet=True)
    if "\n" not in module and os.path.isfile(module):
        parsed = load_module(module)
    else:
        parsed = parse_module_text(module, file or "<string>")
    # (the memos are kept for what-ifs)
    return PropagationResult(Audit(parsed, options, step_memo={}, stage_memo={}))
