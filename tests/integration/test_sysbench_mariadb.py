"""sysbench on a real embedded MariaDB 10.11 under `benchwatch run`: samples, stalls, alerts, InnoDB flushing, CPU contention."""

from __future__ import annotations

import gzip
import json
import os
import re
import socket
import subprocess
import time

import pytest

from benchwatch.query.prometheus import query
from benchwatch.util.processes import wait_until
from tests.helpers.explain import busy_loops, dip_over, explain_finished
from tests.helpers.prometheus import baseline_recorded
from tests.helpers.throwaway import BackgroundRun

TABLES = ["--tables=2", "--table-size=10000"]
PROGRESS = re.compile(rb"^\[ *(\d+)s \] thds: \d+ tps: ([0-9.]+) ")



@pytest.fixture(scope="module")
def prepared(mariadb_stack):
    """`benchwatch run -- sysbench ... prepare`, as a user prepares the tables."""
    r = mariadb_stack.benchwatch("run", "--", "sysbench", "oltp_read_write", *TABLES, "prepare", timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    return r


def run_dir(live, stderr: bytes) -> str:
    run_id = re.search(rb"benchwatch: run (\S+):", stderr).group(1).decode()
    return os.path.join(live.state_dir, "runs", run_id)


def printed(stdout: bytes) -> list[tuple[float, float]]:
    return [(float(m.group(1)), float(m.group(2))) for line in stdout.split(b"\n") if (m := PROGRESS.match(line))]


def tps_samples(live, run_id: str) -> list[tuple[float, float]]:
    result = query(live.prometheus, f'benchmark_progress_tps{{run_id="{run_id}",tool="sysbench"}}[1h]')
    return [(float(t), float(v)) for t, v in result[0]["values"]] if result else []


def test_prepare_passes_through(mariadb_stack, prepared):
    assert b"Creating table 'sbtest2'" in prepared.stdout
    assert b"--report-interval" not in prepared.stderr  # prepare prints no progress: nothing added
    directory = run_dir(mariadb_stack, prepared.stderr)
    with open(os.path.join(directory, "stdout.log"), "rb") as f:
        assert f.read() == prepared.stdout


def test_progress_lines_become_samples_at_the_printed_values(mariadb_stack, prepared):
    live = mariadb_stack
    r = live.benchwatch("run", "--", "sysbench", "oltp_read_write", *TABLES, "--threads=2", "--time=5", "run", timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    assert b"added --report-interval=1 to the sysbench arguments" in r.stderr
    assert b"added --config-file=" in r.stderr
    directory = run_dir(live, r.stderr)
    run_id = os.path.basename(directory)
    with open(os.path.join(directory, "stdout.log"), "rb") as f:
        assert f.read() == r.stdout  # byte for byte
    lines = printed(r.stdout)
    assert len(lines) >= 4
    meta = json.loads(open(os.path.join(directory, "meta.json")).read())
    assert meta["tool"] == "sysbench" and meta["exit_code"] == 0
    # meta.json "targets": the watched targets as objects (docs/targets.md), here the stack's own MariaDB
    assert [t["target"] for t in meta["targets"]] == ["local"]
    assert meta["server_version"].startswith("10.11") and meta["settings"]["innodb_log_file_size"]
    # No password anywhere the run wrote, nor in its argv.
    password = live.stack.server.targets()[0].client_params()["password"]
    for name in os.listdir(directory):
        with open(os.path.join(directory, name), "rb") as f:
            assert password.encode() not in f.read(), name
    assert password.encode() not in r.stderr
    assert wait_until(lambda: len(tps_samples(live, run_id)) >= len(lines), 30, interval=0.5)
    samples = tps_samples(live, run_id)
    assert [v for _, v in samples] == [tps for _, tps in lines]
    start = meta["clock_start_epoch"]
    assert [round(t, 3) for t, _ in samples] == [round(start + elapsed, 3) for elapsed, _ in lines]


def test_exit_code_passes_through(mariadb_stack):
    direct = subprocess.run(["sysbench", "no_such_test", "run"], capture_output=True)
    r = mariadb_stack.benchwatch("run", "--", "sysbench", "no_such_test", "run", timeout=60)
    assert direct.returncode != 0 and r.returncode == direct.returncode
    assert r.stdout == direct.stdout


def test_import_of_a_saved_sysbench_output(mariadb_stack):
    fixture = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "sysbench", "lock.txt")
    r = mariadb_stack.benchwatch("import", fixture, "--start", "2012-01-17T10:00:00Z", "--run-id", "sb-import", timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    assert b"10 progress lines" in r.stderr and b"0 unparsed lines" in r.stderr
    result = query(mariadb_stack.prometheus, 'benchmark_progress_tps{run_id="sb-import",tool="sysbench"}[1m]',
                   time=1326794400 + 30)
    values = [(float(t), float(v)) for t, v in result[0]["values"]]
    with open(fixture, "rb") as f:
        assert values == [(1326794400 + elapsed, tps) for elapsed, tps in printed(f.read())]


def run_dirs(live) -> set[str]:
    return set(os.listdir(os.path.join(live.state_dir, "runs")))


def progress_lines_in(live, before: set[str]) -> int:
    """Progress lines of the run directories that were not there ``before`` (run_dirs), the most of any:
    by name, not by modification time (an earlier run's directory is written to as it ends, and one
    of 12 lines let a wait for 9 return before this run began)."""
    runs = os.path.join(live.state_dir, "runs")
    total = 0
    for d in run_dirs(live) - before:
        try:
            with open(os.path.join(runs, d, "stdout.log"), "rb") as f:
                total = max(total, sum(1 for line in f if PROGRESS.match(line)))
        except FileNotFoundError:
            pass
    return total


def test_table_lock_reads_zero_and_fires_the_tps_drop_alert(mariadb_stack, prepared):
    live = mariadb_stack
    before = run_dirs(live)
    run = BackgroundRun(live, "sysbench", "oltp_read_write", *TABLES, "--threads=2", "--time=24", "--report-interval=1", "run")
    try:
        # A baseline first (10 lines, benchwatch:threshold:pgbench_tps_baseline_min_samples, then the 5 s group
        # pgbench_baseline's next evaluation): the lock's 5 s end at the 21st second at the latest.
        assert wait_until(lambda: baseline_recorded(live.prometheus, run.run_id), 90, interval=0.2), \
            (run.run_id, progress_lines_in(live, before))
        live.mariadb("LOCK TABLES sbtest1 WRITE, sbtest2 WRITE; SELECT SLEEP(5); UNLOCK TABLES;", timeout=60)
    finally:
        code = run.wait(120)
    assert code == 0, run.out.get("stderr", b"").decode()
    run_id = os.path.basename(run_dir(live, run.out["stderr"]))
    lines = printed(run.out["stdout"])
    zeros = [t for t, tps in lines if tps == 0.0]
    assert len(zeros) >= 3, lines
    assert wait_until(lambda: len(tps_samples(live, run_id)) >= len(lines), 30, interval=0.5)
    stored = dict((round(t - json.load(open(os.path.join(run_dir(live, run.out["stderr"]), "meta.json")))["clock_start_epoch"]), v)
                  for t, v in tps_samples(live, run_id))
    assert all(stored[t] == 0.0 for t in zeros)
    fired = query(live.prometheus, f'ALERTS{{alertname="PgbenchTPSDrop",run_id="{run_id}",alertstate="firing"}}[5m]')
    assert fired, "PgbenchTPSDrop never fired for the lock"
    # benchwatch explain reads sysbench runs too: the lock's zero lines are a deep dip.
    r = live.benchwatch("explain", run_id, "--json", timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    dips = json.loads(r.stdout)["dips"]
    assert any(d["level"] == "deep" and d["min_tps"] == 0 for d in dips), dips
    # ... and names the lock: sysbench's threads waited on the tables' metadata lock (the processlist).
    locked = max((d for d in dips if d["min_tps"] == 0), key=lambda d: d["lost_transactions"])
    assert locked["cause"] == "lock" and "metadata_lock" in locked["evidence"], json.dumps(locked, indent=1)


def test_write_heavy_run_shows_dirty_pages_at_the_limit_and_checkpoint_age_climbing(mariadb_stack, prepared):
    live = mariadb_stack
    # A low dirty-page limit stands in for a small buffer pool: the same pressure in seconds.
    live.mariadb("SET GLOBAL innodb_max_dirty_pages_pct = 2; SET GLOBAL innodb_max_dirty_pages_pct_lwm = 0;")
    try:
        started = time.time()
        r = live.benchwatch("run", "--", "sysbench", "oltp_write_only", *TABLES, "--threads=2", "--time=12",
                            "--report-interval=1", "run", timeout=120)
        assert r.returncode == 0, r.stderr.decode()
        window = f"{int(time.time() - started) + 3}s"

        def seen(promql: str) -> float | None:
            result = query(live.prometheus, promql)
            return float(result[0]["value"][1]) if result else None

        assert wait_until(lambda: seen(f'max_over_time(instance:mysql_innodb_flushing_pressure:bool{{target="local"}}[{window}])') == 1,
                          20, interval=0.5), "no flushing-pressure region in Prometheus"
        dirty = seen(f'max_over_time(instance:mysql_innodb_buffer_pool_dirty_pages:percent{{target="local"}}[{window}])')
        limit = seen('instance:mysql_innodb_max_dirty_pages:percent{target="local"}')
        assert limit == 2 and dirty is not None and dirty >= limit
        climb = seen(f'max_over_time(mysql_global_status_innodb_checkpoint_age{{target="local"}}[{window}])'
                     f' - min_over_time(mysql_global_status_innodb_checkpoint_age{{target="local"}}[{window}])')
        assert climb is not None and climb > 1_000_000, climb
        assert seen(f'max_over_time(instance:mysql_innodb_redo_bytes:rate1s{{target="local"}}[{window}])') > 0
        labels = query(live.prometheus, 'instance:mysql_innodb_flushing_pressure:bool')[0]["metric"]
        assert labels["target"] == "local" and labels["host"]
    finally:
        live.mariadb("SET GLOBAL innodb_max_dirty_pages_pct = 90;")


def test_busy_loops_beside_a_sysbench_run_are_cpu_contention(mariadb_stack, prepared):
    """Four busy loops on the machine for 7 s in the middle of an unthrottled sysbench run on MariaDB: the
    dip is the CPU they took (issue 23: CPU pressure for MariaDB runs too), the processes collector
    counting mariadbd as the database and sysbench as the load generator, so that only the loops are
    the others whose CPU rose."""
    live = mariadb_stack
    before = run_dirs(live)
    # Point selects from 4 threads: all CPU (the tables are in the buffer pool), no commit to wait on.
    # Profiled (issue 30, "the same on MariaDB"): the dip's CPU profile against the rest of the run.
    run = BackgroundRun(live, "sysbench", "oltp_point_select", *TABLES, "--threads=4", "--time=25",
                        "--report-interval=1", "run", options=("--profile",))
    try:
        assert wait_until(lambda: progress_lines_in(live, before) >= 9, 60, interval=0.2)
        with busy_loops(4) as loops:
            began = time.time()
            time.sleep(7)  # the fault itself: the loops run 7 s
        ended = time.time()
    finally:
        code = run.wait(120)
    assert code == 0, run.out.get("stderr", b"").decode()
    directory = run_dir(live, run.out["stderr"])
    run_id = os.path.basename(directory)
    meta = json.loads(open(os.path.join(directory, "meta.json")).read())
    report = explain_finished(live, run_id, meta["ended_at"])
    assert report["engine"] == "mysql" and {"cpu_contention", "io_pressure"} <= set(report["signals"]["weighed"])
    dip = dip_over(report, began, ended, directory)
    assert dip["cause"] == "cpu_contention", json.dumps(dip, indent=1)
    # This host's processes, weighed against this host's pressure (the exporter labels them as node_exporter).
    assert dip["candidates"][0]["details"]["host"] == socket.gethostname(), dip["candidates"][0]["details"]
    pids = [f"sh (pid {p.pid})" for p in loops]
    assert any(p in dip["evidence"] for p in pids), (pids, dip["evidence"])
    assert "database_cpu_bound" not in {c["cause"] for c in dip["candidates"]}, json.dumps(dip, indent=1)
    # Its profile: mariadbd's samples per second fall in the dip while the loops' process (sh) takes the CPUs,
    # and mariadbd's stacks are named by its functions (about 12,000 exported names; no debug symbols here).
    assert meta["profile"]["state"] == "profiled", meta["profile"]
    p = dip["profile"]
    by = {g["group"]: g["per_second"] for g in p["groups"]}
    assert by["database"][1] < by["database"][0], json.dumps(p, indent=1)
    sh = [m for m in p["processes"] if m["process"] == "sh"]
    assert sh and sh[0]["group"] == "other" and sh[0]["per_second"][1] > sh[0]["per_second"][0], json.dumps(p, indent=1)
    with open(os.path.join(directory, "profile", "profile.json"), encoding="utf-8") as f:
        summary = json.load(f)
    assert summary["by_group"]["database"] > 0 and summary["unknown_leaf"] < summary["samples"], summary
    with gzip.open(os.path.join(directory, "profile", "slices.tsv.gz"), "rt", encoding="utf-8") as f:
        stacks = [line.rstrip("\n").split("\t", 4) for line in f if not line.startswith("#")]
    assert any(r[1] == "database" and "do_command" in r[4] for r in stacks), stacks[:20]

    # The groups: mariadbd's and sysbench's CPU counted as theirs (each busy through the run), and never
    # among the busiest others the collector names.
    window = f"{int(meta['ended_at'] - meta['clock_start_epoch']) + 2}s"
    used = {r["metric"]["group"]: float(r["value"][1]) for r in query(
        live.prometheus, f"sum by (group) (increase(benchmark_host_cpu_seconds_total[{window}]))", time=meta["ended_at"])}
    assert used.get("database", 0) > 2 and used.get("load_generator", 0) > 0.5, used
    named = query(live.prometheus, f'benchmark_host_top_process_cpu_ratio{{comm=~"mariadbd|mysqld|sysbench"}}[{window}]',
                  time=meta["ended_at"])
    assert named == [], named
