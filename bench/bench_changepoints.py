"""Benchmark: change-point methods on the synthetic series of issue 22's acceptance 1 (docs/history.md).

Run from the repository root::

    .venv/bin/python bench/bench_changepoints.py [--seeds 100] [--otava-python /tmp/otava-venv/bin/python]

Series (2 % Gaussian noise around 1000, seeds 0..N-1): "step": −8 % at run 20 of 40; "outlier": one run
−30 % at run 5, 25 or 37 of 40; "two steps": −8 % at 20 and +8 % at 40 of 60; "noise": 40 runs of noise
(seeds 1000..). Prints, per method, how often each is answered right, the step interval's coverage and
the time per series. benchwatch's own method always; Apache Otava 0.8.0 when --otava-python names a
Python with ``apache-otava`` installed (it cannot share the project's venv: it pins numpy 2.2)::

    python3 -m venv /tmp/otava-venv && /tmp/otava-venv/bin/pip install apache-otava==0.8.0
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np

# The series, as source: the same text runs in Otava's interpreter.
SERIES = '''
import numpy as np
def noise(seed, n):
    return 1000 * (1 + 0.02 * np.random.default_rng(seed).standard_normal(n))
def step(seed):
    x = noise(seed, 40); x[20:] *= 0.92; return x
def outlier(seed):
    x = noise(seed, 40); x[[5, 25, 37][seed % 3]] *= 0.70; return x
def two(seed):
    x = noise(seed, 60); x[20:] *= 0.92; x[40:] *= 1.08; return x
def flat(seed):
    return noise(1000 + seed, 40)
'''

OTAVA = SERIES + '''
import json, sys, time
from otava.analysis import compute_change_points
seeds, p = int(sys.argv[1]), float(sys.argv[2])
def idx(x):
    return [c.index for c in compute_change_points(list(x), window_len=50, max_pvalue=p)[0]]
t = time.perf_counter()
out = {"step": sum(len(c) == 1 and abs(c[0] - 20) <= 1 for c in (idx(step(s)) for s in range(seeds))),
       "outlier": sum(not idx(outlier(s)) for s in range(seeds)),
       "two": sum(len(c) == 2 and abs(c[0] - 20) <= 1 and abs(c[1] - 40) <= 1 for c in (idx(two(s)) for s in range(seeds))),
       "flat": sum(not idx(flat(s)) for s in range(seeds))}
out["s_per_series"] = (time.perf_counter() - t) / (4 * seeds)
print(json.dumps({k: float(v) for k, v in out.items()}))  # numpy booleans summed are numpy integers
'''


def ours(seeds: int) -> dict:
    from benchwatch.history.changepoints import detect

    space: dict = {}
    exec(SERIES, space)
    t = time.perf_counter()
    found = covered = two = outlier = flat = 0
    for s in range(seeds):
        c = detect(space["step"](s))
        if len(c) == 1 and abs(c[0].index - 20) <= 1:
            found += 1
            covered += c[0].step_ci[0] <= -8 <= c[0].step_ci[1]
        outlier += not detect(space["outlier"](s))
        c = detect(space["two"](s))
        two += len(c) == 2 and abs(c[0].index - 20) <= 1 and abs(c[1].index - 40) <= 1
        flat += not detect(space["flat"](s))
    return {"step": found, "ci_covers": covered, "outlier": outlier, "two": two, "flat": flat,
            "s_per_series": (time.perf_counter() - t) / (4 * seeds)}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=100)
    p.add_argument("--otava-python", help="a Python with apache-otava installed")
    args = p.parse_args(argv)
    rows = [("ruptures + permutation test (benchwatch)", ours(args.seeds))]
    if args.otava_python:
        for pvalue in ("0.001", "0.01"):
            r = subprocess.run([args.otava_python, "-c", OTAVA, str(args.seeds), pvalue], capture_output=True, text=True,
                               timeout=3600, check=True)
            rows.append((f"apache-otava, max_pvalue={pvalue}, window 50", json.loads(r.stdout.strip().splitlines()[-1])))
    n = args.seeds
    print(f"{n} seeds: step at 20 ± 1 | its CI covers -8 % | outlier: none | two steps | noise: none | per series")
    for name, r in rows:
        print(f"{name}: {r['step']:g}/{n} | {r.get('ci_covers', '-')}/{n} | {r['outlier']:g}/{n} | {r['two']:g}/{n} | "
              f"{r['flat']:g}/{n} | {r['s_per_series'] * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main(sys.argv[1:]))
