"""``benchwatch demo --shards N``: pgbench through PL/Proxy over N shard databases held by loopback PostgreSQL
instances, every instance watched as its own target by an agent; prints what the stack saw."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchwatch.demokit import DemoContext, graph_url, newest_by_target, value
from benchwatch.engines.postgresql.local import LocalInstance
from benchwatch.engines.postgresql.server import os_user, pg_bindir
from benchwatch.present import stability as stability_words
from benchwatch.query import prometheus
from benchwatch.util import processes

PROXY_DATABASE = "proxy"       # in the stack's own server (target "local")
AGENT_NAME = "shards"
WARMUP_S = 3                   # the first seconds: each proxy backend opens its connections to the shards


def shard_target(i: int) -> str:
    """The target name of shard instance ``i`` (0-based)."""
    return f"shard-pg{i + 1}"


def _start_shard_instances(ctx: DemoContext, shards: int, count: int, bindir: str) -> list[LocalInstance]:
    """``count`` fresh PostgreSQL instances on loopback (the previous demo's are stopped and removed)."""
    from benchwatch.engines.postgresql import plproxy
    from benchwatch.util import net

    base = ctx.instances_dir
    ctx.stop_instances()
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    os.chmod(base, 0o755)  # the instances' own directories are 0700, owned by the server's user
    ports: list[int] = []
    while len(ports) < count:
        port = net.free_port()
        if port not in ports:
            ports.append(port)
    settings = {"max_connections": str(plproxy.SHARD_MAX_CONNECTIONS)}
    instances = [LocalInstance(os.path.join(base, shard_target(i)), port, shard_target(i), bindir, settings)
                 for i, port in enumerate(ports)]
    # Written first, so that benchwatch down finds whatever started even if the setup fails.
    with open(os.path.join(base, ctx.instances_file), "w", encoding="utf-8") as f:
        # "engine": whose instances they are, for benchwatch down (Engine.stop_local_instances).
        json.dump({"engine": "postgresql", "shards": shards, "bindir": bindir, "proxy_database": PROXY_DATABASE,
                   "instances": [{"name": i.name, "port": i.port, "directory": i.directory} for i in instances]}, f, indent=2)
    ctx.say(f"starting {count} PostgreSQL instances on 127.0.0.1 ports {', '.join(map(str, ports))}")
    with ThreadPoolExecutor(max_workers=2) as pool:  # initdb is CPU-bound: one per core
        for fut in [pool.submit(inst.start) for inst in instances]:
            fut.result()
    return instances


def demo_shards(ctx: DemoContext, *, shards: int, instances: int, duration: int, clients: int, jobs: int,
                script: str, extra_args: list[str]) -> int:
    """16 shard databases over 4 loopback instances behind a PL/Proxy proxy database, one pgbench run through
    it, every instance watched as its own target by an agent; prints what the stack saw."""
    from benchwatch.engines.postgresql import connect, plproxy
    from benchwatch.query import targets as targets_mod
    from benchwatch.record.wrapper import run_benchmark

    say, stack = ctx.say, ctx.stack
    try:
        plproxy.check_layout(shards, instances, clients)
    except plproxy.LayoutError as e:
        say(str(e))
        return 2
    failed = ctx.install_and_start(features=("shards",))
    if failed is not None:
        return failed
    if not stack.server.servers():
        say("demo --shards puts the proxy database in the stack's own PostgreSQL; this stack watches an existing "
            "server: start one with its own (a state dir without --pg-dsn)")
        return 2
    say(f"stack is up in {stack.cfg.state_dir}")
    bindir = pg_bindir()
    if bindir is None:
        say("pgbench is not installed: apt-get install postgresql")
        return 1
    if not plproxy.installed(bindir):
        version = os.path.basename(os.path.dirname(bindir.rstrip("/")))  # /usr/lib/postgresql/15/bin
        say(f"PL/Proxy is not installed for {bindir}: apt-get install postgresql-{version}-plproxy")
        return 1
    started = time.monotonic()
    base = ctx.instances_dir
    try:
        insts = _start_shard_instances(ctx, shards, instances, bindir)
        say(f"creating {shards} shard databases ({plproxy.KEYS} accounts) and the proxy database {PROXY_DATABASE!r}")
        # The passfile lives with the shards and belongs to the stack server's user, which reads it.
        partitions = plproxy.setup_shards(insts, shards, os.path.join(base, "proxy.pgpass"), os_user())
        plproxy.setup_proxy(connect.params_from_env(stack.server.client_env()), PROXY_DATABASE, partitions)
        for inst in insts:  # time per call of the shards' statements (the instances preload the library)
            connect.ensure_statements_extension(inst.params())
        say("starting the agent that watches the instances (node_exporter, postgres_exporter and checkpoints per instance)")
        agent_started = time.time()
        agent = ctx.start_agent(os.path.join(base, "agent"), name=AGENT_NAME, central_url=ctx.prometheus,
                                postgres=[i.dsn() for i in insts], server_logs=[i.server_log for i in insts],
                                targets=[i.name for i in insts], out=say)
    except Exception as e:  # setup failed: say why, leave nothing of ours running
        say(f"setting up the shards failed: {e}")
        ctx.stop_instances()
        return 1
    base_url = ctx.prometheus
    names = [i.name for i in insts]
    pattern = "|".join(names)

    def all_arrived() -> bool:
        # Samples of this agent: an earlier demo's instances had the same target names on other ports,
        # and their series stay in the 5 min lookback with their last value.
        up = f'up{{job="postgres", target=~"{pattern}"}}'
        fresh = prometheus.query(base_url, f"timestamp({up}) >= {agent_started:.3f} and {up} == 1")
        return {r["metric"]["target"] for r in fresh} == set(names)

    if not processes.wait_until(all_arrived, 60.0, interval=0.5):
        say("the agent's series did not reach the stack's Prometheus within 60 s; "
            f"see benchwatch agent status --state-dir {os.path.join(base, 'agent')}")
        return 1
    say(f"set up in {time.monotonic() - started:.0f} s")

    script_file = os.path.join(base, f"plproxy-{script}.sql")
    with open(script_file, "w", encoding="utf-8") as f:
        f.write(plproxy.SCRIPTS[script])
    client_env = dict(stack.server.client_env(), PGDATABASE=PROXY_DATABASE)

    def checkpoint_later() -> None:
        # A requested checkpoint on every instance half way, beside the timed/wal ones.
        time.sleep(duration / 2)
        for params in [connect.params_from_env(stack.server.client_env()), *(i.params() for i in insts)]:
            try:
                with connect.connect(params, dbname="postgres") as conn:
                    conn.execute("CHECKPOINT")
            except Exception as e:  # the run goes on without it
                say(f"manual CHECKPOINT on port {params.get('port')} failed: {e}")

    def on_start(run) -> None:
        say(f"run {run.run_id}: watching pgbench through PL/Proxy on {shards} shards over {instances} instances")
        run.update_meta(targets=targets_mod.watched(base_url))
        threading.Thread(target=checkpoint_later, daemon=True).start()

    argv = [os.path.join(bindir, "pgbench"), "-M", "prepared", "-n", "-r", "-f", script_file, "-P", "1",
            "-c", str(clients), "-j", str(jobs), "-T", str(duration), *extra_args, PROXY_DATABASE]
    code, run = run_benchmark(argv, runs_dir=stack.cfg.runs_dir, client_env=client_env, notice=say, on_start=on_start,
                              stability=ctx.stability)
    meta = run.read_meta()
    run.update_meta(targets=targets_mod.merge_watched(meta.get("targets") or [],
                                                      targets_mod.watched(base_url, since=meta.get("started_at"))))
    if code != 0:
        say(f"pgbench exited with {code}")
        return code
    ended_at = float(run.read_meta()["ended_at"])
    selector = f'{{run_id="{run.run_id}"}}'

    waiting: list[str] = []

    def shipped() -> bool:
        # The agent sends in batches: wait for the instances' samples up to the run's end, and for a
        # scrape of the proxy's server after its backends exited (see shard_summary). Per target: the
        # series of an earlier demo's instances (other ports) ended long before this run did.
        newest = newest_by_target(base_url, f'pg_stat_database_xact_commit{{target=~"{pattern}"}}')
        proxy = prometheus.query(base_url, f'max(timestamp(pg_stat_database_xact_commit{{datname="{PROXY_DATABASE}"}}))')
        waiting[:] = [f"{n}'s samples up to the run's end" for n in names if newest.get(n, 0.0) < ended_at]
        if not (proxy and float(proxy[0]["value"][1]) >= ended_at + 1):
            waiting.append(f"a scrape of the proxy database {PROXY_DATABASE!r} after the run")
        if not prometheus.query(base_url, f"benchmark_running{selector} == 0"):
            waiting.append("the run's end (benchmark_running 0)")
        return not waiting

    arrived = processes.wait_until(shipped, 30.0, interval=0.5)
    summary = shard_summary(base_url, run.run_id, names, float(meta["started_at"]), ended_at)
    _print_shard_summary(ctx, run, summary, shards, instances, agent)
    if not arrived:
        say("the stack's Prometheus did not have " + ", ".join(waiting) + " within 30 s: the figures above may be short")
    if not summary["tps"]:
        say(f"too few of run {run.run_id}'s progress lines reached Prometheus for a steady part")
    return 0 if arrived and summary["tps"] else 1


def shard_summary(base: str, run_id: str, names: list[str], start: float, end: float) -> dict:
    """pgbench's TPS and the shards' commits/s over the run's steady part; the proxy database's
    commits and each target's checkpoints over the whole run."""
    tps = prometheus.query(base, f'benchmark_progress_tps{{run_id="{run_id}"}}[1h]', end)
    points = [(float(t), float(v)) for t, v in tps[0]["values"]] if tps else []
    steady = points[WARMUP_S:-1]  # the last line may cover a part second
    out: dict = {"tps": None, "window": None, "shard_commits": {}, "proxy_commits": None, "transactions": None,
                 "checkpoints": {}}
    if len(steady) < 2:
        return out
    # pgbench's point at t covers (t-1, t]: the window starts a second before the first one.
    t0, t1 = steady[0][0] - 1, steady[-1][0]
    window = f"{int(round(t1 - t0))}s"
    pattern = "|".join(names)
    out["tps"] = statistics.mean(v for _, v in steady)
    out["window"] = (t0, t1)
    commits = prometheus.query(base, f'sum by (target) (increase(pg_stat_database_xact_commit{{target=~"{pattern}", '
                                     f'datname=~"shard[0-9]+"}}[{window}])) / {t1 - t0}', t1)
    out["shard_commits"] = {r["metric"]["target"]: float(r["value"][1]) for r in commits}
    # A proxy call reads no table in the proxy database, and PostgreSQL 15 flushes a backend's commit
    # count only with table or WAL statistics: they arrive when pgbench's connections close. So the
    # proxy's commits are compared over the whole run, not per second.
    proxy = f'sum(pg_stat_database_xact_commit{{datname="{PROXY_DATABASE}"}})'
    before, after = value(base, proxy, start), value(base, proxy, end + 1)
    out["proxy_commits"] = None if before is None or after is None else after - before
    out["transactions"] = value(base, f'benchmark_result_transactions{{run_id="{run_id}"}}', end + 1)
    # pg_checkpoint_info: one series per completed checkpoint (its figures are labels).
    cps = prometheus.query(base, f'count by (target) (count_over_time(pg_checkpoint_info[{int(end - start) + 2}s]))', end)
    out["checkpoints"] = {r["metric"]["target"]: int(float(r["value"][1])) for r in cps}
    return out


def _print_shard_summary(ctx: DemoContext, run: Any, summary: dict, shards: int, instances: int, agent: Any) -> None:
    stack = ctx.stack
    print()
    print(f"run {run.run_id}: pgbench through PL/Proxy, {shards} shards on {instances} PostgreSQL instances")
    if summary["tps"] is None:
        print("  too few progress lines in Prometheus for a steady part")
    else:
        t0, t1 = summary["window"]
        total = sum(summary["shard_commits"].values())
        print(f"  steady part ({t1 - t0:.0f} s): pgbench TPS {summary['tps']:.1f}; "
              f"server commits/s in the shard databases {total:.1f} ({100 * total / summary['tps']:.1f} % of TPS)")
        print("    " + ", ".join(f"{t} {v:.1f}" for t, v in sorted(summary["shard_commits"].items())))
    if summary["proxy_commits"] is not None and summary["transactions"] is not None:
        print(f"  the proxy database {PROXY_DATABASE!r} (the stack's own server) committed {summary['proxy_commits']:.0f} times "
              f"for pgbench's {summary['transactions']:.0f} transactions (each call commits there and in its shard; "
              "PostgreSQL counts the proxy's commits when the connections close)")
    from benchwatch.record import outcome

    for line in stability_words.lines((outcome.read(run) or {}).get("stability")):
        print(f"  {line}")
    if summary["checkpoints"]:
        print("  checkpoints during the run: " + ", ".join(f"{t} {n}" for t, n in sorted(summary["checkpoints"].items())))
    print(f"  run directory: {run.path}")
    if stack.pid("grafana") is not None:
        print(f"  Grafana: {stack.cfg.url('grafana')}/d/benchwatch-pgbench-run?var-run_id={run.run_id}")
    expr = 'sum by (target) (instance_datname:pg_xact_commit:rate1s{datname=~"shard[0-9]+"})'
    print(f"  Prometheus, commits/s per instance: {graph_url(ctx.prometheus, expr)}")
    print(f"  the instances and their agent: {ctx.instances_dir} (benchwatch agent status "
          f"--state-dir {agent.cfg.state_dir})")
    print("  stop the stack, the instances and the agent with: benchwatch down")
