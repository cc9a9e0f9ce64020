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
from benchwatch.engines.postgresql.embedded import os_user, pg_bindir
from benchwatch.query import prometheus
from benchwatch.stack import packages
from benchwatch.stack.native import Stack, StackError
from benchwatch.stack.shards import SHARDS_FILE, shards_dir, stop_shards
from benchwatch.util import processes


def _install_and_start(stack: Stack, say: Callable[[str], None], features: tuple[str, ...] = ()) -> int | None:
    """What the demo uses and nothing more (the stack, its engine, the tool its demo runs, ``features``)
    installed where missing, then the stack up; None when both are done, else the exit code to give."""
    needs = packages.for_demo(stack.engine, features)
    code = subprocess.run([resources.path("scripts", "install-deps"), *needs.install_args()]).returncode
    if code != 0:
        return code
    try:
        stack.up()
    except StackError as e:
        say(str(e))
        return 1
    return None


def demo(stack: Stack, *, duration: int, say: Callable[[str], None]) -> int:
    failed = _install_and_start(stack, say)
    if failed is not None:
        return failed
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
        from benchwatch.engines.postgresql import connect

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
    ended = processes.wait_until(lambda: bool(prometheus.query(base, f"benchmark_running{selector} == 0")), 30.0, interval=0.2)
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
    shown = {"up": "yes", "down": "NO", "unknown": "not scraped yet"}
    print("  scrape targets up: " + ", ".join(f"{job}={shown.get(h, h)}" for job, h in sorted(targets.items())))
    print(f"  run directory: {run.path}")
    expr = urllib.parse.quote(f"benchmark_progress_tps{selector}")
    print(f"  Prometheus: {base}/graph?g0.expr={expr}&g0.range_input=5m")
    print(f"  Alertmanager: {stack.cfg.url('alertmanager')}")
    print("  stop the stack with: benchwatch down")
    return 0 if ended and values else 1


# -- benchwatch demo --shards N: pgbench through PL/Proxy over N shard databases ---------------------

PROXY_DATABASE = "proxy"       # in the stack's own server (target "local")
AGENT_NAME = "shards"
WARMUP_S = 3                   # the first seconds: each proxy backend opens its connections to the shards


def shard_target(i: int) -> str:
    """The target name of shard instance ``i`` (0-based)."""
    return f"shard-pg{i + 1}"


def _start_shard_instances(stack: Stack, shards: int, count: int, bindir: str,
                           say: Callable[[str], None]) -> list:
    """``count`` fresh PostgreSQL instances on loopback (the previous demo's are stopped and removed)."""
    import json
    import shutil
    from concurrent.futures import ThreadPoolExecutor

    from benchwatch.engines.postgresql import plproxy
    from benchwatch.engines.postgresql.local import LocalInstance
    from benchwatch.util import net

    base = shards_dir(stack.cfg.state_dir)
    stop_shards(stack.cfg.state_dir)
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
    with open(os.path.join(base, SHARDS_FILE), "w", encoding="utf-8") as f:
        json.dump({"shards": shards, "bindir": bindir, "proxy_database": PROXY_DATABASE,
                   "instances": [{"name": i.name, "port": i.port, "directory": i.directory} for i in instances]}, f, indent=2)
    say(f"starting {count} PostgreSQL instances on 127.0.0.1 ports {', '.join(map(str, ports))}")
    with ThreadPoolExecutor(max_workers=2) as pool:  # initdb is CPU-bound: one per core
        for fut in [pool.submit(inst.start) for inst in instances]:
            fut.result()
    return instances


