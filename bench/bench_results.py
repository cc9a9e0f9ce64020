"""Benchmark: the results database (issue 31: writing a run's record ≤ 50 ms; history over 10,000 runs ≤ 2 s).

Run from the repository root::

    .venv/bin/python bench/bench_results.py [--runs 10000] [--run RUN_DIR] [--before-src DIR] [--repeat N]

Starts a PostgreSQL of its own (the engine's results server, as the stack's own results database: a temporary
data directory, a free port on 127.0.0.1, stopped and removed after), then:

* writes one run's record 20 times (``Store.write_run``: the run directory read, every file gzip-compressed,
  one transaction replacing the run's rows), the run ``--run`` (default: tests/fixtures/snapshot's run, and a
  copy of it with 1.4 MB of archived series, the size of a 5-minute run's); prints the median and worst;
* writes --runs records of 20 workloads on 3 hosts (meta.json as ``benchwatch run`` leaves it, the figures
  history reads, no files: they are not read by history), then times ``benchwatch history --all-hosts`` in this
  process: the runs read from the database and pooled (the workload listing), and the history of the workload
  holding half of them (series, change points, what changed); and the same commands end to end through the
  CLI (its start-up included), the median of --repeat runs of each.

``--before-src DIR`` times the CLI also with another version's package (DIR is a ``src`` directory, e.g. from
``git archive <commit> src | tar -x -C /tmp/before``; put first on PYTHONPATH, ahead of this checkout's), the two
versions taking turns, so that a change's figures before and after are taken in one run at one load.
"""

from __future__ import annotations

import argparse
import os
import platform
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchwatch import engines
from benchwatch.history import index, report, workload
from benchwatch.record import rundir
from benchwatch.results import dsn as results_dsn
from benchwatch.results import record
from benchwatch.results.store import UPSERT_RUN, Store
from benchwatch.util import net
from benchwatch.util.private import write_private
from benchwatch.util.processes import wait_until

FIXTURE_RUN = os.path.join(ROOT, "tests", "fixtures", "snapshot", "20261122T181310Z-ece8")
SETTINGS = {f"setting_{i}": str(i) for i in range(40)}


class Server:
    def __init__(self) -> None:
        server = engines.results_server()
        assert server is not None and server.program(), "PostgreSQL is not installed"
        self.home = tempfile.mkdtemp(prefix="benchwatch-bench-results-", dir="/tmp")
        os.chmod(self.home, 0o755)
        data = os.path.join(self.home, "pg", "data")
        password = secrets.token_urlsafe(18)
        server.init(data, password, os.path.join(self.home, "pg"), {"PATH": os.environ["PATH"]})
        pgpass = os.path.join(self.home, "pgpass")
        write_private(pgpass, f"127.0.0.1:*:*:postgres:{password}\n")
        port = net.free_port()
        self.dsn = results_dsn.local(port, pgpass, dbname="postgres")
        user = server.user()
        self.proc = subprocess.Popen(server.argv(data, port, os.path.join(self.home, "socket")), user=user, group=user,
                                     extra_groups=[] if user else None, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, cwd=self.home)

        def ready() -> bool:
            try:
                Store(self.dsn).connect().close()
                return True
            except Exception:
                return False

        assert wait_until(ready, 60, 0.2), "PostgreSQL did not start"

    def close(self) -> None:
        self.proc.send_signal(2)
        self.proc.wait(60)
        shutil.rmtree(self.home, ignore_errors=True)


