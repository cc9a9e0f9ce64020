"""Benchmark: CPU time of the stability profile of the 12-hour, 21,600-line sysbench run (corpus file 012).

Run from the repository root::

    .venv/bin/python bench/bench_stability.py [--passes 8]

The goal (issue 29) is under 0.3 s of CPU beyond reading and parsing the run. The file is read and
replayed into samples once (as ``record.outcome`` does when a run ends, the figure printed for scale);
then, over ``--passes``, best and median CPU of: the TPS samples taken from the samples, the dip
detector alone (explain's, which the profile calls), and the whole profile
(``benchwatch.stability.profile``: dips, stalls, variation, warm-up), its latency tail included.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchwatch import stability
from benchwatch.explain import dips
from benchwatch.record import outcome, replay
from tests.helpers.corpus import CORPUS

FILE = os.path.join(CORPUS, "012_sysbench_1017_12h_2s_interval.txt")
GOAL_S = 0.3


def _cpu(fn):
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=8)
    args = ap.parse_args()
    with open(FILE, "rb") as f:
        data = f.read()
    parse_s, (model, samples) = _cpu(lambda: replay.replay_output(data, "bench", 1_452_074_400.0))
    print(f"{os.path.basename(FILE)}: read and replayed once in {parse_s:.3f} s CPU "
          f"({len(samples):,} samples; not counted below)")
    rows: dict[str, list[float]] = {"TPS samples": [], "dip detector": [], "profile": [], "samples + profile": []}
    result = None
    for _ in range(max(3, args.passes)):
        t, tps = _cpu(lambda: [(s.timestamp_ms, s.value) for s in samples if s.name == outcome.TPS])
        rows["TPS samples"].append(t)
        interval = float(model.interval_s or 1.0)
        rows["dip detector"].append(_cpu(lambda: dips.detect(tps, interval))[0])
        latency = outcome.latency_tail_sources(model, samples)
        tail = stability.LatencyTail(latency["p99_s"], latency["p999_s"], latency["max_s"], latency["source"] or "")
        t_profile, result = _cpu(lambda: stability.profile(tps, interval, latency=tail))
        rows["profile"].append(t_profile)
        rows["samples + profile"].append(t + t_profile)
    print(f"CPU seconds over {max(3, args.passes)} passes (best, median):")
    for name, values in rows.items():
        print(f"  {name:<18} {min(values):.3f} s best  {statistics.median(values):.3f} s median")
    assert result is not None
    print(f"  {result['intervals']:,} steady intervals of {result['interval_s']:g} s, CoV {result['tps_cov']}, "
          f"{result['dips']} dips")
    worst = statistics.median(rows["samples + profile"])
    print(f"the stability profile beyond reading and parsing: {worst:.3f} s CPU median "
          f"({'within' if worst < GOAL_S else 'OVER'} the {GOAL_S} s goal)")
    return 0 if worst < GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
