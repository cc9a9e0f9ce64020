"""Benchmark: pgbench per-transaction log ingestion (benchwatch.loadgens.pgbench.txlog).

Run from the repository root::

    .venv/bin/python bench/bench_txlog.py [--lines 10000000] [--tps 20000]

Generates in memory a synthetic ``pgbench -l`` run shaped like a real one (16
clients on 2 threads, so two log files; built-in TPC-B lines ``client tx
latency 0 epoch usec`` of ~32 bytes; log-normal latencies around 1.5 ms with a
1 % tail up to 40 times slower): 8 distinct seconds per file, streamed again
and again with advancing epochs, so memory holds only those and the current
chunk.  Feeds it to ``TxlogAggregator`` in
1 MiB chunks of complete lines, alternating between the two files as a file
follower would, calling ``samples()`` after each round over the files (as a
follower's poll would, after feeding what every file had).  Prints, pinned to
one CPU:

* lines/s of the aggregator (feed + samples; generation not counted), per
  second of CPU time of this process (``time.process_time``: the machine is
  shared, and other processes' load must not count) and per wall-clock second;
* lines/s of the bare reference loop on the same stream: per line
  ``split()``, ``int`` of the latency, ``bisect`` into the buckets, sum;
* VmRSS before feeding, after 1 M lines and after all lines (flat memory).

Each figure is the best of ``--repeat`` passes (the machine is shared).
"""

from __future__ import annotations

import argparse
import bisect
import os
import random
import resource
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from benchwatch.loadgens.pgbench.txlog import DEFAULT_BUCKETS, TxlogAggregator

CHUNK = 1 << 20
EPOCH0 = 1795370000
TEMPLATE_SECONDS = 8  # distinct seconds generated; the stream repeats them with new epochs


def vmrss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def make_templates(tps: int, threads: int, clients: int, seed: int) -> list[list[bytes]]:
    """Per thread, TEMPLATE_SECONDS seconds of log lines (second i has epoch EPOCH0 + i)."""
    rng = random.Random(seed)
    per_thread = clients // threads
    out = []
    for t in range(threads):
        txno = [0] * per_thread
        secs = []
        for i in range(TEMPLATE_SECONDS):
            n = tps // threads
            usecs = sorted(rng.randrange(1_000_000) for _ in range(n))
            lines = []
            for j, us in enumerate(usecs):
                c = j % per_thread
                txno[c] += 1
                lat = int(rng.lognormvariate(7.31, 0.5))
                if rng.random() < 0.01:
                    lat *= rng.randint(3, 40)
                lines.append(b"%d %d %d 0 %d %d\n" % (t * per_thread + c, txno[c], lat, EPOCH0 + i, us))
            secs.append(b"".join(lines))
        out.append(secs)
    return out


def source_name(thread: int) -> str:
    return "pgbench_log.4242" if thread == 0 else f"pgbench_log.4242.{thread}"


def stream(templates: list[list[bytes]], total_lines: int):
    """(source, chunk, lines) triples: each thread's file read 1 MiB at a time, in turn."""
    threads = len(templates)
    sources = [source_name(t) for t in range(threads)]
    bufs = [b""] * threads
    produced = 0
    sec = 0
    while produced < total_lines:
        for t in range(threads):
            tmpl = templates[t][sec % TEMPLATE_SECONDS]
            old = b" %d " % (EPOCH0 + sec % TEMPLATE_SECONDS)
            new = b" %d " % (EPOCH0 + sec)
            bufs[t] += tmpl.replace(old, new) if old != new else tmpl
        sec += 1
        for t in range(threads):
            while len(bufs[t]) >= CHUNK:
                cut = bufs[t].rfind(b"\n", 0, CHUNK) + 1
                chunk, bufs[t] = bufs[t][:cut], bufs[t][cut:]
                n = chunk.count(b"\n")
                if produced + n > total_lines:
                    cut = 0
                    for _ in range(total_lines - produced):
                        cut = chunk.index(b"\n", cut) + 1
                    chunk, n = chunk[:cut], total_lines - produced
                produced += n
                yield sources[t], chunk, n
                if produced >= total_lines:
                    return


def last_count_and_sum(samples, previous: tuple[float, float]) -> tuple[float, float]:
    count, total = previous
    for s in samples:
        if s.name == "benchmark_latency_seconds_count":
            count = s.value
        elif s.name == "benchmark_latency_seconds_sum":
            total = s.value
    return count, total


