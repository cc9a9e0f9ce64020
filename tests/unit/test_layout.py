"""The package's layout: subpackages along the data flow, imported in one direction only; engines and
load generators as plug-in folders that nothing else names."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import benchwatch
from benchwatch import engines, loadgens

PACKAGE_DIR = os.path.dirname(benchwatch.__file__)
REPO_DIR = os.path.dirname(os.path.dirname(PACKAGE_DIR))
# Packages whose subpackages are plug-ins (one folder per engine or tool), each a room of its own.
PLUGIN_PACKAGES = ("engines", "loadgens")


def _modules() -> dict[str, str]:
    """Every module of the package: dotted name -> path."""
    out = {}
    for root, _dirs, files in os.walk(PACKAGE_DIR):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, os.path.dirname(PACKAGE_DIR))[:-3].replace(os.sep, ".")
                out[rel.removesuffix(".__init__")] = path
    return out


MODULES = _modules()


def _resolve(name: str, known: dict[str, str]) -> str | None:
    """The module a dotted name is, or is in (``benchwatch.a.b.func`` -> ``benchwatch.a.b``)."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in known:
            return ".".join(parts)
        parts.pop()
    return None


def module_imports(module: str, path: str, known: dict[str, str] | None = None) -> list[tuple[str, int]]:
    """(module, line) of every benchwatch module a file imports: at the top, inside functions, under
    ``if TYPE_CHECKING:``, absolute or relative; ``from benchwatch.x import y`` counts as y where y is
    a module, else as x."""
    known = MODULES if known is None else known
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            if not base.startswith("benchwatch"):
                continue
            for alias in node.names:
                target = _resolve(f"{base}.{alias.name}", known)
                if target:
                    found.append((target, node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name, known) if alias.name.startswith("benchwatch") else None
                if target:
                    found.append((target, node.lineno))
    return [(m, line) for m, line in found if m != module]


def _imports(path: str) -> set[str]:
    """benchwatch modules a file imports (every kind of import)."""
    module = next(m for m, p in MODULES.items() if p == path)
    return {m for m, _ in module_imports(module, path)}


def room(module: str) -> str:
    """The room a module is in: its top-level subpackage, a plug-in folder (engines/postgresql), or the
    module itself (cli, demo, resources); the package's own __init__ is the room ``benchwatch``."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] in PLUGIN_PACKAGES and os.path.isdir(os.path.join(PACKAGE_DIR, parts[1], parts[2])):
        return f"{parts[1]}/{parts[2]}"
    return parts[1] if len(parts) > 1 else parts[0]


def layer_order(text: str | None = None) -> dict[str, int]:
    """room -> floor, from the block after the layer-order marker in docs/architecture.md: the one place
    the order is written. ``engines/*`` stands for every plug-in folder of engines."""
    if text is None:
        with open(os.path.join(REPO_DIR, "docs", "architecture.md"), encoding="utf-8") as f:
            text = f.read()
    block = text.split("<!-- layer order", 1)[1].split("```", 2)[1]
    floors: dict[str, int] = {}
    for line in block.splitlines():
        # Columns are two or more spaces apart: the floor, its rooms (one space apart), what they are.
        columns = re.split(r"\s{2,}", line.strip())
        if len(columns) >= 2 and columns[0].isdigit():
            for word in columns[1].split():
                floors[word] = int(columns[0])
    return floors


def floor_of(room_name: str, floors: dict[str, int]) -> int | None:
    if room_name in floors:
        return floors[room_name]
    package = room_name.split("/")[0]
    return floors.get(f"{package}/*") if "/" in room_name else None


def layer_violations(edges: list[tuple[str, str, int]], floors: dict[str, int]) -> list[str]:
    """Imports (importing module, imported module, line) that do not go down a floor, and rooms not on one."""
    out = []
    for src, dst, line in edges:
        a, b = room(src), room(dst)
        if a == b:
            continue
        fa, fb = floor_of(a, floors), floor_of(b, floors)
        for name, f in ((a, fa), (b, fb)):
            if f is None:
                out.append(f"room {name} is on no floor of docs/architecture.md's layer order")
        if fa is not None and fb is not None and fb >= fa:
            out.append(f"{src}:{line} imports {dst}: {a} (floor {fa}) may not import {b} (floor {fb})")
    return sorted(set(out))


def file_circles(edges: list[tuple[str, str, int]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan): files that import each other, round a loop."""
    graph: dict[str, set[str]] = {}
    for src, dst, _ in edges:
        graph.setdefault(src, set()).add(dst)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def import_edges() -> list[tuple[str, str, int]]:
    return [(module, target, line) for module, path in MODULES.items() for target, line in module_imports(module, path)]


def test_every_import_goes_down_the_floors():
    floors = layer_order()
    assert {"util", "model", "engines", "loadgens", "engines/*", "loadgens/*", "commands"} <= set(floors)
    bad = layer_violations(import_edges(), floors)
    assert not bad, "imports against the layer order of docs/architecture.md:\n" + "\n".join(bad)


def test_no_circle_between_files():
    circles = file_circles(import_edges())
    assert not circles, "files that import each other round a loop: " + "; ".join(" <-> ".join(c) for c in circles)


def test_the_layer_checks_can_fail():
    floors = layer_order("<!-- layer order -->\n```\nfloor  rooms\n 1  util\n 2  model  what it is\n 3  engines/*  x y\n 4  stack\n```\n")
    assert floors == {"util": 1, "model": 2, "engines/*": 3, "stack": 4}
    edges = [("benchwatch.model.run", "benchwatch.util.net", 1),             # down: fine
             ("benchwatch.util.net", "benchwatch.model.run", 7),             # up
             ("benchwatch.engines.postgresql.x", "benchwatch.stack.native", 9),  # a plug-in reaching up
             ("benchwatch.stack.native", "benchwatch.engines.postgresql.x", 3),  # down, but see below
             ("benchwatch.cli", "benchwatch.util.net", 2)]                   # a room on no floor
    bad = layer_violations(edges, floors)
    assert any("util (floor 1) may not import model" in b for b in bad)
    assert any("engines/postgresql (floor 3) may not import stack" in b for b in bad)
    assert any("room cli is on no floor" in b for b in bad)
    assert not any("benchwatch.model.run:1" in b for b in bad)
    assert file_circles(edges) == [["benchwatch.model.run", "benchwatch.util.net"],
                                   ["benchwatch.engines.postgresql.x", "benchwatch.stack.native"]]
    assert file_circles([("a", "b", 1), ("b", "c", 1)]) == []


def test_every_kind_of_import_counts(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from benchwatch.stack.native import Stack\n"
                     "def f():\n    from benchwatch.model import run\n    import benchwatch.sink.openmetrics\n"
                     "from . import outcome\nfrom .. import resources\n")
    found = {m for m, _ in module_imports("benchwatch.record.probe", str(probe))}
    assert found == {"benchwatch.stack.native", "benchwatch.model.run", "benchwatch.sink.openmetrics",
                     "benchwatch.record.outcome", "benchwatch.resources"}


# Imports of a plug-in folder from outside it, while issue 28 moves the last engine code into the
# folders; each leaves this list when it moves. The registry's by-name loading is not an import.
PLUGIN_IMPORTS_NOT_YET_MOVED: set[str] = set()


def test_nothing_outside_a_plugin_folder_imports_from_inside_one():
    found = set()
    for src, dst, _line in import_edges():
        inside = room(dst)
        if "/" in inside and room(src) != inside:
            found.add(f"{room(src) if '/' in room(src) else os.path.relpath(MODULES[src], PACKAGE_DIR)} -> {inside}")
    left = found - PLUGIN_IMPORTS_NOT_YET_MOVED
    assert not left, "imports of a plug-in folder from outside it (only its registry loads it, by name):\n" + "\n".join(sorted(left))
    assert not PLUGIN_IMPORTS_NOT_YET_MOVED - found, "moved: take these off the list: " + ", ".join(sorted(PLUGIN_IMPORTS_NOT_YET_MOVED - found))


def test_output_parsers_are_pure():
    """Each tool's output parser and argv reader turn lines and words into events: no other part of benchwatch."""
    checked = 0
    for module, path in MODULES.items():
        parts = module.split(".")
        if len(parts) == 4 and parts[1] == "loadgens" and parts[3] in ("output", "args"):
            assert _imports(path) <= {m for m in _imports(path) if m.startswith(".".join(parts[:3]) + ".")}, module
            checked += 1
    assert checked >= 4


def _function_imports(path: str, function: str) -> set[str]:
    """benchwatch modules imported at the top of a file and in the body of one of its functions."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    body = [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    body += [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    assert len(body) > 1 and any(getattr(n, "name", None) == function for n in body), function
    found = set()
    for node in (sub for top in body for sub in ast.walk(top)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("benchwatch"):
            found.update({node.module} | {f"{node.module}.{a.name}" for a in node.names})
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def _rooms_imported() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for src, dst, _ in import_edges():
        out.setdefault(room(src), set()).add(room(dst))
    return out


def test_the_exporter_daemon_imports_neither_the_share_layer_nor_the_dashboards():
    """What the daemon archives is benchwatch.query.archive's list, plain data: no snapshot code, no
    Grafana SDK, no explain-by-dashboard in a process that runs for the whole benchmark."""
    reaches = _rooms_imported()
    assert not {"share", "grafana", "dashboards", "present"} & reaches["exporter"], reaches["exporter"]
    assert not {"share", "grafana", "dashboards", "explain"} & reaches["query"], reaches["query"]
    # And at run time: the daemon with every collector, and the archive's list of series, loaded.
    code = ("import sys, tempfile\n"
            "from benchwatch.exporter import server\n"
            "from benchwatch.query import archive\n"
            "e = server.Exporter(runs_dir=tempfile.mkdtemp(), remote_write_url='http://127.0.0.1:9/api/v1/write',\n"
            "                    collectors={name: True for name in server.load_collectors()})\n"
            "assert archive.archived_selectors() and e.collectors\n"
            "print('\\n'.join(sorted(m for m in sys.modules if m.startswith(('benchwatch.share', 'benchwatch.grafana',\n"
            "      'grafana_foundation_sdk', 'matplotlib')))))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", "the exporter daemon loaded:\n" + r.stdout


def test_down_does_not_import_the_demo():
    """benchwatch down stops the sharded demo's instances through benchwatch.stack.shards, not the demos
    (each engine's demo.py, shards_demo.py, benchwatch.demokit)."""
    found = _function_imports(os.path.join(PACKAGE_DIR, "commands", "lifecycle.py"), "cmd_down")
    assert "benchwatch.stack.shards" in found
    assert not {m for m in found if "demo" in m}, found
    assert "demokit" not in _rooms_imported()["stack"]


def test_no_module_left_beside_the_subpackages():
    loose = sorted(n for n in os.listdir(PACKAGE_DIR) if n.endswith(".py"))
    assert loose == ["__init__.py", "__main__.py", "cli.py", "resources.py"]


# -- no engine or tool named outside its folder ------------------------------------------------

def plugin_names() -> set[str]:
    """Every name an engine or a load generator goes by: what a string comparison on them would use."""
    out: set[str] = set()
    for g in loadgens.load_generators().values():
        out |= {g.name, *g.programs}
    for e in engines.load_engines().values():
        out |= {e.name, *e.aliases}
    return out


def named_plugins(path: str, names: set[str]) -> list[str]:
    """Places in a file where an engine or tool name is compared as a string (==, !=, in, not in, a
    match case, a str method such as startswith), keys a dict literal, a subscript (``status["mysql"]``)
    or a ``.get()``: each a branch on one plug-in that belongs in its folder."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)

    def consts(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return [c for e in node.elts for c in consts(e)]
        return []

    found = []
    for node in ast.walk(tree):
        hits: list[str] = []
        if isinstance(node, ast.Subscript):  # status["mysql"]
            hits += [c for c in consts(node.slice) if c in names]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("get", "pop", "setdefault") and node.args):  # status.get("mysql")
            hits += [c for c in consts(node.args[0]) if c in names]
        if isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                hits += [c for c in consts(operand) if c in names]
        elif isinstance(node, ast.Dict):
            hits += [c for k in node.keys if k is not None for c in consts(k) if c in names]
        elif isinstance(node, ast.match_case):
            hits += [c for sub in ast.walk(node.pattern) if isinstance(sub, ast.MatchValue)
                     for c in consts(sub.value) if c in names]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("startswith", "endswith", "removeprefix", "removesuffix")):
            hits += [c for a in node.args for c in consts(a) if c in names]
        found += [f"{os.path.relpath(path, PACKAGE_DIR)}:{node.lineno}: {h!r}" for h in hits]
    return found


# An abbreviation of an engine's name that its own identifiers and flags start with (pg_dsn, --pg-dsn).
ABBREVIATIONS = {"pg"}


def _words(text: str) -> list[str]:
    return [w for w in re.split(r"[-_.]+", text.lower()) if w]


def named_in_identifiers(path: str, names: set[str]) -> list[str]:
    """Places in a file where an engine or tool names a command-line flag (``--mysql-defaults-file``, a
    dest), an attribute (``cfg.option("pg_dsn")``) or a keyword argument (``postgres=``): each an option or a field
    that belongs to its folder. A flag is named when any of its words is a name; an attribute or a
    keyword when its first word is."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    # Each name as its run of words: go-tpc is "go" then "tpc", so go_modules (the language) names no tool.
    runs = {tuple(_words(n)) for n in names} | {(a,) for a in ABBREVIATIONS}

    def starts(words: list[str]) -> bool:
        return any(tuple(words[:len(r)]) == r for r in runs)

    def contains(words: list[str]) -> bool:
        return any(starts(words[i:]) for i in range(len(words)))

    found = []
    for node in ast.walk(tree):
        hits: list[str] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            flags += [k.value.value for k in node.keywords if k.arg == "dest" and isinstance(k.value, ast.Constant)
                      and isinstance(k.value.value, str)]
            hits += [f for f in flags if contains(_words(f))]
        elif isinstance(node, ast.Attribute) and starts(_words(node.attr)):
            hits.append("." + node.attr)
        elif isinstance(node, ast.keyword) and node.arg and starts(_words(node.arg)):
            hits.append(node.arg + "=")
        found += [f"{os.path.relpath(path, PACKAGE_DIR)}:{getattr(node, 'lineno', 0)}: {h!r}" for h in hits]
    return found


# Modules that still branch on an engine or tool by name while issue 19 moves them into the
# folders; each leaves this list when its branches do. Empty when the issue is done.
# Issue 28: the stack's PostgreSQL connection code (cfg.ports["postgres"]), found once subscripts counted.
NOT_YET_MOVED: set[str] = set()


def test_no_engine_or_tool_compared_by_name_outside_its_folder():
    names = plugin_names()
    assert {"pgbench", "sysbench", "postgresql", "mysql", "postgres", "mariadb"} <= names
    found = []
    for module, path in MODULES.items():
        if "/" in room(module):
            continue  # inside a plug-in folder: its own name is its business
        if os.path.relpath(path, PACKAGE_DIR) in NOT_YET_MOVED:
            continue
        found += named_plugins(path, names)
    assert not found, "branches on an engine or tool name outside its folder:\n" + "\n".join(found)


def test_the_name_check_finds_a_branch(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('if tool == "sysbench":\n    pass\nx = {"pgbench": 1}\nok = tool == "other"\n'
                     'if engine in ("mariadb", "x"):\n    pass\nif name.startswith("postgres"):\n    pass\n')
    hits = named_plugins(str(probe), {"sysbench", "pgbench", "mariadb", "postgres"})
    assert [h.split(": ", 1)[1] for h in hits] == ["'sysbench'", "'pgbench'", "'mariadb'", "'postgres'"]


# Files whose identifiers may still name an engine or tool while they are being moved (none left: the
# stack's PostgreSQL connection, the exporter's collectors, run/attach's arguments, the snapshot's rebuild
# and its secrets moved in issue 28).
IDENTIFIERS_NOT_YET_MOVED: set[str] = set()
# Names that are contracts: (file, what the check reports), each with its reason.
IDENTIFIERS_ALLOWED = {
    # stack.json's key and Config's field of the stack's database name since the first release.
    ("stack/config.py", "'.pg_database'"),
}


def test_no_engine_or_tool_names_a_flag_key_or_attribute_outside_its_folder():
    """Beyond comparisons: a subscript or .get() keyed by an engine or tool name, a flag, an attribute or a
    keyword argument named after one. An engine's options and fields are declared in its folder and read
    through the registry (Engine.stack_options, Config.option)."""
    names = plugin_names()
    found = []
    for module, path in MODULES.items():
        if "/" in room(module):
            continue  # inside a plug-in folder: its own name is its business
        rel = os.path.relpath(path, PACKAGE_DIR)
        if rel in IDENTIFIERS_NOT_YET_MOVED:
            continue
        found += [h for h in named_in_identifiers(path, names) + named_plugins(path, names)
                  if (rel, h.split(": ", 1)[1]) not in IDENTIFIERS_ALLOWED]
    assert not found, "engine or tool names outside their folders:\n" + "\n".join(found)


def test_the_identifier_check_finds_each_kind(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('status.get("mysql")\nstatus["postgres"]\np.add_argument("--mysql-defaults-file")\n'
                     'p.add_argument("--x", dest="pg_dsn")\ncfg.pg_dsn\nstart(postgres=[])\n'
                     'status.get("other")\np.add_argument("--state-dir")\ncfg.state_dir\nf(page=1)\n')
    names = {"mysql", "postgres"}
    hits = named_plugins(str(probe), names) + named_in_identifiers(str(probe), names)
    assert sorted(h.split(": ", 1)[1] for h in hits) == sorted(
        ["'mysql'", "'postgres'", "'--mysql-defaults-file'", "'pg_dsn'", "'.pg_dsn'", "'postgres='"])
