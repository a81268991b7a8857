"""Soufflé's semantics on the embedded engines, case by hand-computed case (and on
Soufflé itself when it is on PATH): aggregates, 32-bit arithmetic, nested
scopes, several heads, ``.output`` forms, string escapes, declared types; and
the one-line errors for what the engines do not implement."""

from __future__ import annotations

import shutil

import pytest

from sdy_dl.datalog.program import Program, parse_declarations
from sdy_dl.engines import get_engine
from sdy_dl.errors import SdyError

ENGINES = ["python", "clingo"] + (["souffle"] if shutil.which("souffle") else [])

EDGES = [(1, 2), (2, 3), (3, 1), (1, 3), (2, 1), (4, 5)]


def decls(*lines: str) -> str:
    return "".join(f"// {line.split()[1].split('(')[0]}: a test relation\n{line}\n"
                   for line in lines)


E = ".decl e(x: number, y: number)"
HEADER = decls(E) + ".input e\n"


def run(engine: str, text: str, facts=None):
    return get_engine(engine).run(Program(text, parse_declarations(text)),
                                  {"e": EDGES} if facts is None else facts)


def out(*names: str) -> str:
    return decls(*(f".decl {n}(v: number)" for n in names)) + "".join(
        f".output {n}\n" for n in names)


@pytest.mark.parametrize("engine", ENGINES)
def test_count_and_sum_over_a_joined_body_are_over_distinct_bindings(engine):
    text = HEADER + out("c", "s") + (
        "c(N) :- N = count : { e(X, Y), e(Y, _) }.\n"
        "s(N) :- N = sum X : { e(X, Y), e(Y, _) }.\n")
    # (X, Y) with an edge leaving Y: (1,2) (2,3) (3,1) (1,3) (2,1); not (4,5).
    # Joined tuples would be 8 (Y=1 and Y=2 have two edges each).
    assert run(engine, text) == {"c": {(5,)}, "s": {(9,)}}


@pytest.mark.parametrize("engine", ENGINES)
def test_count_over_one_atom_counts_its_tuples(engine):
    text = HEADER + decls(".decl t(a: number, b: number, c: number)", ".decl d(x: number, n: number)",
                          ".decl r(n: number)") + ".input t\n.output d\n.output r\n" + (
        "d(X, N) :- e(X, _), N = count : { e(X, _) }.\n"
        "r(N) :- N = count : { t(X, X, _) }.\n")
    facts = {"e": EDGES, "t": [(1, 1, 5), (1, 1, 6), (2, 2, 7), (1, 2, 3)]}
    # t(X, X, _) names X twice: Soufflé materialises it, distinct X = {1, 2}
    assert run(engine, text, facts) == {"d": {(1, 2), (2, 2), (3, 1), (4, 1)}, "r": {(2,)}}


@pytest.mark.parametrize("engine", ENGINES)
def test_arithmetic_is_32_bit_with_c_division(engine):
    rows = {"a": "(2 - 10) / 3", "b": "(2 - 10) % 3", "c": "7 / -2", "d": "-7 % 2",
            "f": "2147483647 + 1", "g": "-2147483648 - 1", "h": "65536 * 65536",
            "i": "46341 * 46341", "j": "-(-2147483648)", "k": "-2147483648 / 2"}
    text = out(*rows) + "".join(f"{n}(X) :- X = {expr}.\n" for n, expr in rows.items())
    assert run(engine, text, {}) == {
        "a": {(-2,)}, "b": {(-2,)}, "c": {(-3,)}, "d": {(-1,)}, "f": {(-2147483648,)},
        "g": {(2147483647,)}, "h": {(0,)}, "i": {(-2147479015,)}, "j": {(-2147483648,)},
        "k": {(-1073741824,)}}


@pytest.mark.parametrize("engine", ["python", "clingo"])
@pytest.mark.parametrize("expr,what", [("X / (Y - Y)", "division by zero"),
                                       ("X % 0", "modulo by zero"),
                                       ("(-2147483647 - 1) / (X - 2)", "overflow")])
