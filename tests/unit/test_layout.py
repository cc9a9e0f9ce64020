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
# Packages whose subpackages are plug-ins (one folder per engine or tool), each a layer of its own.
PLUGIN_PACKAGES = ("engines", "loadgens")


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _walk_runtime(tree: ast.AST):
    """ast.walk without the bodies of ``if TYPE_CHECKING:`` (imports for annotations only)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not _is_type_checking(child):
                stack.append(child)


def _imports(path: str) -> set[str]:
    """benchwatch modules a file imports at run time, at any depth (function-level imports count too)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = set()
    for node in _walk_runtime(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "benchwatch" or node.module in {f"benchwatch.{p}" for p in PLUGIN_PACKAGES}:
                found.update(f"{node.module}.{a.name}" for a in node.names)
            elif node.module.startswith("benchwatch."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("benchwatch."))
    return found


def _unit(module: str) -> str:
    """The layer a module belongs to: its top-level subpackage (a plug-in folder is a layer of its own:
    engines.postgresql, loadgens.pgbench), or the module itself (cli, demo, resources)."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] in PLUGIN_PACKAGES:
        folder = os.path.join(PACKAGE_DIR, parts[1], parts[2])
        if os.path.isdir(folder):
            return f"{parts[1]}.{parts[2]}"
    return parts[1] if len(parts) > 1 else parts[0]


def _modules():
    for root, _dirs, files in os.walk(PACKAGE_DIR):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, os.path.dirname(PACKAGE_DIR))[:-3].replace(os.sep, ".")
                yield rel.removesuffix(".__init__"), path


def subpackage_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in _modules():
        src = _unit(module)
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
    assert {"model", "sink", "record", "engines", "loadgens", "query", "share", "exporter", "stack", "commands",
            "loadgens.pgbench", "loadgens.sysbench", "engines.postgresql", "engines.mysql"} <= set(graph)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle between subpackages: " + " -> ".join(cycle or [])


def test_the_cycle_check_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_interfaces_load_their_plugins_by_name_only():
    """engines/ and loadgens/ find their folders at run time; importing a folder would make the
    interface depend on one engine or tool."""
    graph = subpackage_graph()
    for package in PLUGIN_PACKAGES:
        assert not {u for u in graph[package] if u.startswith(package + ".")}, package


def test_output_parsers_are_pure():
    """Each tool's output parser and argv reader turn lines and words into events: no other part of benchwatch."""
    checked = 0
    for module, path in _modules():
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
    for node in (sub for top in body for sub in _walk_runtime(top)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("benchwatch"):
            found.update({node.module} | {f"{node.module}.{a.name}" for a in node.names})
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_the_exporter_daemon_imports_neither_the_share_layer_nor_the_dashboards():
    """What the daemon archives is benchwatch.query.archive's list, plain data: no snapshot code, no
    Grafana SDK, no explain-by-dashboard in a process that runs for the whole benchmark."""
    graph = subpackage_graph()
    assert not {"share", "grafana"} & graph["exporter"], graph["exporter"]
    assert not {"share", "grafana", "explain"} & graph["query"], graph["query"]
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
    assert "demokit" not in subpackage_graph()["stack"]


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
    dest), an attribute (``cfg.pg_dsn``) or a keyword argument (``postgres=``): each an option or a field
    that belongs to its folder. A flag is named when any of its words is a name; an attribute or a
    keyword when its first word is."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    words = {w for n in names for w in _words(n)} | ABBREVIATIONS
    found = []
    for node in ast.walk(tree):
        hits: list[str] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            flags += [k.value.value for k in node.keywords if k.arg == "dest" and isinstance(k.value, ast.Constant)
                      and isinstance(k.value.value, str)]
            hits += [f for f in flags if set(_words(f)) & words]
        elif isinstance(node, ast.Attribute) and _words(node.attr)[:1] and _words(node.attr)[0] in words:
            hits.append("." + node.attr)
        elif isinstance(node, ast.keyword) and node.arg and _words(node.arg)[0] in words:
            hits.append(node.arg + "=")
        found += [f"{os.path.relpath(path, PACKAGE_DIR)}:{getattr(node, 'lineno', 0)}: {h!r}" for h in hits]
    return found


# Modules that still branch on an engine or tool by name while issue 19 moves them into the
# folders; each leaves this list when its branches do. Empty when the issue is done.
# Issue 28: the stack's PostgreSQL connection code (cfg.ports["postgres"]), found once subscripts counted.
NOT_YET_MOVED: set[str] = {"stack/native.py"}


def test_no_engine_or_tool_compared_by_name_outside_its_folder():
    names = plugin_names()
    assert {"pgbench", "sysbench", "postgresql", "mysql", "postgres", "mariadb"} <= names
    found = []
    for module, path in _modules():
        parts = module.split(".")
        if len(parts) > 2 and parts[1] in PLUGIN_PACKAGES and _unit(module) != parts[1]:
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


# Files whose identifiers still name an engine or tool while issue 28 moves them (each leaves when it
# does): the stack's PostgreSQL connection and the exporter's collectors (their own parts of the issue),
# run/attach's tool-named arguments (args.pgbench, --pgbench-args and --sysbench-args: the load
# generators' part), the snapshot's rebuild (rebuild.pgbench_samples) and its secrets (stack.pg_params).
IDENTIFIERS_NOT_YET_MOVED = {"stack/native.py", "exporter/statements.py", "exporter/server.py", "commands/record.py",
                             "share/collect.py", "commands/share.py"}
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
    for module, path in _modules():
        parts = module.split(".")
        if len(parts) > 2 and parts[1] in PLUGIN_PACKAGES and _unit(module) != parts[1]:
            continue
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
