"""Benchmark: the cost of watching a pgbench run.

Run from the repository root::

    .venv/bin/python bench/bench_watch_cost.py [--seconds 20] [--rounds 5] [--variants bare,ours,stock] [--breakdown]

Starts its own native stack (temporary state dir, free ports), initialises
pgbench tables, then runs rounds of one pgbench run of --seconds per variant,
in an order that rotates every round so drift (other work on the machine,
checkpoints, table growth) spreads over all of them:

* bare:  the watchers are down (Prometheus, Alertmanager, node_exporter,
         postgres_exporter, benchwatch exporter stopped by PID; PostgreSQL, the
         system under test, stays up) and pgbench runs alone;
* ours:  the stack as ``./benchwatch up`` starts it, and
         ``./benchwatch run -- pgbench ...``;
* stock: the same, with the exporters as Debian ships them: node_exporter
         with its default collectors, postgres_exporter with its default
         metrics (our custom queries file still loaded);
* lean, lean-norules (with --variants): the options measured side by side,
         see VARIANTS; argv and a copy of prometheus.yml in the temporary
         state dir are changed, never the repository.

Every watched variant starts from freshly (re)started watchers. Every run is
``pgbench -n -c C -j J -T S -P 1`` (the -P 1 that ``benchwatch run`` adds is
given to the bare run too, so the only difference is the watching). "Stack
down" is the baseline because that is what a user compares to: pgbench on its
own, nothing else started.

Cost of watching, per watched run: utime+stime from /proc/<pid>/stat of
every watching process, sampled from the first progress line to 1.5 s before
the end, divided by the window: Prometheus, Alertmanager, node_exporter,
postgres_exporter, the benchwatch exporter, the ``benchwatch run`` wrapper,
and the PostgreSQL backends serving the watchers' database sessions (found by
the client ports of the watchers' sockets in pg_stat_activity). The total is
given as a share of the machine (CPU seconds per second / cores). The
wrapper's one-off start-up CPU (bash, Python start, pgbench --version, two
psql calls) is printed apart.

TPS: each watched run against the bare run of its own round; the mean ratio
and its spread. Run-to-run noise here is about 5 % at best, so the CPU
accounting is the sharper figure.

--breakdown then shows where the CPU goes and what each option saves:
[1] CPU per scrape of exporter variants (each started alone on a free port,
scraped back to back; exporter plus its database backends), [2] Prometheus and
Alertmanager with and without the rule files and with their self-scrapes at
15 s (applied by /-/reload), with each rule group's evaluation time, [3] the
benchwatch exporter following a live run at several poll intervals.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _live
from benchwatch import resources
from benchwatch.stack.config import LISTEN_HOST
from benchwatch.stack.native import NODE_COLLECTORS, Stack, binary
from benchwatch.util import net, processes
from tests.helpers.prometheus import query

# Each variant, and what it changes from the stack as `./benchwatch up` starts it.
VARIANTS = {
    "bare": "watchers stopped (PostgreSQL up), plain pgbench",
    "ours": "the stack as ./benchwatch up starts it, ./benchwatch run -- pgbench",
    "stock": "ours with the exporters' Debian defaults: node_exporter's default collectors, "
             "postgres_exporter's default metrics (our queries file kept)",
    "lean": "ours + postgres_exporter --disable-settings-metrics --no-collector.database, the prometheus and "
            "alertmanager jobs scraped every 15 s, the benchwatch exporter polling every 0.25 s",
    "lean-norules": "lean without rule_files: the floor without recording rules and alerts",
    "gogc": "ours with GOGC=400 for the Go daemons (Prometheus, Alertmanager, the exporters): less garbage "
            "collection for more memory",
    "procs1": "ours with GOMAXPROCS=1 for Alertmanager and the two exporters: one scheduler thread for "
              "daemons that do one small thing at a time",
    "procs1all": "procs1 and Prometheus under GOMAXPROCS=1 too",
    "scrape2s": "ours with the host's and the server's exporters (node, postgres) scraped every 2 s instead of 1 s",
    "hostread": "ours with BENCHWATCH_HOST_READER=exporter: the benchwatch exporter reads the host every second "
                "(its host collector) and node_exporter is scraped only every 15 s (node_inventory)",
    "node1s": "ours with BENCHWATCH_HOST_READER=node_exporter: node_exporter scraped every second, whatever the "
              "stack's default",
}
GO_COMPONENTS = ("prometheus", "alertmanager", "node_exporter", "postgres_exporter")
DEFAULT_VARIANTS = "bare,ours,stock"
LEAN_PG_FLAGS = ("--disable-settings-metrics", "--no-collector.database")
LEAN_POLL_S = 0.25
SETTLE_S = 5.0  # after (re)starting watchers: let start-up CPU (WAL replay, first scrapes) pass
TPS_RE = re.compile(rb"tps = ([0-9.]+) \((?:without initial connection time|excluding connections establishing)\)")
REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "watch_cost_reference.json")
CALIBRATION_ITERATIONS = 200_000


def calibration_seconds(repeat: int = 5) -> float:
    """CPU seconds of a fixed CPU-bound loop (pure Python, no I/O), the least of ``repeat``: the unit of the
    cost index. CPU time, not wall time: waiting for a core on a busy machine is not counted, and what
    contention slows (caches, a slower clock) slows the watchers about as much."""
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        x = 0
        for i in range(CALIBRATION_ITERATIONS):
            x = (x * 31 + i) % 1_000_003
        best = min(best, time.process_time() - t)
    return best


def collector_cpu(url: str) -> dict[str, float]:
    """The benchwatch exporter's CPU seconds by collector (and its remote write), from its /metrics."""
    try:
        status, body = net.http_get(url + "/metrics", timeout=5.0)
    except OSError:
        return {}
    out: dict[str, float] = {}
    for line in body.decode(errors="replace").splitlines():
        if line.startswith("benchwatch_exporter_collector_cpu_seconds_total{"):
            out[line.split('"')[1]] = float(line.rsplit(" ", 1)[1])
        elif line.startswith("benchwatch_exporter_remote_write_cpu_seconds_total "):
            out["(remote write)"] = float(line.rsplit(" ", 1)[1])
    return out if status == 200 else {}