def test_division_by_zero_is_a_located_error(engine, expr, what):
    text = HEADER + out("q") + f"q(Z) :- e(X, Y), Z = {expr}.\n"
    with pytest.raises(SdyError, match=what) as info:
        run(engine, text)
    assert str(info.value).startswith("<program>:7:1: ")


@pytest.mark.parametrize("engine", ENGINES)
def test_a_division_runs_only_for_the_bindings_the_rest_of_the_body_admits(engine):
    # written before the filter, evaluated after it: no division by zero for Y = 1
    text = HEADER + out("q") + "q(Z) :- e(X, Y), Z = X / (Y - 1), Y != 1.\n"
    assert run(engine, text) == {"q": {(0,), (1,)}}


@pytest.mark.parametrize("engine", ENGINES)
def test_a_filter_on_an_aggregate_of_outer_variables_runs_before_a_division(engine):
    # The count needs only X (bound by e), so the filter N != 0 is not deferred and
    # the division, written before both, runs only where it holds: X = 3 counts no Y > 3.
    text = HEADER + out("q").replace("(v: number)", "(x: number, m: number)") + (
        "q(X, M) :- e(X, _), M = X / N, N = count : { e(X, Y), Y > X }, N != 0.\n")
    assert run(engine, text) == {"q": {(1, 0), (2, 2), (4, 4)}}


@pytest.mark.parametrize("engine", ENGINES)
def test_an_aggregate_dividing_by_an_outer_variable_runs_after_the_outer_filters(engine):
    # The count's body divides by X - 4, so the count runs after X != 4, written after it.
    text = HEADER + out("q").replace("(v: number)", "(x: number, n: number)") + (
        "q(X, N) :- e(X, _), N = count : { e(Z, _), Z / (X - 4) != 0 }, X != 4.\n")
    # the tuples of e whose first column Z has |Z| >= 4 - X: 2 for X = 1, 4 for 2, 6 for 3
    assert run(engine, text) == {"q": {(1, 2), (2, 4), (3, 6)}}


@pytest.mark.parametrize("engine", ENGINES)
def test_an_aggregate_over_a_variable_only_a_division_binds_runs_after_it(engine):
    # T is bound only by the division, so the count over Z > T, and the filter on
    # it, run after the division (the rule is safe, in either order written).
    head = HEADER + out("q").replace("(v: number)", "(x: number, n: number)")
    # T = X / Y: 0 for (1,2) (2,3) (1,3) (4,5), 3 for (3,1), 2 for (2,1); e has
    # six tuples, their first column 1 2 3 1 2 4.
    expected = {"q": {(1, 6), (2, 6), (2, 2), (3, 1), (4, 6)}}
    for body in ("e(X, Y), T = X / Y, N = count : { e(Z, _), Z > T }, N > 0",
                 "N > 0, N = count : { e(Z, _), Z > T }, T = X / Y, e(X, Y)"):
        assert run(engine, head + f"q(X, N) :- {body}.\n") == expected, body
    # compared with a constant: the count binds nothing, and still waits for T
    text = HEADER + out("r") + "r(X) :- e(X, Y), T = X / Y, count : { e(Z, _), Z > T } > 1.\n"
    assert run(engine, text) == {"r": {(1,), (2,), (4,)}}


@pytest.mark.parametrize("engine", ENGINES)
def test_nested_aggregate_sees_the_outer_variables(engine):
    text = HEADER + decls(".decl n(x: number, c: number)") + ".output n\n" + (
        "n(X, N) :- e(X, _), N = count : { e(X, Y), C = count : { e(Y, X) }, C > 0 }.\n")
    # X=1: Y=2 and Y=3 have an edge back; X=2: only Y=1; X=3: Y=1; X=4: Y=5 has none
    assert run(engine, text) == {"n": {(1, 2), (2, 1), (3, 1), (4, 0)}}


