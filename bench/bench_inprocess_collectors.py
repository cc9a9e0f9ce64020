"""Benchmark: what the two 1 s exporters cost per scrape, against the same reading done in Python.

Run from the repository root::

    .venv/bin/python bench/bench_inprocess_collectors.py [--scrapes 300]

Issue 32 asks whether "one process for what is now several" would make watching cheaper: the benchwatch
exporter already wakes every second, reads /proc, holds a session on the server and remote-writes a batch.
This measures, side by side in one run on one throwaway server (the stack's own, its watchers stopped):

* postgres_exporter as the stack starts it (its flags, the queries file for the server's version), scraped
  back to back: its CPU and its server sessions' CPU per scrape; then the same queries from Python (psycopg,
  one session, each query prepared after its fifth execution as psycopg does), each row turned into samples
  named as postgres_exporter names them, encoded and compressed as a remote-write request: this process's
  CPU and its server session's CPU per reading. Its bgwriter collector (a second session) is one query more
  there, ``pg_stat_bgwriter``'s counters as ``pg_stat_bgwriter_*_total``.
* node_exporter as the stack starts it, scraped as Prometheus does (``collect[]`` cpu, diskstats, pressure,
  gzip): its CPU per scrape; then /proc/stat, /proc/diskstats and /proc/pressure/* read with pread on
  descriptors kept open, turned into node_exporter's samples (node_cpu_seconds_total by cpu and mode, the
  eleven node_disk_*_total, the pressure totals), encoded and compressed: CPU per reading.

What this does not count: Prometheus' side. Scraping a target and ingesting the same samples by remote
write both cost it something; which costs more is not measured here. Nor the HTTP request the exporter would
send: it sends one a second already while a run is live, and the samples would join that batch.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import yaml

import _live
from bench_watch_cost import pg_exporter_env
from benchwatch.engines.postgresql import exporter_queries
from benchwatch.engines.postgresql.server import POSTGRES_EXPORTER_FLAGS
from benchwatch.model.samples import sample
from benchwatch.sink.wire import compress, encode_write_request
from benchwatch.stack.config import LISTEN_HOST
from benchwatch.stack.native import NODE_EXPORTER_FLAGS, NODE_FAST_COLLECTORS, binary
from benchwatch.util import net, processes

CLK_TCK = os.sysconf("SC_CLK_TCK")
CPU_MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
# /proc/diskstats fields (Documentation/admin-guide/iostats.rst) as node_exporter 1.5 names them, with the unit
# each is turned into (sectors of 512 bytes, milliseconds).
DISK_FIELDS = (("reads_completed", 3, 1.0), ("reads_merged", 4, 1.0), ("read_bytes", 5, 512.0),
               ("read_time_seconds", 6, 0.001), ("writes_completed", 7, 1.0), ("writes_merged", 8, 1.0),
               ("written_bytes", 9, 512.0), ("write_time_seconds", 10, 0.001), ("io_now", 11, 1.0),
               ("io_time_seconds", 12, 0.001), ("io_time_weighted_seconds", 13, 0.001))
SKIPPED_DEVICES = ("loop", "ram", "fd")
LABELS = {"host": "bench", "target": "local"}
BGWRITER = ("SELECT checkpoints_timed, checkpoints_req, checkpoint_write_time, checkpoint_sync_time, buffers_checkpoint, "
            "buffers_clean, maxwritten_clean, buffers_backend, buffers_backend_fsync, buffers_alloc FROM pg_stat_bgwriter")


def scrape_cpu(url: str, pids: list[int], scrapes: int, headers: dict[str, str]) -> tuple[float, float]:
    """CPU seconds per scrape of ``pids`` (the exporter, its sessions), and of the exporter alone."""
    request = urllib.request.Request(url, headers=headers)
    for _ in range(5):  # connections opened, caches warm
        urllib.request.urlopen(request, timeout=10).read()
    before = [_live.cpu_seconds(p) or 0.0 for p in pids]
    for _ in range(scrapes):
        urllib.request.urlopen(request, timeout=10).read()
    after = [_live.cpu_seconds(p) or 0.0 for p in pids]
    return (sum(after) - sum(before)) / scrapes, (after[0] - before[0]) / scrapes


def started(argv: list[str], env: dict[str, str], url: str):
    import subprocess

    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    if not processes.wait_until(lambda: net.http_ok(url), 20, 0.05, abort=lambda: proc.poll() is not None):
        processes.stop_pid(proc.pid)
        raise SystemExit(f"{argv[0]} did not start")
    return proc


def sessions_of(live: _live.BenchStack, pid: int) -> list[int]:
    ports = _live.socket_local_ports(pid, live.stack.cfg.ports["postgres"])
    if not ports:
        return []
    rows = live.psql(f"SELECT pid FROM pg_stat_activity WHERE client_port IN ({','.join(map(str, ports))})")
    return [int(p) for p in rows.split()]


class PythonServerReading:
    """The queries file's queries from one psycopg session, as samples named as postgres_exporter names them."""

    def __init__(self, queries_path: str, env: dict[str, str]):
        import psycopg

        with open(queries_path, encoding="utf-8") as f:
            spec = yaml.safe_load(f)
        self.queries = []
        for name, q in spec.items():
            usage = {col: m["usage"] for entry in q["metrics"] for col, m in entry.items()}
            self.queries.append((name, q["query"], usage))
        # postgres_exporter's bgwriter collector: every column a counter but stats_reset.
        self.queries.append(("pg_stat_bgwriter", BGWRITER, {}))
        conninfo = {k: env[v] for k, v in (("host", "PGHOST"), ("port", "PGPORT"), ("user", "PGUSER"),
                                            ("dbname", "PGDATABASE"), ("passfile", "PGPASSFILE")) if v in env}
        self.conn = psycopg.connect(autocommit=True, **conninfo)
        self.backend = self.conn.execute("SELECT pg_backend_pid()").fetchone()[0]

    def read(self) -> tuple[bytes, int]:
        now = int(time.time() * 1000)
        out = []
        for name, sql, usage in self.queries:
            cur = self.conn.execute(sql)
            columns = [d.name for d in cur.description or ()]
            for row in cur.fetchall():
                labels = dict(LABELS)
                labels.update((c, "" if v is None else str(v)) for c, v in zip(columns, row) if usage.get(c) == "LABEL")
                for c, v in zip(columns, row):
                    if not usage and isinstance(v, (int, float)):
                        out.append(sample(f"{name}_{c}_total", labels, float(v), now))
                    elif usage.get(c) in ("GAUGE", "COUNTER") and v is not None:
                        out.append(sample(f"{name}_{c}", labels, float(v), now))
        return compress(encode_write_request(out)), len(out)