EXPORTER_CODE = (
    "import sys; import benchwatch.exporter.server as s; s.POLL_INTERVAL_S = float(sys.argv[1]); "
    "from benchwatch.cli import main; sys.exit(main(sys.argv[2:]))"
)


def stock_argv(component: str, argv: list[str]) -> list[str]:
    """The exporter as Debian ships it: only the listen address (and our queries file) kept."""
    if component == "node_exporter":
        return [argv[0]] + [a for a in argv[1:] if a.startswith("--web.listen-address")]
    if component == "postgres_exporter":
        return [argv[0]] + [a for a in argv[1:] if a.startswith(("--web.", "--extend.query-path"))]
    return argv


def lean_argv(component: str, argv: list[str]) -> list[str]:
    if component == "postgres_exporter":
        return argv + [f for f in LEAN_PG_FLAGS if f not in argv]
    if component == "benchwatch_exporter" and "-m" in argv:
        # [python, -m, benchwatch, exporter, flags...] -> the same with another poll interval
        return [argv[0], "-c", EXPORTER_CODE, str(LEAN_POLL_S), *argv[argv.index("exporter"):]]
    return argv


def no_rules(config: dict) -> None:
    config.pop("rule_files", None)


def slow_self_scrapes(config: dict) -> None:
    for job in config["scrape_configs"]:
        if job["job_name"] in ("prometheus", "alertmanager"):
            job["scrape_interval"] = "15s"
            job["scrape_timeout"] = "10s"


def scrape_every_2s(config: dict) -> None:
    for job in config["scrape_configs"]:
        if job["job_name"] in ("node", "postgres"):
            job["scrape_interval"] = "2s"
            job["scrape_timeout"] = "2s"


def write_config(link: str, config: dict) -> None:
    import yaml

    if os.path.lexists(link):
        os.unlink(link)  # the link to the repository's file: never write through it
    with open(link, "w", encoding="utf-8") as f:
        yaml.safe_dump(config, f)


class VariantStack(Stack):
    """The benchwatch stack, started as one of the VARIANTS."""

    variant = "ours"

    def reads_host(self) -> bool:
        return self.variant != "node1s" and (self.variant == "hostread" or super().reads_host())

    def spawn(self, component, argv, env=None, user=None):
        if self.variant == "stock":
            argv = stock_argv(component, argv)
        elif self.variant.startswith("lean"):
            argv = lean_argv(component, argv)
        elif self.variant.startswith("gogc") and component in GO_COMPONENTS:
            env = dict(env if env is not None else os.environ, GOGC="400")
        elif self.variant.startswith("procs1") and component in GO_COMPONENTS and (
                component != "prometheus" or self.variant == "procs1all"):
            env = dict(env if env is not None else os.environ, GOMAXPROCS="1")
        return super().spawn(component, argv, env=env, user=user)

    def _write_prometheus_config(self) -> str:
        path = super()._write_prometheus_config()
        if self.variant.startswith("lean") or self.variant == "scrape2s":
            import yaml

            with open(path, encoding="utf-8") as f:
                config = yaml.safe_load(f)
            if self.variant == "scrape2s":
                scrape_every_2s(config)
            else:
                slow_self_scrapes(config)
            if self.variant == "lean-norules":
                no_rules(config)
            write_config(path, config)
        return path


