"""Issue 31's SQL panels against a real results database: a PostgreSQL started for the test, first given the
version 1 schema (with a run in it) so that benchwatch upgrades it in place; a stack pointed at it runs a short
sweep (two variants, two runs each) and its report, which writes the verdicts (sweep_verdicts); a second
state directory's history of a workload, whose change point history writes (history_change_points). Then every
SQL panel query of the provisioned History and Experiment dashboards, its macros and variables expanded as
Grafana would (benchwatch.query.grafana_sql), must return rows from that database.

The same sweep is in the database as its host ran it (table sweeps, written by the sweep itself), and
`report` in a state directory that never ran it ("another host") reads it from there with its runs and gives
the same report; two hosts' sweeps of one name are told apart by NAME@HOST; a sweep's row written while the
database is down waits as a marker until the exporter's writer writes it through.

The history's twelve runs are run directories written with benchwatch's own record API, as tests/unit/
test_history.py makes them (six at 1000 TPS, six at 700 after a setting changed): a change point needs twelve
runs, which real runs would cost a minute of this test's budget; what is proven here is the database side."""

from __future__ import annotations

import json
import os
import subprocess
import time

import numpy as np
import psycopg
import pytest

from benchwatch.query import grafana_sql as gs
from benchwatch.results.store import SCHEMA_VERSION, schema_sql
from benchwatch.util.processes import wait_until
from tests.helpers import throwaway
from tests.helpers.results_db import ResultsServer
from tests.unit.test_history import _run as planted_run

pytestmark = pytest.mark.integration

SWEEP = "sqlpanels"
HISTORY_HOST = "history-host"
DAY = 86400


def _version_1(db: ResultsServer) -> None:
    """The schema as benchwatch's version 1 created it (schema.sql up to version 2's tables), and one run."""
    v1 = schema_sql().split("-- Version 2:")[0]
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        conn.execute(v1)
        conn.execute("INSERT INTO runs (run_id, host, meta) VALUES ('20261101T000000.000Z-v1v1', 'old-host', '{}')")
        assert conn.execute("SELECT max(version) FROM benchwatch_schema").fetchone()[0] == 1
        assert conn.execute("SELECT to_regclass('sweep_verdicts')").fetchone()[0] is None


def _history_dir(tmp_path_factory) -> tuple[str, list[str], float]:
    """Twelve runs of one workload, a day apart up to yesterday, the last six 30 % slower with another setting."""
    state = str(tmp_path_factory.mktemp("history-host"))
    rng = np.random.default_rng(31)
    first = time.time() - 13 * DAY
    ids = []
    for i in range(12):
        slow = i >= 6
        ids.append(planted_run(os.path.join(state, "runs"), first + i * DAY,
                               1000 * (0.7 if slow else 1.0) * (1 + 0.01 * rng.standard_normal()),
                               {"synchronous_commit": "on" if slow else "off"}))
    return state, ids, first


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    started = time.monotonic()
    db = ResultsServer()
    db.start()
    live = None
    try:
        _version_1(db)
        live = throwaway.start(scale=1, results_dsn=db.dsn, host="sql-host")
        r = live.benchwatch("sweep", "--name", SWEEP, "--variant", "on", "--variant", "off:synchronous_commit=off",
                            "--repeat", "2", "--", "pgbench", "-c", "1", "-T", "2", "-P", "1", timeout=600)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        r = live.benchwatch("report", SWEEP, "--json", "--no-why", timeout=300)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        model = json.loads(r.stdout)
        assert b"could not write the report's verdicts" not in r.stderr, r.stderr
        state, ids, first = _history_dir(tmp_path_factory)
        env = dict(os.environ, BENCHWATCH_STATE_DIR=state, BENCHWATCH_RESULTS_DSN=db.dsn, BENCHWATCH_HOST=HISTORY_HOST)
        h = subprocess.run([throwaway.BENCHWATCH, "history", ids[0], "--json"], env=env, capture_output=True, timeout=300)
        assert h.returncode == 0, h.stderr.decode(errors="replace")
        assert b"could not write the change points" not in h.stderr, h.stderr
        history = json.loads(h.stdout)
        print(f"results database, sweep, report and history in {time.monotonic() - started:.1f} s")
        yield db, live, model, history, ids, first
    finally:
        if live is not None:
            assert not live.close()
        db.close()


