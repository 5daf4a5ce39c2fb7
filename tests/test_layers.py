"""The import graph of the library against docs/ARCHITECTURE.md's layer table: every
module placed, every import pointing down (or within its layer), no cycles, nothing below
the CLI importing it, and no comparison with an algorithm's name.

Every import counts, function-level and ``TYPE_CHECKING`` ones included, so a cycle or an
upward import cannot hide behind a late import (docs/ARCHITECTURE.md, Layers).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"rlamd": ROOT / "rlamd", "rlamd.agents": ROOT / "agents", "rlamd.envs": ROOT / "envs"}
TOOLS = ("rlamd.bench", "rlamd.doctor")
CLI = {
    "rlamd.train",
    "rlamd.__main__",
    "rlamd.bench.__main__",
    "rlamd.doctor.__main__",
    "rlamd.sweep.__main__",
}


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


def _path_to_module(path: str) -> str:
    """``rlamd/replay/`` -> ``rlamd.replay``; ``agents/`` -> ``rlamd.agents``;
    ``rlamd/config/__init__.py`` -> ``rlamd.config``; ``rlamd/engine.py`` -> ``rlamd.engine``."""
    path = path.removesuffix("/").removesuffix(".py").removesuffix("/__init__")
    parts = path.split("/")
    if parts[0] in ("agents", "envs"):
        parts = ["rlamd", *parts]
    return ".".join(parts)


def _layer_table() -> dict[str, tuple[int, str]]:
    """Module (or package prefix) -> (layer number, layer name), from the doc's table."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    table: dict[str, tuple[int, str]] = {}
    for row in re.finditer(r"^\| (\d+) ([^|]+?) \| ([^|]+) \|", section, re.M):
        for path in re.findall(r"`([^`]+)`", row.group(3)):
            table[_path_to_module(path)] = (int(row.group(1)), row.group(2).strip())
    return table


def _placed(module: str, table: dict[str, tuple[int, str]]) -> tuple[int, str] | None:
    """The layer of ``module``: its own row, else the longest package prefix's."""
    name = module
    while name:
        if name in table:
            return table[name]
        name = name.rpartition(".")[0]
    return None


def test_the_layer_table_is_read():
    table = _layer_table()
    assert table["rlamd.train"][0] == 8 and table["rlamd.replay"][0] == 1
    assert table["rlamd.agents"][0] == 2 and table["rlamd.config.layers"][0] == 5


def test_every_module_has_a_layer():
    table = _layer_table()
    missing = sorted(m for m in _modules() if _placed(m, table) is None)
    assert missing == [], f"place these in docs/ARCHITECTURE.md's layer table: {missing}"


def test_imports_point_down():
    """An import goes to a lower layer or within the same layer; tools (same number as
    the run layer) are imported by the CLI alone."""
    table, graph = _layer_table(), _graph()
    up = []
    for module, targets in graph.items():
        here = _placed(module, table)
        for target in targets:
            there = _placed(target, table)
            if module.startswith(target + "."):  # a package's own __init__ (its parent)
                continue
            tool = there is not None and there[1] == "tools" and here != there
            if here[0] < there[0] or (tool and here[1] != "CLI"):
                up.append(f"{module} ({here[0]} {here[1]}) -> {target} ({there[0]} {there[1]})")
    assert up == [], "imports pointing up:\n" + "\n".join(up)


def _algorithm_names() -> set[str]:
    from rlamd.algos import ALGORITHMS

    return set(ALGORITHMS)


def test_nothing_compares_with_an_algorithms_name():
    """Algorithms are chosen once, from the registry: no ``algo == "dqn"`` anywhere in the
    library (the name may still key a table, as the registry and the Ray drivers do). The
    tools are left out: a benchmark suite is named ``dqn``, and a peer has algorithms of
    its own."""
    names, table = _algorithm_names(), _layer_table()
    found = []
    for module, path in _modules().items():
        if _placed(module, table)[1] == "tools" or module.startswith(TOOLS):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            consts = [
                c.value
                for o in operands
                for c in ([o] if not isinstance(o, (ast.Tuple, ast.List, ast.Set)) else o.elts)
                if isinstance(c, ast.Constant)
            ]
            if names & set(consts):
                found.append(f"{module}:{node.lineno}")
    assert found == []


@pytest.mark.parametrize("limit", [450])
def test_files_and_functions_stay_small(limit):
    """Every library file at most 450 lines, every function at most 60 (named kernels
    -- numba and Triton -- excepted)."""
    long_files, long_functions = [], []
    for module, path in _modules().items():
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > limit:
            long_files.append(f"{module}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1
                kernel = node.name.startswith("_nb_") or node.name.endswith("_kernel")
                if size > 60 and not kernel:
                    long_functions.append(f"{module}.{node.name}: {size} lines")
    assert long_files == [] and long_functions == []


def test_the_graph_is_read():
    graph = _graph()
    assert "rlamd.config.sections" in graph["rlamd.train"]
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


def test_the_agents_know_nothing_of_graph_capture():
    """Capture is applied from outside (rlamd.algos' capture sites): no agent imports
    rlamd.graphs or touches torch.cuda's graph API."""
    graph = _graph()
    for module, path in _modules().items():
        if not module.startswith("rlamd.agents"):
            continue
        assert "rlamd.graphs" not in graph[module], module
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"cuda\.graph|CUDAGraph|GraphStep|Captured", text), module
