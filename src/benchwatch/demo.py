"""``benchwatch demo``: the README's first command, a real run observed end to end."""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable

from benchwatch import resources
from benchwatch.query import prometheus
from benchwatch.stack.native import Stack, StackError, pg_bindir
from benchwatch.util import processes


def demo(stack: Stack, *, duration: int, say: Callable[[str], None]) -> int:
    install = subprocess.run([resources.path("scripts", "install-deps")])
    if install.returncode != 0:
        return install.returncode
    try:
        stack.up()
    except StackError as e:
        say(str(e))
        return 1
    say(f"stack is up in {stack.cfg.state_dir}")
    env = dict(os.environ, **stack.pg_env())
    bindir = pg_bindir()
    if bindir is None:
        say("pgbench is not installed: apt-get install postgresql")
        return 1
    pgbench = os.path.join(bindir, "pgbench")
    say("initialising pgbench tables (scale 10)")
    init = subprocess.run([pgbench, "-i", "-q", "-s", "10"], env=env, capture_output=True, text=True)
    if init.returncode != 0:
        say(f"pgbench -i failed: {init.stderr.strip()}")
        return init.returncode

    from benchwatch.record.wrapper import run_benchmark

    # A manual CHECKPOINT half way, beside the timed/wal ones the settings cause.
    def checkpoint_later() -> None:
        time.sleep(duration / 2)
        from benchwatch.engines.postgres import connect

        try:
            with connect.connect(connect.params_from_env(env)) as conn:
                conn.execute("CHECKPOINT")
        except Exception as e:  # the demo goes on without it; the timed and wal checkpoints remain
            say(f"manual CHECKPOINT failed: {e}")

    threading.Thread(target=checkpoint_later, daemon=True).start()
    argv = [pgbench, "-M", "prepared", "-n", "-r", "-P", "1", "-c", "4", "-j", "2", "-T", str(duration)]
    code, run = run_benchmark(argv, runs_dir=stack.cfg.runs_dir, pg_env=stack.pg_env(), notice=say,
                            on_start=lambda r: say(f"run {r.run_id}: watching pgbench"))
    if code != 0:
        say(f"pgbench exited with {code}")
        return code
    base = stack.cfg.url("prometheus")
    selector = f'{{run_id="{run.run_id}"}}'
    ended = processes.wait_until(lambda: bool(prometheus.query(base, f"pgbench_running{selector} == 0")), 30.0, interval=0.2)
    with open(run.file("stderr.log"), "rb") as f:
        printed = sum(1 for line in f if line.startswith(b"progress: "))
    at = time.time()
    stored = prometheus.query(base, f"count_over_time(pgbench_progress_tps{selector}[1h])", at)
    tps = prometheus.query(base, f"pgbench_progress_tps{selector}[1h]", at)
    values = [float(v) for _, v in tps[0]["values"]] if tps else []
    # Every configured target, also those not scraped yet (the watchers' own jobs scrape every 15 s).
    targets = {t["labels"]["job"]: t["health"] for t in prometheus.active_targets(base)}
    print()
    print(f"run {run.run_id}")
    print(f"  progress lines printed by pgbench: {printed}; samples in Prometheus: {int(float(stored[0]['value'][1])) if stored else 0}")
    if values:
        print(f"  TPS mean {statistics.mean(values):.1f}  min {min(values):.1f}  max {max(values):.1f}  "
              f"stddev {statistics.pstdev(values):.1f}")
    shown = {"up": "yes", "down": "NO", "unknown": "not scraped yet"}
    print("  scrape targets up: " + ", ".join(f"{job}={shown.get(h, h)}" for job, h in sorted(targets.items())))
    print(f"  run directory: {run.path}")
    expr = urllib.parse.quote(f"pgbench_progress_tps{selector}")
    print(f"  Prometheus: {base}/graph?g0.expr={expr}&g0.range_input=5m")
    print(f"  Alertmanager: {stack.cfg.url('alertmanager')}")
    print("  stop the stack with: benchwatch down")
    return 0 if ended and values else 1


# -- MariaDB: N instances side by side ---------------------------------------------------

SYSBENCH_TABLES = ("--tables=2", "--table-size=10000")
# A low dirty-page limit stands in for a buffer pool too small for the working set: a
# short demo then shows InnoDB's flushing pressure (and its valleys) within seconds.
DEMO_MAX_DIRTY_PAGES_PCT = 5


def _mariadb_sql(target, sql: str) -> subprocess.CompletedProcess:
    client = shutil.which("mariadb") or shutil.which("mysql") or "mariadb"
    return subprocess.run([client, f"--defaults-file={target.client_file}", "-N", "-B"], input=sql,
                          capture_output=True, text=True, timeout=60)


def _value(base: str, expr: str, at: float) -> float | None:
    result = prometheus.query(base, expr, at)
    return float(result[0]["value"][1]) if result else None


