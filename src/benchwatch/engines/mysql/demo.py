"""``benchwatch demo --engine mariadb --instances N``: N embedded MariaDB instances and one sysbench run on
each, side by side, observed as one experiment."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time

from benchwatch.demokit import DemoContext, graph_url, runs_ended, value
from benchwatch.engines.mysql.embedded import instance_count
from benchwatch.present import stability as stability_words

SYSBENCH_TABLES = ("--tables=2", "--table-size=10000")
# A low dirty-page limit stands in for a buffer pool too small for the working set: a
# short demo then shows InnoDB's flushing pressure (and its valleys) within seconds.
DEMO_MAX_DIRTY_PAGES_PCT = 5


def _mariadb_sql(target, sql: str) -> subprocess.CompletedProcess:
    client = shutil.which("mariadb") or shutil.which("mysql") or "mariadb"
    return subprocess.run([client, f"--defaults-file={target.client_file}", "-N", "-B"], input=sql,
                          capture_output=True, text=True, timeout=60)


def _stability(runs_dir: str, run_id: str | None) -> dict | None:
    """The run's stability profile as its summary.json keeps it (``benchwatch run`` wrote it)."""
    from benchwatch.record import outcome, rundir

    if not run_id:
        return None
    found = (outcome.read(rundir.RunDir(os.path.join(runs_dir, run_id))) or {}).get("stability")
    return found if isinstance(found, dict) else None


def demo(ctx: DemoContext) -> int:
    return demo_mariadb(ctx, instances=instance_count(ctx.stack.cfg), duration=ctx.args.duration or 20)


def demo_mariadb(ctx: DemoContext, *, instances: int, duration: int) -> int:
    """N embedded MariaDB instances and one sysbench run on each, side by side, observed as one
    experiment; prints each instance's TPS and their sum, as Prometheus stored them."""
    say, stack = ctx.say, ctx.stack
    # Its own packages (MariaDB, its exporter, sysbench): the pgbench demo no longer installs them.
    stopped = ctx.install_and_start()
    if stopped is not None:
        return stopped
    targets = stack.server.targets()
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
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
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
    failed_runs = [f"{t.name}: exit {code}: {err.strip().splitlines()[-1:]}" for t, code, run_id, err in outcomes
                   if code != 0 or run_id is None]
    if failed_runs:
        say("; ".join(failed_runs))
        return 1
    base = ctx.prometheus
    run_ids = [run_id for _, _, run_id, _ in outcomes if run_id]
    ended = runs_ended(base, run_ids)
    at = time.time()
    window = f"{duration + 60}s"
    print()
    print(f"experiment {experiment}: {len(targets)} MariaDB instances, one sysbench oltp_write_only run each")
    means = []
    for t, _, run_id, _ in outcomes:
        tps = f'benchmark_progress_tps{{run_id="{run_id}"}}[{window}]'
        mean, low, high = (value(base, f"{fn}_over_time({tps})", at) for fn in ("avg", "min", "max"))
        pressure = value(base, f'sum_over_time(instance:mysql_innodb_flushing_pressure:bool{{target="{t.name}"}}[{window}])', at)
        means.append(mean or 0.0)
        print(f"  {t.name:<10} run {run_id}  TPS mean {mean or 0:.1f}  min {low or 0:.1f}  max {high or 0:.1f}"
              f"  seconds under flushing pressure {int(pressure or 0)}")
        steadiness = stability_words.short(_stability(stack.cfg.runs_dir, run_id))
        if steadiness:
            print(f"  {'':<10} stability: {steadiness}")
    per_run = (f'benchmark_progress_tps * on(run_id) group_left(target) '
               f'benchmark_run_info{{experiment="{experiment}"}}')
    summed = value(base, f"avg_over_time(sum({per_run})[{duration}s:1s] @ {at - 1:.3f})", at)
    print(f"  {'sum':<10} TPS mean {sum(means):.1f} (the instances' means added)"
          + (f"; mean of the summed curve {summed:.1f}" if summed is not None else ""))
    print("  dashboard: sysbench on InnoDB (uid benchwatch-sysbench-innodb), pick any of the runs: "
          "\"Experiment: TPS per instance and sum\"")
    print(f"  Prometheus: {graph_url(base, f'sum by (target) ({per_run})')}")
    print("  stop the stack with: benchwatch down")
    return 0 if ended and all(means) else 1
