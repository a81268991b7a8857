"""The import graph of sdy_dl is layered and has no cycle.

Layers, lowest first: the shared basics (errors, signals, sharding values,
resources, progress, input and output helpers), ``ir``, then ``rules``/``datalog``/
``engines``, ``propagation``, ``passes``, the pipeline and its front ends
(``pipeline``, ``audit``, ``summary``), the Python API (``api``, ``jax``), and ``cli``.  A module may import
its own layer or a lower one, never a higher one, and modules may not import
each other in a circle.  Every import counts, also those inside functions,
except that a package may load its own parts (``sdy_dl.passes`` loads every
pass module, which registers itself; ``sdy_dl.cli`` loads its commands).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Top-level package or module of sdy_dl -> layer.
LAYERS = {
    "errors": 0, "frozen": 0, "sharding": 0, "resources": 0, "progress": 0, "output": 0,
    "text_input": 0, "signals": 0,
    "ir": 1,
    "rules": 2, "datalog": 2, "engines": 2,
    "propagation": 3,
    "passes": 4,
    "pipeline": 5, "catalog": 5, "audit": 5, "summary": 5,
    "api": 6, "jax": 6,
    "cli": 7,
}


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for sdy_dl/ and cli/ (installed as sdy_dl.cli)."""
    out = {}
    for base, prefix in ((ROOT / "sdy_dl", "sdy_dl"), (ROOT / "cli", "sdy_dl.cli")):
        for path in base.rglob("*.py"):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([prefix, *parts])] = path
    return out


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The sdy_dl modules ``path`` imports (anywhere in the file)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        found.update(t for t in targets if t in known)
    found.discard(name)
    if path.name == "__init__.py":   # a package loading its own parts (registries)
        found = {m for m in found if not m.startswith(name + ".")}
    return found


def _layer(module: str) -> int:
    parts = module.split(".")
    assert len(parts) >= 2, module
    top = parts[1]
    assert top in LAYERS, f"{module}: place sdy_dl.{top} in a layer of tests/test_layering.py"
    return LAYERS[top]


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(path, name, known) for name, path in modules.items()}


def test_no_module_imports_a_higher_layer():
    upward = [f"{a} (layer {_layer(a)}) imports {b} (layer {_layer(b)})"
              for a, deps in sorted(_graph().items()) if a != "sdy_dl"
              for b in sorted(deps) if b != "sdy_dl" and _layer(b) > _layer(a)]
    assert upward == []


def test_no_import_cycle():
    graph = _graph()
    state: dict[str, int] = {}   # 1: on the current path, 2: done
    cycles = []
    for root in sorted(graph):
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(sorted(graph[root])))]
        path = [root]
        while stack:
            node, deps = stack[-1]
            for dep in deps:
                if state.get(dep) == 1:
                    cycles.append(" -> ".join(path[path.index(dep):] + [dep]))
                elif dep not in state:
                    state[dep] = 1
                    stack.append((dep, iter(sorted(graph[dep]))))
                    path.append(dep)
                    break
            else:
                stack.pop()
                path.pop()
                state[node] = 2
    assert cycles == []


def test_the_check_sees_imports():
    """Known edges are in the graph: top-level and function-local imports."""
    graph = _graph()
    assert "sdy_dl.ir.model" in graph["sdy_dl.passes.call_graph"]
    assert "sdy_dl.engines" in graph["sdy_dl.passes"]   # imported inside a function
    assert any(deps for deps in graph.values())
