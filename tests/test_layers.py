"""The import graph of the library: no cycles, and nothing below the CLI imports it.

Every import counts, function-level and ``TYPE_CHECKING`` ones included, so a cycle
cannot hide behind a late import (docs/ARCHITECTURE.md, Layers).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"rlamd": ROOT / "rlamd", "rlamd.agents": ROOT / "agents", "rlamd.envs": ROOT / "envs"}
CLI = {"rlamd.train", "rlamd.__main__", "rlamd.bench.__main__", "rlamd.doctor.__main__"}


def _modules() -> dict[str, Path]:
    found = {}
    for prefix, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((prefix, *parts))] = path
    return found


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        for t in targets:
            while t and t not in known:  # `from x import name`: the module is x
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_graph_is_read():
    graph = _graph()
    assert "rlamd.runconfig" in graph["rlamd.train"]
    assert "rlamd.algos.dqn" in graph["rlamd.algos"]  # relative imports resolved


def test_no_import_cycles():
    """Regression: train -> driver -> roles -> evaluate -> train, hidden by late imports."""
    # a package's __init__ re-exporting its own modules is not a cycle of layers
    graph = {
        m: {t for t in ts if not (m.startswith(t + ".") and t in ts)} for m, ts in _graph().items()
    }
    assert _cycles(graph) == []


def test_nothing_below_the_cli_imports_it():
    graph = _graph()
    for module, targets in graph.items():
        if module in CLI:
            continue
        assert not targets & CLI, f"{module} imports the command line: {targets & CLI}"
