"""1,000,000 (or --lines) seeded mutated pgbench lines through import, attach and the live follower.

The fast, seeded variant runs in the suite (tests/unit/test_fuzz_inputs.py); this is the long one.
Prints lines/s per path and the counts (progress lines understood, lines counted as unparsed);
exits 1 on any exception, which is what it is for.

    .venv/bin/python bench/bench_fuzz.py [--lines 1000000] [--seed 12] [--pattern 'sysbench/*.txt']

--pattern picks the real outputs mutated (tests/fixtures/PATTERN): pgbench's by default, sysbench's
(sysbench/*.txt) or go-tpc's (gotpc/*.stdout); the attached and followed run is of that tool.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchwatch import loadgens
from benchwatch.exporter.pgbench_runs import PgbenchRunsCollector
from benchwatch.model.run import METRICS
from benchwatch.record import replay, rundir
from benchwatch.record.wrapper import attach_stream
from benchwatch.sink.openmetrics import write_openmetrics
from tests.helpers import fuzz

START = 1_700_000_000.0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--pattern", default="pgbench/*", help="fixtures mutated: pgbench/*, sysbench/*.txt, gotpc/*.stdout")
    args = parser.parse_args()
    data = fuzz.fuzzed_output(args.lines, args.seed, args.pattern)
    tool = loadgens.for_output(data).name
    print(f"{args.lines} mutated {tool} lines, {len(data) / 1e6:.1f} MB, seed {args.seed}")

    t = time.perf_counter()
    model, samples = replay.replay_output(data, "fuzz", START)
    out = io.StringIO()
    write_openmetrics(samples, out, types={k: v[0] for k, v in METRICS.items()}, help={k: v[1] for k, v in METRICS.items()})
    took = time.perf_counter() - t
    print(f"import --openmetrics: {args.lines / took:,.0f} lines/s; {model.progress_lines} progress, "
          f"{model.unparsed_lines} unparsed, {len(samples)} samples")
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
        run = attach_stream(read_fd, runs_dir=tmp, echo=None, pgbench_args=None, interval=None, tool=tool)
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
        return 0 if intact and not c.unreadable else 1


if __name__ == "__main__":
    sys.exit(main())
