"""Benchmark: how long from a pgbench progress line to the sample being queryable in Prometheus.

Run from the repository root::

    .venv/bin/python bench/bench_line_latency.py [--seconds 40]

Starts its own native stack (temporary state dir, free ports), then runs
``./benchwatch attach --quiet`` and plays pgbench itself: once a second it
writes a progress line with a unique tps value to attach's stdin and notes the
time, then polls every 10 ms

* the run's saved output (attach has written the line), and
* Prometheus ``/api/v1/query`` for ``benchmark_progress_tps{run_id=...}``,

until the sample with that value is returned. The query is evaluated a minute
ahead so a sample stamped a few ms after the query moment still counts (the
sample's timestamp is pgbench's clock: start of the run + elapsed).
Lines are paced one a second, each up to 0.4 s late (seeded random), so they
meet the exporter's poll loop at every phase. The first --warmup lines are
reported apart: they include the exporter discovering the new run directory
(when the runs directory's mtime moves; a 0.5 s rescan alone took up to 450 ms). --exporter-poll S repeats the measurement with the
exporter restarted with POLL_INTERVAL_S = S (the latency side of the
cost-of-watching option of polling less often).
Target: median and p95 at most 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _live
from benchwatch.util import processes

POLL_S = 0.010
TIMEOUT_S = 10.0
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def latest_tps(prometheus: str, run_id: str) -> float | None:
    params = urllib.parse.urlencode({"query": f'benchmark_progress_tps{{run_id="{run_id}"}}',
                                     "time": f"{time.time() + 60:.3f}"})
    with _OPENER.open(f"{prometheus}/api/v1/query?{params}", timeout=2) as r:
        result = json.load(r)["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def find_run_dir(runs_dir: str, pid: int, timeout: float = 30.0) -> str:
    found: list[str] = []

    def check() -> bool:
        for name in sorted(os.listdir(runs_dir)) if os.path.isdir(runs_dir) else []:
            try:
                with open(os.path.join(runs_dir, name, "meta.json"), encoding="utf-8") as f:
                    if json.load(f).get("pid") == pid:
                        found.append(os.path.join(runs_dir, name))
                        return True
            except (FileNotFoundError, ValueError):
                continue
        return False

    if not processes.wait_until(check, timeout, 0.02):
        raise RuntimeError("attach never created its run directory")
    return found[0]


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def summary(label: str, values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return (f"  {label:<34} n={len(ms):<3} median {statistics.median(ms):7.1f} ms  "
            f"p95 {percentile(ms, 95):7.1f} ms  max {max(ms):7.1f} ms  min {min(ms):6.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=40, help="measured progress lines, one per second (default 40)")
    parser.add_argument("--warmup", type=int, default=2, help="first lines reported apart (default 2)")
    parser.add_argument("--exporter-poll", type=float, action="append", default=[],
                        help="also measure with the exporter's POLL_INTERVAL_S set to this (repeatable; "
                             "the exporter is restarted with it, the code is not changed)")
    args = parser.parse_args()
    if args.seconds < 1:
        parser.error("--seconds must be at least 1")

    print("benchwatch line-to-Prometheus latency benchmark")
    print(f"{os.cpu_count()} cores; {_live.loadavg()} before")
    with _live.BenchStack() as live, tempfile.TemporaryDirectory(prefix="benchwatch-bench-") as tmp:
        from benchwatch.exporter.server import POLL_INTERVAL_S

        ok = True
        for poll in [None] + args.exporter_poll:
            if poll is not None:
                live.set_exporter_poll(poll)
            print(f"\nexporter poll interval {poll if poll is not None else POLL_INTERVAL_S} s"
                  + (" (code default)" if poll is None else " (exporter restarted with it)"))
            ok = measure(live, tmp, args.seconds, args.warmup) and ok
    print(_live.loadavg() + " after")
    return 0 if ok else 1


def measure(live: _live.BenchStack, tmp: str, seconds: int, warmup: int) -> bool:
    """One attach run of warmup + seconds lines; prints the latencies; True if the target is met."""
    err_path = os.path.join(tmp, "attach.stderr")
    with open(err_path, "wb") as err:
        attach = subprocess.Popen([_live.BENCHWATCH, "attach", "--quiet", "--interval", "1"],
                                  stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err, env=live.env())
    try:
        run_dir = find_run_dir(os.path.join(live.state_dir, "runs"), attach.pid)
        run_id = os.path.basename(run_dir)
        output = os.path.join(run_dir, "output.log")
        print(f"attach pid {attach.pid}, run {run_id}; prometheus {live.prometheus}")
        saved_lat, seen_lat, query_ms = [], [], []
        written = 0
        start = time.time() + 0.5
        jitter = random.Random(1)
        for i in range(warmup + seconds):
            tps = 1000.0 + i + 0.5  # unique per line: the sample that answers is this line's
            line = (f"progress: {i + 1}.0 s, {tps:.1f} tps, lat {1 + i / 1000:.3f} ms stddev 0.100, 0 failed\n").encode()
            # Paced like pgbench -P 1, each line up to 0.4 s late, so that lines meet the exporter's
            # poll loop at every phase (a real run keeps one phase for its whole length).
            delay = start + i + jitter.uniform(0.0, 0.4) - time.time()
            if delay > 0:
                time.sleep(delay)
            attach.stdin.write(line)
            attach.stdin.flush()
            t_write = time.time()
            written += len(line)
            t_saved = t_seen = None
            while time.time() - t_write < TIMEOUT_S:
                if t_saved is None and os.path.getsize(output) >= written:
                    t_saved = time.time()
                q0 = time.perf_counter()
                value = latest_tps(live.prometheus, run_id)
                query_ms.append((time.perf_counter() - q0) * 1000)
                if value == tps:
                    t_seen = time.time()
                    break
                time.sleep(POLL_S)
            if t_seen is None:
                print(f"  line {i + 1}: not queryable after {TIMEOUT_S:.0f} s")
                return False
            saved_lat.append((t_saved or t_seen) - t_write)
            seen_lat.append(t_seen - t_write)
        attach.stdin.close()
        attach.wait(timeout=30)
    finally:
        if attach.poll() is None:
            processes.stop_pid(attach.pid)

    w = warmup
    print(f"progress line written -> sample returned by /api/v1/query (poll every {POLL_S * 1000:.0f} ms; "
          f"a query took median {statistics.median(query_ms):.1f} ms):")
    if w:
        print(summary(f"first {w} lines (run discovery)", seen_lat[:w]))
    print(summary("line -> queryable", seen_lat[w:]))
    print(summary("  of which line -> saved by attach", saved_lat[w:]))
    print(summary("  of which saved -> queryable", [b - a for a, b in zip(saved_lat[w:], seen_lat[w:])]))
    ok = statistics.median(seen_lat[w:]) <= 1.0 and percentile(seen_lat[w:], 95) <= 1.0
    print(f"target <= 1 s: {'met' if ok else 'NOT met'}")
    return ok


if __name__ == "__main__":
    _live.run_main(main)