class CostBench:
    def __init__(self, live: _live.BenchStack, args: argparse.Namespace, tmp: str):
        self.live, self.args, self.tmp = live, args, tmp
        self.stack: VariantStack = live.stack
        self.current: str | None = "ours"  # what `up` started
        self.backends: dict[str, list[int]] = {}
        self.pgbench_args = ["-n", "-c", str(args.clients), "-j", str(args.threads), "-T", str(args.seconds), "-P", "1"]

    # -- configuration ---------------------------------------------------------------

    def configure(self, variant: str) -> None:
        """Every watched run starts from freshly started watchers, whatever ran before."""
        # Also when the same watched variant ran just before (the order rotates, so every
        # other round starts with the variant the last one ended on): else the previous
        # run's end (the exporter archiving its series from Prometheus) lands in this window.
        if variant == self.current == "bare":
            return
        self.live.stop_watchers()
        self.backends = {}
        if variant != "bare":
            self.stack.variant = variant
            self.live.start_watchers()
            self.wait_scraped()
            time.sleep(SETTLE_S)  # a settling period for the measurement, not a readiness wait
            self.backends = self.find_backends()
        self.current = variant

    def wait_scraped(self) -> None:
        jobs = {"prometheus", "alertmanager", "node_inventory" if self.stack.reads_host() else "node", "postgres", "benchwatch"}

        def all_up() -> bool:
            try:
                up = {r["metric"]["job"]: r["value"][1] for r in query(self.live.prometheus, "up")}
            except Exception:
                return False
            return all(up.get(j) == "1" for j in jobs)

        if not processes.wait_until(all_up, 60, 0.2):
            raise RuntimeError("not every scrape target came up")

    def find_backends(self) -> dict[str, list[int]]:
        """PostgreSQL backends serving each watcher's database sessions, by client port."""
        pg_port = self.stack.cfg.ports["postgres"]
        ports = {c: _live.socket_local_ports(pid, pg_port) for c, pid in self.live.pids().items()}
        wanted = sorted(p for ps in ports.values() for p in ps)
        if not wanted:
            return {}
        rows = self.live.psql("SELECT pid, client_port FROM pg_stat_activity WHERE client_addr IS NOT NULL "
                              f"AND client_port IN ({','.join(map(str, wanted))})")
        by_port = {int(port): int(pid) for pid, port in (r.split("|") for r in rows.splitlines() if r)}
        return {c: [by_port[p] for p in sorted(ps) if p in by_port] for c, ps in ports.items() if ps}

    # -- one run -------------------------------------------------------------------------

    def processes(self, wrapper: int | None) -> dict[str, list[int]]:
        out = {c: [pid] for c, pid in self.live.pids().items()}
        for c, pids in self.backends.items():
            out[f"{c} backends"] = pids
        if wrapper:
            out["benchwatch run wrapper"] = [wrapper]
        return out

    @staticmethod
    def snapshot(groups: dict[str, list[int]]) -> dict[str, float | None]:
        out = {}
        for name, pids in groups.items():
            values = [_live.cpu_seconds(p) for p in pids]
            out[name] = None if any(v is None for v in values) else sum(values)
        return out

    def run(self, variant: str, round_no: int) -> dict:
        self.configure(variant)
        out_path = os.path.join(self.tmp, f"r{round_no}-{variant}.out")
        err_path = os.path.join(self.tmp, f"r{round_no}-{variant}.err")
        pgbench = self.live.pgbench_path()
        if variant == "bare":
            argv, env = [pgbench, *self.pgbench_args], self.live.pg_env()
        else:
            # The real binary, not Debian's pg_wrapper script, as in the bare run.
            argv, env = [_live.BENCHWATCH, "run", "--", pgbench, *self.pgbench_args], self.live.env()
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env)
        try:
            if not processes.wait_until(lambda: b"progress: " in open(err_path, "rb").read(), 60, 0.02,
                                    abort=lambda: proc.poll() is not None):
                raise RuntimeError(f"{variant}: no progress line: {open(err_path, 'rb').read()[-500:]!r}")
            wrapper = proc.pid if variant != "bare" else None
            groups = self.processes(wrapper) if variant != "bare" else {}
            exporter_url = self.stack.cfg.url("benchwatch_exporter")
            k0 = collector_cpu(exporter_url) if variant != "bare" else {}
            t0, busy0 = time.monotonic(), _live.machine_busy_seconds()
            c0 = self.snapshot(groups)
            startup = None
            if wrapper:
                startup = (_live.cpu_seconds(wrapper) or 0.0) + (_live.children_cpu_seconds(wrapper) or 0.0)
            window = max(1.0, self.args.seconds - 2.5)
            time.sleep(window)  # the measurement window itself
            c1 = self.snapshot(groups)
            t1, busy1 = time.monotonic(), _live.machine_busy_seconds()
            k1 = collector_cpu(exporter_url) if variant != "bare" else {}
            calibration = calibration_seconds()  # the same moment's machine: the unit of the index
            churn = {c: _live.socket_local_ports(self.live.pids().get(c, 0), self.stack.cfg.ports["postgres"])
                     for c in self.backends}
            proc.wait(timeout=self.args.seconds + 120)
        finally:
            if proc.poll() is None:
                processes.stop_pid(proc.pid)
        m = TPS_RE.search(open(out_path, "rb").read())
        if proc.returncode != 0 or not m:
            raise RuntimeError(f"{variant}: pgbench failed ({proc.returncode}): {open(err_path, 'rb').read()[-500:]!r}")
        elapsed = t1 - t0
        cpu = {}
        for name in groups:
            if c0[name] is None or c1[name] is None:
                cpu[name] = None  # ended inside the window: not measurable
            else:
                cpu[name] = (c1[name] - c0[name]) / elapsed
        lost = [c for c, ports in churn.items() if len(ports) != len(self.backends[c])]
        collectors = {k: (k1[k] - k0.get(k, 0.0)) / elapsed for k in k1}
        return {"variant": variant, "round": round_no, "tps": float(m.group(1)), "window": elapsed,
                "collectors": collectors, "calibration": calibration,
                "cpu": cpu, "machine_busy": (busy1 - busy0) / elapsed / _live.NPROC,
                "wrapper_startup": startup, "backends_churned": lost}