def with_series(src: str, dst: str, size: int = 1_400_000) -> str:
    """A copy of ``src`` whose archived series weigh ``size`` bytes (the fixture's CSVs repeated)."""
    shutil.copytree(src, dst)
    series = os.path.join(dst, "series")
    names = sorted(n for n in os.listdir(series) if n.endswith(".csv"))
    total = sum(os.path.getsize(os.path.join(series, n)) for n in names)
    for n in names:
        path = os.path.join(series, n)
        with open(path, "rb") as f:
            head, *rows = f.read().splitlines(keepends=True)
        body = b"".join(rows) * max(1, size // max(total, 1))
        with open(path, "wb") as f:
            f.write(head + body)
    return dst


def time_writes(store: Store, run_dir: str, into: str, times: int = 20) -> tuple[list[float], list[float], int, int]:
    """Writes ``times`` copies of the run, each under a run id of its own (a run is written once when it ends):
    the seconds of reading and compressing it, and of the database's transaction, each; its bytes, stored bytes."""
    entry = index.read_entry(rundir.RunDir(run_dir))
    assert entry is not None
    pooled = workload.pooled_id(entry["key"])
    reading, writing = [], []
    rec = None
    for i in range(times):
        copy = os.path.join(into, f"{os.path.basename(run_dir.rstrip('/'))}-{i}")
        shutil.copytree(run_dir, copy)
        t = time.perf_counter()
        rec = record.read_run(copy, "bench-host", entry, pooled)
        reading.append(time.perf_counter() - t)
        t = time.perf_counter()
        store.write_record(rec)
        writing.append(time.perf_counter() - t)
    assert rec is not None
    return reading, writing, sum(f.size for f in rec.files), sum(len(f.data) for f in rec.files)


def fill(store: Store, n: int, workloads: int = 20, hosts: int = 3) -> str:
    """n records, half of them in one workload (with three steps in its TPS), the rest spread; returns that
    workload's pooled id."""
    rng = np.random.default_rng(7)
    base = 1_700_000_000.0
    big_key = None
    conn = store.connect()
    with conn.transaction(), conn.cursor() as cur:
        for i in range(n):
            w = 0 if i % 2 == 0 else 1 + i % (workloads - 1)
            host = f"host-{i % hosts}"
            clients = 1 + w
            key = {"tool": "pgbench", "script": "tpcb-like", "clients": str(clients), "threads": "1", "scale": "10",
                   "engine": "postgresql", "host": host}
            tps = 1000.0 * (1 + 0.1 * (i * 3 // n)) + rng.normal(0, 20) if w == 0 else 500 + rng.normal(0, 20)
            started = base + i * 60
            meta = {"run_id": f"r{i:06d}", "tool": "pgbench", "engine": "postgresql", "state": "finished",
                    "argv": ["pgbench", "-c", str(clients), "-T", "60", "-P", "1"], "hostname": host,
                    "started_at": started, "ended_at": started + 60, "exit_code": 0, "pgbench_version": "15.5",
                    "server_version": "15.5", "settings": SETTINGS, "scale": 10}
            rec = record.RunRecord(run_id=meta["run_id"], host=host, meta=meta, summary={"tps": tps},
                                   workload=workload.workload_id(key), pooled_workload=workload.pooled_id(key),
                                   workload_key=key, figures={"tps": tps, "latency_avg_ms": 1000 / tps})
            if w == 0:
                big_key = workload.pooled_id(key)
            cur.execute(UPSERT_RUN, rec.row())
    assert big_key is not None
    return big_key


def cli(args: list[str], env: dict[str, str], src: str | None = None) -> float:
    if src is not None:
        env = dict(env, PYTHONPATH=src)
    t = time.perf_counter()
    r = subprocess.run([os.path.join(ROOT, "benchwatch"), *args], env=env, capture_output=True, timeout=300)
    took = time.perf_counter() - t
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return took


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=10_000)
    p.add_argument("--run", help="a run directory to write (default: the fixture and its 1.4 MB-series copy)")
    p.add_argument("--before-src", help="another version's src directory: its CLI timed too, taking turns")
    p.add_argument("--repeat", type=int, default=1, help="CLI runs of each command (the median is printed)")
    args = p.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()[0]:.1f}, {platform.python_version()}, "
          f"{os.cpu_count()} CPUs")
    server = Server()
    tmp = tempfile.mkdtemp(prefix="benchwatch-bench-results-runs-")
    try:
        with Store(server.dsn) as store:
            runs = [args.run] if args.run else [FIXTURE_RUN, with_series(FIXTURE_RUN, os.path.join(tmp, "big"))]
            for n, run in enumerate(runs):
                reading, writing, size, stored = time_writes(store, run, os.path.join(tmp, f"copies-{n}"))
                total = [r + w for r, w in zip(reading, writing, strict=True)]
                print(f"write a run's record ({size / 1e6:.2f} MB of files, {stored / 1e6:.2f} MB stored): median "
                      f"{statistics.median(total) * 1000:.1f} ms (read and compress {statistics.median(reading) * 1000:.1f}, "
                      f"the transaction {statistics.median(writing) * 1000:.1f}), worst {max(total) * 1000:.1f} ms "
                      "(target ≤ 50 ms)")
            store.connect().execute("TRUNCATE runs CASCADE")
            store.connect().commit()
            t = time.perf_counter()
            big = fill(store, args.runs)
            print(f"filled {args.runs} runs in {time.perf_counter() - t:.1f} s")

            t = time.perf_counter()
            entries = index.pooled(store.runs(), [], "bench-host")
            hist = report.History(os.path.join(tmp, "runs"), os.path.join(tmp, "history"), meta_of=store.meta)
            listing = hist.workloads(entries)
            took_list = time.perf_counter() - t
            t = time.perf_counter()
            stored = store.runs()
            took_read = time.perf_counter() - t
            entries = index.pooled(stored, [], "bench-host")
            took_pool = time.perf_counter() - t - took_read
            series = report.series(hist, big, "tps", entries)
            took_series = time.perf_counter() - t
            print(f"history --all-hosts, in process: the workloads ({len(listing)}) {took_list:.2f} s; the workload of "
                  f"{len(series['runs'])} runs ({len(series['change_points'])} change points) {took_series:.2f} s "
                  f"(the runs read {took_read:.2f} s, pooled {took_pool:.2f} s, series and change points "
                  f"{took_series - took_read - took_pool:.2f} s) (target ≤ 2 s)")
        state = os.path.join(tmp, "state")
        os.makedirs(state)
        env = dict(os.environ, BENCHWATCH_STATE_DIR=state, BENCHWATCH_RESULTS_DSN=server.dsn)
        versions = {"this checkout": None} | ({f"--before-src {args.before_src}": args.before_src} if args.before_src else {})
        commands = {"the workloads": ["history", "--all-hosts", "--json"], "the workload": ["history", big, "--all-hosts", "--json"]}
        took: dict[tuple[str, str], list[float]] = {(v, c): [] for v in versions for c in commands}
        for _ in range(args.repeat):
            for c, argv in commands.items():
                for v, src in versions.items():
                    took[v, c].append(cli(argv, env, src))
        for v in versions:
            print(f"history --all-hosts --json, the CLI end to end ({v}, median of {args.repeat}): "
                  + "; ".join(f"{c} {statistics.median(took[v, c]):.2f} s" for c in commands))
    finally:
        server.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
