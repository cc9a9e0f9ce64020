"""The time a sweep spends between its runs: settings, restarts, the database made ready, bookkeeping.

Two sweeps on a throwaway stack, each of two variants interleaved so that most runs switch variant:
one whose setting takes a reload (synchronous_commit), one whose setting needs a restart
(shared_buffers). For each run after the first: the gap from the end of the run before (its meta.json
ended_at) to this run's start (started_at), and how much of it the sweep spent preparing (settings,
CHECKPOINT, TRUNCATE: state.jsonl's between_s). Goal: <= 2 s without a restart.

    .venv/bin/python bench/bench_sweep_gap.py [--rounds 4] [--seconds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _live
from tests.helpers import throwaway


def gaps(live: throwaway.ThrowawayStack, name: str) -> tuple[list[float], list[float], list[bool]]:
    """(gap between runs, time preparing, whether the variant switched) for each run after the first."""
    with open(os.path.join(live.state_dir, "sweeps", name, "state.jsonl")) as f:
        events = [json.loads(line) for line in f]
    with open(os.path.join(live.state_dir, "sweeps", name, "plan.json")) as f:
        plan = json.load(f)
    variant = {r["index"]: r["variant"] for r in plan["runs"]}
    done = [e for e in events if e["event"] == "finished" and e.get("ok")]
    metas = []
    for e in done:
        with open(os.path.join(live.state_dir, "runs", e["run_id"], "meta.json")) as f:
            metas.append((e, json.load(f)))
    out_gap, out_prep, switched = [], [], []
    for (e0, m0), (e1, m1) in zip(metas, metas[1:]):
        out_gap.append(m1["started_at"] - m0["ended_at"])
        out_prep.append(float(e1.get("between_s") or 0))
        switched.append(variant[e0["index"]] != variant[e1["index"]])
    return out_gap, out_prep, switched


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--seconds", type=int, default=1, help="pgbench -T of each run")
    args = p.parse_args()
    live = throwaway.start(scale=1)
    try:
        for name, variant in (("reload", "B:synchronous_commit=off"), ("restart", "B:shared_buffers=160MB")):
            print(f"{name}: {_live.loadavg()}", flush=True)
            r = subprocess.run([throwaway.BENCHWATCH, "sweep", "--name", name, "--variant", "A", "--variant", variant,
                                "--repeat", str(args.rounds), "--seed", "1", "--", "pgbench", "-S", "-T", str(args.seconds)],
                               env=live.env(), capture_output=True, timeout=1800)
            if r.returncode != 0:
                print(r.stderr.decode()[-2000:], file=sys.stderr)
                return 1
            gap, prep, switched = gaps(live, name)
            for label, keep in (("variant switched", True), ("same variant", False)):
                g = [x for x, s in zip(gap, switched) if s == keep]
                pr = [x for x, s in zip(prep, switched) if s == keep]
                if g:
                    print(f"  {label:<17} n={len(g):2d}  gap between runs median {statistics.median(g):.2f} s "
                          f"(max {max(g):.2f}), of which preparing median {statistics.median(pr):.2f} s", flush=True)
            print(f"  after: {_live.loadavg()}", flush=True)
    finally:
        live.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