def demo_shards(stack: Stack, *, shards: int, instances: int, duration: int, clients: int, jobs: int,
                script: str, extra_args: list[str], say: Callable[[str], None]) -> int:
    """16 shard databases over 4 loopback instances behind a PL/Proxy proxy database, one pgbench run through
    it, every instance watched as its own target by an agent; prints what the stack saw."""
    from benchwatch.engines.postgresql import connect, plproxy
    from benchwatch.query import targets as targets_mod
    from benchwatch.record.wrapper import run_benchmark
    from benchwatch.stack import agent as agent_mod

    try:
        plproxy.check_layout(shards, instances, clients)
    except plproxy.LayoutError as e:
        say(str(e))
        return 2
    failed = _install_and_start(stack, say, features=("shards",))
    if failed is not None:
        return failed
    if not stack.embedded_pg:
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
    try:
        insts = _start_shard_instances(stack, shards, instances, bindir, say)
        say(f"creating {shards} shard databases ({plproxy.KEYS} accounts) and the proxy database {PROXY_DATABASE!r}")
        base = shards_dir(stack.cfg.state_dir)
        # The passfile lives with the shards and belongs to the stack server's user, which reads it.
        partitions = plproxy.setup_shards(insts, shards, os.path.join(base, "proxy.pgpass"), os_user())
        plproxy.setup_proxy(stack.pg_params(), PROXY_DATABASE, partitions)
        for inst in insts:  # time per call of the shards' statements (the instances preload the library)
            connect.ensure_statements_extension(inst.params())
        say("starting the agent that watches the instances (node_exporter, postgres_exporter and checkpoints per instance)")
        agent_started = time.time()
        agent = agent_mod.start_agent(os.path.join(base, "agent"), name=AGENT_NAME, central_url=stack.cfg.url("prometheus"),
                                      postgres=[i.dsn() for i in insts], server_logs=[i.server_log for i in insts],
                                      targets=[i.name for i in insts], out=say)
    except Exception as e:  # setup failed: say why, leave nothing of ours running
        say(f"setting up the shards failed: {e}")
        stop_shards(stack.cfg.state_dir)
        return 1
    base_url = stack.cfg.url("prometheus")
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
    pg_env = dict(stack.pg_env(), PGDATABASE=PROXY_DATABASE)

    def checkpoint_later() -> None:
        # A requested checkpoint on every instance half way, beside the timed/wal ones.
        time.sleep(duration / 2)
        for params in [stack.pg_params(), *(i.params() for i in insts)]:
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
    code, run = run_benchmark(argv, runs_dir=stack.cfg.runs_dir, pg_env=pg_env, notice=say, on_start=on_start)
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
    _print_shard_summary(stack, run, summary, shards, instances, agent)
    if not arrived:
        say("the stack's Prometheus did not have " + ", ".join(waiting) + " within 30 s: the figures above may be short")
    if not summary["tps"]:
        say(f"too few of run {run.run_id}'s progress lines reached Prometheus for a steady part")
    return 0 if arrived and summary["tps"] else 1


def newest_by_target(base: str, selector: str) -> dict[str, float]:
    """The newest sample time of each target's series matching ``selector``. A target is its name: one
    restarted on other ports has new series (other ``instance``), and the old ones, still within the
    lookback, do not hold it back."""
    return {r["metric"].get("target", ""): float(r["value"][1])
            for r in prometheus.query(base, f"max by (target) (timestamp({selector}))")}


def _value(base: str, promql: str, at: float) -> float | None:
    result = prometheus.query(base, promql, at)
    return float(result[0]["value"][1]) if result else None


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
    before, after = _value(base, proxy, start), _value(base, proxy, end + 1)
    out["proxy_commits"] = None if before is None or after is None else after - before
    out["transactions"] = _value(base, f'benchmark_result_transactions{{run_id="{run_id}"}}', end + 1)
    # pg_checkpoint_info: one series per completed checkpoint (its figures are labels).
    cps = prometheus.query(base, f'count by (target) (count_over_time(pg_checkpoint_info[{int(end - start) + 2}s]))', end)
    out["checkpoints"] = {r["metric"]["target"]: int(float(r["value"][1])) for r in cps}
    return out


