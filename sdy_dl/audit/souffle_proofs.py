"""Datalog proofs from Soufflé's own provenance (``souffle -t explain``).

One interpreter process in provenance mode evaluates the ``step`` program on
the steps' facts and then answers ``explain rel(args)`` commands on stdin
(``format json``).  The printed depth is kept at 3 (the tuple, its rule's
body tuples, their truncated subproofs) and every derived body tuple is
explained by its own command, once: Soufflé prints a proof as a tree, so a
deep ``setdepth`` repeats shared subproofs and grows exponentially, while one
level per tuple gives the same proof as a DAG.  Soufflé's rule numbers
``(Rk)`` name the clauses as Soufflé keeps them (``souffle_rules``: matched by
the clause text each answer lists) and so the rules of ``proofs.parse_rules``
and their template lines in ``datalog/`` (``proofs.rule_origin``); a tuple of
a relation Soufflé replaced by the one it copies is put back through the copy
clause.

Soufflé lists negated atoms (``!rel(..)``), comparisons and an
aggregate's result (``1 = 1``) as leaves; like the proof search, a
proof keeps only the positive body atoms.  Tuples Soufflé cannot explain
(its provenance answers ``Tuple not found`` or names no rule, its rule
number's text matches no clause or several, or its body tuples are not the
clause's atoms) are proved by ``ProofSearch`` when one is given;
``Proof.rule`` then ends with ``(proof search)``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile

from sdy_dl.audit.proofs import Proof, parse_rules, rule_origin
from sdy_dl.audit.souffle_rules import SouffleRuleNumbers, copied
from sdy_dl.datalog.facts import (escape_symbol, read_relation_file, unescape_symbol,
                                  write_facts_dir)
from sdy_dl.datalog.program import Program
from sdy_dl.engines.souffle_engine import souffle_program
from sdy_dl.errors import SdyError

_ATOM = re.compile(r"^([a-z_][A-Za-z0-9_]*)\((.*)\)$", re.S)


def _parse_args(text: str) -> tuple:
    """``0, "a", 2`` -> ``(0, "a", 2)`` (Soufflé's printing of a tuple; symbols
    unescaped as they travel in fact files)."""
    values = json.loads("[" + text + "]") if text.strip() else []
    return tuple(unescape_symbol(v) if isinstance(v, str) else v for v in values)


def _quote(v) -> str:
    """``v`` as an argument of an ``explain`` command (a symbol escaped as in fact files)."""
    return str(v) if isinstance(v, int) else json.dumps(escape_symbol(str(v)))


class SouffleProvenance:
    """One ``souffle -t explain`` session over ``program`` and ``facts``."""

    def __init__(self, program: Program, facts: dict, binary: str | None = None, fallback=None):
        self.binary = binary or shutil.which("souffle")
        if self.binary is None:
            raise SdyError("engine souffle: no 'souffle' on PATH")
        self.numbers = SouffleRuleNumbers(parse_rules(program),
                                          {d.name for d in program.inputs + program.outputs})
        self.inputs = {(name, tuple(row)) for name, rows in facts.items() for row in rows}
        self._given = {name for name, _ in self.inputs}
        self.fallback = fallback
        self._proofs: dict[tuple, Proof | None] = {}
        self._tmp = tempfile.TemporaryDirectory(prefix="sdy-dl-explain-")
        fact_dir, out_dir = os.path.join(self._tmp.name, "facts"), os.path.join(self._tmp.name, "out")
        os.makedirs(out_dir)
        write_facts_dir(program, facts, fact_dir)
        source = os.path.join(self._tmp.name, "program.dl")
        with open(source, "w", encoding="utf-8") as f:
            f.write(souffle_program(program).text)   # its string constants as facts write symbols
        self.command = [self.binary, "-w", "-t", "explain", "-F", fact_dir, "-D", out_dir, source]
        self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self._send("setdepth 3\nformat json")
        self.explain_raw("sdy_dl_no_relation", (0,))   # answered once the evaluation is done
        self.relations = {d.name: read_relation_file(d, os.path.join(out_dir, f"{d.name}.csv"))
                          for d in program.outputs}

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self._send("exit")
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._tmp.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def explain_raw(self, relation: str, args: tuple) -> dict:
        """Soufflé's json answer (the ``proof`` object) for one tuple."""
        self._send(f"explain {relation}({', '.join(_quote(a) for a in args)})")
        lines = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SdyError(f"souffle -t explain stopped answering (explain {relation})")
            lines.append(line)
            if line.rstrip("\n") == "}" and lines[-2:-1] == ["]\n"]:
                break
        answer = json.loads("".join(lines).replace("\t", " "))
        self.numbers.add(answer.get("rules", ()))
        return answer["proof"]

    def rows(self, relation: str) -> list[tuple]:
        """The tuples of output relation ``relation``, sorted."""
        return sorted(tuple(r) for r in self.relations.get(relation, ()))

    def proof(self, relation: str, args: tuple) -> Proof | None:
        """The minimal-height proof of one tuple, as Soufflé's provenance gives it."""
        key = (relation, tuple(args))
        if key in self._proofs:
            return self._proofs[key]
        self._proofs[key] = None   # a cycle guard; provenance proofs are well-founded
        node = self._build(key)
        self._proofs[key] = node
        return node

    def _build(self, key) -> Proof | None:
        relation, args = key
        answer = self.explain_raw(relation, args)
        if "axiom" in answer:
            if answer["axiom"].startswith(relation + "(") and key in self.inputs:
                return Proof(relation, args, "", 0)
            return self._fallback(key)
        number = re.fullmatch(r"\(R(\d+)\)", answer.get("rule-number", ""))
        rule = self.numbers.rule(relation, int(number.group(1))) if number else None
        if rule is None:
            return self._fallback(key)
        children = []
        for child in answer.get("children", ()):
            text = child.get("premises") or child.get("axiom", "")
            m = _ATOM.match(text)
            if m is None or not self._shown(m.group(1)):
                continue   # a negation, comparison, aggregate constraint or Soufflé's own relation
            sub = self.proof(m.group(1), _parse_args(m.group(2)))
            if sub is None:
                return self._fallback(key)
            children.append(sub)
        wanted = [name for name, _ in rule.atoms
                  if self._shown(copied(name, self.numbers.copies))]
        if [copied(name, self.numbers.copies) for name in wanted] != [c.relation for c in children]:
            return self._fallback(key)   # Soufflé's body tuples are not the clause's atoms
        children = [self._copy(name, c) for name, c in zip(wanted, children)]
        height = 1 + max((c.height for c in children), default=0)
        return Proof(relation, args, rule_origin(rule), height, children)

    def _shown(self, relation: str) -> bool:
        """Whether a proof lists tuples of ``relation`` (derived, or given facts)."""
        return relation in self.numbers.by_head or relation in self._given

    def _copy(self, relation: str, proof: Proof) -> Proof:
        """``proof``'s tuple as one of ``relation``, a relation Soufflé replaced by the
        relation it copies (through the copy clauses; ``proof`` itself when none)."""
        if relation == proof.relation:
            return proof
        rule = self.numbers.copies[relation]
        inner = self._copy(rule.atoms[0][0], proof)
        return Proof(relation, proof.args, rule_origin(rule), inner.height + 1, [inner])

    def _fallback(self, key) -> Proof | None:
        if self.fallback is None:
            return None
        found = self.fallback.proof(*key)
        if found is not None and found.rule and not found.rule.endswith(" (proof search)"):
            found.rule += " (proof search)"
        return found
