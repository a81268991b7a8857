"""Soufflé's provenance rule numbers name the clauses Soufflé keeps, matched by their text."""

from __future__ import annotations

import shutil

import pytest

from sdy_dl.audit.proofs import parse_rules
from sdy_dl.audit.souffle_rules import SouffleRuleNumbers
from sdy_dl.datalog.program import Program, parse_declarations

# Soufflé drops the clause over the empty relation e, moves the clause with an
# arithmetic body argument to the end of w's clauses, and replaces c (a copy of s)
# by s: its (R2) of w is the fifth clause of w here, its (R3) the fourth.
TEXT = """// s(N): given
.decl s(n: number)
.input s
// e(N): never given, never derived
.decl e(n: number)
// c(N): a copy of s
.decl c(n: number)
// w(N, Q): walked
.decl w(n: number, q: number)
.output w
// pair(N, Q): walked on
.decl pair(n: number, q: number)
c(N) :- s(N).
w(N, 0) :- c(N).
w(N + 1, 0) :- e(N), s(N + 1).
w(N, 5) :- s(N), s(N + 1).
w(N, Q + 1) :- pair(N, Q).
pair(N, Q) :- w(N, Q), Q < 2.
"""


def _program(text: str) -> Program:
    return Program(text, parse_declarations(text))


@pytest.mark.souffle
@pytest.mark.skipif(not shutil.which("souffle"), reason="souffle not on PATH")
def test_provenance_names_the_clause_souffle_numbers_not_the_kth_in_the_text():
    from sdy_dl.audit.souffle_proofs import SouffleProvenance

    program = _program(TEXT)
    rule = [f"rule {r.index}: {r.text}" for r in parse_rules(program)]
    assert "w(N, Q + 1)" in rule[4].replace("w (", "w(")
    with SouffleProvenance(program, {"s": [(1,), (2,)]}) as provenance:
        walked = provenance.proof("w", (1, 1))
        doubled = provenance.proof("w", (1, 5))
    assert walked.lines() == [f"w(1, 1)  [{rule[4]}]", f"  pair(1, 0)  [{rule[5]}]",
                              f"    w(1, 0)  [{rule[1]}]", f"      c(1)  [{rule[0]}]",
                              "        s(1)  [input fact]"]
    assert walked.height == 4
    assert doubled.lines() == [f"w(1, 5)  [{rule[3]}]", "  s(1)  [input fact]",
                               "  s(2)  [input fact]"]


def test_a_rule_number_whose_text_matches_no_clause_or_several_names_none():
    text = TEXT + "pair(N, Q) :- w(N, Q), Q < 2.\n"
    numbers = SouffleRuleNumbers(parse_rules(_program(text)), {"s", "w"})
    numbers.add([{"rule-number": "(R1)", "rule": "w(N,7) :- \n   s(N)."},
                 {"rule-number": "(R2)", "rule": "w(N,(Q+1)) :- \n   pair(N,Q)."},
                 {"rule-number": "(R1)", "rule": "pair(N,Q) :- \n   w(N,Q),\n   Q < 2."},
                 {"rule-number": "(R3)", "rule": "w(N,5) :- \n   s(N),\n   s( _tmp_0),\n"
                                                 "    _tmp_0 = (N+1)."}])
    assert numbers.rule("w", 1) is None          # no clause w(N, 7)
    assert numbers.rule("pair", 1) is None       # two clauses print so
    assert numbers.rule("w", 2).index == 4
    assert numbers.rule("w", 3).index == 3
    assert numbers.rule("w", 4) is None          # Soufflé listed no (R4)


def test_two_rule_numbers_naming_one_clause_name_none():
    """A mapping that is not one-to-one is refused for every number it joins (one of
    them names another clause, which the comparison failed to tell apart)."""
    numbers = SouffleRuleNumbers(parse_rules(_program(TEXT)), {"s", "w"})
    numbers.add([{"rule-number": "(R2)", "rule": "w(N,(Q+1)) :- \n   pair(N,Q)."},
                 {"rule-number": "(R4)", "rule": "w(N,(Q+1)) :- \n   pair(N,Q)."},
                 {"rule-number": "(R3)", "rule": "w(N,5) :- \n   s(N),\n   s( _tmp_0),\n"
                                                 "    _tmp_0 = (N+1)."}])
    assert numbers.rule("w", 2) is None and numbers.rule("w", 4) is None
    assert numbers.rule("w", 3).index == 3