def demo_mariadb(stack: Stack, *, instances: int, duration: int, say: Callable[[str], None]) -> int:
    """N embedded MariaDB instances and one sysbench run on each, side by side, observed as one
    experiment; prints each instance's TPS and their sum, as Prometheus stored them."""
    try:
        stack.up()
    except StackError as e:
        say(str(e))
        return 1
    targets = stack.mysql_targets()
    say(f"stack is up in {stack.cfg.state_dir}: MariaDB {', '.join(t.name for t in targets)}")
    if shutil.which("sysbench") is None:
        say("sysbench is not installed: apt-get install sysbench")
        return 1
    say(f"preparing sysbench tables on each instance ({' '.join(SYSBENCH_TABLES)}); "
        f"innodb_max_dirty_pages_pct={DEMO_MAX_DIRTY_PAGES_PCT} so the flushing shows within seconds")

    def prepare(target) -> str | None:
        _mariadb_sql(target, "DROP TABLE IF EXISTS sbtest1, sbtest2;")
        r = subprocess.run(["sysbench", f"--config-file={target.sysbench_file}", "oltp_write_only", *SYSBENCH_TABLES,
                            "prepare"], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            return f"{target.name}: sysbench prepare failed: {(r.stderr or r.stdout).strip()[-200:]}"
        s = _mariadb_sql(target, f"SET GLOBAL innodb_max_dirty_pages_pct = {DEMO_MAX_DIRTY_PAGES_PCT};")
        return None if s.returncode == 0 else f"{target.name}: {s.stderr.strip()}"

    errors: list[str | None] = [None] * len(targets)
    threads = [threading.Thread(target=lambda i=i, t=t: errors.__setitem__(i, prepare(t))) for i, t in enumerate(targets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if any(errors):
        say("; ".join(e for e in errors if e))
        return 1
    experiment = f"demo-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"
    say(f"experiment {experiment}: {len(targets)} sysbench runs side by side, {duration} s each")
    env = dict(os.environ, BENCHWATCH_STATE_DIR=stack.cfg.state_dir)
    benchwatch = [sys.executable, "-m", "benchwatch"]
    procs = []
    for t in targets:
        argv = [*benchwatch, "run", "--target", t.name, "--experiment", experiment, "--", "sysbench", "oltp_write_only",
                *SYSBENCH_TABLES, "--threads=1", f"--time={duration}", "--report-interval=1", "run"]
        procs.append((t, subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)))
    outcomes = []
    for t, proc in procs:
        _, err = proc.communicate(timeout=duration + 300)
        m = re.search(rb"benchwatch: run (\S+):", err)
        outcomes.append((t, proc.returncode, m.group(1).decode() if m else None, err.decode(errors="replace")))
    failed = [f"{t.name}: exit {code}: {err.strip().splitlines()[-1:]}" for t, code, run_id, err in outcomes
              if code != 0 or run_id is None]
    if failed:
        say("; ".join(failed))
        return 1
    base = stack.cfg.url("prometheus")
    run_ids = [run_id for _, _, run_id, _ in outcomes]
    ended = processes.wait_until(lambda: all(prometheus.query(base, f'pgbench_running{{run_id="{r}"}} == 0')
                                             for r in run_ids), 30.0, interval=0.2)
    at = time.time()
    window = f"{duration + 60}s"
    print()
    print(f"experiment {experiment}: {len(targets)} MariaDB instances, one sysbench oltp_write_only run each")
    means = []
    for t, _, run_id, _ in outcomes:
        tps = f'pgbench_progress_tps{{run_id="{run_id}"}}[{window}]'
        mean, low, high = (_value(base, f"{fn}_over_time({tps})", at) for fn in ("avg", "min", "max"))
        pressure = _value(base, f'sum_over_time(instance:mysql_innodb_flushing_pressure:bool{{target="{t.name}"}}[{window}])', at)
        means.append(mean or 0.0)
        print(f"  {t.name:<10} run {run_id}  TPS mean {mean or 0:.1f}  min {low or 0:.1f}  max {high or 0:.1f}"
              f"  seconds under flushing pressure {int(pressure or 0)}")
    per_run = (f'pgbench_progress_tps * on(run_id) group_left(target) '
               f'pgbench_run_info{{experiment="{experiment}"}}')
    summed = _value(base, f"avg_over_time(sum({per_run})[{duration}s:1s] @ {at - 1:.3f})", at)
    print(f"  {'sum':<10} TPS mean {sum(means):.1f} (the instances' means added)"
          + (f"; mean of the summed curve {summed:.1f}" if summed is not None else ""))
    print("  dashboard: sysbench on InnoDB (uid benchwatch-sysbench-innodb), pick any of the runs: "
          "\"Experiment: TPS per instance and sum\"")
    expr = urllib.parse.quote(f"sum by (target) ({per_run})")
    print(f"  Prometheus: {base}/graph?g0.expr={expr}&g0.range_input=5m")
    print("  stop the stack with: benchwatch down")
    return 0 if ended and all(means) else 1