class PythonHostReading:
    """What node_exporter's cpu, diskstats and pressure collectors give, from /proc, descriptors kept open."""

    def __init__(self) -> None:
        self.stat = os.open("/proc/stat", os.O_RDONLY)
        self.disks = os.open("/proc/diskstats", os.O_RDONLY)
        self.pressure = {r: os.open(f"/proc/pressure/{r}", os.O_RDONLY) for r in ("cpu", "io", "memory")
                         if os.path.exists(f"/proc/pressure/{r}")}

    def read(self) -> tuple[bytes, int]:
        now = int(time.time() * 1000)
        out = []
        for line in os.pread(self.stat, 1 << 16, 0).decode().splitlines():
            if line.startswith("cpu") and line[3:4].isdigit():
                fields = line.split()
                cpu = fields[0][3:]
                for mode, value in zip(CPU_MODES, fields[1:9]):
                    out.append(sample("node_cpu_seconds_total", dict(LABELS, cpu=cpu, mode=mode), int(value) / CLK_TCK, now))
        for line in os.pread(self.disks, 1 << 16, 0).decode().splitlines():
            fields = line.split()
            if len(fields) < 14 or fields[2].startswith(SKIPPED_DEVICES):
                continue
            for metric, index, scale in DISK_FIELDS:
                out.append(sample(f"node_disk_{metric}_total", dict(LABELS, device=fields[2]), int(fields[index]) * scale, now))
        for resource, fd in self.pressure.items():
            for line in os.pread(fd, 4096, 0).decode().splitlines():
                kind, *pairs = line.split()
                total_s = int(pairs[-1].split("=", 1)[1]) / 1e6
                out.append(sample(f"node_pressure_{resource}_{'waiting' if kind == 'some' else 'stalled'}_seconds_total",
                                  LABELS, total_s, now))
        return compress(encode_write_request(out)), len(out)


