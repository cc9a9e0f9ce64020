"""Benchmark: remote-write encoding throughput and end-to-end import time.

Run from the repository root::

    .venv/bin/python bench/bench_remote_write.py [--samples 500000]

Builds a synthetic ~9-hour pgbench run (15 series sampled every second, as
the run model emits), then prints

* encode throughput of ``encode_write_request`` (samples/s, best of 3),
  snappy compression time and OpenMetrics writing throughput;
* end-to-end time to remote-write all samples to a real Prometheus (started
  and stopped here, on 127.0.0.1, in a temporary directory) in batches of
  several sizes, checking that Prometheus holds every sample afterwards.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchwatch.model.samples import sample
from benchwatch.sink.openmetrics import write_openmetrics
from benchwatch.sink.remote_write import RemoteWriter, compress, encode_write_request
from tests.helpers.prometheus import REMOTE_WRITE_CONFIG, query, start_prometheus

METRICS = (
    "bench_progress_tps",
    "bench_progress_latency_ms",
    "bench_progress_latency_stddev_ms",
    "bench_progress_lag_ms",
    "bench_xacts_total",
)
CLIENT_GROUPS = ("0", "1", "2")  # 5 metrics x 3 label sets = 15 series, one sample each per second


def make_run(n_samples: int, end_ms: int, run: str) -> list:
    per_second = len(METRICS) * len(CLIENT_GROUPS)
    seconds = -(-n_samples // per_second)
    start_ms = (end_ms // 1000 - seconds) * 1000
    out = []
    for sec in range(seconds):
        ts = start_ms + sec * 1000
        for m_i, metric in enumerate(METRICS):
            for group in CLIENT_GROUPS:
                value = sec * 3.0 if metric.endswith("_total") else 1000.0 + (sec * 7 + m_i * 13) % 101 / 4
                out.append(sample(metric, {"run": run, "host": "db1", "clients": group}, value, ts))
    return out[:n_samples]


def best_of(n: int, fn):
    best = float("inf")
    result = None
    for _ in range(n):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def stored_count(url: str, run: str, at_s: float, span_s: int) -> int:
    total = 0
    for metric in METRICS:
        result = query(url, f'sum(count_over_time({metric}{{run="{run}"}}[{span_s + 60}s]))', time=at_s)
        total += int(float(result[0]["value"][1])) if result else 0
    return total


def end_to_end(samples: list, batch: int, label: str) -> None:
    run = dict(samples[0].labels)["run"]
    directory = tempfile.mkdtemp(prefix="benchwatch-bench-")
    try:
        prom = start_prometheus(directory, REMOTE_WRITE_CONFIG, ["--web.enable-remote-write-receiver"])
        try:
            writer = RemoteWriter(prom.remote_write_url, max_batch=batch, timeout_s=60)
            t = time.perf_counter()
            writer.send(samples)
            elapsed = time.perf_counter() - t
            first, last = samples[0].timestamp_ms, samples[-1].timestamp_ms
            stored = stored_count(prom.url, run, last / 1000, (last - first) // 1000)
            requests = -(-len(samples) // batch)
            print(
                f"  {label:<24} batch {batch:>6}: {elapsed:6.2f} s  "
                f"{len(samples) / elapsed:>10,.0f} samples/s  ~{requests} requests  "
                f"stored {stored:,}/{len(samples):,}"
            )
        finally:
            prom.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=500_000)
    parser.add_argument("--batches", default="1000,5000,20000", help="comma-separated batch sizes")
    args = parser.parse_args()
    n = args.samples

    now_ms = int(time.time() * 1000)
    samples = make_run(n, now_ms, "recent")
    hours = (samples[-1].timestamp_ms - samples[0].timestamp_ms) / 3_600_000
    print(f"benchwatch remote-write benchmark: {n:,} samples, 15 series, {hours:.1f} h of 1 s data")
    print(f"python {sys.version.split()[0]}")

    enc_s, payload = best_of(3, lambda: encode_write_request(samples))
    comp_s, compressed = best_of(3, lambda: compress(payload))
    om_s, _ = best_of(3, lambda: write_openmetrics(samples, io.StringIO(), types={"bench_xacts": "counter"}))
    print("encoding (best of 3):")
    print(f"  encode_write_request   {enc_s:6.3f} s  {n / enc_s:>12,.0f} samples/s  {len(payload):,} bytes")
    print(f"  snappy compress        {comp_s:6.3f} s  {n / comp_s:>12,.0f} samples/s  {len(compressed):,} bytes")
    print(f"  write_openmetrics      {om_s:6.3f} s  {n / om_s:>12,.0f} samples/s")

    print("end-to-end remote write to a real Prometheus (send() incl. encoding, compression, HTTP):")
    for batch in (int(b) for b in args.batches.split(",")):
        end_to_end(samples, batch, "recent run")
    old = make_run(n, 1452074400000 + 10 * 3_600_000, "r2016")  # ends 2016-01-06T20:00Z
    end_to_end(old, 5000, "2016 run (out-of-order)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
