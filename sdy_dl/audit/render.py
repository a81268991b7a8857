"""Derivation trees as text and Graphviz dot (the HTML report: :mod:`sdy_dl.audit.report`)."""

from __future__ import annotations

from sdy_dl.audit.explain import Node
from sdy_dl.audit.tree_text import CUT_TEXT, text_lines  # noqa: F401 (text_lines: for callers)


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
    try:
        done = subprocess.run([exe, "-Tsvg"], input=dot_text.encode(), capture_output=True)
    except OSError as e:
        raise SdyError(f"cannot run {exe}: {e.strerror or e}") from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SdyError(f"{exe} failed: " + (said[-1] if said else
                                             f"killed by signal {-done.returncode}"
                                             if done.returncode < 0 else
                                             f"exit status {done.returncode}"))
    try:
        return done.stdout.decode("utf-8")
    except UnicodeDecodeError:
        raise SdyError(f"{exe} wrote an SVG that is not UTF-8 text") from None
