"""Programs the differential fuzzer (``datalog_programs``) found the engines to
disagree on, kept as they were generated (text, facts).

Seeds 700, 1149, 1675 and 1726 of the first generator: the Python engine evaluated a
division for bindings that other literals of the body reject (a division by zero
clingo never met); divisions now run after the rest of their body in both engines.
Seed 5178 of the second: a rule with a division by zero whose head another rule had
already derived; clingo skipped it (no error), Soufflé and the Python engine evaluate
it; clingo now derives an auxiliary relation of every variable of such a body.
(Its division assigns a variable used nowhere else: Soufflé removes that equality
before it evaluates the rule, and so do the engines now.)
"""

FOUND = [
    (  # seed 700
        '// in_e: a generated relation\n'
        '.decl in_e(c0: number, c1: number)\n'
        '.input in_e\n'
        '// in_n: a generated relation\n'
        '.decl in_n(c0: number)\n'
        '.input in_n\n'
        '// in_s: a generated relation\n'
        '.decl in_s(c0: number, c1: symbol)\n'
        '.input in_s\n'
        '// r0: a generated relation\n'
        '.decl r0(c0: symbol, c1: number, c2: number)\n'
        '// r1: a generated relation\n'
        '.decl r1(c0: number)\n'
        '.output r1\n'
        '// r2: a generated relation\n'
        '.decl r2(c0: number, c1: symbol)\n'
        '.output r2\n'
        '// r3: a generated relation\n'
        '.decl r3(c0: number, c1: number, c2: symbol)\n'
        'r0(Z, 1, W) :- in_s(Y, Z), in_n(W), !in_n(W), A = (W / W), W = sum P * 3 : { in_e(P, R), in_e(P, 1) }.\n'
        'r0("", Y, Y) :- in_n(Y), Y = Y.\n'
        'r0("a", Y, 3) :- in_e(_, Y), in_n(_), Y > Y, N = min Q * 2 : { in_e(Q, R) }.\n'
        'r1(N + 0) :- in_e(Y, X), in_s(X, _), X >= Y, A = Y, N = count : { in_n(_), in_s(Q, _) }.\n'
        'r1(N) :- in_n(_), N = min P : { in_s(P, R) }.\n'
        'r2(A, "b") :- r1(W), W = W, A = (W + W), N = max R : { in_s(P, _), in_e(1, R), R >= W, C = count : { in_n(R) }, C > 1 }.\n'
        'r2(X, Z) :- r0(_, X, _), r1(_), r2(Y, Z).\n'
        'r2(3, X) :- in_s(4, X), in_s(Y, X), X != "b".\n'
        'r3(Z, W, X) :- in_e(Y, Z), r3(W, 3, X).\n'
        'r3(W, Y + 0, "") :- r2(_, _), in_e(Y, -7), r1(W), W <= 2, A = (W % 4), N = count : { r2(_, Q) }.\n'
    , {
        'in_e': [(2, 4), (3, 4)],
        'in_n': [(1,)],
        'in_s': [(2, ''), (4, 'x\\y'), (7, 'c d')],
    }),
    (  # seed 1149
        '// in_e: a generated relation\n'
        '.decl in_e(c0: number, c1: number)\n'
        '.input in_e\n'
        '// in_n: a generated relation\n'
        '.decl in_n(c0: number)\n'
        '.input in_n\n'
        '// in_s: a generated relation\n'
        '.decl in_s(c0: number, c1: symbol)\n'
        '.input in_s\n'
        '// r0: a generated relation\n'
        '.decl r0(c0: number, c1: symbol, c2: number)\n'
        '.output r0\n'
        '// r1: a generated relation\n'
        '.decl r1(c0: symbol, c1: symbol, c2: number)\n'
        '.output r1\n'
        'r0(3, "c d", N) :- in_n(Z), count : { in_s(R, P), C = count : { in_n(R) }, C <= 1 } = N.\n'
        'r0(X, Y, Z) :- in_s(X, Y), r0(Z, Y, W).\n'
        'r0(Z, "b", 3) :- in_s(Z, _), !in_s(Z, _), Z = Z, A = (Z % 0).\n'
        'r1("a", "a", W) :- in_e(Y, Y), r0(W, _, X), in_n(2147483647), W < W, N = count : { in_n(3) }.\n'
        'r1(X, X, Z) :- r0(Y, "a", Z), in_n(Y), in_s(Z, X), X = "b".\n'
        'r1(Y, Y, A) :- in_s(Z, Y), in_s(X, Y), Z = X, Y != "a", A = (X + -7).\n'
    , {
        'in_e': [(1, 3), (2, 2), (3, 0)],
        'in_n': [(0,), (1,), (3,), (4,)],
        'in_s': [(-2147483648, 'q"t'), (0, 'c d'), (2, 'a'), (3, 'x\\y'), (4, 'a'), (4, 'x\\y')],
    }),
    (  # seed 1675
        '// in_e: a generated relation\n'
        '.decl in_e(c0: number, c1: number)\n'
        '.input in_e\n'
        '// in_n: a generated relation\n'
        '.decl in_n(c0: number)\n'
        '.input in_n\n'
        '// in_s: a generated relation\n'
        '.decl in_s(c0: number, c1: symbol)\n'
        '.input in_s\n'
        '// r0: a generated relation\n'
        '.decl r0(c0: number, c1: number, c2: symbol)\n'
        '.output r0\n'
        '// r1: a generated relation\n'
        '.decl r1(c0: number, c1: number, c2: symbol)\n'
        '// r2: a generated relation\n'
        '.decl r2(c0: symbol, c1: number)\n'
        '.output r2\n'
        '// r3: a generated relation\n'
        '.decl r3(c0: number, c1: number)\n'
        '.output r3\n'
        'r0(X, A, Z) :- in_n(_), in_e(X, X), in_s(_, Z), !in_s(X, "a"), X = 0, A = (X / X).\n'
        'r1(W, Y, "b") :- r0(W, _, X), in_n(Y), r1(Z, _, "x\\\\y"), Z >= W.\n'
        'r2(W, 2) :- in_e(Z, Y), r2(W, X), in_e(X, _), r2(W, X), Y >= Y.\n'
        'r2(X, 1) :- in_e(_, _), r0(_, _, X), r2(W, _).\n'
        'r2("", 2) :- in_s(X, _), in_e(_, -1), X <= X, N = min R : { r0(_, R, Q), in_e(R, X), R < 4 }.\n'
        'r3(3, Z) :- r1(Z, _, W), r3(X, Y), !r0(0, _, _), X > X.\n'
    , {
        'in_e': [(0, 0), (2, -1), (2, 1), (65536, 4)],
        'in_n': [(1,), (2,), (3,), (4,)],
        'in_s': [(-1, 'q"t'), (0, ''), (0, 'a'), (2, 'b'), (4, 'c d')],
    }),
    (  # seed 1726
        '// in_e: a generated relation\n'
        '.decl in_e(c0: number, c1: number)\n'
        '.input in_e\n'
        '// in_n: a generated relation\n'
        '.decl in_n(c0: number)\n'
        '.input in_n\n'
        '// in_s: a generated relation\n'
        '.decl in_s(c0: number, c1: symbol)\n'
        '.input in_s\n'
        '// r0: a generated relation\n'
        '.decl r0(c0: symbol)\n'
        '.output r0\n'
        '// r1: a generated relation\n'
        '.decl r1(c0: symbol)\n'
        '.output r1\n'
        '// r2: a generated relation\n'
        '.decl r2(c0: symbol, c1: symbol, c2: symbol)\n'
        '.output r2\n'
        'r0("x\\\\y") :- in_e(_, 3), in_e(W, Y), in_e(_, _), W <= W, A = W, W >= max Q : { in_s(Q, R) }.\n'
        'r0("c d") :- in_n(Y), in_e(Y, Z), !in_e(Z, Z), A = (Z + 2), Z < sum P : { in_e(P, Q), in_e(Q, Z) }.\n'
        'r0(W) :- in_s(X, W), in_n(X), r0(_), r0(""), !in_n(X), X != 0, W != "a".\n'
        'r1(Z) :- r0(Z), in_s(1, Z), r0(X), r1(_), Z = "x\\\\y".\n'
        'r2(Y, Y, Y) :- r0(Y), in_e(X, X), A = (X % 7), N = count : { r1(R), r0(_) }.\n'
        'r2("", Z, Z) :- in_s(X, Z), in_n(W), Z = "a", count : { in_s(X, R) } = N.\n'
        'r2(X, X, X) :- in_s(Z, X), in_n(Z), in_e(Z, Z), A = (Z % Z).\n'
    , {
        'in_e': [(3, 1), (3, 3)],
        'in_n': [(1,), (2,), (3,), (4,)],
        'in_s': [(0, 'x\\y'), (1, 'x\\y'), (2, 'a'), (2, 'c d'), (2, 'q"t'), (3, 'a')],
    }),
    (  # seed 5178 of the second generator
        '// in_e: a generated relation\n'
        '.decl in_e(c0: number, c1: number)\n'
        '.input in_e\n'
        '// in_n: a generated relation\n'
        '.decl in_n(c0: number)\n'
        '.input in_n\n'
        '// in_s: a generated relation\n'
        '.decl in_s(c0: number, c1: symbol)\n'
        '.input in_s\n'
        '// r0: a generated relation\n'
        '.decl r0()\n'
        '// r1: a generated relation\n'
        '.decl r1(c0: symbol, c1: symbol)\n'
        '.output r1\n'
        '// r2: a generated relation\n'
        '.decl r2(c0: number, c1: number)\n'
        '.output r2\n'
        '// r3: a generated relation\n'
        '.decl r3(c0: number)\n'
        '.output r3\n'
        'r0() :- in_s(Y, X), in_e(Z, W), A = (Y % W).\n'
        'r0() :- in_s(_, X), in_s(Z, W), !in_n(Z), Z >= 1.\n'
        'r0() :- in_e(W, W), in_e(Y, Z), r0(), Z != Y.\n'
        'r1(X, X) :- r0(), in_n(Z), in_s(Y, X), !in_e(Z, Y), A = Y, N = min R : { in_e(Q, R), in_e(Q, R), Q < Q }.\n'
        'r1(Z, "q\\"t") :- in_e(X, W), r0(), r1(Z, Z), W = W.\n'
        'r2(X, X) :- in_n(Z), in_e(X, Z), r0().\n'
        'r3(Y) :- in_s(Y, W), r3(_).\n'
    , {
        'in_e': [(-2147483648, 4), (1, 2147483647), (2, 4), (2147483647, 2), (3, 2), (7, 0)],
        'in_n': [(2,)],
        'in_s': [(3, ''), (3, 'a')],
    }),
]
