"""The collector interface and registry (benchwatch.collector): a low room that the exporter daemon and the
engines' collectors share, a registry that refuses a name twice, and an exporter that names no engine."""

from __future__ import annotations

import ast
import os
import types

import pytest

import benchwatch
from benchwatch import engines
from benchwatch.collector import DuplicateCollector, ExporterOptions, Registry, register_collector
from benchwatch.exporter import COLLECTOR_MODULES, collector_modules, load_collectors

PACKAGE_DIR = os.path.dirname(benchwatch.__file__)


def module_with_collectors(name: str, *collectors: str) -> types.ModuleType:
    """A module as a collector module is once imported: its factories marked by register_collector."""
    module = types.ModuleType(name)
    for collector in collectors:
        def build(options: ExporterOptions) -> None:
            return None
        build.__module__ = name
        setattr(module, f"_build_{collector}", register_collector(collector, f"the {collector} collector")(build))
    return module


def test_a_fresh_registry_refuses_a_name_twice_and_says_who_registered_it():
    registry = Registry()
    assert [s.name for s in registry.load(module_with_collectors("ours", "runs", "log"))] == ["runs", "log"]
    with pytest.raises(DuplicateCollector, match=r"collector 'log' registered twice: by ours and by theirs"):
        registry.load(module_with_collectors("theirs", "log"))
    assert list(registry) == ["runs", "log"] and registry.module_of("log") == "ours"


def test_a_factory_imported_into_another_module_is_not_registered_again():
    ours = module_with_collectors("ours", "runs")
    other = types.ModuleType("other")
    other._build_runs = ours._build_runs  # type: ignore[attr-defined]
    registry = Registry()
    registry.load(ours)
    assert registry.load(other) == [] and list(registry) == ["runs"]


def test_the_polling_order_is_each_collectors_order_then_the_order_of_loading():
    late = types.ModuleType("late")
    late.first = register_collector("first", "", order=5)(lambda options: None)  # type: ignore[attr-defined]
    late.first.__module__ = "late"  # type: ignore[attr-defined]
    registry = Registry()
    registry.load(module_with_collectors("early", "a", "b"))
    registry.load(late)
    assert list(registry) == ["first", "a", "b"]


def test_load_collectors_gives_a_fresh_registry_of_the_daemons_and_each_engines_collectors():
    one, two = load_collectors(), load_collectors()
    assert one is not two and list(one) == list(two)
    # The order pinned by tests/golden/exporter.prom and docs/metrics.md.
    assert list(one) == ["pgbench_runs", "host", "checkpoints", "dips", "processes", "statements"]
    own = {f"benchwatch.exporter.{m}" for m in COLLECTOR_MODULES}
    for name in one:
        module = one.module_of(name)
        assert module in own or any(module.startswith(f"{type(e).__module__}.") for e in engines.load_engines().values())
    assert collector_modules()[:len(COLLECTOR_MODULES)] == [f"benchwatch.exporter.{m}" for m in COLLECTOR_MODULES]


def _imports(path: str) -> set[str]:
    """Every benchwatch module a file imports, at any depth, TYPE_CHECKING blocks included."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("benchwatch"):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("benchwatch"))
    return found


def _files(*parts: str):
    for root, _dirs, files in os.walk(os.path.join(PACKAGE_DIR, *parts)):
        yield from (os.path.join(root, f) for f in sorted(files) if f.endswith(".py"))


def test_the_collector_room_imports_nothing_of_benchwatch_but_util():
    for path in _files("collector"):
        above = {m for m in _imports(path) if not m.startswith(("benchwatch.util", "benchwatch.collector"))}
        assert not above, f"{path} imports {sorted(above)}"


def test_engine_folders_never_import_the_exporter_and_the_exporter_no_engine_folder():
    folders = {f"benchwatch.engines.{e.name}" for e in engines.load_engines().values()}
    folders |= {type(e).__module__ for e in engines.load_engines().values()}
    for path in _files("engines"):
        assert not {m for m in _imports(path) if m.startswith("benchwatch.exporter")}, path
    for path in _files("exporter"):
        inside = {m for m in _imports(path) if any(m == f or m.startswith(f + ".") for f in folders)}
        assert not inside, f"{path} imports {sorted(inside)}"


def test_the_exporter_names_no_engine():
    words = {w.lower() for e in engines.load_engines().values() for w in (e.name, *e.aliases, *e.title.split("/"))}
    for path in _files("exporter"):
        with open(path, encoding="utf-8") as f:
            text = f.read().lower()
        assert not [w for w in words if w in text], path


def test_the_engines_collector_finds_its_server_in_the_daemons_environment(tmp_path):
    """The statements collector exists only where the environment names a server, and then is told of
    possibly low TPS lines through on_possibly_low (the exporter judges them, not the engine)."""
    from benchwatch.exporter.server import Exporter

    def make(environ):
        runs = tmp_path / str(len(list(tmp_path.iterdir())))
        runs.mkdir()
        return Exporter(runs_dir=str(runs), remote_write_url="http://127.0.0.1:9/api/v1/write", archive_runs=False,
                        environ=environ)

    bare = make(None)
    # The processes collector speeds its scans up on a possibly low line too (issue 32), engine or not.
    assert "statements" not in bare.collectors and bare.low_lines is not None
    assert bare.low_lines.callbacks == [bare.collectors["processes"].hurry]  # type: ignore[attr-defined]
    watched = make({"PGHOST": "127.0.0.1", "PGPORT": "9", "PGDATABASE": "pgbench", "PGUSER": "postgres"})
    statements = watched.collectors["statements"]
    assert watched.low_lines is not None
    assert sorted(map(repr, watched.low_lines.callbacks)) == sorted(
        map(repr, [statements.schedule.hurry, watched.collectors["processes"].hurry]))  # type: ignore[attr-defined]
    assert watched.low_lines.observe in watched.subscribers