# -- breakdown: CPU per scrape of exporter variants ---------------------------------------


def pg_exporter_env(stack: Stack) -> dict[str, str]:
    from benchwatch.engines.postgresql import dsn

    params = stack.server.pg_params()
    params.pop("password", None)
    return dict(stack.base_env(), DATA_SOURCE_NAME=dsn.to_uri(params), PGPASSFILE=stack.path("secrets", "pgpass"))


def breakdown_variants() -> list[tuple[str, str, list[str]]]:
    queries = f"--extend.query-path={resources.path('exporters', 'postgres_exporter', 'queries.yaml')}"
    only = lambda *cs: ["--collector.disable-defaults"] + [f"--collector.{c}" for c in cs]  # noqa: E731
    variants = [
        ("node_exporter", "stock (default collectors)", []),
        ("node_exporter", f"ours: {','.join(NODE_COLLECTORS)}", only(*NODE_COLLECTORS)),
        ("node_exporter", "cpu,diskstats,meminfo,loadavg", only("cpu", "diskstats", "meminfo", "loadavg")),
        ("node_exporter", "cpu,diskstats", only("cpu", "diskstats")),
    ]
    variants += [("node_exporter", f"only {c}", only(c)) for c in NODE_COLLECTORS]
    variants += [
        ("postgres_exporter", "stock + queries.yaml", [queries]),
        ("postgres_exporter", "+ --disable-settings-metrics", [queries, "--disable-settings-metrics"]),
        ("postgres_exporter", "+ --no-collector.database", [queries, "--no-collector.database"]),
        ("postgres_exporter", "+ both", [queries, "--disable-settings-metrics", "--no-collector.database"]),
        ("postgres_exporter", "+ both + --no-collector.bgwriter",
         [queries, "--disable-settings-metrics", "--no-collector.database", "--no-collector.bgwriter"]),
        ("postgres_exporter", "queries.yaml only (everything else off)",
         [queries, "--disable-default-metrics", "--disable-settings-metrics", "--no-collector.database", "--no-collector.bgwriter"]),
    ]
    return variants


