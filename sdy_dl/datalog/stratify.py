"""Check that a program is syntactically stratified, as Soufflé requires.

A relation may not depend negatively (``!atom``) or through an aggregate on
a relation in its own recursive component.  clingo would accept such a
program when it happens to be locally stratified; Soufflé rejects it, so the
compiler rejects it for both engines.
"""

from __future__ import annotations

from sdy_dl.datalog.lexer import clauses
from sdy_dl.errors import SdyError


def dependencies(text: str) -> set[tuple[str, str, bool]]:
    """(head, body relation, negative?) edges; aggregates count as negative."""
    edges = set()
    for clause in clauses(text):
        texts = [t[1] for t in clause]
        if ":-" not in texts:
            continue
        split = texts.index(":-")
        head = clause[0][1]
        depth = 0
        for k in range(split + 1, len(clause)):
            kind, tok, _ = clause[k]
            depth += {"{": 1, "}": -1}.get(tok, 0)
            if kind == "ident" and k + 1 < len(clause) and clause[k + 1][1] == "(":
                negative = depth > 0 or texts[k - 1] == "!"
                edges.add((head, tok, negative))
    return edges


def check_stratified(text: str, source: str = "<program>") -> None:
    """Raise SdyError naming a negative/aggregate edge inside a recursive cycle."""
    edges = dependencies(text)
    comp = components({(h, b) for h, b, _ in edges})
    for head, body, negative in sorted(edges):
        if negative and comp.get(head) is not None and comp.get(head) == comp.get(body):
            raise SdyError(f"program is not stratified: {head} depends on {body} through "
                           f"negation or an aggregate inside a recursive cycle", file=source)


def components(edges: set[tuple[str, str]]) -> dict[str, int]:
    """Strongly connected components (iterative Tarjan): relation -> component id;
    ids grow in dependency order (a component after every component it reaches)."""
    graph: dict[str, list[str]] = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    comp: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                cid = len(set(comp.values()))
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp[w] = cid
                    if w == node:
                        break
    return comp
