"""The rule oracle: Shardy's own op sharding rules, and ours, op by op.

Shardy attaches its rule to every live op when ``sdy-basic-propagate`` runs
with ``keep-sharding-rules=true`` (semantics §0).  To pair ops of the
oracle's output with ours, every op is first tagged with a discardable
attribute ``rules_test.tag = N``; the pass keeps attributes and does not fold,
but erases dead pure ops, which are then left out of the comparison.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sdy_dl.ir import parse_module_text
from sdy_dl.ir.context import mlir_context
from sdy_dl.rules.db import RULE_ATTR, RuleDB

TAG = "rules_test.tag"


def context():
    """The project's MLIR context, with chlo registered (JAX lowers top_k to chlo)."""
    from jaxlib.mlir.dialects import chlo
    ctx = mlir_context()
    chlo.register_dialect(ctx)
    return ctx


def _walk(op):
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                yield child
                yield from _walk(child)


def tag_module(text: str) -> str:
    """``text`` with every op tagged ``rules_test.tag = <pre-order index>``."""
    from jaxlib.mlir import ir
    with context():
        module = ir.Module.parse(text)
        i64 = ir.IntegerType.get_signless(64)
        for n, op in enumerate(_walk(module.operation)):
            op.attributes[TAG] = ir.IntegerAttr.get(i64, n)
        return str(module)


def _main_ok(text: str) -> None:
    funcs = re.findall(r"func\.func (?:public |private )?@([\w$.-]+)", text)
    if len(funcs) > 1 and "main" not in funcs:
        raise AssertionError("a module with several functions needs @main (Shardy aborts)")


def shardy_rules(tagged: str, conservative: bool = False) -> dict[int, str | None]:
    """Tag -> Shardy's rule text (None: no rule) for every op the pass keeps."""
    from jaxlib.mlir import ir, passmanager
    _main_ok(tagged)
    options = "keep-sharding-rules=true" + (" conservative-propagation=true"
                                             if conservative else "")
    with context():
        module = ir.Module.parse(tagged)
        passmanager.PassManager.parse(
            f"builtin.module(sdy-basic-propagate{{{options}}})").run(module.operation)
        out = {}
        for op in _walk(module.operation):
            attrs = op.attributes
            if TAG in attrs:
                tag = ir.IntegerAttr(attrs[TAG]).value
                out[tag] = str(attrs[RULE_ATTR]) if RULE_ATTR in attrs else None
        return out


def our_rules(tagged: str, db: RuleDB) -> dict[int, tuple[str, str | None]]:
    """Tag -> (op name, our rule text or None) for every op."""
    context()
    module = parse_module_text(tagged, "<rules-test>")
    out = {}
    for op in module.ops:
        a = op.attr(TAG)
        if a is None:
            continue
        from jaxlib.mlir import ir
        rule = db.rule_for(op, module)
        out[ir.IntegerAttr(a).value] = (op.name, None if rule is None else rule.to_text())
    return out


@dataclass
class Agreement:
    """Counts of a comparison and the differences found."""

    compared: int = 0
    equal: int = 0
    with_rule: int = 0          # compared ops that have a rule in Shardy
    erased: int = 0             # ops the pass erased (dead), not compared
    diffs: list[str] = field(default_factory=list)
    ops: set[str] = field(default_factory=set)

    def add(self, other: "Agreement") -> None:
        self.compared += other.compared
        self.equal += other.equal
        self.with_rule += other.with_rule
        self.erased += other.erased
        self.diffs += other.diffs
        self.ops |= other.ops

    def __str__(self) -> str:
        return (f"{self.equal}/{self.compared} equal ({self.with_rule} with a rule, "
                f"{len(self.ops)} op kinds, {self.erased} dead ops erased by the oracle)")


def compare(text: str, db: RuleDB, conservative: bool | None = None) -> Agreement:
    """Our rules vs Shardy's for every op of ``text`` (db.conservative by default)."""
    conservative = db.conservative if conservative is None else conservative
    tagged = tag_module(text)
    theirs = shardy_rules(tagged, conservative)
    ours = our_rules(tagged, db)
    result = Agreement()
    for tag, (name, mine) in ours.items():
        if tag not in theirs:
            result.erased += 1
            continue
        result.compared += 1
        result.ops.add(name)
        if theirs[tag] is not None:
            result.with_rule += 1
        if theirs[tag] == mine:
            result.equal += 1
        else:
            result.diffs.append(f"{name} (tag {tag}):\n  shardy: {theirs[tag]}\n  ours:   {mine}")
    return result


def assert_agree(text: str, db: RuleDB, min_rules: int = 1) -> Agreement:
    """Every compared op has Shardy's rule exactly; returns the counts."""
    result = compare(text, db)
    assert not result.diffs, (f"{len(result.diffs)} rule(s) differ from Shardy "
                              f"({'conservative' if db.conservative else 'normal'} mode):\n"
                              + "\n".join(result.diffs[:20]))
    assert result.with_rule >= min_rules, f"too few ops with a rule: {result}"
    return result
