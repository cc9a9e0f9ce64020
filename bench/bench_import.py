"""Benchmark: CPU time of importing the 12-hour, 21,600-line sysbench log (corpus file 012).

Run from the repository root::

    .venv/bin/python bench/bench_import.py [--passes 8] [--commands 3] [--no-live]

Two figures, the goal being under 1 s of CPU for the import (issue 20):

* in process, phase by phase, best and median of ``--passes``: reading the file as a paste and
  cutting it into runs (``read_saved``), replaying the run into samples (``replay_saved``), and
  encoding them as remote-write requests (protobuf + snappy, in the batches ``import`` sends),
  beside a bare ``bytes.split()`` over the same lines, the floor for any per-line work;
* the whole command, as a user runs it: ``benchwatch import FILE --start ...`` against a
  throwaway stack of its own (temporary state dir, free ports), ``--commands`` times; its CPU is
  the child's user + system time as the kernel accounts it (Python's start included), and
  Prometheus is asked afterwards whether every progress line is there. ``--no-live`` skips it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._live import BenchStack, loadavg, run_main

from benchwatch.record import replay
from benchwatch.sink import client, wire
from tests.helpers.corpus import CORPUS

FILE = os.path.join(CORPUS, "012_sysbench_1017_12h_2s_interval.txt")
START = "2016-01-06T10:00:00Z"
BATCH = 5000  # RemoteWriter's default max_batch, what `import` sends


def in_process(data: bytes) -> dict[str, float]:
    """CPU seconds of each phase of one import, in this process."""
    lines = data.split(b"\n")
    t0 = time.process_time()
    for line in lines:
        line.split()
    t1 = time.process_time()
    saved = replay.read_saved(data)
    t2 = time.process_time()
    reads, _ = replay.replay_saved(data, lambda k, s: f"bench-{k}", 1_452_074_400.0, saved=saved)
    t3 = time.process_time()
    samples = [s for r in reads for s in r.samples + r.model.end_markers()]
    items = samples if client._in_time_order(samples) else sorted(samples, key=client._timestamp_of)
    size = 0
    for batch in client._batches(items, BATCH):
        size += len(wire.compress(wire.encode_write_request(batch)))
    t4 = time.process_time()
    return {"reference": t1 - t0, "read and cut": t2 - t1, "replay": t3 - t2, "encode": t4 - t3,
            "import": t4 - t1, "samples": float(len(samples)), "bytes": float(size)}


def command_cpu(live: BenchStack) -> tuple[float, str]:
    """CPU seconds of one `benchwatch import` process, and the run id it printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([sys.executable, "-m", "benchwatch", "import", FILE, "--start", START],
                       env=live.env(), capture_output=True, timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(f"import exited {r.returncode}: {r.stderr.decode(errors='replace')[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, r.stdout.decode().split()[-1]


def stored_lines(live: BenchStack, run_id: str) -> int:
    query = f'count_over_time(benchmark_progress_tps{{run_id="{run_id}"}}[14h])'
    url = f"{live.prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": query, "time": "1452124800"})
    with urllib.request.urlopen(url, timeout=30) as resp:
        result = json.load(resp)["data"]["result"]
    return int(float(result[0]["value"][1])) if result else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=int, default=8)
    ap.add_argument("--commands", type=int, default=3)
    ap.add_argument("--no-live", action="store_true")
    args = ap.parse_args()
    with open(FILE, "rb") as f:
        data = f.read()
    newline = b"\n"
    print(f"{os.path.basename(FILE)}: {data.count(newline):,} lines, {len(data):,} bytes; {loadavg()}")
    passes = [in_process(data) for _ in range(max(3, args.passes))]
    print(f"in process, CPU seconds over {len(passes)} passes (best, median; ratio of best to the reference's):")
    ref = min(p["reference"] for p in passes)
    for key in ("reference", "read and cut", "replay", "encode", "import"):
        values = [p[key] for p in passes]
        print(f"  {key:<14} {min(values):7.3f} s best  {statistics.median(values):7.3f} s median  "
              f"{min(values) / ref:6.1f}x")
    print(f"  {int(passes[0]['samples']):,} samples, {int(passes[0]['bytes']):,} bytes of compressed requests")
    if args.no_live:
        return 0
    with BenchStack(scale=None) as live:
        cpus = []
        for _ in range(max(1, args.commands)):
            cpu, run_id = command_cpu(live)
            stored = stored_lines(live, run_id)
            cpus.append(cpu)
            print(f"  benchwatch import: {cpu:.3f} s CPU, run {run_id}: {stored:,} progress lines in Prometheus")
            if stored != 21_600:
                print("FAILED: Prometheus does not hold every progress line")
                return 1
        print(f"the whole command: {min(cpus):.3f} s CPU best, {statistics.median(cpus):.3f} s median "
              f"(Python's start and imports included); {loadavg()}")
    return 0


if __name__ == "__main__":
    run_main(main)
