"""Benchmark: pgbench output parser and run model throughput (lines/s).

Run from the repository root::

    .venv/bin/python bench/bench_parser.py [--seconds 3] [--progress-per-run 300]

The input is a realistic mix built from the real fixtures in
tests/fixtures/pgbench: every fixture is one run (its stderr, then its
stdout), and each run's progress lines are replayed, with the elapsed time
renumbered so the clock moves on, until the run has --progress-per-run of
them (300 = five minutes at -P 1). Most lines are therefore progress lines,
as in a real run; the rest are the real summaries, -r tables, errors and
notices.

Three loops over the same lines, side by side in one process:

* reference: ``line.split()`` on every line, the floor for any per-line work
  in Python;
* parser: ``PgbenchOutputParser.feed`` (a fresh parser per run);
* run model: ``RunModel.feed_line`` (parser + samples; a fresh model per run,
  ``finish`` at its end), which is what the exporter does per line.

Each loop repeats over the whole mix for --seconds (at least 3 passes); the
best and the median pass are printed, with the ratio to the reference.
"""

from __future__ import annotations

import argparse
import glob
import os
import platform
import re
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from benchwatch.loadgens.pgbench.model import PgbenchRunModel as RunModel
from benchwatch.loadgens.pgbench.output import PgbenchOutputParser, Progress

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "pgbench")
START = 1_700_000_000.0
_ELAPSED = re.compile(rb"^progress: ([0-9]+(?:\.([0-9]+))?) s")


def read_lines(path: str) -> list[bytes]:
    try:
        with open(path, "rb") as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def renumbered(progress: list[bytes], count: int) -> list[bytes]:
    """``count`` progress lines cycled from the real ones, elapsed time moving on by the run's interval."""
    times = [float(_ELAPSED.match(l).group(1)) for l in progress]
    spacing = [b - a for a, b in zip(times, times[1:]) if b > a]
    interval = min(spacing) if spacing else 1.0
    first = times[0]
    out = []
    for i in range(count):
        template = progress[i % len(progress)]
        m = _ELAPSED.match(template)
        decimals = len(m.group(2) or b"")
        value = f"{first + i * interval:.{decimals}f}".encode()
        out.append(b"progress: " + value + template[m.end(1):])
    return out


def build_runs(progress_per_run: int) -> list[list[bytes]]:
    runs = []
    for stderr in sorted(glob.glob(os.path.join(FIXTURES, "*.stderr"))):
        base = stderr[: -len(".stderr")]
        err = read_lines(stderr)
        progress = [l for l in err if _ELAPSED.match(l)]
        other = [l for l in err if not _ELAPSED.match(l)]
        if progress:
            # Notices before the run, progress during it, anything else (errors, aborts) after.
            run = other[:1] + renumbered(progress, progress_per_run) + other[1:]
        else:
            run = err
        run += read_lines(base + ".stdout")
        runs.append(run)
    return runs


def loop_split(runs: list[list[bytes]]) -> int:
    n = 0
    for run in runs:
        for line in run:
            line.split()
            n += 1
    return n


def loop_parser(runs: list[list[bytes]]) -> int:
    n = 0
    for run in runs:
        parser = PgbenchOutputParser()
        feed = parser.feed
        for line in run:
            feed(line)
            n += 1
        parser.flush()
    return n


SAMPLES = {"count": 0}  # samples the run model produced in its last pass


def loop_model(runs: list[list[bytes]]) -> int:
    n = samples = 0
    for i, run in enumerate(runs):
        model = RunModel(f"bench-{i}", interval_s=1.0, start_epoch=START)
        feed = model.feed_line
        for line in run:
            samples += len(feed(line, START))
            n += 1
        samples += len(model.finish(START + 3600, 0))
    SAMPLES["count"] = samples
    return n


def measure(fn, runs, budget_s: float) -> tuple[float, float, int]:
    """Best and median lines/s over passes for budget_s seconds (at least 3 passes)."""
    rates = []
    deadline = time.perf_counter() + budget_s
    while len(rates) < 3 or time.perf_counter() < deadline:
        t = time.perf_counter()
        n = fn(runs)
        rates.append(n / (time.perf_counter() - t))
    return max(rates), statistics.median(rates), len(rates)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time spent on each loop (default 3)")
    parser.add_argument("--progress-per-run", type=int, default=300,
                        help="progress lines per run in the mix (default 300: five minutes at -P 1)")
    args = parser.parse_args()

    runs = build_runs(args.progress_per_run)
    lines = [l for run in runs for l in run]
    if not lines:
        print(f"no fixtures found under {FIXTURES}", file=sys.stderr)
        return 1
    progress = sum(1 for l in lines if l.startswith(b"progress: "))
    check = PgbenchOutputParser()
    parsed_progress = sum(1 for l in lines for e in check.feed(l) if isinstance(e, Progress))
    only_progress = [[l for l in run if l.startswith(b"progress: ")] for run in runs]

    print("benchwatch parser benchmark")
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores; "
          f"load average before {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"mix: {len(runs)} runs from tests/fixtures/pgbench, {len(lines):,} lines, "
          f"{progress:,} progress lines ({100 * progress / len(lines):.1f} %), "
          f"{sum(len(l) + 1 for l in lines):,} bytes; parser recognised {parsed_progress:,} progress lines")
    print(f"each loop: best and median pass over the mix, {args.seconds:g} s per loop")

    results = {}
    for name, fn, data in (
        ("reference: bytes.split()", loop_split, runs),
        ("PgbenchOutputParser.feed", loop_parser, runs),
        ("RunModel.feed_line", loop_model, runs),
        ("PgbenchOutputParser.feed, progress lines only", loop_parser, only_progress),
        ("RunModel.feed_line, progress lines only", loop_model, only_progress),
    ):
        best, median, passes = measure(fn, data, args.seconds)
        results[name] = best
        ref = results["reference: bytes.split()"]
        print(f"  {name:<48} {best:>12,.0f} lines/s best  {median:>12,.0f} median  "
              f"({passes} passes)  {ref / best:6.1f}x the reference's time per line")
        if fn is loop_model:
            per_line = SAMPLES["count"] / sum(len(r) for r in data)
            print(f"  {'':<48} {best * per_line:>12,.0f} samples/s best ({per_line:.1f} samples per line)")
    model_rate = results["RunModel.feed_line"]
    print(f"a run at -P 1 prints 1 progress line per second: the run model keeps up with "
          f"{model_rate:,.0f} such runs on one core")
    print(f"load average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
