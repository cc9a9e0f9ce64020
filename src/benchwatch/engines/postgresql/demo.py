"""``benchwatch demo`` on PostgreSQL: the README's first command, a real pgbench run observed end to end;
with ``--shards N``, pgbench through PL/Proxy over N shard databases (``shards_demo.py``)."""

from __future__ import annotations

import os
import statistics
import subprocess
import threading
import time

from benchwatch.demokit import DemoContext, graph_url, runs_ended
from benchwatch.engines.postgresql import shards_demo
from benchwatch.engines.postgresql.server import pg_bindir
from benchwatch.present import stability as stability_words
from benchwatch.query import prometheus


def demo(ctx: DemoContext) -> int:
    """The plain demo, or the sharded one with --shards; extra pgbench arguments only go with --shards."""
    args = ctx.args
    extra = args.pgbench_args[1:] if args.pgbench_args[:1] == ["--"] else args.pgbench_args
    if args.shards is None:
        if extra:
            ctx.say("extra pgbench arguments are for demo --shards")
            return 2
        return pgbench_demo(ctx, duration=args.duration or 40)
    return shards_demo.demo_shards(ctx, shards=args.shards, instances=args.instances or 4, duration=args.duration or 30,
                                   clients=args.clients, jobs=args.jobs, script=args.script, extra_args=extra)


def _stability(run) -> dict | None:
    from benchwatch.record import outcome

    found = (outcome.read(run) or {}).get("stability")
    return found if isinstance(found, dict) else None


def pgbench_demo(ctx: DemoContext, *, duration: int) -> int:
    say, stack = ctx.say, ctx.stack
    failed = ctx.install_and_start()
    if failed is not None:
        return failed
    say(f"stack is up in {stack.cfg.state_dir}")
    client_env = stack.server.client_env()
    env = dict(os.environ, **client_env)
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
        from benchwatch.engines.postgresql import connect

        try:
            with connect.connect(connect.params_from_env(env)) as conn:
                conn.execute("CHECKPOINT")
        except Exception as e:  # the demo goes on without it; the timed and wal checkpoints remain
            say(f"manual CHECKPOINT failed: {e}")

    threading.Thread(target=checkpoint_later, daemon=True).start()
    argv = [pgbench, "-M", "prepared", "-n", "-r", "-P", "1", "-c", "4", "-j", "2", "-T", str(duration)]
    code, run = run_benchmark(argv, runs_dir=stack.cfg.runs_dir, client_env=client_env, notice=say,
                              on_start=lambda r: say(f"run {r.run_id}: watching pgbench"), stability=ctx.stability)
    if code != 0:
        say(f"pgbench exited with {code}")
        return code
    base = ctx.prometheus
    selector = f'{{run_id="{run.run_id}"}}'
    ended = runs_ended(base, [run.run_id])
    with open(run.file("stderr.log"), "rb") as f:
        printed = sum(1 for line in f if line.startswith(b"progress: "))
    at = time.time()
    stored = prometheus.query(base, f"count_over_time(benchmark_progress_tps{selector}[1h])", at)
    tps = prometheus.query(base, f"benchmark_progress_tps{selector}[1h]", at)
    values = [float(v) for _, v in tps[0]["values"]] if tps else []
    # Every configured target, also those not scraped yet (the watchers' own jobs scrape every 15 s).
    targets = {t["labels"]["job"]: t["health"] for t in prometheus.active_targets(base)}
    print()
    print(f"run {run.run_id}")
    print(f"  progress lines printed by pgbench: {printed}; samples in Prometheus: {int(float(stored[0]['value'][1])) if stored else 0}")
    if values:
        print(f"  TPS mean {statistics.mean(values):.1f}  min {min(values):.1f}  max {max(values):.1f}  "
              f"stddev {statistics.pstdev(values):.1f}")
    for line in stability_words.lines(_stability(run)):  # what summary.json keeps of how steady the run was
        print(f"  {line}")
    shown = {"up": "yes", "down": "NO", "unknown": "not scraped yet"}
    print("  scrape targets up: " + ", ".join(f"{job}={shown.get(h, h)}" for job, h in sorted(targets.items())))
    print(f"  run directory: {run.path}")
    print(f"  Prometheus: {graph_url(base, f'benchmark_progress_tps{selector}')}")
    print(f"  Alertmanager: {stack.cfg.url('alertmanager')}")
    print("  stop the stack with: benchwatch down")
    return 0 if ended and values else 1