@pytest.mark.parametrize("engine", ENGINES)
def test_min_and_max_wherever_they_stand(engine):
    text = HEADER + out("lo", "hi", "below", "none") + (
        "lo(V) :- min Y : { e(Y, _) } = V.\n"
        "hi(V) :- V = max Y : { e(_, Y) }.\n"
        "below(X) :- e(X, _), X < max Y : { e(_, Y), Y < 4 }.\n"
        "none(X) :- e(X, _), X < min Y : { e(Y, _), Y > 10 }.\n")
    assert run(engine, text) == {"lo": {(1,)}, "hi": {(5,)}, "below": {(1,), (2,)},
                                 "none": set()}


@pytest.mark.parametrize("engine", ENGINES)
def test_several_heads_are_several_rules(engine):
    text = HEADER + out("b", "c") + "b(X), c(Y) :- e(X, Y), X > 2.\n"
    assert run(engine, text) == {"b": {(3,), (4,)}, "c": {(1,), (5,)}}


@pytest.mark.parametrize("engine", ENGINES)
def test_output_forms_and_no_output(engine):
    text = HEADER + decls(".decl a(x: number)", ".decl b(x: number)", ".decl c(x: number)") + (
        ".output a, b\n.output c(IO=stdout)\n"
        "a(X) :- e(X, 2).\nb(X) :- e(X, 3).\nc(X) :- e(4, X).\n")
    assert run(engine, text) == {"a": {(1,)}, "b": {(1,), (2,)}, "c": {(5,)}}
    silent = HEADER + decls(".decl a(x: number)") + "a(X) :- e(X, 2).\n"
    assert run(engine, silent) == {}


@pytest.mark.parametrize("engine", ENGINES)
def test_string_escapes(engine):
    text = decls(".decl s(v: symbol)") + ".output s\n" + r's("a\tb\n\"c\"\\d\'").' + "\n"
    assert run(engine, text, {}) == {"s": {("a\tb\n\"c\"\\d'",)}}


@pytest.mark.parametrize("engine", ENGINES)
def test_declared_types(engine):
    text = (".type Node <: number\n.type Name <: symbol\n"
            + decls(".decl e(x: Node, y: Node)", ".decl name(x: Node, n: Name)",
                    ".decl reach(x: Node, n: Name)") + ".input e\n.input name\n.output reach\n"
            "reach(X, N) :- name(X, N).\nreach(Y, N) :- reach(X, N), e(X, Y), Y != 5.\n")
    facts = {"e": EDGES, "name": [(4, "four"), (1, "one")]}
    assert run(engine, text, facts)["reach"] == {(4, "four"), (1, "one"), (2, "one"), (3, "one")}


#: Two declared subtypes of each kind, and relations of each type.
TYPED = (".type A <: number\n.type B <: number\n.type S <: symbol\n.type T <: symbol\n"
         + decls(".decl ea(x: A, y: number)", ".decl eb(x: B, y: number)",
                 ".decl gs(x: S, y: symbol)")
         + ".input ea\n.input eb\n.input gs\n"
         + decls(*(f".decl r{t.lower()}(x: {t})" for t in ("A", "B", "S", "T")),
                 ".decl rnumber(x: number)", ".decl rsymbol(x: symbol)")
         + "".join(f".output r{t}\n" for t in ("a", "b", "s", "t", "number", "symbol")))
