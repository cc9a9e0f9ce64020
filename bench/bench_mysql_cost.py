"""Benchmark: what watching one MariaDB target costs at the 1 s scrape.

Run from the repository root::

    .venv/bin/python bench/bench_mysql_cost.py [--seconds 12] [--rounds 3]

Starts a stack with the embedded MariaDB 10.11 (``up --engine mariadb``, free
ports, a temporary state dir), then, each round, measures two windows side by
side (after a settling time each), so both see the same machine load:

* watched:   the ``mysql`` scrape job scrapes mysqld_exporter every second;
* unwatched: the job's target list is emptied (``targets/mysql.json``, read by
  Prometheus' file discovery), so nothing asks mysqld_exporter or the server.

The cost of the target is mysqld_exporter's CPU while watched, plus the
server's CPU above the unwatched window (the exporter's sessions: SHOW GLOBAL
STATUS, SHOW GLOBAL VARIABLES, information_schema.innodb_metrics), plus
Prometheus' CPU above the unwatched window (scrape, relabelling, the mysql.yml
rules, storage). CPU is utime+stime from /proc/<pid>/stat. The machine's load
average is printed with the results: it is shared, measure side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _live  # puts the repository on sys.path
from benchwatch.query import prometheus
from benchwatch.stack.config import load_config
from benchwatch.stack.native import Stack
from benchwatch.util import net
from tests.helpers import throwaway

SETTLE_S = 5.0


def window(pids: dict[str, int], seconds: float) -> dict[str, float]:
    """ms of CPU per second of each process over ``seconds``."""
    before = {k: _live.cpu_seconds(p) or 0.0 for k, p in pids.items()}
    t = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - t
    return {k: ((_live.cpu_seconds(p) or 0.0) - before[k]) * 1000 / elapsed for k, p in pids.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    state_dir = throwaway.make_state_dir()
    live = throwaway.ThrowawayStack(Stack(load_config(state_dir, throwaway.free_ports(), engine="mariadb"),
                                          out=lambda m: print(m, file=sys.stderr)), state_dir)
    try:
        live.bring_up(None)
        stack = live.stack
        targets_file = stack.path("prometheus", "etc", "targets", "mysql.json")
        with open(targets_file, encoding="utf-8") as f:
            watched_targets = f.read()
        pids = {c: stack.pid(c) for c in ("mysqld_exporter", "mariadb", "prometheus")}
        base = stack.cfg.url("prometheus")
        time.sleep(SETTLE_S)
        _, body = net.http_get(stack.cfg.url("mysqld_exporter") + "/metrics", timeout=10)
        exposed = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
        rows = []
        loads = [_live.loadavg()]
        for r in range(args.rounds):
            with open(targets_file, "w", encoding="utf-8") as f:
                f.write(watched_targets)
            time.sleep(SETTLE_S)
            on = window(pids, args.seconds)
            if r == 0:  # what the job stores per scrape (after metric_relabel_configs), and the rules' series
                stored = prometheus.query(base, 'count({job="mysql", __name__=~"mysql_.*"})')
                recorded = prometheus.query(base, 'count({__name__=~"instance:mysql_.*"})')
            with open(targets_file, "w", encoding="utf-8") as f:
                json.dump([], f)
            time.sleep(SETTLE_S)
            off = window(pids, args.seconds)
            rows.append({"exporter": on["mysqld_exporter"], "server": on["mariadb"] - off["mariadb"],
                         "prometheus": on["prometheus"] - off["prometheus"],
                         "server_idle": off["mariadb"], "exporter_idle": off["mysqld_exporter"]})
            loads.append(_live.loadavg())
            print(f"round {r + 1}: " + ", ".join(f"{k} {v:.1f}" for k, v in rows[-1].items()), file=sys.stderr)
        mean = {k: statistics.fmean(row[k] for row in rows) for k in rows[0]}
        total = mean["exporter"] + mean["server"] + mean["prometheus"]
        print(f"MariaDB target at a 1 s scrape, {args.rounds} rounds of {args.seconds:g} s watched / unwatched, "
              f"{_live.NPROC} CPUs")
        print(f"series stored per target: {int(float(stored[0]['value'][1])) if stored else '?'} scraped"
              f" + {int(float(recorded[0]['value'][1])) if recorded else '?'} recorded (exposed by the exporter: {exposed})")
        print("| ms of CPU per second | mean | per round |")
        print("| --- | ---: | --- |")
        for key, label in (("exporter", "mysqld_exporter"), ("server", "mariadbd above unwatched (the exporter's sessions)"),
                           ("prometheus", "Prometheus above unwatched (scrape, relabel, mysql.yml rules, storage)")):
            print(f"| {label} | {mean[key]:.1f} | {' / '.join(f'{row[key]:.1f}' for row in rows)} |")
        print(f"| **total** | **{total:.1f}** | {total / (10 * _live.NPROC):.2f} % of the machine |")
        print(f"mariadbd unwatched: {mean['server_idle']:.1f} ms/s; mysqld_exporter unwatched: {mean['exporter_idle']:.1f} ms/s")
        print("load: " + " → ".join(loads))
        return 0
    finally:
        left = live.close()
        if left:
            print(f"still running: {left}", file=sys.stderr)


if __name__ == "__main__":
    _live.run_main(main)
