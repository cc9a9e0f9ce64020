"""1,000,000 (or --lines) seeded mutated pgbench lines through import, attach and the live follower.

The fast, seeded variant runs in the suite (tests/unit/test_fuzz_inputs.py); this is the long one.
Prints lines/s per path and the counts (progress lines understood, lines counted as unparsed);
exits 1 on any exception, which is what it is for.

    .venv/bin/python bench/bench_fuzz.py [--lines 1000000] [--seed 12] [--pattern 'sysbench/*.txt']

--pattern picks the real outputs mutated (tests/fixtures/PATTERN): pgbench's by default, sysbench's
(sysbench/*.txt) or go-tpc's (gotpc/*.stdout); the attached and followed run is of that tool.

Issue 32: the runs of the file are named as ``import`` names them (a run id from each run's start), every
sample's timestamp is checked against benchwatch.util.bounds, ``--promtool`` has promtool build TSDB
blocks from the OpenMetrics written, and ``--live`` pipes the lines through ``benchwatch attach`` into a
throwaway real stack: Prometheus must then hold what the saved output replays to, and promtool must
accept the exporter's /metrics. The issue's run: ``--seed 11 --promtool --live``.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchwatch import loadgens
from benchwatch.exporter.pgbench_runs import PgbenchRunsCollector
from benchwatch.model.run import METRICS
from benchwatch.record import replay, rundir
from benchwatch.record.wrapper import attach_stream
from benchwatch.sink.openmetrics import write_openmetrics
from benchwatch.util import bounds, net, processes
from tests.helpers import fuzz

START = 1_700_000_000.0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--pattern", default="pgbench/*", help="fixtures mutated: pgbench/*, sysbench/*.txt, gotpc/*.stdout")
    parser.add_argument("--promtool", action="store_true", help="promtool tsdb create-blocks-from the OpenMetrics written")
    parser.add_argument("--live", action="store_true", help="also through benchwatch attach into a throwaway real stack")
    args = parser.parse_args()
    data = fuzz.fuzzed_output(args.lines, args.seed, args.pattern)
    tool = loadgens.for_output(data).name
    print(f"{args.lines} mutated {tool} lines, {len(data) / 1e6:.1f} MB, seed {args.seed}")

    t = time.perf_counter()
    # As import does it: each run of the file named by its start (rundir.new_run_id).
    reads, _ = replay.replay_saved(data, lambda k, s: rundir.new_run_id(s), START)
    samples = [s for r in reads for s in r.samples]
    model = reads[0].model
    out = io.StringIO()
    write_openmetrics(samples, out, types={k: v[0] for k, v in replay.run_metrics().items()},
                      help={k: v[1] for k, v in METRICS.items()})
    took = time.perf_counter() - t
    print(f"import --openmetrics: {args.lines / took:,.0f} lines/s; {len(reads)} runs "
          f"({sum(r.skipped is not None for r in reads)} skipped), "
          f"{sum(r.model.progress_lines for r in reads)} progress, {sum(r.model.unparsed_lines for r in reads)} unparsed, "
          f"{len(samples)} samples")
    outside = sum(1 for s in samples if not bounds.ms_in_range(s.timestamp_ms))
    newest = max(s.timestamp_ms for s in samples) / 1000
    print(f"  samples outside the bounds: {outside}; newest at {time.strftime('%Y-%m-%d', time.gmtime(newest))}")
    ok = outside == 0
    if args.promtool:
        ok = promtool_blocks(out.getvalue()) and ok
    nonfinite = sum(1 for s in samples if s.value != s.value or s.value in (math.inf, -math.inf))
    print(f"  non-finite samples: {nonfinite} (a nan latency of an interval with 0 tps is kept); "
          f"first bad lines: {model.bad_line_notes(3)}")

    with tempfile.TemporaryDirectory(prefix="benchwatch-fuzz-") as tmp:
        read_fd, write_fd = os.pipe()

        def feed():
            view = memoryview(data)
            for i in range(0, len(view), 65536):
                os.write(write_fd, view[i:i + 65536])
            os.close(write_fd)

        t = time.perf_counter()
        writer = threading.Thread(target=feed)
        writer.start()
        run = attach_stream(read_fd, runs_dir=tmp, echo=None, tool_args=None, interval=None, tool=tool)
        writer.join()
        os.close(read_fd)
        with open(run.file("output.log"), "rb") as f:
            intact = f.read() == data
        print(f"attach: {args.lines / (time.perf_counter() - t):,.0f} lines/s; saved byte for byte: {intact}")

        # The live follower reads the attached run as it would a growing one (in slices), to the end.
        run.update_meta(state=rundir.RUNNING, pid=os.getpid())
        produced = [0]
        c = PgbenchRunsCollector(tmp, lambda s: produced.__setitem__(0, produced[0] + len(s)), clock=lambda: START)
        t = time.perf_counter()
        c.poll()
        run.update_meta(state=rundir.FINISHED)
        while c.following or not c.seen:
            c.poll()
        print(f"live follower: {args.lines / (time.perf_counter() - t):,.0f} lines/s; {produced[0]} samples; "
              f"set aside: {len(c.unreadable)}")
        ok = ok and intact and not c.unreadable
    if args.live:
        ok = live(data, tool) and ok
    return 0 if ok else 1


def promtool_blocks(text: str) -> bool:
    """promtool builds TSDB blocks from the OpenMetrics (what the project's tests check an import with)."""
    with tempfile.TemporaryDirectory(prefix="benchwatch-fuzz-om-") as tmp:
        path = os.path.join(tmp, "fuzz.om")
        with open(path, "w") as f:
            f.write(text)
        t = time.perf_counter()
        r = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", "-q", path, os.path.join(tmp, "blocks")],
                           capture_output=True, text=True)
        blocks = len(os.listdir(os.path.join(tmp, "blocks"))) if os.path.isdir(os.path.join(tmp, "blocks")) else 0
        print(f"promtool tsdb create-blocks-from openmetrics: exit {r.returncode}, {blocks} blocks, "
              f"{time.perf_counter() - t:.0f} s {r.stderr.strip()[-500:]}")
        return r.returncode == 0


