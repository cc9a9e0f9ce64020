"""The package's layout: subpackages along the data flow, imported in one direction only."""

from __future__ import annotations

import ast
import os

import benchwatch

PACKAGE_DIR = os.path.dirname(benchwatch.__file__)


def _imports(path: str) -> set[str]:
    """benchwatch modules a file imports, at any depth (function-level imports count too)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "benchwatch":
                found.update(f"benchwatch.{a.name}" for a in node.names)
            elif node.module.startswith("benchwatch."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("benchwatch."))
    return found


def _unit(module: str) -> str:
    """The layer a module belongs to: its top-level subpackage, or the module itself (cli, demo, resources)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def subpackage_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for root, _dirs, files in os.walk(PACKAGE_DIR):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, os.path.dirname(PACKAGE_DIR))[:-3].replace(os.sep, ".")
            src = _unit(rel.removesuffix(".__init__"))
            edges = graph.setdefault(src, set())
            edges.update(u for u in map(_unit, _imports(path)) if u != src)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_no_import_cycle_between_subpackages():
    graph = subpackage_graph()
    assert {"parse", "model", "sink", "record", "engines", "query", "share", "exporter", "stack"} <= set(graph)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle between subpackages: " + " -> ".join(cycle or [])


def test_the_cycle_check_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_parsers_are_pure():
    """parse/ turns lines into events: it imports no other part of benchwatch."""
    assert subpackage_graph()["parse"] == set()


def test_no_module_left_beside_the_subpackages():
    loose = sorted(n for n in os.listdir(PACKAGE_DIR) if n.endswith(".py"))
    assert loose == ["__init__.py", "__main__.py", "cli.py", "demo.py", "resources.py"]
