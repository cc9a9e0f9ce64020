"""The archive's one list of series (benchwatch.query.archive) covers every query a snapshot rebuilt
from the run directory runs: each dashboard's panels, annotations and repeated rows, each engine's
summary series and explain's signals. A panel reading a series nothing archives would draw empty in
every rebuilt snapshot; here it fails instead."""

from __future__ import annotations

import glob
import os
import re

from benchwatch import engines, resources
from benchwatch.explain import causes
from benchwatch.query import archive, promql
from benchwatch.query import grafana as gq
from benchwatch.record import replay
from benchwatch.share import collect

TARGETS = ["local", "shard-pg1"]


def _run_series(selector: str) -> bool:
    """Rebuilt from the run's raw output instead of archived: its own series (run_id), by name or regex."""
    name, matchers = promql.parse_matchers(selector)
    if any(label == "run_id" for label, _op, _v in matchers) or (name and archive.is_run_series(name)):
        return True
    regexes = [v for label, op, v in matchers if label == "__name__" and op == "=~"]
    return bool(regexes) and all(any(re.fullmatch(r, n) for n in replay.run_metrics()) for r in regexes)


def covers(archived: str, wanted: str) -> bool:
    """Every series ``wanted`` selects is among those ``archived`` selects (by its name and its matchers)."""
    a_name, a_matchers = promql.parse_matchers(archived)
    w_name, w_matchers = promql.parse_matchers(wanted)
    a_names = [m for m in a_matchers if m[0] == "__name__"]
    rest = [m for m in a_matchers if m[0] != "__name__"]
    if not set(rest) <= set(w_matchers):
        return False
    if w_name is None:  # a regex over names: only the same regex is known to cover it
        return a_name is None and set(a_names) <= set(w_matchers) and bool(a_names)
    return a_name == w_name or (a_name is None and bool(a_names) and promql.matches({"__name__": w_name}, a_names))


def wanted_selectors() -> list[str]:
    out: list[str] = []
    for path in sorted(glob.glob(resources.path("dashboards", "*.json"))):
        if path.endswith("history.json"):  # runs over calendar time (issue 22): no snapshot of one run draws it
            continue
        if os.path.basename(path) == "experiment.json":
            continue  # an experiment's report, written by benchwatch report: no run's snapshot reads it
        dash = collect.snapshot_dashboard(collect.load_dashboard(path), TARGETS)
        variables = collect.snapshot_variables(dash, "RUN", TARGETS)
        for q in gq.dashboard_queries(dash):
            if not q.source.startswith("variable"):
                out += promql.selectors(gq.expand(q.expr, variables, 60.0))
    for engine in engines.load_engines().values():
        out += engine.context_selectors
    return out + causes.selectors()


def test_the_archive_covers_every_query_of_a_rebuilt_snapshot():
    archived = archive.archived_selectors()
    wanted = [s for s in dict.fromkeys(wanted_selectors()) if not _run_series(s)]
    assert len(wanted) > 50
    missing = [s for s in wanted if not any(covers(a, s) for a in archived)]
    assert not missing, "series read by a dashboard, summary or explain but not archived:\n" + "\n".join(missing)


def test_the_coverage_check_sees_a_gap():
    assert covers("node_disk_info", 'node_disk_info{target=~"local"}')
    assert covers('{__name__=~"pg_stat_(wal|bgwriter)_.*"}', 'pg_stat_wal_wal_bytes{target=~"x"}')
    assert not covers('{__name__=~"pg_stat_(wal|bgwriter)_.*"}', 'pg_stat_io_reads_total{target=~"x"}')
    assert not covers('node_cpu_seconds_total{mode="idle"}', 'node_cpu_seconds_total{mode="user"}')
    assert not any(covers(a, "pg_stat_io_reads_total") for a in archive.archived_selectors())
    assert _run_series('pgbench_progress_lag_seconds{run_id="RUN"}')
    assert _run_series('{__name__=~"benchmark_progress_tps|pgbench_progress_tps"}')
    assert not _run_series("pg_up")


def test_a_snapshot_reads_what_the_archive_saves():
    assert archive.run_selectors("R")[1:] == archive.archived_selectors()
    assert collect.window is archive.window