def run_aggregator(templates, total_lines: int):
    agg = TxlogAggregator("bench")
    for t in range(len(templates)):  # the wrapper knows -j: both files exist from the start
        agg.expect(source_name(t))
    cpu = wall = 0.0
    fed = 0
    rss_1m = -1
    written = (0.0, 0.0)
    cpu_clock, wall_clock = time.process_time, time.perf_counter
    last_source = source_name(len(templates) - 1)
    for source, chunk, n in stream(templates, total_lines):
        c0, w0 = cpu_clock(), wall_clock()
        agg.feed(source, chunk)
        samples = agg.samples() if source == last_source else []
        cpu += cpu_clock() - c0
        wall += wall_clock() - w0
        written = last_count_and_sum(samples, written)
        fed += n
        if rss_1m < 0 and fed >= 1_000_000:
            rss_1m = vmrss_kib()
    c0, w0 = cpu_clock(), wall_clock()
    samples = agg.samples(final=True)
    cpu += cpu_clock() - c0
    wall += wall_clock() - w0
    written = last_count_and_sum(samples, written)
    return fed / cpu, fed / wall, rss_1m, vmrss_kib(), agg, written


def run_bare(templates, total_lines: int) -> tuple[float, float, int, int]:
    bounds = [round(b * 1e6) for b in DEFAULT_BUCKETS]
    counts = [0] * (len(bounds) + 1)
    total = 0
    cpu = wall = 0.0
    fed = 0
    cpu_clock, wall_clock = time.process_time, time.perf_counter
    bl = bisect.bisect_left
    for _source, chunk, n in stream(templates, total_lines):
        c0, w0 = cpu_clock(), wall_clock()
        for line in chunk.split(b"\n"):
            f = line.split()
            if len(f) < 6:
                continue
            v = int(f[2])
            total += v
            counts[bl(bounds, v)] += 1
        cpu += cpu_clock() - c0
        wall += wall_clock() - w0
        fed += n
    return fed / cpu, fed / wall, sum(counts), total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=10_000_000)
    ap.add_argument("--tps", type=int, default=20_000, help="lines per second of log time, all threads")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--cpu", type=int, default=None, help="CPU to pin to (default: the last one allowed)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    cpus = sorted(os.sched_getaffinity(0))
    cpu = cpus[-1] if args.cpu is None else args.cpu
    os.sched_setaffinity(0, {cpu})

    t0 = time.perf_counter()
    templates = make_templates(args.tps, args.threads, args.clients, args.seed)
    tmpl_bytes = sum(len(s) for th in templates for s in th)
    tmpl_lines = sum(s.count(b"\n") for th in templates for s in th)
    print(f"pinned to CPU {cpu}; {args.lines:,} lines, {args.tps:,} lines/s of log time, "
          f"{args.threads} files, {tmpl_bytes / tmpl_lines:.1f} bytes/line "
          f"(templates built in {time.perf_counter() - t0:.1f} s); VmRSS before feeding "
          f"{vmrss_kib() / 1024:.1f} MiB")

    best = {"agg": 0.0, "agg_wall": 0.0, "bare": 0.0, "bare_wall": 0.0}
    for rep in range(args.repeat):
        rate, rate_wall, rss_1m, rss_end, agg, (count, total) = run_aggregator(templates, args.lines)
        bare_rate, bare_wall, bare_count, bare_sum = run_bare(templates, args.lines)
        for key, value in (("agg", rate), ("agg_wall", rate_wall), ("bare", bare_rate), ("bare_wall", bare_wall)):
            best[key] = max(best[key], value)
        # Same answer as the reference loop: every line counted, same latency sum.
        assert agg.lines == args.lines and count == bare_count == args.lines, (agg.lines, count, bare_count)
        assert round(total * 1e6) == bare_sum, (total, bare_sum)
        print(f"pass {rep + 1}: aggregator {rate / 1e6:.2f} M lines/CPU-s ({rate_wall / 1e6:.2f} M/wall-s), "
              f"bare loop {bare_rate / 1e6:.2f} M lines/CPU-s ({bare_wall / 1e6:.2f} M/wall-s); "
              f"VmRSS {rss_1m / 1024:.1f} MiB at 1 M lines, {rss_end / 1024:.1f} MiB at {args.lines / 1e6:g} M lines; "
              f"late lines {agg.late_lines}, line-by-line {agg.slow_lines}")
        del agg
    print(f"best: aggregator {best['agg'] / 1e6:.2f} M lines/CPU-s ({best['agg_wall'] / 1e6:.2f} M/wall-s), "
          f"{best['agg'] / best['bare']:.2f}x the bare loop at {best['bare'] / 1e6:.2f} M lines/CPU-s "
          f"({best['bare_wall'] / 1e6:.2f} M/wall-s); max RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
