"""`benchwatch demo --shards 16` on a throwaway stack: 16 shard databases on 4 loopback PostgreSQL
instances behind a PL/Proxy proxy database, watched by an agent, one pgbench run through the proxy.

The run uses -R/-L/--max-tries/-l on top of the demo's arguments so that every panel of every
dashboard has something to show (schedule lag, skipped, retried, percentiles), as test_dashboards'
run does; the rate is well under what the shards sustain on 2 cores, so the run stays steady.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import stat
import subprocess
import threading

import pytest

from benchwatch.engines.postgresql import plproxy
from benchwatch.engines.postgresql.server import pg_bindir
from benchwatch.engines.postgresql.shards_demo import PROXY_DATABASE
from benchwatch.query import grafana as gq
from benchwatch.query.prometheus import query
from benchwatch.stack.shards import shards_dir, stop_shards
from benchwatch.util import processes
from tests.helpers import throwaway
from tests.helpers.dashboards import (
    autovacuum_annotation,
    logged_autovacuums,
    other_commands_annotation,
    other_engines_annotation,
    read_from_disk,
)
from tests.helpers.tools import require_tool
from tests.integration.test_dashboards import CHECKPOINT_LINE, DASHBOARDS, QUERIES

pytestmark = pytest.mark.integration

SHARDS, INSTANCES, DURATION = 16, 4, 24
RATE = 600
PSQL = os.path.join(pg_bindir() or "/usr/lib/postgresql/15/bin", "psql")
STEADY_SKIP = 3  # the first progress lines: each proxy backend opens its shard connections


@pytest.fixture(scope="module")
def sharded():
    require_tool("pgbench", "postgresql")
    live = throwaway.start(scale=0)  # no pgbench tables: the proxy database is all the run needs
    runs_dir = os.path.join(live.state_dir, "runs")

    def read_during_the_run() -> None:
        # The r_await panels need reads that reach the device during the run; the shards' data is all in the page
        # cache (CI saw no read at all in one run).
        if processes.wait_until(lambda: os.path.isdir(runs_dir) and any(not n.startswith(".") for n in os.listdir(runs_dir)), 360, 0.5):
            read_from_disk(live.state_dir, after_s=3.0, times=15)

    reads = threading.Thread(target=read_during_the_run, daemon=True)
    try:
        reads.start()
        r = live.benchwatch("demo", "--shards", str(SHARDS), "--instances", str(INSTANCES), "--duration", str(DURATION),
                            "--", "-R", str(RATE), "-L", "1000", "--max-tries", "3", "-l", timeout=420)
        out, err = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
        assert r.returncode == 0, out[-3000:] + err[-3000:]
        reads.join(timeout=60)
        runs = os.listdir(runs_dir)
        assert len(runs) == 1, runs
        meta = json.load(open(os.path.join(live.state_dir, "runs", runs[0], "meta.json")))
        with open(os.path.join(shards_dir(live.state_dir), "shards.json"), encoding="utf-8") as f:
            layout = json.load(f)
        logs = {i["name"]: os.path.join(i["directory"], "server.log") for i in layout["instances"]}
        logs["local"] = live.stack.log_file("postgres")
        yield {"live": live, "meta": meta, "run_id": meta["run_id"], "layout": layout, "logs": logs, "stdout": out,
               # What a user looks at: the run, with a little margin (as test_dashboards).
               "start": meta["clock_start_epoch"] - 5, "end": meta["ended_at"] + 5}
    finally:
        stop_shards(live.state_dir)
        left = live.close()
        assert not left, left


def _tps_points(prom: str, run_id: str, at: float) -> list[tuple[float, float]]:
    result = query(prom, f'benchmark_progress_tps{{run_id="{run_id}"}}[1h]', at)
    return [(float(t), float(v)) for t, v in result[0]["values"]]


def test_shards_are_spread_over_the_instances_and_each_is_a_target(sharded):
    layout = sharded["layout"]
    assert layout["shards"] == SHARDS and len(layout["instances"]) == INSTANCES
    recorded = {t["target"] for t in sharded["meta"]["targets"]}
    assert {i["name"] for i in layout["instances"]} | {"local"} == recorded, sharded["meta"]["targets"]
    live = sharded["live"]
    for inst in layout["instances"]:
        params = {"host": "127.0.0.1", "port": str(inst["port"]), "user": "postgres", "sslmode": "disable",
                  "password": open(os.path.join(inst["directory"], "password")).read().strip()}
        env = dict(os.environ, PGHOST=params["host"], PGPORT=params["port"], PGUSER="postgres", PGPASSWORD=params["password"])
        dbs = subprocess.run([PSQL, "-XAtqc", "SELECT datname FROM pg_database WHERE datname LIKE 'shard%' ORDER BY 1",
                              "postgres"], env=env, capture_output=True, text=True, timeout=30)
        assert dbs.returncode == 0, dbs.stderr
        assert len(dbs.stdout.split()) == SHARDS // INSTANCES, (inst["name"], dbs.stdout)
    # Every key sits on the shard PL/Proxy sends its calls to: through the proxy, each of a sample is found.
    sample = list(range(1, plproxy.KEYS + 1, 997))
    found = subprocess.run([PSQL, "-XAtqc", f"SELECT count(*) FROM generate_series(1, {plproxy.KEYS}, 997) k "
                            "WHERE get_balance(k) IS NOT NULL", PROXY_DATABASE],
                           env=live.pg_env(), capture_output=True, text=True, timeout=60)
    assert found.returncode == 0, found.stderr
    assert int(found.stdout) == len(sample)


def test_shard_commits_add_up_to_pgbench_tps(sharded):
    prom = sharded["live"].prometheus
    names = [i["name"] for i in sharded["layout"]["instances"]]
    points = _tps_points(prom, sharded["run_id"], sharded["end"])
    assert len(points) >= DURATION - 2, points
    steady = points[STEADY_SKIP:-1]
    # pgbench's point at t covers (t-1, t]; the counters are read at their last sample before each edge,
    # and each target is scraped at a fixed offset, so both sides span the same whole seconds.
    t0, t1 = steady[0][0] - 1, steady[-1][0]
    tps = sum(v for _, v in steady) / len(steady)
    sel = f'pg_stat_database_xact_commit{{target=~"{"|".join(names)}", datname=~"shard[0-9]+"}}'

    def values(at: float) -> dict[tuple, float]:
        return {(r["metric"]["target"], r["metric"]["datname"]): float(r["value"][1]) for r in query(prom, sel, at)}

    before, after = values(t0), values(t1)
    assert len(after) == SHARDS and set(before) == set(after), (before, after)
    per_target: dict[str, float] = {}
    for (target, _), v in after.items():
        per_target[target] = per_target.get(target, 0.0) + (v - before[(target, _)]) / (t1 - t0)
    total = sum(per_target.values())
    assert abs(total - tps) <= 0.05 * tps, f"shards {total:.1f}/s ({per_target}) vs pgbench {tps:.1f} TPS"
    # Every instance did its share (keys hash evenly over the shards).
    for target, rate in per_target.items():
        assert rate > 0.15 * tps, (target, per_target)
    # And as the dashboard draws it: the per-database rate series the panels sum, averaged over the same part.
    # (The rule is recorded every 15 s; the dashboards evaluate its expression at 1 s: docs/rules.md.)
    from benchwatch.grafana import rules
    rate = rules.expr("instance_datname:pg_xact_commit:rate1s", 'datname=~"shard[0-9]+"')
    drawn = query(prom, f'avg_over_time(sum({rate})[{int(t1 - t0)}s:1s])', t1)
    assert drawn and abs(float(drawn[0]["value"][1]) - tps) <= 0.05 * tps, (drawn, tps)
    # A call commits once in the proxy database too: PostgreSQL counts those when the connections close.
    assert "the proxy database 'proxy'" in sharded["stdout"]


def logged_checkpoints(log_file: str, start: float, end: float) -> list[tuple[str, float, float]]:
    """(reason, start, end) of the completed checkpoints in a server log overlapping [start, end]."""
    out, open_ = [], None
    with open(log_file, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = CHECKPOINT_LINE.match(line.rstrip("\n"))
            if not m:
                continue
            assert m.group(2) in ("UTC", "GMT"), line  # the servers log in UTC here
            t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=datetime.UTC).timestamp()
            if m.group(3) == "starting":
                open_ = (m.group(4).strip(), t)
            elif open_ is not None:
                (reason, t0), open_ = open_, None
                if t0 <= end and t >= start - 1:
                    out.append((reason, t0, t))
    return out


def _annotation_queries(dashboard: str) -> list[gq.Query]:
    with open(os.path.join(DASHBOARDS, dashboard), encoding="utf-8") as f:
        return [q for q in gq.dashboard_queries(json.load(f)) if q.source.startswith("annotation 'Checkpoints:")]


def test_every_checkpoint_of_every_instance_has_its_region_with_its_target(sharded):
    prom, start, end = sharded["live"].prometheus, sharded["start"], sharded["end"]
    annotations = _annotation_queries("pgbench-run.json")
    assert len(annotations) == 4, [q.source for q in annotations]  # one per reason colour
    for target, log in sharded["logs"].items():
        logged = logged_checkpoints(log, start, end)
        # The demo asks every instance for a CHECKPOINT half way through the run.
        assert "immediate force wait" in [r for r, _, _ in logged], (target, logged)
        regions: list[tuple[dict, list[float]]] = []

        def drawn() -> bool:
            regions.clear()
            for q in annotations:
                for r in gq.run_query(prom, q, {"target": target, "datasource": "benchwatch-prometheus"}, start, end):
                    regions.append((r["metric"], [float(t) for t, v in r["values"] if float(v) == 1]))
            return all(any(m.get("reason") == reason and any(t0 - 1 <= t <= t1 + 1 for t in ts) for m, ts in regions)
                       for reason, t0, t1 in logged)

        # Checkpoints completing at the very end may still be on their way from the agent.
        assert processes.wait_until(drawn, 30, interval=1.0), (target, logged, [(m, ts[:3]) for m, ts in regions])
        assert {m["target"] for m, _ in regions} == {target}, (target, {m["target"] for m, _ in regions})


TOO_FREQUENT_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) \w+ \[\d+\] LOG:  checkpoints are occurring too frequently")
LOOKBACK_S = 300  # Prometheus' default lookback: a series shows up to 5 min after its last sample


def too_frequent_warnings(log_file: str, start: float, end: float) -> int:
    with open(log_file, encoding="utf-8", errors="replace") as f:
        times = [datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=datetime.UTC).timestamp()
                 for m in map(TOO_FREQUENT_LINE.match, f) if m]
    return sum(1 for t in times if start - LOOKBACK_S <= t <= end)


def _run_has_dips(sharded: dict) -> bool:
    """Whether `benchwatch explain` finds a TPS dip in the run (the dips annotation draws exactly those)."""
    if "has_dips" not in sharded:
        r = sharded["live"].benchwatch("explain", sharded["run_id"], "--json", timeout=120)
        assert r.returncode == 0, r.stderr
        sharded["has_dips"] = bool(json.loads(r.stdout)["dips"])
    return sharded["has_dips"]


def _expected(q: gq.Query, logs: list[str], start: float, end: float) -> bool:
    """Checkpoint annotations of one reason have data exactly when a selected target's log has such checkpoints;
    the "too frequently" counter exists once a selected server has logged that warning (a WAL-driven checkpoint
    closer than checkpoint_warning to the previous one, which this run's WAL volume does not cause)."""
    if "pg_checkpoints_too_frequent_total" in q.expr:
        return any(too_frequent_warnings(log, start, end) for log in logs)
    if other_engines_annotation(q.source, "postgresql"):
        return False  # InnoDB's regions: none on PostgreSQL instances
    if other_commands_annotation(q.source):
        return False  # no sweep ran and nothing was annotated
    if autovacuum_annotation(q.source):  # each instance's autovacuum runs, where its log has them
        return any(logged_autovacuums(log, start - 1, end) for log in logs)
    m = re.search(r'reason(=~|!~)"([^"]*)"', q.expr)
    if not m or not q.source.startswith("annotation"):
        return True
    matches = [re.fullmatch(m.group(2), r) is not None for log in logs for r, _, _ in logged_checkpoints(log, start, end)]
    return any(matches) if m.group(1) == "=~" else any(not x for x in matches)


@pytest.mark.parametrize("name, q", QUERIES, ids=[f"{n}:{q.source}" for n, q in QUERIES])
def test_every_dashboard_query_has_data_for_the_sharded_run_per_target_and_for_all(sharded, name, q):
    prom, start, end = sharded["live"].prometheus, sharded["start"], sharded["end"]
    with open(os.path.join(DASHBOARDS, name), encoding="utf-8") as f:
        defaults = gq.default_variables(json.load(f))
    assert defaults["target"] == ".*"  # All
    logs = sharded["logs"]
    selections = {"All": (".*", list(logs.values()))} | {t: (t, [log]) for t, log in logs.items()}
    empty = []
    for label, (value, selected_logs) in selections.items():
        if "pg_statement_active_sessions" in q.expr and label != "All":
            # A session is active only while a call runs, a shard's well under a millisecond: a reading every
            # 5 s may find none on one target (CI saw the front without); on all of them together, some.
            continue
        variables = {**defaults, "target": value, "run_id": sharded["run_id"], "datasource": "benchwatch-prometheus"}
        dips_annotation = "benchmark_dip_info" in q.expr
        # A steady sharded run may have no TPS dip: then the dips annotation has nothing to draw
        # (and the live detector, which sees only past lines, may still have drawn a mild one).
        expected = _run_has_dips(sharded) if dips_annotation else _expected(q, selected_logs, start, end)
        result = gq.run_query(prom, q, variables, start, end)
        if dips_annotation and not expected:
            continue
        if expected and not result:
            empty.append(f"{label}: {gq.expand(q.expr, variables, end - start)}")
        elif not expected:
            assert not result, f"{label}: data although no selected log shows what it counts"
    assert not empty, f"{name} {q.source}: no data for\n" + "\n".join(empty)


def test_no_password_in_the_cluster_config_argv_or_files_left_open(sharded):
    live, layout = sharded["live"], sharded["layout"]
    base = shards_dir(live.state_dir)
    env = live.pg_env()
    options = subprocess.run([PSQL, "-XAtqc", "SELECT array_to_string(srvoptions, ' ') FROM pg_foreign_server",
                              PROXY_DATABASE], env=env, capture_output=True, text=True, timeout=30)
    assert options.returncode == 0, options.stderr
    partitions = re.findall(r"p(\d+)=", options.stdout)
    assert sorted(map(int, partitions)) == list(range(SHARDS)), options.stdout
    assert "password" not in options.stdout and f"passfile={base}/proxy.pgpass" in options.stdout, options.stdout
    passfile = os.stat(os.path.join(base, "proxy.pgpass"))
    assert stat.S_IMODE(passfile.st_mode) == 0o600
    for inst in layout["instances"]:
        assert stat.S_IMODE(os.stat(os.path.join(inst["directory"], "password")).st_mode) == 0o600
    # Nothing secret in the layout file or the run's argv.
    secrets = [open(os.path.join(i["directory"], "password")).read().strip() for i in layout["instances"]]
    with open(os.path.join(base, "shards.json"), encoding="utf-8") as f:
        text = f.read() + json.dumps(sharded["meta"]["argv"])
    assert not [s for s in secrets if s in text]
    with open(passfile_path := os.path.join(base, "proxy.pgpass"), encoding="utf-8") as f:
        assert all(line.split(":")[3] == plproxy.SHARD_ROLE for line in f), passfile_path
    # The shard role the proxy connects as is no superuser.
    inst = layout["instances"][0]
    su = subprocess.run([PSQL, "-XAtqc", f"SELECT rolsuper FROM pg_roles WHERE rolname = '{plproxy.SHARD_ROLE}'", "postgres"],
                        env=dict(os.environ, PGHOST="127.0.0.1", PGPORT=str(inst["port"]), PGUSER="postgres",
                                 PGPASSWORD=secrets[0]), capture_output=True, text=True, timeout=30)
    assert su.stdout.strip() == "f", su


def test_down_and_the_demo_again_on_other_ports(sharded):
    """Issue 19's second defect: within 5 minutes of the first demo, whose instances' series (other ports)
    are still in Prometheus' lookback, down and the demo again exits 0, and every target is healthy."""
    live, first = sharded["live"], sharded["layout"]
    r = live.benchwatch("down", timeout=180)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    # down stopped the demo's instances (through their engine, found by the registry) and its agent.
    said = r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
    for inst in first["instances"]:
        assert inst["name"] in said, said
        assert not os.path.exists(os.path.join(inst["directory"], "data", "postmaster.pid")), inst
    assert "agent prometheus" in said, said
    r = live.benchwatch("demo", "--shards", str(SHARDS), "--instances", str(INSTANCES), "--duration", "8", timeout=420)
    out, err = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
    assert r.returncode == 0, out[-3000:] + err[-3000:]
    with open(os.path.join(shards_dir(live.state_dir), "shards.json"), encoding="utf-8") as f:
        second = json.load(f)
    ports = {i["name"]: i["port"] for i in second["instances"]}
    assert ports != {i["name"]: i["port"] for i in first["instances"]}  # else this test shows nothing
    r = live.benchwatch("targets", "--json", timeout=60)
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()
    listed = {t["target"]: t for t in json.loads(r.stdout)["targets"]}
    assert set(listed) == set(ports) | {"local"}
    assert all(t["healthy"] for t in listed.values()), listed
    assert {n: listed[n]["instance"] for n in ports} == {n: f"127.0.0.1:{p}" for n, p in ports.items()}
    assert listed["local"]["engine"] == "postgresql"