def pg_stat_database_queries(tmp: str) -> str:
    """Our queries file plus pg_stat_database as a custom query (same metric names as the default metrics)."""
    with open(resources.path("exporters", "postgres_exporter", "queries.yaml"), encoding="utf-8") as f:
        text = f.read()
    counters = ("numbackends:GAUGE xact_commit xact_rollback blks_read blks_hit tup_returned tup_fetched "
                "tup_inserted tup_updated tup_deleted conflicts temp_files temp_bytes deadlocks "
                "blk_read_time blk_write_time").split()
    metrics = "".join(f"    - {c.split(':')[0]}: {{usage: {c.split(':')[1] if ':' in c else 'COUNTER'}, description: {c.split(':')[0]}}}\n"
                      for c in counters)
    text += ("\npg_stat_database:\n  query: |\n    SELECT datid::text, datname, "
             + ", ".join(c.split(":")[0] for c in counters)
             + "\n    FROM pg_stat_database WHERE datname IS NOT NULL\n  metrics:\n"
             + "    - datid: {usage: LABEL, description: datid}\n    - datname: {usage: LABEL, description: datname}\n"
             + metrics)
    path = os.path.join(tmp, "queries-with-pg_stat_database.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def scrape_breakdown(live: _live.BenchStack, scrapes: int, tmp: str) -> None:
    stack = live.stack
    pg_port = stack.cfg.ports["postgres"]
    variants = breakdown_variants()
    variants.append(("postgres_exporter", "default metrics off, pg_stat_database as a query",
                     [f"--extend.query-path={pg_stat_database_queries(tmp)}", "--disable-default-metrics",
                      "--disable-settings-metrics", "--no-collector.database"]))
    print(f"\n[1] per-scrape CPU of exporter variants, each alone on a free port, {scrapes} scrapes back to back "
          f"(exporter + its database backends; at 1 scrape/s, ms per scrape = ms per second):")
    for component, label, flags in variants:
        port = net.free_port()
        argv = [binary(component), f"--web.listen-address={LISTEN_HOST}:{port}", *flags]
        env = pg_exporter_env(stack) if component == "postgres_exporter" else stack.base_env()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        try:
            url = f"http://{LISTEN_HOST}:{port}/metrics"
            if not processes.wait_until(lambda: net.http_ok(url), 20, 0.05, abort=lambda: proc.poll() is not None):
                print(f"  {component:<18} {label:<48} did not start")
                continue
            for _ in range(3):  # connections opened, caches warm
                body = urllib.request.urlopen(url, timeout=10).read()
            pids = [proc.pid]
            ports = _live.socket_local_ports(proc.pid, pg_port)
            if ports:
                rows = live.psql(f"SELECT pid FROM pg_stat_activity WHERE client_port IN ({','.join(map(str, ports))})")
                pids += [int(p) for p in rows.split()]
            c0 = sum(_live.cpu_seconds(p) or 0.0 for p in pids)
            t0 = time.perf_counter()
            for _ in range(scrapes):
                body = urllib.request.urlopen(url, timeout=10).read()
            wall = (time.perf_counter() - t0) / scrapes
            cpu = (sum(_live.cpu_seconds(p) or 0.0 for p in pids) - c0) / scrapes
            series = sum(1 for l in body.splitlines() if l and not l.startswith(b"#"))
            print(f"  {component:<18} {label:<48} {cpu * 1000:6.2f} ms CPU/scrape  {wall * 1000:6.1f} ms wall  "
                  f"{series:4d} series  {len(pids) - 1} backends")
        finally:
            processes.stop_pid(proc.pid)


def window_cpu(pids: dict[str, int], seconds: float) -> dict[str, float]:
    """CPU seconds per second of each process over a window of ``seconds``."""
    c0, t0 = {k: _live.cpu_seconds(p) or 0.0 for k, p in pids.items()}, time.monotonic()
    time.sleep(seconds)  # the measurement window itself
    elapsed = time.monotonic() - t0
    return {k: ((_live.cpu_seconds(p) or 0.0) - c0[k]) / elapsed for k, p in pids.items()}


def prometheus_variants(config: dict) -> list[tuple[str, dict]]:
    import copy

    out = []
    for label, changes in (("as in the repository", []), ("without rule_files", [no_rules]),
                           ("prometheus+alertmanager jobs at 15 s", [slow_self_scrapes]),
                           ("both", [no_rules, slow_self_scrapes])):
        c = copy.deepcopy(config)
        for change in changes:
            change(c)
        out.append((label, c))
    return out


def prometheus_breakdown(live: _live.BenchStack, window: float) -> None:
    import yaml

    stack = live.stack
    etc = stack.path("prometheus", "etc")
    link = os.path.join(etc, "prometheus.yml")
    with open(link, encoding="utf-8") as f:
        config = yaml.safe_load(f)
    groups = query(live.prometheus, "prometheus_rule_group_rules")
    n_rules = int(sum(float(g["value"][1]) for g in groups))
    print(f"\n[2] Prometheus and Alertmanager CPU with no pgbench running, {window:.0f} s per config "
          f"(the repository's config: {n_rules} rules in {len(groups)} groups, every job at 1 s; applied by /-/reload):")
    # Where rule evaluation goes: each group's evaluation time (wall, a proxy for its CPU) over the last minute.
    durations = query(live.prometheus, "avg_over_time(prometheus_rule_group_last_duration_seconds[1m])")
    intervals = {g["metric"]["rule_group"]: float(g["value"][1])
                 for g in query(live.prometheus, "prometheus_rule_group_interval_seconds")}
    sizes = {g["metric"]["rule_group"]: int(float(g["value"][1])) for g in groups}
    print("  rule groups by evaluation time (avg over 1 min, x evaluations per second = ms/s of wall time):")
    for g in sorted(durations, key=lambda g: -float(g["value"][1])):
        name = g["metric"]["rule_group"]
        per_eval = float(g["value"][1]) * 1000
        every = intervals.get(name, 1.0)
        print(f"    {name.split('/')[-1]:<56} {sizes.get(name, 0):3d} rules every {every:g} s  "
              f"{per_eval:6.2f} ms per evaluation = {per_eval / every:6.2f} ms/s")
    pids = {"prometheus": stack.pid("prometheus"), "alertmanager": stack.pid("alertmanager")}
    try:
        for label, c in prometheus_variants(config):
            write_config(link, c)
            reload(live.prometheus)
            time.sleep(3.0)  # settle: first evaluations and scrapes after the reload
            cpu = window_cpu(pids, window)
            print(f"  {label:<40} prometheus {cpu['prometheus'] * 1000:6.2f} ms/s  alertmanager {cpu['alertmanager'] * 1000:6.2f} ms/s"
                  f"  together {sum(cpu.values()) * 1000:6.2f} ms/s")
    finally:
        os.unlink(link)
        os.symlink(resources.path("prometheus", "prometheus.yml"), link)
        reload(live.prometheus)


def reload(prometheus: str) -> None:
    req = urllib.request.Request(prometheus + "/-/reload", method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        r.read()


def exporter_breakdown(live: _live.BenchStack, window: float, tmp: str) -> dict[str, float]:
    """The benchwatch exporter following a live run, whole and with each collector off in turn: what each
    collector costs (the stack's own exporter command line and environment; fed by attach)."""
    from benchwatch.exporter import load_collectors

    stack = live.stack
    argv = processes.process_cmdline(stack.pid("benchwatch_exporter"))
    base = [a for a in argv[argv.index("exporter"):] if not a.startswith("--listen=")]
    env = dict(stack.base_env(), **stack.server.exporter_env())
    names = list(load_collectors())
    print(f"\n[3] benchwatch exporter following a live run (attach fed one steady progress line per second), "
          f"{window:.0f} s per configuration, its /proc CPU (the stack's exporter stopped meanwhile; not scraped); "
          f"a collector's cost = the whole exporter's less the exporter without it:")
    stack.stop("supervisor")  # else it starts the stack's exporter again; up restarts both
    stack.stop("benchwatch_exporter")
    out: dict[str, float] = {}
    try:
        for off in [None, *names]:
            port = net.free_port()
            flags = [] if off is None else [f"--no-collector.{off}"]
            cmd = [sys.executable, "-m", "benchwatch", *base, f"--listen={LISTEN_HOST}:{port}", *flags]
            with open(os.path.join(tmp, f"exporter-{off}.log"), "wb") as log:
                exporter = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
            attach = None
            label = "whole exporter" if off is None else f"without {off}"
            try:
                if not processes.wait_until(lambda: net.http_ok(f"http://{LISTEN_HOST}:{port}/healthz"), 30, 0.05,
                                            abort=lambda: exporter.poll() is not None):
                    print(f"  {label:<28} the exporter did not start")
                    continue
                attach = subprocess.Popen([_live.BENCHWATCH, "attach", "--quiet"], stdin=subprocess.PIPE,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=live.env())
                start = time.monotonic()
                c0 = t0 = 0.0
                lines = int(window) + 3
                for i in range(lines + 1):
                    delay = start + i - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)  # pace like pgbench -P 1
                    if i == 3:
                        c0, t0 = _live.cpu_seconds(exporter.pid) or 0.0, time.monotonic()  # after run discovery
                    attach.stdin.write(f"progress: {i + 1}.0 s, {500 + i % 3}.0 tps, lat 4.000 ms stddev 0.500, 0 failed\n".encode())
                    attach.stdin.flush()
                following = ((_live.cpu_seconds(exporter.pid) or 0.0) - c0) / (time.monotonic() - t0)
                out[label] = following * 1000
                extra = "" if off is None or "whole exporter" not in out else \
                    f"   -> {off} costs {out['whole exporter'] - out[label]:6.2f} ms/s"
                print(f"  {label:<28} {following * 1000:6.2f} ms/s{extra}", flush=True)
            finally:
                if attach is not None and attach.stdin is not None:
                    attach.stdin.close()
                    attach.wait(timeout=30)
                processes.stop_pid(exporter.pid)
    finally:
        live.start_watchers()
    return out


# -- report ----------------------------------------------------------------------------------


def spread(values: list[float]) -> str:
    if len(values) < 2:
        return f"mean {values[0]:.3f}" if values else "no data"
    return (f"mean {statistics.mean(values):.3f}  stdev {statistics.stdev(values):.3f}  "
            f"min {min(values):.3f}  max {max(values):.3f}")


# Student's t, two-sided 95 %, by degrees of freedom (n - 1 pairs); 1.96 beyond the table.
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23, 11: 2.20,
       12: 2.18, 13: 2.16, 14: 2.14, 15: 2.13, 19: 2.09, 24: 2.06, 29: 2.05}