def rows(db: ResultsServer, sql: str, params: tuple | None = None) -> list[tuple]:
    """The rows of ``sql``; without ``params`` the text goes as it is, as Grafana sends it (its "%" are not
    placeholders)."""
    with psycopg.connect(db.dsn) as conn:
        return conn.execute(sql, params).fetchall()


def test_a_version_1_database_is_upgraded_in_place(world):
    db = world[0]
    assert SCHEMA_VERSION == 2
    assert [r[0] for r in rows(db, "SELECT version FROM benchwatch_schema ORDER BY version")] == [1, 2]
    assert rows(db, "SELECT host FROM runs WHERE run_id = '20261101T000000.000Z-v1v1'") == [("old-host",)]


def test_report_writes_its_verdicts_with_intervals(world):
    db, live, model, *_ = world
    (diff,) = model["differences"]
    got = rows(db, "SELECT host, baseline, variant, cell, verdict, ratio, ratio_ci_low, ratio_ci_high, p_adjusted, "
               "n_baseline, n_variant FROM sweep_verdicts WHERE sweep = %s AND metric = 'tps'", (SWEEP,))
    assert got == [("sql-host", "on", "off", diff["cell"], diff["verdict"], diff["ratio"], *diff["ratio_ci"],
                    diff["p_adjusted"], 2, 2)]
    # The report whole beside its verdicts: the sweep's plan as described, its runs, its cells and medians.
    ((runs_planned, runs_done, whole),) = rows(db, "SELECT runs_planned, runs_done, report FROM sweep_reports "
                                                   "WHERE host = 'sql-host' AND sweep = %s AND baseline = 'on'", (SWEEP,))
    assert (runs_planned, runs_done) == (4, 4) and whole["argv"] == model["argv"], whole
    assert [(v["name"], v["what"]) for v in whole["variants"]] == [(v["name"], v["what"]) for v in model["variants"]]
    assert [(c["variant"], c["n"], c["tps_median"]) for c in whole["cells"]] == \
        [(c["variant"], c["n"], c["tps_median"]) for c in model["cells"]]
    # docs/results.md's example query over it: each cell's TPS median with its interval
    cells = rows(db, "SELECT host, c->>'variant' AS variant, (c->>'tps_median')::float8 AS tps, c->'tps_ci' AS interval "
                     "FROM sweep_reports, jsonb_array_elements(report->'cells') AS c WHERE sweep = %s", (SWEEP,))
    assert sorted(r[1] for r in cells) == ["off", "on"] and all(r[2] > 0 for r in cells), cells
    metrics = {r[0] for r in rows(db, "SELECT metric FROM sweep_verdicts WHERE sweep = %s", (SWEEP,))}
    # (runs of 2 s are too short for a stability profile: the steadiness verdict's row says so, no measure's row)
    assert {"tps", "latency_avg", "steadiness"} <= metrics
    # a report again replaces its rows: the table holds the latest report, never two of one
    before = len(rows(db, "SELECT 1 FROM sweep_verdicts"))
    r = live.benchwatch("report", SWEEP, "--json", "--no-why", timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert len(rows(db, "SELECT 1 FROM sweep_verdicts")) == before


def test_history_writes_its_change_points_with_what_changed(world):
    db, _, _, history, ids, first = world
    (cp,) = history["change_points"]
    got = rows(db, "SELECT host, workload, metric, run_id, verdict, step_pct, extract(epoch FROM started_at), "
               "changed->'synchronous_commit', changed_text FROM history_change_points")
    assert len(got) == 1
    host, workload, metric, run_id, verdict, step, started, setting, text = got[0]
    assert (host, workload, metric, run_id, verdict) == (HISTORY_HOST, history["workload"], "tps", ids[6], "regression")
    assert step == cp["step_pct"] < -25 and abs(float(started) - (first + 6 * DAY)) < 0.01
    assert setting == ["off", "on"] and "synchronous_commit: off → on" in text


def _dashboard(name: str) -> dict:
    with open(os.path.join(throwaway.REPO_ROOT, "dashboards", name), encoding="utf-8") as f:
        return json.load(f)


def test_every_sql_panel_query_returns_rows(world):
    """The issue's acceptance: every SQL panel query of the provisioned dashboards, as Grafana sends it, returns
    rows: the Experiment dashboard over its default range (the last 15 minutes: the report was just made),
    the History dashboard over the last 30 days."""
    db, _, _, history, *_ = world
    now_ms = int(time.time() * 1000)
    cases = {"experiment.json": ({"experiment": SWEEP}, now_ms - 15 * 60 * 1000),
             "history.json": ({"workload": history["workload"], "metric": "tps"}, now_ms - 30 * DAY * 1000)}
    checked = 0
    for name, (variables, from_ms) in cases.items():
        dash = _dashboard(name)
        queries = gs.dashboard_sql_queries(dash)
        assert queries, f"{name} has no SQL panel"
        for q in queries:
            sql = gs.expand(q.raw_sql, variables, from_ms, now_ms, gs.multi_variables(dash))
            assert "$" not in sql, f"{name} {q.source}: left unexpanded: {sql}"
            got = rows(db, sql)
            assert got, f"{name} {q.source}: no rows for\n{sql}"
            checked += 1
    assert checked >= 2


def test_a_panel_of_another_workload_or_an_earlier_range_has_no_rows(world):
    """The check above can fail: the same queries select by the variables and the time range."""
    db, _, _, history, _, first = world
    dash = _dashboard("history.json")
    (q,) = gs.dashboard_sql_queries(dash)
    before_ms = int((first - DAY) * 1000)
    assert rows(db, gs.expand(q.raw_sql, {"workload": "no-such-workload", "metric": "tps"}, before_ms,
                              int(time.time() * 1000))) == []
    assert rows(db, gs.expand(q.raw_sql, {"workload": history["workload"], "metric": "tps"}, before_ms - DAY * 1000,
                              before_ms)) == []


def test_report_reads_a_run_whose_directory_is_gone_from_the_results_database(world, tmp_path):
    """`report` takes runs from any host: a sweep's run whose directory is gone here is read from the results
    database (materialized under <state>/results/fetched/), not only from the state file's copy of its figures."""
    db, live, model, *_ = world
    runs_dir = os.path.join(live.state_dir, "runs")
    run_ids = [r for c in model["cells"] for r in c["run_ids"]]
    assert wait_until(lambda: set(run_ids) <= set(db.run_hosts()), 90, 0.5), "the sweep's runs never reached the database"
    gone = run_ids[0]
    os.rename(os.path.join(runs_dir, gone), tmp_path / gone)
    try:
        r = live.benchwatch("report", SWEEP, "--json", "--no-why", timeout=300)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        again = json.loads(r.stdout)
    finally:
        os.rename(tmp_path / gone, os.path.join(runs_dir, gone))
    assert os.path.isfile(os.path.join(live.state_dir, "results", "fetched", gone, "meta.json"))
    assert [(c["variant"], c["n"], c["tps_median"]) for c in again["cells"]] == \
        [(c["variant"], c["n"], c["tps_median"]) for c in model["cells"]]


def _sweep_row(db: ResultsServer, host: str, name: str = SWEEP) -> dict | None:
    from benchwatch.results.store import Store

    with Store(db.dsn) as store:
        return store.read_sweep(host, name)


def test_the_sweep_is_in_the_results_database_as_its_host_ran_it(world):
    from benchwatch.results.sweeps import PendingSweeps

    """Written by the sweep itself (its start, each run's end, its end), without waiting on a report."""
    db, live, model, *_ = world
    row = _sweep_row(db, "sql-host")
    assert row is not None
    assert (row["state"], row["tool"], row["engine"], row["baseline"], row["repeat"]) == \
        ("completed", "pgbench", "postgresql", "on", 2)
    assert (row["runs_planned"], row["runs_done"]) == (4, 4)
    assert sorted(row["run_ids"]) == sorted(r for c in model["cells"] for r in c["run_ids"])
    assert row["variants"] == [{"name": "on", "what": "the server as it is"},
                               {"name": "off", "what": "synchronous_commit=off"}]
    assert row["plan"]["argv"] == model["argv"] and row["plan"]["name"] == SWEEP
    assert [e["event"] for e in row["events"]][0] == "planned" and row["events"][-1]["event"] == "completed"
    assert PendingSweeps(live.state_dir).names() == []  # nothing left waiting


def _elsewhere(db: ResultsServer, tmp_path, host: str, *args: str) -> subprocess.CompletedProcess:
    """benchwatch in a state directory that never ran the sweep (another host: no stack, only the database)."""
    # PGPASSWORD is the benchmark server's (as under docker-compose): the DSN's passfile must win over it
    env = dict(os.environ, BENCHWATCH_STATE_DIR=str(tmp_path / host), BENCHWATCH_RESULTS_DSN=db.dsn,
               BENCHWATCH_HOST=host, PGPASSWORD="the-benchmark-servers-password")
    return subprocess.run([throwaway.BENCHWATCH, *args], env=env, capture_output=True, timeout=300)


def test_report_on_another_host_reads_the_sweep_from_the_results_database(world, tmp_path):
    """The same report (cells with medians and intervals, verdicts with theirs) on a host that never ran it."""
    db, _, model, *_ = world
    run_ids = [r for c in model["cells"] for r in c["run_ids"]]
    assert wait_until(lambda: set(run_ids) <= set(db.run_hosts()), 90, 0.5), "the sweep's runs never reached the database"
    verdicts_before = rows(db, "SELECT host, reported_at FROM sweep_verdicts ORDER BY 1, 2")
    r = _elsewhere(db, tmp_path, "other-host", "report", SWEEP, "--json", "--no-why")
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert f"sweep {SWEEP} of host sql-host, from the results database (completed, 4/4 runs)".encode() in r.stderr
    there = json.loads(r.stdout)
    assert there["differences"] == model["differences"] and there["cells"] == model["cells"]
    assert there == model
    assert not os.path.exists(tmp_path / "other-host" / "sweeps" / SWEEP)  # read, not copied as a sweep of its own
    for run_id in run_ids:
        assert os.path.isfile(tmp_path / "other-host" / "results" / "fetched" / run_id / "meta.json")
    # the sweep is sql-host's: its verdicts stay as sql-host's report wrote them
    assert rows(db, "SELECT host, reported_at FROM sweep_verdicts ORDER BY 1, 2") == verdicts_before


def test_docker_compose_s_secret_script_gives_benchwatch_a_pgpass_that_connects(world, tmp_path, monkeypatch):
    """docker/results-secret.sh (docker-compose's benchwatch service) turns the password file into a pgpass that
    libpq reads, through a DSN naming it, with the benchmark server's PGPASSWORD in the environment."""
    from benchwatch.results.dsn import local, pgpass_password
    from benchwatch.results.store import Store

    db = world[0]
    secret = tmp_path / "results_db_password"
    secret.write_text(pgpass_password(db.pgpass, "127.0.0.1", str(db.port), "postgres", "postgres") + "\n")
    pgpass = tmp_path / "pgpass"
    env = dict(os.environ, RESULTS_DB_SECRET=str(secret), BENCHWATCH_RESULTS_PGPASS=str(pgpass))
    r = subprocess.run(["sh", os.path.join(throwaway.REPO_ROOT, "docker", "results-secret.sh"), "pgpass", "true"],
                       env=env, capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    monkeypatch.setenv("PGPASSWORD", "the-benchmark-servers-password")
    with Store(local(db.port, str(pgpass), dbname="postgres")) as store:
        assert store.connect().execute("SELECT current_user").fetchone() == ("postgres",)


def test_two_hosts_sweeps_of_one_name_are_told_apart_by_host(world, tmp_path):
    from benchwatch.results.store import Store

    db, _, model, *_ = world
    row = _sweep_row(db, "sql-host")
    assert row is not None
    with Store(db.dsn) as store:
        store.write_sweep(dict(row, host="second-host", state="running"))
    try:
        r = _elsewhere(db, tmp_path, "third-host", "report", SWEEP, "--json", "--no-why")
        assert r.returncode == 2 and r.stdout == b"", r
        assert (f"sweep {SWEEP} was run on 2 hosts (second-host (running), sql-host (completed)): say which, "
                f"e.g. benchwatch report {SWEEP}@second-host").encode() in r.stderr, r.stderr
        r = _elsewhere(db, tmp_path, "third-host", "report", f"{SWEEP}@sql-host", "--json", "--no-why")
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        assert json.loads(r.stdout)["differences"] == model["differences"]
        r = _elsewhere(db, tmp_path, "third-host", "report", f"{SWEEP}@no-such-host", "--json", "--no-why")
        assert r.returncode == 2
        assert f"nor of host 'no-such-host' in the results database (hosts with a sweep {SWEEP}: second-host, " \
               f"sql-host)".encode() in r.stderr, r.stderr
        r = _elsewhere(db, tmp_path, "third-host", "report", "no-such-sweep", "--json", "--no-why")
        assert r.returncode == 2 and b"nor in the results database" in r.stderr, r.stderr
    finally:
        rows(db, "DELETE FROM sweeps WHERE host = 'second-host' RETURNING host")


def test_a_sweep_goes_on_while_the_database_is_down_and_is_written_once_it_is_back(world, tmp_path):
    """The sweep's publisher against the test's database stopped (a real refusal), then the exporter's writer
    once it is back: the latest row, nothing lost. (Last in the module: the database stops for it.)"""
    from benchwatch.experiment import plan as plans
    from benchwatch.experiment import publish
    from benchwatch.exporter.results_writer import ResultsWriter
    from benchwatch.results import sweeps as sweep_rows

    db, live, *_ = world
    source = plans.SweepDir(os.path.join(live.state_dir, "sweeps", SWEEP))
    plan = source.read_plan()
    plan.name = "while-down"
    state = str(tmp_path / "runner")
    sdir = plans.SweepDir(os.path.join(state, "sweeps", plan.name))
    sdir.write_plan(plan)
    said: list[str] = []
    publisher = publish.Publisher(sdir, plan, "runner-host", db.dsn, state, [], said.append)
    sdir.listener = publisher.event
    publisher.update()
    assert wait_until(lambda: (_sweep_row(db, "runner-host", plan.name) or {}).get("state") == "running", 30, 0.2)
    db.stop()
    try:
        for e in source.events():
            sdir.append(e.pop("event"), **{k: v for k, v in e.items() if k != "at"})
        assert publisher.close(sweep_rows.COMPLETED) is False
    finally:
        db.start()
    assert len(said) == 1 and "the sweep goes on" in said[0], said
    assert sweep_rows.PendingSweeps(state).names() == [plan.name]
    os.makedirs(os.path.join(state, "runs"))
    writer = ResultsWriter(os.path.join(state, "runs"), db.dsn, "runner-host", retry_s=0.5)
    try:
        assert wait_until(lambda: not sweep_rows.PendingSweeps(state).names(), 60, 0.2), "never written through"
    finally:
        writer.store.close()
    row = _sweep_row(db, "runner-host", plan.name)
    assert row is not None and (row["state"], row["runs_done"]) == ("completed", 4)
    assert row["run_ids"] == (_sweep_row(db, "sql-host") or {})["run_ids"]