def _print_shard_summary(stack: Stack, run, summary: dict, shards: int, instances: int, agent) -> None:
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
    if summary["checkpoints"]:
        print("  checkpoints during the run: " + ", ".join(f"{t} {n}" for t, n in sorted(summary["checkpoints"].items())))
    print(f"  run directory: {run.path}")
    if stack.pid("grafana") is not None:
        print(f"  Grafana: {stack.cfg.url('grafana')}/d/benchwatch-pgbench-run?var-run_id={run.run_id}")
    expr = urllib.parse.quote('sum by (target) (instance_datname:pg_xact_commit:rate1s{datname=~"shard[0-9]+"})')
    print(f"  Prometheus, commits/s per instance: {stack.cfg.url('prometheus')}/graph?g0.expr={expr}&g0.range_input=5m")
    print(f"  the instances and their agent: {shards_dir(stack.cfg.state_dir)} (benchwatch agent status "
          f"--state-dir {agent.cfg.state_dir})")
    print("  stop the stack, the instances and the agent with: benchwatch down")


# -- MariaDB: N instances side by side ---------------------------------------------------

SYSBENCH_TABLES = ("--tables=2", "--table-size=10000")
# A low dirty-page limit stands in for a buffer pool too small for the working set: a
# short demo then shows InnoDB's flushing pressure (and its valleys) within seconds.
DEMO_MAX_DIRTY_PAGES_PCT = 5


def _mariadb_sql(target, sql: str) -> subprocess.CompletedProcess:
    client = shutil.which("mariadb") or shutil.which("mysql") or "mariadb"
    return subprocess.run([client, f"--defaults-file={target.client_file}", "-N", "-B"], input=sql,
                          capture_output=True, text=True, timeout=60)


def demo_mariadb(stack: Stack, *, instances: int, duration: int, say: Callable[[str], None]) -> int:
    """N embedded MariaDB instances and one sysbench run on each, side by side, observed as one
    experiment; prints each instance's TPS and their sum, as Prometheus stored them."""
    stopped = _install_and_start(stack, say)
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
    failed = [f"{t.name}: exit {code}: {err.strip().splitlines()[-1:]}" for t, code, run_id, err in outcomes
              if code != 0 or run_id is None]
    if failed:
        say("; ".join(failed))
        return 1
    base = stack.cfg.url("prometheus")
    run_ids = [run_id for _, _, run_id, _ in outcomes]
    ended = processes.wait_until(lambda: all(prometheus.query(base, f'benchmark_running{{run_id="{r}"}} == 0')
                                             for r in run_ids), 30.0, interval=0.2)
    at = time.time()
    window = f"{duration + 60}s"
    print()
    print(f"experiment {experiment}: {len(targets)} MariaDB instances, one sysbench oltp_write_only run each")
    means = []
    for t, _, run_id, _ in outcomes:
        tps = f'benchmark_progress_tps{{run_id="{run_id}"}}[{window}]'
        mean, low, high = (_value(base, f"{fn}_over_time({tps})", at) for fn in ("avg", "min", "max"))
        pressure = _value(base, f'sum_over_time(instance:mysql_innodb_flushing_pressure:bool{{target="{t.name}"}}[{window}])', at)
        means.append(mean or 0.0)
        print(f"  {t.name:<10} run {run_id}  TPS mean {mean or 0:.1f}  min {low or 0:.1f}  max {high or 0:.1f}"
              f"  seconds under flushing pressure {int(pressure or 0)}")
    per_run = (f'benchmark_progress_tps * on(run_id) group_left(target) '
               f'benchmark_run_info{{experiment="{experiment}"}}')
    summed = _value(base, f"avg_over_time(sum({per_run})[{duration}s:1s] @ {at - 1:.3f})", at)
    print(f"  {'sum':<10} TPS mean {sum(means):.1f} (the instances' means added)"
          + (f"; mean of the summed curve {summed:.1f}" if summed is not None else ""))
    print("  dashboard: sysbench on InnoDB (uid benchwatch-sysbench-innodb), pick any of the runs: "
          "\"Experiment: TPS per instance and sum\"")
    expr = urllib.parse.quote(f"sum by (target) ({per_run})")
    print(f"  Prometheus: {base}/graph?g0.expr={expr}&g0.range_input=5m")
    print("  stop the stack with: benchwatch down")
    return 0 if ended and all(means) else 1