def reading_cpu(read, scrapes: int, backend: int | None = None) -> tuple[float, float, int]:
    """CPU seconds per reading of this process and of the server session ``backend``; samples per reading."""
    for _ in range(5):
        read()  # psycopg prepares each query at its fifth execution
    b0 = _live.cpu_seconds(backend) or 0.0 if backend else 0.0
    c0 = time.process_time()
    n = 0
    for _ in range(scrapes):
        _, n = read()
    cpu = (time.process_time() - c0) / scrapes
    b1 = _live.cpu_seconds(backend) or 0.0 if backend else 0.0
    return cpu, (b1 - b0) / scrapes, n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scrapes", type=int, default=300, help="scrapes (readings) per measurement")
    args = parser.parse_args()
    with _live.BenchStack(scale=1) as live:
        stack = live.stack
        live.stop_watchers()  # nothing else scrapes or queries the server meanwhile
        tmp = stack.path("bench")
        os.makedirs(tmp, exist_ok=True)
        queries = exporter_queries.for_server(stack.server.pg_params(), os.path.join(tmp, "queries.yaml"))
        env = pg_exporter_env(stack)
        print(f"{args.scrapes} scrapes (readings) back to back each; ms of CPU per scrape = ms/s at a 1 s scrape; "
              f"{_live.loadavg()}")

        port = net.free_port()
        url = f"http://{LISTEN_HOST}:{port}/metrics"
        proc = started([binary("postgres_exporter"), f"--web.listen-address={LISTEN_HOST}:{port}",
                        f"--extend.query-path={queries}", *POSTGRES_EXPORTER_FLAGS], env, url)
        try:
            pids = [proc.pid, *sessions_of(live, proc.pid)]
            both, alone = scrape_cpu(url, pids, args.scrapes, {"Accept-Encoding": "gzip"})
        finally:
            processes.stop_pid(proc.pid)
        python = PythonServerReading(queries, live.pg_env())
        py, backend, n = reading_cpu(python.read, args.scrapes, python.backend)
        python.conn.close()
        print(f"  server   postgres_exporter {alone * 1000:5.2f} + its {len(pids) - 1} sessions {(both - alone) * 1000:5.2f} "
              f"= {both * 1000:5.2f} ms   python {py * 1000:5.2f} + its session {backend * 1000:5.2f} = "
              f"{(py + backend) * 1000:5.2f} ms ({n} samples)   ratio {(py + backend) / both:.2f}")

        port = net.free_port()
        url = f"http://{LISTEN_HOST}:{port}/metrics"
        proc = started([binary("node_exporter"), f"--web.listen-address={LISTEN_HOST}:{port}", *NODE_EXPORTER_FLAGS],
                       stack.base_env(), url)
        try:
            query = "&".join(f"collect[]={c}" for c in NODE_FAST_COLLECTORS)
            node, _ = scrape_cpu(f"{url}?{query}", [proc.pid], args.scrapes, {"Accept-Encoding": "gzip"})
        finally:
            processes.stop_pid(proc.pid)
        py, _, n = reading_cpu(PythonHostReading().read, args.scrapes)
        print(f"  host     node_exporter {node * 1000:5.2f} ms   python {py * 1000:5.2f} ms ({n} samples)   "
              f"ratio {py / node:.2f}")
    return 0


if __name__ == "__main__":
    _live.run_main(main)