def live(data: bytes, tool: str) -> bool:
    """The lines through ``benchwatch attach`` into a throwaway real stack's exporter and Prometheus."""
    from benchwatch.query.prometheus import query
    from tests.helpers import throwaway

    stack = throwaway.start(scale=0)
    try:
        t = time.perf_counter()
        r = stack.benchwatch("attach", "--tool", tool, "--quiet", input=data, timeout=3600)
        m = re.search(rb"benchwatch: run (\S+):", r.stderr)
        if r.returncode != 0 or m is None or b"Traceback" in r.stderr:
            print(f"attach failed ({r.returncode}): {r.stderr.decode(errors='replace')[-2000:]}")
            return False
        run_id = m.group(1).decode()
        path = os.path.join(stack.state_dir, "runs", run_id)
        ingested = processes.wait_until(lambda: os.path.exists(os.path.join(path, ".ingested")), 3600, 1.0)
        took = time.perf_counter() - t
        with open(os.path.join(path, "meta.json")) as f:
            model, expected = replay.replay_run_dir_model(path, json.load(f))
        wanted = Counter(s.value for s in expected if s.name == "benchmark_progress_tps" and s.value != 0)
        first, last = min(s.timestamp_ms for s in expected), max(s.timestamp_ms for s in expected)
        span = f"{int((last - first) / 1000) + 120}s"
        result = query(stack.prometheus, f'benchmark_progress_tps{{run_id="{run_id}"}}[{span}]', last / 1000 + 1)
        stored = Counter(float(v) for _, v in result[0]["values"] if float(v) != 0) if result else Counter()
        status, body = net.http_get(stack.stack.cfg.url("benchwatch_exporter") + "/metrics")
        check = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True)
        lint = [line for line in (check.stdout + check.stderr).decode().splitlines()  # but the metric contract's names
                if line and not re.search(r"should not include type|should not have \"(quantile|le)\" label", line)]
        logs = "".join(open(p, errors="replace").read() for p in
                       (os.path.join(stack.state_dir, "logs", n) for n in os.listdir(os.path.join(stack.state_dir, "logs")))
                       if "benchwatch_exporter" in p)
        print(f"attach into a live exporter: ingested {ingested} after {took:.0f} s ({len(data.splitlines()) / took:,.0f} lines/s); "
              f"tps samples stored {sum(stored.values())} of {sum(wanted.values())} the saved output replays to "
              f"(equal: {stored == wanted}); {model.unparsed_lines} unparsed; promtool check metrics: exit "
              f"{check.returncode} {lint[:3]}; exporter log tracebacks: {logs.count('Traceback')}")
        return ingested and stored == wanted and status == 200 and check.returncode in (0, 3) and not lint \
            and "Traceback" not in logs
    finally:
        stack.close()


if __name__ == "__main__":
    sys.exit(main())
