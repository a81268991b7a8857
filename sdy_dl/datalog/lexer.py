"""Tokens and statements of the Soufflé subset sdy-dl's engines read."""

from __future__ import annotations

import re

from sdy_dl.errors import SdyError

_TOKEN_RE = re.compile(r'''
    (?P<ws>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<number>\d+)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>:-|!=|<=|>=|<:|[<>=!(),.+\-*/%:{};^|&@$\[\]?])
''', re.VERBOSE | re.DOTALL)

Token = tuple[str, str, int, int]  # (kind, text, line, column)


def tokenize(text: str, source: str = "<program>") -> list[Token]:
    """(kind, text, line, column) tokens, without white space and comments."""
    tokens, pos, line, line_start = [], 0, 1, 0
    append = tokens.append
    for m in _TOKEN_RE.finditer(text):
        if m.start() != pos:
            break
        pos = m.end()
        kind, value = m.lastgroup, m.group()
        if kind == "ws" or kind == "comment":
            newlines = value.count("\n")
            if newlines:
                line += newlines
                line_start = m.start() + value.rindex("\n") + 1
        else:
            append((kind, value, line, m.start() - line_start + 1))
    if pos != len(text):
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        what = "an unterminated comment" if text.startswith("/*", pos) else (
            "an unterminated string" if text[pos] == '"' else f"character {text[pos]!r}")
        raise SdyError(f"unexpected {what}", file=source, line=line, col=col)
    return tokens


def replace_strings(text: str, replace) -> str:
    """``text`` with each string literal ``s`` (outside comments) written
    ``replace(s)``; the rest of the text as it is."""
    return _TOKEN_RE.sub(lambda m: replace(m.group()) if m.lastgroup == "string" else m.group(),
                         text)


def split_statements(tokens: list[Token], source: str = "<program>") -> list[list[Token]]:
    """Directives end at the end of their line; clauses end with a '.' token."""
    stmts, cur, i = [], [], 0
    while i < len(tokens):
        tok = tokens[i]
        if not cur and tok[1] == ".":
            j = i
            while j < len(tokens) and tokens[j][2] == tok[2]:
                j += 1
            stmts.append(tokens[i:j])
            i = j
            continue
        cur.append(tok)
        if tok[1] == ".":
            stmts.append(cur)
            cur = []
        i += 1
    if cur:
        raise SdyError("clause without a final '.'", file=source, line=cur[0][2], col=cur[0][3])
    return stmts


def clauses(text: str) -> list[list[Token]]:
    """The facts and rules of a program (directives left out)."""
    return [s for s in split_statements(tokenize(text)) if s[0][1] != "."]


def is_directive(stmt: list[Token]) -> bool:
    return stmt[0][1] == "."
