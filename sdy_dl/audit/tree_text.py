"""A derivation tree (:class:`~sdy_dl.audit.explain.Node`) as text lines and as an
HTML fragment: what ``sdy-dl explain`` prints, ``str(tree)`` and Jupyter show; and
the texts of its annotation leaves, one per input annotation
(:func:`one_per_annotation`, which conflicts and why-not cite too)."""

from __future__ import annotations

import html

#: The marker where a tree is cut: at the depth asked for, or a step shown above.
CUT_TEXT = {"depth": "… deeper steps cut here (raise --depth to see them)",
            "seen": "… derived above in this tree"}


def one_per_annotation(items) -> list[str]:
    """The texts of ``items`` ((a leaf :class:`Node` or None, its text) pairs), each
    input annotation once, in the order first met: an annotation the import passes
    moved onto another value (a sharding constraint's, onto its operand's
    producer) met both as written and as moved is given by the text of the one
    as written (the constraint at its line)."""
    chosen: dict = {}   # the annotation (or the text) -> (moved, its text)
    for leaf, text in items:
        cited = leaf.cited if leaf is not None else ""
        at = cited or ("", text)
        moved = bool(leaf.moved) if leaf is not None else False
        if at not in chosen or chosen[at][0] and not moved:
            chosen[at] = (moved, text)
    return [text for _, text in chosen.values()]


def text_lines(node, prefix: str = "", last: bool = True, top: bool = True) -> list[str]:
    """The tree as indented text lines."""
    head = "" if top else prefix + ("└─ " if last else "├─ ")
    lines = [f"{head}{node.what} = {node.sharding}"]
    inner = "" if top else prefix + ("   " if last else "│  ")
    lines.append(f"{inner}   because: {node.because}")
    for f in node.factors:
        lines.append(f"{inner}   {factor_text(f)}")
    for reason in node.reasons:
        if reason != node.because:
            lines.append(f"{inner}   why not more: {reason}")
    for proof in node.proof:
        lines += [f"{inner}   proof: " + line if k == 0 else f"{inner}          " + line
                  for k, line in enumerate(proof.lines())]
    for i, child in enumerate(node.children):
        lines += text_lines(child, inner, i == len(node.children) - 1 and not node.truncated,
                            top=False)
    if node.truncated:
        lines.append(f"{inner}└─ {CUT_TEXT[node.truncated]}")
    return lines


def factor_text(f: dict) -> str:
    """One changed factor of a step: its axes and where they came from."""
    sources = ", ".join(f"{s['value']} ({s['tensor']} dim {s['dim']})" for s in f["from"])
    return (f"factor {f['factor']} ({f['kind']}) of {f['tensor']} dim {f['dim']} gets "
            f"{', '.join(f['axes'])}" + (f" from {sources}" if sources else ""))


def tree_html(node) -> str:
    """The tree as nested HTML lists (self-contained: no script, no style sheet)."""
    esc = html.escape
    parts = [f"<li><code>{esc(node.what)}</code> = <code>{esc(node.sharding)}</code>"
             f"<div style='color:#555'>because: {esc(node.because)}</div>"]
    parts += [f"<div style='color:#064'>{esc(factor_text(f))}</div>" for f in node.factors]
    parts += [f"<div style='color:#a40'>why not more: {esc(r)}</div>"
              for r in node.reasons if r != node.because]
    children = [tree_html(c) for c in node.children]
    if node.truncated:
        children.append(f"<li><i>{esc(CUT_TEXT[node.truncated])}</i></li>")
    if children:
        parts.append("<ul style='list-style:none;border-left:1px dotted #999'>"
                     + "".join(children) + "</ul>")
    return "".join(parts) + "</li>"
