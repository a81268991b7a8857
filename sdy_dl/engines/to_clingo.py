"""Translate the Soufflé subset sdy-dl's templates use into a clingo (ASP) program.

The subset (checked here; anything else is an error, never a silent change):

* directives ``.decl``, ``.input``, ``.output`` (dropped; outputs become ``#show``);
* facts and rules ``head(...) :- body.`` over declared relations;
* variables start with an upper-case letter, relations are lower-case;
  ``_`` is the anonymous variable;
* negation ``!atom`` (stratified), comparisons ``= != < <= > >=``,
  integer arithmetic ``+ - * / %`` on non-negative numbers;
* aggregates ``X = count : { ... }``, ``X = sum E : { ... }``,
  ``X = min E : { ... }``, ``X = max E : { ... }``.

Under stratified negation both engines compute the same perfect model, so
the same program gives the same relations.  Differences handled here:
clingo's ``#count``/``#sum`` work on sets of tuples, so the tuple lists every
variable of the aggregate body, ``_`` made into fresh variables (Soufflé
counts the body's tuples); an empty
``#min``/``#max`` yields ``#sup``/``#inf`` in clingo where Soufflé derives
nothing, so a guard is added.
"""

from __future__ import annotations

from sdy_dl.datalog.lexer import is_directive, split_statements, tokenize
from sdy_dl.datalog.program import Program
from sdy_dl.errors import SdyError

AGGREGATES = ("count", "sum", "min", "max")


def translate(program: Program) -> str:
    """The clingo program equivalent to the Soufflé ``program``."""
    out: list[str] = []
    for stmt in split_statements(tokenize(program.text)):
        if is_directive(stmt):
            if stmt[1][1] not in ("decl", "input", "output"):
                raise SdyError(f"unsupported directive .{stmt[1][1]}", file="<program>",
                               line=stmt[0][2])
            continue
        out.append(_Clause(stmt, program).render())
    out.extend(f"#show {d.name}/{d.arity}." for d in program.outputs)
    return "\n".join(out) + "\n"


class _Clause:
    """One fact or rule, rendered token by token."""

    def __init__(self, tokens, program: Program):
        self.toks = tokens
        self.program = program
        self.i = 0

    def error(self, msg: str) -> SdyError:
        return SdyError(msg, file="<program>", line=self.toks[min(self.i, len(self.toks) - 1)][2])

    def render(self) -> str:
        parts: list[str] = []
        toks = self.toks
        while self.i < len(toks):
            kind, text, _ = toks[self.i]
            nxt = toks[self.i + 1][1] if self.i + 1 < len(toks) else ""
            if kind == "ident" and text in AGGREGATES and (nxt == ":" or (text != "count" and nxt != "(")):
                parts.append(self._aggregate(parts))
                continue
            parts.append(self._token(kind, text, nxt))
            self.i += 1
        return " ".join(parts)

    def _token(self, kind: str, text: str, nxt: str) -> str:
        if kind == "ident":
            if nxt == "(":
                if text not in self.program.decls:
                    raise self.error(f"{text}(...) is not a declared relation "
                                     "(functors are outside the shared subset)")
                return text
            if text == "_" or text[0].isupper():
                return text
            raise self.error(f"{text!r}: variables must start with an upper-case letter")
        if text == "!":
            return "not"
        if text == "%":
            return "\\"
        return text

    def _aggregate(self, parts: list[str]) -> str:
        """``count : {body}`` / ``min E : {body}`` → clingo ``#count{...}`` / ``#min{...}``."""
        toks = self.toks
        func = toks[self.i][1]
        self.i += 1
        expr_toks = []
        while toks[self.i][1] != ":":
            expr_toks.append(toks[self.i])
            self.i += 1
        self.i += 1  # ':'
        if toks[self.i][1] != "{":
            raise self.error(f"{func} aggregate: expected '{{'")
        self.i += 1
        depth, body = 1, []
        while depth:
            tok = toks[self.i]
            depth += {"{": 1, "}": -1}.get(tok[1], 0)
            if depth:
                body.append(tok)
            self.i += 1
        # Soufflé aggregates over the body's satisfying tuples, '_' positions
        # included; clingo aggregates over a set of tuples, so each '_' becomes
        # a fresh variable that is part of the tuple.
        body = [(k, f"Anon{n}_", ln) if text == "_" else (k, text, ln)
                for n, (k, text, ln) in enumerate(body)]
        variables = sorted({t[1] for t in body if t[0] == "ident" and t[1][0].isupper()})
        inner = _Clause(body, self.program).render()
        expr = _Clause(expr_toks, self.program).render() if expr_toks else ""
        if func == "count":
            tuple_ = ", ".join(variables) or "0"
        elif func == "sum":
            tuple_ = ", ".join([expr] + variables)
        else:
            tuple_ = expr
        agg = f"#{func}{{ {tuple_} : {inner} }}"
        if func in ("min", "max") and len(parts) >= 2 and parts[-1] == "=":
            guard = "#sup" if func == "min" else "#inf"
            agg += f", {parts[-2]} != {guard}"
        return agg
