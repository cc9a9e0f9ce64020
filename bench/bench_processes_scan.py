"""Benchmark: the CPU one scan of the exporter's processes collector costs (issue 23).

Run from the repository root::

    .venv/bin/python bench/bench_processes_scan.py [--scans 200]

Reads /proc the way the collector does (every process's stat, the uptime) and turns it into the
groups' CPU time and the busiest processes, --scans times back to back; prints the CPU per scan
(process time, so other load on the machine does not count) with the number of processes seen,
and what that costs at the collector's interval as a share of the machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from benchwatch.exporter import processes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scans", type=int, default=200)
    args = parser.parse_args()
    groups = processes.CpuGroups(processes.server_process_names(), processes.load_generator_names())
    groups.feed(processes.read_proc(), time.time(), processes.uptime())
    costs = []
    seen = 0
    for _ in range(args.scans):
        t0 = time.process_time()
        procs = processes.read_proc()
        groups.feed(procs, time.time(), processes.uptime())
        costs.append(time.process_time() - t0)
        seen = len(procs)
    per_scan = statistics.fmean(costs)
    per_s = per_scan / processes.EVERY_S
    cores = os.cpu_count() or 1
    print(f"processes seen: {seen}; {args.scans} scans")
    print(f"CPU per scan: mean {per_scan * 1000:.2f} ms, median {statistics.median(costs) * 1000:.2f} ms "
          f"({per_scan / max(seen, 1) * 1e6:.1f} us per process)")
    print(f"every {processes.EVERY_S:.0f} s: {per_s * 1000:.2f} ms/s = {per_s / cores * 100:.3f} % of the machine ({cores} cores)")


if __name__ == "__main__":
    main()