TYPED_FACTS = {"ea": [(1, 1), (2, 5), (3, 0)], "eb": [(2, 2), (4, 1)], "gs": [("a", "a"), ("b", "c")]}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("rule,error", [
    # Soufflé's rules: a variable's type is the meet of the columns of the positive
    # atoms it stands in; the head and positive atoms take subtypes of their columns'
    # types, negated atoms values of their kind; the sides of a comparison are of
    # one type; constants, arithmetic and count fit any type of their kind; sum,
    # min and max are of their expression's type.
    ("rnumber(X) :- ea(X, _).", None),
    ("ra(X) :- ea(X, _), ea(_, X).", None),
    ("ra(X) :- ea(X, N), X = N.", None),
    ("ra(X) :- ea(X, N), X < N.", None),
    ("ra(X) :- ea(X, _), !eb(X, _).", None),
    ("rb(X) :- ea(Y, _), X = Y + 1.", None),
    ("ra(X + 1) :- ea(X, _).", None),
    ("rb(N) :- ea(_, _), N = count : { ea(_, _) }.", None),
    ("ra(M) :- ea(_, _), M = min X : { ea(X, _) }.", None),
    ("ra(M) :- ea(_, _), M = sum X : { ea(X, _) }.", None),
    ("rsymbol(X) :- gs(X, _).", None),
    ("rs(X) :- gs(X, Y), X = Y.", None),
    ("ra(X) :- ea(_, X).", "ra: variable X of type number where column of type A is declared"),
    ("rb(X) :- ea(X, _).", "rb: variable X of type A where column of type B is declared"),
    ("ra(X) :- ea(X, _), eb(X, _).", "variable X is used with types A and B"),
    ("ra(X) :- ea(X, _), eb(Y, _), X = Y.", "comparison '=' of a A with a B"),
    ("ra(X) :- ea(X, _), eb(Y, _), X < Y.", "comparison '<' of a A with a B"),
    ("rb(M) :- ea(_, _), M = min X : { ea(X, _) }.",
     "rb: variable M of type A where column of type B is declared"),
    ("rb(X) :- eb(X, _), X = max Z : { ea(Z, _) }.", "comparison '=' of a B with a A"),
    ("rt(X) :- gs(X, _).", "rt: variable X of type S where column of type T is declared"),
    ("rs(X) :- gs(_, X).", "rs: variable X of type symbol where column of type S is declared"),
])
def test_declared_types_follow_souffles_type_rules(engine, rule, error):
    """Each engine accepts what Soufflé's type checker accepts (with the same
    relations) and refuses the rest with one located error."""
    text = TYPED + rule + "\n"
    if error is None:
        assert run(engine, text, TYPED_FACTS) == run("python", text, TYPED_FACTS)
        return
    with pytest.raises(SdyError) as info:
        run(engine, text, TYPED_FACTS)
    message = str(info.value)
    assert (message.startswith("<program>:") and error in message
            or engine == "souffle" and "Error:" in message), message


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("rule,derived", [
    ("a(X) :- e(X, Y), A = X / (Y - Y).", {(1,), (2,), (3,), (4,)}),
    ("a(X) :- e(X, Y), B = X % (Y - Y), A = B.", {(1,), (2,), (3,), (4,)}),
    ("a(X) :- e(X, Y), X / (Y - Y) = X / (Y - Y).", {(1,), (2,), (3,), (4,)}),
    ("a(X) :- e(X, Y), A = X / (Y - Y), A = A.", {(1,), (2,), (3,), (4,)}),
    ("a(X) :- e(X, Y), A = X / (Y - Y), !e(A, 5).", "division by zero"),
    ("a(X) :- e(X, Y), N = count : { e(Z, W), B = Z / (W - W) }, N > 0.", "division by zero"),
])
def test_an_equality_souffle_removes_is_not_evaluated(engine, rule, derived):
    """Soufflé resolves the aliases of a rule's body before it evaluates it: an
    equality binding a variable used nowhere else, or of a term with itself,
    is removed (not in an aggregate's body), so its division never runs."""
    text = HEADER + out("a") + rule + "\n"
    if isinstance(derived, set):
        assert run(engine, text) == {"a": derived}
        return
    with pytest.raises(SdyError, match="division by zero|arithmetic exception|souffle failed"):
        run(engine, text)


