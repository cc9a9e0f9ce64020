"""A long run at -P 1 (default one hour): exporter RSS and open files stay flat, every progress line is stored.

    .venv/bin/python bench/bench_soak.py [--seconds 3600] [--every 60] [--rate 200]

Starts its own stack (bench/_live.py), runs `benchwatch run -- pgbench -T SECONDS -P 1 -R RATE`,
and every --every seconds prints the exporter's RSS (KiB), open file descriptors, the
remote-write backlog and the supervisor's restart count. At the end: printed progress lines
vs samples stored in Prometheus (benchmark_progress_tps, values compared), and the RSS / fd drift
between the first and the last quarter of the run.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

from _live import BENCHWATCH, BenchStack, loadavg
from benchwatch.query.prometheus import query
from benchwatch.util import processes

PROGRESS = re.compile(rb"^progress: ([0-9.]+) s, ([0-9.]+) tps")


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def scalar(url: str, expr: str) -> float | None:
    r = query(url, expr)
    return float(r[0]["value"][1]) if r else None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=3600)
    parser.add_argument("--every", type=float, default=60.0)
    parser.add_argument("--rate", type=int, default=200, help="pgbench -R: a steady load, not a saturated machine")
    args = parser.parse_args()
    print(loadavg())
    with BenchStack(scale=2) as live:
        stack = live.stack
        before = set(os.listdir(stack.cfg.runs_dir))
        proc = subprocess.Popen([BENCHWATCH, "run", "--", "pgbench", "-n", "-c", "2", "-R", str(args.rate),
                                 "-T", str(args.seconds), "-P", "1"], env=live.env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        start = time.monotonic()
        rows = []
        print(f"{'t (s)':>7} {'RSS KiB':>9} {'fds':>5} {'pending':>8} {'restarts':>8}")
        while proc.poll() is None:
            pid = stack.pid("benchwatch_exporter")
            if pid:
                pending = scalar(live.prometheus, "benchwatch_exporter_remote_write_pending_samples")
                restarts = sum(v.get("restarts", 0) for v in stack.restarts().values())
                row = (time.monotonic() - start, rss_kib(pid), open_fds(pid), pending, restarts)
                rows.append(row)
                print(f"{row[0]:7.0f} {row[1]:9d} {row[2]:5d} {row[3] if row[3] is not None else '-':>8} {row[4]:8d}",
                      flush=True)
            processes.wait_until(lambda: proc.poll() is not None, args.every, 0.5)
        (run_id,) = set(os.listdir(stack.cfg.runs_dir)) - before
        with open(os.path.join(stack.cfg.runs_dir, run_id, "stderr.log"), "rb") as f:
            printed = [float(m.group(2)) for m in map(PROGRESS.match, f) if m]

        def stored() -> list[float]:
            r = query(live.prometheus, f'benchmark_progress_tps{{run_id="{run_id}"}}[3h]')
            return [float(v) for _, v in r[0]["values"]] if r else []

        complete = processes.wait_until(lambda: stored() == printed, 30, 0.5)
        print(f"run {run_id}: {len(printed)} progress lines printed, {len(stored())} stored, "
              f"values equal: {complete}; pgbench exit code {proc.returncode}")
        if len(rows) >= 8:
            q = len(rows) // 4
            first, last = rows[:q], rows[-q:]
            for i, name in ((1, "RSS KiB"), (2, "open fds")):
                a = sum(r[i] for r in first) / len(first)
                b = sum(r[i] for r in last) / len(last)
                print(f"{name}: first quarter mean {a:.0f}, last quarter mean {b:.0f} ({(b - a) / a * 100:+.1f} %)")
    print(loadavg())
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
