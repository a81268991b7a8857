"""Derivation trees as text, Graphviz dot, and one self-contained HTML report."""

from __future__ import annotations

import html
import re

from sdy_dl.audit.explain import Node
from sdy_dl.audit.tree_text import CUT_TEXT, factor_text, text_lines  # noqa: F401 (text_lines: for callers)


# -- Graphviz ---------------------------------------------------------------------------

def _dot_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(trees: list[Node]) -> str:
    """One digraph of the trees: a node per value state, an edge per derivation step."""
    ids: dict[tuple[str, str], str] = {}
    lines = ["digraph sharding {", "  rankdir=BT;", '  node [shape=box, fontname="monospace"];']
    edges: set[tuple[str, str, str]] = set()

    def node_id(n: Node) -> str:
        k = (n.what, n.sharding)
        if k not in ids:
            ids[k] = f"n{len(ids)}"
            shape = {"annotation": ", style=bold", "unsharded": ", style=dashed"}.get(n.kind, "")
            lines.append(f"  {ids[k]} [label={_dot_str(n.what + chr(10) + n.sharding)}{shape}];")
        return ids[k]

    def visit(n: Node) -> None:
        me = node_id(n)
        label = n.op["name"] if n.op else n.kind
        for c in n.children:
            edges.add((node_id(c), me, label))
            visit(c)
        if n.truncated == "depth":   # a visible marker where --depth cut the tree
            cut = f"cut{me}"
            lines.append(f"  {cut} [label={_dot_str(CUT_TEXT['depth'])}, shape=plaintext];")
            edges.add((cut, me, "…"))

    for t in trees:
        visit(t)
    lines += [f"  {a} -> {b} [label={_dot_str(label)}];" for a, b, label in sorted(edges)]
    lines.append("}")
    return "\n".join(lines) + "\n"


def dot_to_svg(dot_text: str) -> str:
    """Render dot text with Graphviz's ``dot`` (an SdyError when it is not installed)."""
    import shutil
    import subprocess

    from sdy_dl.errors import SdyError

    exe = shutil.which("dot")
    if exe is None:
        raise SdyError("--format svg needs Graphviz's 'dot' on PATH (use --format dot)")
    done = subprocess.run([exe, "-Tsvg"], input=dot_text, capture_output=True, text=True)
    if done.returncode != 0:
        raise SdyError(f"dot failed: {done.stderr.strip().splitlines()[-1] if done.stderr else ''}")
    return done.stdout


# -- HTML -------------------------------------------------------------------------------

_CSS = """
body{font-family:sans-serif;margin:1.5em;max-width:110em}
code,pre,.s{font-family:monospace}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top}
ul.t{list-style:none;padding-left:1.2em;border-left:1px dotted #999}
.b{color:#555}.f{color:#064}.w{color:#a40}details{margin:2px 0}
"""


def anchor(name: str) -> str:
    """The HTML id of value ``name``."""
    return "v-" + re.sub(r"[^A-Za-z0-9_-]", lambda m: f"_{ord(m.group()):x}", name)


def html_chunks(audit, depth: int = 8):
    """One self-contained page: every value, its sharding, its derivation, the
    conflicts; in pieces, a value's row at a time: each value's tree is made when
    its row is written and dropped after (every tree of a large module at once is
    gigabytes)."""
    esc = html.escape
    known = {out.name for out in audit.outputs.values}
    conflicts = audit.conflicts()

    def link(name: str) -> str:
        return f'<a href="#{anchor(name)}">{esc(name)}</a>' if name in known else esc(name)

    def tree(n: Node) -> str:
        parts = [f"<li>{link(n.what)} = <span class=s>{esc(n.sharding)}</span>",
                 f"<div class=b>because: {esc(n.because)}</div>"]
        for f in n.factors:
            parts.append(f"<div class=f>{esc(factor_text(f))}</div>")
        for r in n.reasons:
            if r != n.because:
                parts.append(f"<div class=w>why not more: {esc(r)}</div>")
        if n.children:
            parts.append('<ul class=t>' + "".join(tree(c) for c in n.children) + "</ul>")
        parts.append("</li>")
        return "".join(parts)

    yield ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
           f"<title>sdy-dl report: {esc(audit.file)}</title><style>{_CSS}</style></head><body>"
           f"<h1>sdy-dl report: <code>{esc(audit.file)}</code></h1>"
           f"<p>{len(audit.outputs.values)} values, {len(conflicts)} conflicts. Every value of "
           "the propagated module with the sharding it prints and why; names link along "
           "derivations.</p>"
           "<h2>Values</h2><table id=values><tr><th>value</th><th>function</th><th>op</th>"
           "<th>sharding</th><th>derivation</th></tr>")
    for out, t in zip(audit.outputs.values, audit.iter_explain_all(depth)):
        yield (f'<tr id="{anchor(out.name)}"><td><code>{esc(out.name)}</code></td>'
               f"<td>{esc(out.func)}</td><td>{esc(out.op)}</td>"
               f"<td class=s>{esc(t.sharding)}</td>"
               f"<td><details><summary>{esc(t.because[:100])}</summary>"
               f"<ul class=t>{tree(t)}</ul></details></td></tr>")
    crow = []
    for g in audit.conflict_groups():
        c = g.example
        comps = "<br>".join(
            f"{link(x['value'])} ({esc(x['tensor'])} dim {x['dim']}, factor {esc(x['factor'])}): "
            f"[{esc(', '.join(x['axes']))}]" + "".join(
                f" {esc(o['axis'])} &larr; {esc('; '.join(o['from']))}" for o in x["origins"])
            for x in c.competitors)
        members = ", ".join(link(m["value"]) for m in g.members)
        crow.append(f"<tr><td>{esc(c.op)}</td><td>{esc(c.factor)} {esc(c.axis)}</td>"
                    f"<td>{esc(c.kind)}</td><td>{g.count}</td><td>{comps}</td>"
                    f"<td>{esc(str(c.kept))}</td><td>{esc(c.decided_text)}</td>"
                    f"<td>{esc(c.output_text)}</td><td>{members}</td></tr>")
    conflict_table = ("<p>No conflicts.</p>" if not crow else
                      "<table id=conflicts><tr><th>op</th><th>factor</th><th>kind</th><th>count</th>"
                      "<th>competitors</th><th>kept</th><th>decided by</th><th>output</th>"
                      "<th>at</th></tr>" + "".join(crow) + "</table>")
    yield ("</table>"
           f"<h2>Conflicts</h2>{conflict_table}"
           f"<h2>Propagated module</h2><pre id=module>{esc(audit.text)}</pre>"
           "</body></html>\n")
