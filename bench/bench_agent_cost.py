"""Benchmark: what an agent costs on its database host, and what each added PostgreSQL target costs.

Run from the repository root::

    .venv/bin/python bench/bench_agent_cost.py [--seconds 15] [--instances 3] [--rounds 2]

Starts a private central Prometheus (remote-write receiver) and --instances
idle PostgreSQL instances on free loopback ports (temporary directory under
/tmp), then, each round, measures for --seconds (after a 5 s settling time):

* idle:   no agent; the instances' own CPU (postmaster and its children),
* agent with 1 target, then with all --instances targets: the agent's
  processes (Prometheus in agent mode, node_exporter, a postgres_exporter and a
  checkpoint follower per target) and the instances' CPU above idle (the
  backends answering the exporters' queries).

CPU is utime+stime from /proc/<pid>/stat (10 ms ticks). The cost per added
target is (cost with N targets - cost with 1) / (N - 1), at the 1 s scrape the
agent uses. Everything is stopped by PID and removed afterwards.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _live  # puts the repository on sys.path
from benchwatch.engines.postgresql.local import start_instances
from benchwatch.engines.postgresql.server import pg_bindir
from benchwatch.query.launch import start_prometheus
from benchwatch.stack import agent as agent_mod
from benchwatch.util import net

SETTLE_S = 5.0


def instance_pids(inst) -> list[int]:
    """The postmaster and its children (backends, background processes)."""
    root = inst.pid()
    if root is None:
        return []
    out = [root]
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == root:
            out.append(int(name))
    return out


def window(groups: dict[str, callable], seconds: float) -> dict[str, float]:
    """CPU ms per second of each group of processes over ``seconds`` (pids listed at both ends)."""
    def total(pids: list[int]) -> dict[int, float]:
        return {p: c for p in pids if (c := _live.cpu_seconds(p)) is not None}
    before = {g: total(f()) for g, f in groups.items()}
    t0 = time.monotonic()
    time.sleep(seconds)
    after = {g: total(f()) for g, f in groups.items()}
    elapsed = time.monotonic() - t0
    # A pid seen only at the end (a new backend) counts from 0.
    return {g: 1000 * sum(c - before[g].get(p, 0.0) for p, c in after[g].items()) / elapsed for g in groups}


def agent_pids(a: agent_mod.Agent) -> dict[str, int]:
    return {c: p for c in a.components() if (p := a.pid(c)) is not None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="benchwatch-agentbench-", dir="/tmp")
    os.chmod(tmp, 0o755)
    instances, a = [], None
    print(_live.loadavg(), f"({os.cpu_count()} cores)")
    try:
        with start_prometheus(os.path.join(tmp, "central")) as central:
            names = [f"db{i + 1}" for i in range(args.instances)]
            instances = start_instances(os.path.join(tmp, "pg"), [net.free_port() for _ in names], names, pg_bindir())
            pg = {"instances": lambda: [p for i in instances for p in instance_pids(i)]}
            results: dict[str, list[dict[str, float]]] = {"idle": [], "1": [], str(args.instances): []}
            for r in range(args.rounds):
                time.sleep(SETTLE_S)
                results["idle"].append(window(pg, args.seconds))
                for n in (1, args.instances):
                    a = agent_mod.start_agent(os.path.join(tmp, f"agent-{r}-{n}"), name="bench", central_url=central.url,
                                              postgres=[i.dsn() for i in instances[:n]],
                                              server_logs=[i.server_log for i in instances[:n]],
                                              targets=names[:n], out=lambda m: None)
                    time.sleep(SETTLE_S)
                    pids = agent_pids(a)
                    groups = {c: (lambda p=p: [p]) for c, p in pids.items()}
                    groups.update(pg)
                    results[str(n)].append(window(groups, args.seconds))
                    a.down()
                    a = None
                print(f"round {r + 1}: " + "; ".join(f"{k}: {sum(v[-1].values()):.1f} ms/s" for k, v in results.items()),
                      flush=True)
            idle = statistics.mean(x["instances"] for x in results["idle"])
            print(f"\n{'':<34}" + "".join(f"{k + ' target(s)':>16}" for k in ("1", str(args.instances))))
            rows = sorted({k.split("-", 1)[0] if k.startswith(("postgres_exporter-", "checkpoints-")) else k
                           for v in results["1"] + results[str(args.instances)] for k in v})
            totals = {}
            for n in ("1", str(args.instances)):
                per = []
                for x in results[n]:
                    grouped: dict[str, float] = {}
                    for k, v in x.items():
                        key = k.split("-", 1)[0] if k.startswith(("postgres_exporter-", "checkpoints-")) else k
                        grouped[key] = grouped.get(key, 0.0) + (v - idle if k == "instances" else v)
                    per.append(grouped)
                totals[n] = {k: statistics.mean(g.get(k, 0.0) for g in per) for k in rows}
            for k in rows:
                label = "PostgreSQL backends (above idle)" if k == "instances" else k
                print(f"{label:<34}" + "".join(f"{totals[n][k]:>13.1f} ms/s" for n in totals))
            t1, tn = sum(totals["1"].values()), sum(totals[str(args.instances)].values())
            print(f"{'total':<34}{t1:>13.1f} ms/s{tn:>13.1f} ms/s")
            cores = os.cpu_count() or 1
            per_target = (tn - t1) / (args.instances - 1) if args.instances > 1 else float("nan")
            print(f"\nagent with 1 target: {t1:.1f} ms/s = {t1 / 10 / cores:.2f} % of the machine")
            print(f"each added PostgreSQL target: {per_target:.1f} ms/s = {per_target / 10 / cores:.2f} % of the machine")
            print(f"instances idle (no agent): {idle:.1f} ms/s for {args.instances}")
    finally:
        if a is not None:
            a.down()
        for inst in instances:
            inst.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        print(_live.loadavg())
    return 0


if __name__ == "__main__":
    _live.run_main(main)
