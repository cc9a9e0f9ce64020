"""``benchwatch demo``: the README's first command, a real run observed end to end."""

from __future__ import annotations

import os
import statistics
import subprocess
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