@pytest.mark.parametrize("engine", ENGINES)
def test_string_constants_equal_the_symbols_of_facts(engine):
    """A constant with a quote, backslash, tab or percent sign equals the fact
    symbol of its value, and reads back as it."""
    values = ['q"t', "x\\y", "a\tb", "50%", "plain"]
    text = (decls(".decl in_s(v: symbol)", ".decl hit(v: symbol)", ".decl lit(v: symbol)")
            + ".input in_s\n.output hit\n.output lit\n"
            + 'hit(V) :- in_s(V), V = "q\\"t".\nhit(V) :- in_s(V), V = "x\\\\y".\n'
            + 'hit(V) :- in_s(V), V = "a\\tb".\nhit(V) :- in_s(V), V = "50%".\n'
            + 'lit("50%41").\n')
    assert run(engine, text, {"in_s": [(v,) for v in values]}) == {
        "hit": {('q"t',), ("x\\y",), ("a\tb",), ("50%",)}, "lit": {("50%41",)}}


@pytest.mark.parametrize("engine", ["python", "clingo"])
@pytest.mark.parametrize("body,where,what", [
    (".limitsize r(n=5)", "6:2", "directive .limitsize is not supported"),
    (".plan 0:(1,2)", "6:2", "directive .plan is not supported"),
    (".pragma \"x\" \"y\"", "6:2", "directive .pragma is not supported"),
    (".output r(IO=sqlite)", "6:11", "parameter of .output not supported"),
    ("r(X) :- e(X, _) ; e(_, X).", "6:17", "disjunction"),
    ("r(X) :- e(X, _), not (e(_, X)).", "6:18", "'not' is not Soufflé's negation"),
    ("r(X) :- e(X, _), !(e(_, X)).", "6:19", "negation '!' applies to one atom"),
    ("r(Y) :- e(X, _).", "6:1", "variable Y of the head is not bound"),
    ("r(X) :- !e(X, _).", "6:9", "variable X of a negated atom is not bound"),
    ("r(X) :- e(_, _), X > 1.", "6:18", "variable X is not bound"),
    ("r(count : { e(_, _) }) :- e(_, _).", "6:3", "aggregate as an atom's argument"),
    ("r(X) :- e(X, _), X = 1 + count : { e(_, _) }.", "6:26", "aggregate inside arithmetic"),
    ("r(X) :- X = count : { X > 1 }.", "6:13", "needs a positive atom"),
    ("r(N) :- e(X, _), N = sum X : { e(X, _) }.", "6:22", "also occurs outside"),
    ("r(X) :- N = count : { e(X, _) }, N > 0.", "6:13", "bound only inside an aggregate"),
    ("r(X) :- e(X, \"a\").", "6:9", "a symbol where column of type number"),
    ("r(X) :- e(X, Y), X < \"a\".", "6:18", "comparison '<' of a number with a symbol"),
    ("r(X) :- e(X, _), X = cat(\"a\", \"b\").", "6:22", "functors are not supported"),
    ("r(\"\\q\").", "6:3", "unknown escape sequence"),
    ("r(2147483648).", "6:3", "does not fit in 32 bits"),
    ("r(X) :- e(X, _), nope(X).", "6:18", "nope(...) is not a declared relation"),
    ("r(X) :- e(X, _, _).", "6:9", "e has 2 columns, not 3"),
    ("r(X) :- e(X, _), !r(X).", "6:1", "not stratified"),
])
def test_what_the_engines_do_not_implement_is_one_located_error(engine, body, where, what):
    text = HEADER + decls(".decl r(v: number)") + body + "\n"
    with pytest.raises(SdyError) as info:
        run(engine, text)
    message = str(info.value)
    assert message.startswith(f"<program>:{where}: ") and what in message, message
    assert "\n" not in message


def test_engines_reject_an_unstratified_program_at_their_entry():
    text = decls(".decl p(x: number)", ".decl q(x: number)") + (
        ".output p\n.output q\np(1) :- !q(1).\nq(1) :- !p(1).\n")
    for engine in ("python", "clingo"):
        with pytest.raises(SdyError, match="not stratified"):
            run(engine, text, {})
