"""Check that a program is syntactically stratified, as Soufflé requires.

A relation may not depend negatively (``!atom``) or through an aggregate on
a relation in its own recursive component.  clingo would accept such a
program when it happens to be locally stratified; Soufflé rejects it, so the
engines reject it (:mod:`sdy_dl.datalog.check`) and so does the compiler.
"""

from __future__ import annotations

from sdy_dl.datalog.clauses import Clause, parse_clauses
from sdy_dl.errors import SdyError


def dependencies(clauses: list[Clause]) -> set[tuple[str, str, bool]]:
    """(head, body relation, negative?) edges; atoms inside aggregates count as negative."""
    edges = set()

    def walk(literals, head, inside):
        for lit in literals:
            if lit[0] == "atom":
                edges.add((head, lit[1], lit[3] or inside))
            else:
                for side in (lit[2], lit[3]):
                    if side[0] == "agg":
                        walk(side[3], head, True)

    for c in clauses:
        walk(c.body, c.head[1], False)
    return edges


def check_stratified(text: str, source: str = "<program>") -> None:
    """Raise SdyError naming a negative/aggregate edge inside a recursive cycle."""
    check_stratification(parse_clauses(text, source), source)


def check_stratification(clauses: list[Clause], source: str = "<program>") -> None:
    """Raise SdyError at a rule whose head depends on itself through negation or an aggregate."""
    edges = dependencies(clauses)
    comp = components({(h, b) for h, b, _ in edges})
    bad = {(h, b) for h, b, negative in edges if negative and comp.get(h) == comp.get(b)}
    for c in clauses if bad else ():
        for head, body, negative in sorted(dependencies([c])):
            if negative and (head, body) in bad:
                raise SdyError(f"program is not stratified: {head} depends on {body} through "
                               f"negation or an aggregate inside a recursive cycle",
                               file=source, line=c.line, col=c.col)


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