def confidence(ratios: list[float]) -> str:
    """The 95 % confidence interval of the mean ratio (pairs of one round each, so alternation cancels drift)."""
    if len(ratios) < 2:
        return ""
    df = len(ratios) - 1
    t = T95.get(df) or next((T95[k] for k in sorted(T95) if k >= df), 1.96)
    half = t * statistics.stdev(ratios) / len(ratios) ** 0.5
    mean = statistics.mean(ratios)
    return f"  95 % CI of the mean {mean - half:.3f}-{mean + half:.3f}"


def report(results: list[dict], variants: list[str]) -> None:
    watched_variants = [v for v in variants if v != "bare"]
    watched = [r for r in results if r["variant"] != "bare"]
    if watched:
        names: list[str] = []
        for r in watched:
            names += [n for n in r["cpu"] if n not in names]
        print("\ncost of watching: CPU ms per second of run (mean over rounds; per-round values in brackets)")
        print(f"  {'process':<30}" + "".join(f"{v:>26}" for v in watched_variants))
        for name in names:
            cells = []
            for variant in watched_variants:
                vals = [r["cpu"].get(name) for r in watched if r["variant"] == variant]
                vals = [v * 1000 for v in vals if v is not None]
                cells.append(f"{statistics.mean(vals):6.2f} [{' '.join(f'{v:.0f}' for v in vals)}]" if vals else "-")
            print(f"  {name:<30}" + "".join(f"{c:>26}" for c in cells))
        for variant in watched_variants:
            totals = [sum(v for v in r["cpu"].values() if v is not None) for r in watched if r["variant"] == variant]
            share = [x / _live.NPROC * 100 for x in totals]
            print(f"  total {variant:<13} {statistics.mean(totals) * 1000:6.2f} ms/s = {statistics.mean(share):.2f} % of the machine "
                  f"({_live.NPROC} cores; per round {' '.join(f'{x:.2f}' for x in share)} %; "
                  f"target <= 1 %: {'met' if statistics.mean(share) <= 1.0 else 'NOT met'})")
        cnames: list[str] = []
        for r in watched:
            cnames += [n for n in r.get("collectors", {}) if n not in cnames]
        if cnames:
            print("  the benchwatch exporter by collector (its self-metric benchwatch_exporter_collector_cpu_seconds_total: "
                  "polls and the collector's own threads; the rest is its HTTP server and the interpreter):")
            for name in cnames:
                cells = []
                for variant in watched_variants:
                    vals = [r["collectors"][name] * 1000 for r in watched if r["variant"] == variant and name in r["collectors"]]
                    cells.append(f"{statistics.mean(vals):6.2f} [{' '.join(f'{v:.1f}' for v in vals)}]" if vals else "-")
                print(f"    {name:<28}" + "".join(f"{c:>26}" for c in cells))
        startups = [r["wrapper_startup"] for r in watched if r["wrapper_startup"] is not None]
        if startups:
            print(f"  one-off per run: benchwatch run start-up (bash, Python, pgbench --version, psql x2) "
                  f"{statistics.median(startups) * 1000:.0f} ms CPU (median)")
        churned = sorted({c for r in watched for c in r["backends_churned"]})
        if churned:
            print(f"  WARNING: database sessions of {churned} changed inside a window: their backends' CPU is undercounted")
    busy = {v: [r["machine_busy"] * 100 for r in results if r["variant"] == v] for v in variants}
    print("  machine busy during the windows (everything: pgbench, PostgreSQL, watchers, other users): "
          + "  ".join(f"{v} {statistics.mean(b):.0f} %" for v, b in busy.items() if b))

    if "bare" not in variants:
        return
    print("\nTPS, each watched run against the bare run of its round (ratio watched/bare):")
    by_round: dict[int, dict[str, float]] = {}
    for r in results:
        by_round.setdefault(r["round"], {})[r["variant"]] = r["tps"]
    for rn, tps in sorted(by_round.items()):
        parts = [f"{v} {tps[v]:7.1f}" for v in variants if v in tps]
        ratios = [f"{v}/bare {tps[v] / tps['bare']:.3f}" for v in watched_variants if v in tps and "bare" in tps]
        print(f"  round {rn}: " + "  ".join(parts) + "   " + "  ".join(ratios))
    for v in watched_variants:
        ratios = [t[v] / t["bare"] for t in by_round.values() if v in t and "bare" in t]
        if ratios:
            print(f"  {v}/bare: {spread(ratios)}  (n={len(ratios)}){confidence(ratios)}")
    bare = [t["bare"] for t in by_round.values() if "bare" in t]
    if len(bare) > 1:
        print(f"  run-to-run noise of bare alone: stdev {statistics.stdev(bare) / statistics.mean(bare) * 100:.1f} % of its mean")


def cost_index(results: list[dict], variant: str = "ours") -> tuple[float, float, list[float]] | None:
    """The figure a check compares: the whole stack's CPU per second of run in units of the calibration loop's
    CPU time measured right after the same window (a ratio of two CPU times of one moment, not a time), the
    mean over rounds; with the mean ms/s and the per-round indexes."""
    rounds = [r for r in results if r["variant"] == variant and r.get("calibration")]
    if not rounds:
        return None
    totals = [sum(v for v in r["cpu"].values() if v is not None) for r in rounds]
    indexes = [t / r["calibration"] for t, r in zip(totals, rounds, strict=True)]
    return statistics.mean(indexes), statistics.mean(totals) * 1000, indexes


def check(results: list[dict], args: argparse.Namespace) -> int:
    """Prints the final figure; with --check compares it with the recorded one, with --record records it."""
    import json

    got = cost_index(results)
    if got is None:
        return 0
    index, ms, indexes = got
    cal = statistics.median(r["calibration"] for r in results if r.get("calibration"))
    print(f"\nFINAL: the whole stack at 1 s resolution {ms:.2f} ms of CPU per second of run "
          f"= {ms / 10 / _live.NPROC:.2f} % of the machine; cost index {index:.3f} "
          f"(stack CPU per second / CPU of the calibration loop, {cal * 1000:.1f} ms here; per round "
          f"{' '.join(f'{x:.3f}' for x in indexes)})")
    if args.record:
        with open(REFERENCE, "w", encoding="utf-8") as f:
            json.dump({"index": round(index, 4), "ms_per_s": round(ms, 2), "rounds": len(indexes),
                       "calibration_ms": round(cal * 1000, 2), "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "tolerance": args.tolerance}, f, indent=2)
            f.write("\n")
        print(f"recorded in {os.path.relpath(REFERENCE)}")
    if args.check:
        try:
            with open(REFERENCE, encoding="utf-8") as f:
                ref = json.load(f)
        except (OSError, ValueError) as e:
            print(f"CHECK FAILED: no recorded figure to compare with ({e}); record one with --record")
            return 2
        limit = ref["index"] * (1 + args.tolerance)
        if index > limit:
            print(f"CHECK FAILED: cost index {index:.3f} > recorded {ref['index']:.3f} + {args.tolerance:.0%} = {limit:.3f}: "
                  f"watching got dearer (see the breakdown above)")
            return 1
        print(f"CHECK OK: cost index {index:.3f} <= recorded {ref['index']:.3f} + {args.tolerance:.0%} = {limit:.3f}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=20, help="length of each pgbench run (default 20)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the variants (default 5; 0 with --breakdown: the breakdown only)")
    parser.add_argument("--variants", default=DEFAULT_VARIANTS,
                        help=f"comma-separated, from {', '.join(VARIANTS)} (default {DEFAULT_VARIANTS})")
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--scale", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=5, help="seconds of pgbench before the rounds (default 5)")
    parser.add_argument("--breakdown", action="store_true", help="add where the CPU goes and what each option saves")
    parser.add_argument("--check", action="store_true",
                        help=f"compare the cost index with the recorded one ({os.path.basename(REFERENCE)}); exit 1 when dearer")
    parser.add_argument("--record", action="store_true", help="record this run's cost index as the reference")
    parser.add_argument("--tolerance", type=float, default=0.35,
                        help="how much dearer than the recorded index --check lets pass (default 0.35: 35 %%)")
    parser.add_argument("--parts", default="1,2,3", help="which parts of the breakdown (default 1,2,3)")
    parser.add_argument("--scrapes", type=int, default=100, help="scrapes per variant in the breakdown (default 100)")
    parser.add_argument("--window", type=float, default=15.0, help="seconds per configuration in the breakdown's CPU windows (default 15)")
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        parser.error(f"unknown variants {unknown}: choose from {', '.join(VARIANTS)}")
    if args.seconds < 5:
        parser.error("--seconds must be at least 5")
    if args.rounds < 1 and not args.breakdown:
        parser.error("--rounds 0 only with --breakdown")

    print("benchwatch cost-of-watching benchmark")
    print(f"{_live.NPROC} cores; {_live.loadavg()} before; pgbench -n -c {args.clients} -j {args.threads} "
          f"-T {args.seconds} -P 1 at scale {args.scale}; {args.rounds} rounds of {'/'.join(variants)}, order rotating")
    for v in variants:
        print(f"  {v:<13} {VARIANTS[v]}")
    results: list[dict] = []
    status = 0
    if (args.check or args.record) and "ours" not in variants:
        parser.error("--check and --record compare the 'ours' variant: include it in --variants")
    with _live.BenchStack(scale=args.scale, stack_cls=VariantStack) as live, tempfile.TemporaryDirectory(prefix="benchwatch-bench-") as tmp:
        bench = CostBench(live, args, tmp)
        for c in ("node_exporter", "postgres_exporter"):
            argv = processes.process_cmdline(live.stack.pid(c))
            print(f"  ours: {c} {' '.join(a for a in argv[1:] if not a.startswith('--web.listen'))}")
        live.pgbench("-n", "-c", str(args.clients), "-j", str(args.threads), "-T", str(args.warmup), timeout=args.warmup + 60)
        for rn in range(1, args.rounds + 1):
            k = (rn - 1) % len(variants)
            for variant in variants[k:] + variants[:k]:
                r = bench.run(variant, rn)
                results.append(r)
                total = sum(v for v in r["cpu"].values() if v is not None) if r["variant"] != "bare" else None
                print(f"  round {rn} {variant:<13} tps {r['tps']:7.1f}  window {r['window']:.1f} s"
                      + (f"  watching {total * 1000:6.1f} ms/s = {total / _live.NPROC * 100:.2f} % of the machine" if total is not None else "")
                      + f"  machine busy {r['machine_busy'] * 100:.0f} %  {_live.loadavg()}", flush=True)
        if results:
            report(results, variants)
            status = check(results, args)
        if args.breakdown:
            bench.configure("ours")
            parts = set(args.parts.split(","))
            if "1" in parts:
                scrape_breakdown(live, args.scrapes, tmp)
            if "2" in parts:
                prometheus_breakdown(live, args.window)
            if "3" in parts:
                exporter_breakdown(live, args.window, tmp)
    print(f"\n{_live.loadavg()} after")
    return status


if __name__ == "__main__":
    _live.run_main(main)
