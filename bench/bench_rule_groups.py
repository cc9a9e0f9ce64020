"""Benchmark: what a rule group's evaluation costs Prometheus beyond its rules.

Run from the repository root::

    .venv/bin/python bench/bench_rule_groups.py [--seconds 90]

Two Prometheus 2.42, side by side on free ports with temporary data dirs and no
scrape target, load the same rules (prometheus/rules and prometheus/alerts, less
mysql.yml, as a PostgreSQL stack loads them): one in the repository's groups, the
other with every group of the same interval merged into one (records first, then
alerts). After 30 s of settling, each one's CPU (utime+stime of /proc/<pid>/stat)
over --seconds is printed. The difference, divided by the difference in group
evaluations per second, is the cost of one evaluation.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import yaml

import _live
from benchwatch import resources
from benchwatch.query import launch

SETTLE_S = 30.0


def repository_groups() -> list[dict]:
    files = sorted(glob.glob(os.path.join(resources.path("prometheus", "rules"), "*.yml"))
                   + glob.glob(os.path.join(resources.path("prometheus", "alerts"), "*.yml")))
    groups: list[dict] = []
    for path in files:
        if os.path.basename(path) != "mysql.yml":
            with open(path, encoding="utf-8") as f:
                groups += yaml.safe_load(f)["groups"]
    return groups


def merged_by_interval(groups: list[dict]) -> list[dict]:
    by_interval: dict[str, list[dict]] = {}
    for g in groups:
        by_interval.setdefault(g.get("interval", "1s"), []).extend(g["rules"])
    return [{"name": f"all_{interval}", "interval": interval,
             "rules": [r for r in rules if "record" in r] + [r for r in rules if "alert" in r]}
            for interval, rules in by_interval.items()]


def evaluations_per_second(groups: list[dict]) -> float:
    units = {"s": 1, "m": 60}
    return sum(1 / (float(g.get("interval", "1s")[:-1]) * units[g.get("interval", "1s")[-1]]) for g in groups)


def start(directory: str, groups: list[dict]) -> launch.PrometheusProcess:
    os.makedirs(directory)
    with open(os.path.join(directory, "rules.yml"), "w", encoding="utf-8") as f:
        yaml.safe_dump({"groups": groups}, f, sort_keys=False)
    config = yaml.safe_dump({"global": {"evaluation_interval": "1s"}, "rule_files": ["rules.yml"]})
    return launch.start_prometheus(directory, config, remote_write_receiver=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=90.0)
    args = parser.parse_args()
    groups = repository_groups()
    variants = {"as in the repository": groups, "merged by interval": merged_by_interval(groups)}
    print(f"2 Prometheus, {sum(len(g['rules']) for g in groups)} rules each, no scrape target; {_live.loadavg()}")
    proms: dict[str, launch.PrometheusProcess] = {}
    with tempfile.TemporaryDirectory(prefix="bench-rule-groups-") as tmp:
        try:
            for i, (name, gs) in enumerate(variants.items()):
                proms[name] = start(os.path.join(tmp, str(i)), gs)
            time.sleep(SETTLE_S)  # start-up (WAL, first evaluations) out of the window, not a readiness wait
            before = {name: _live.cpu_seconds(p.pid) or 0.0 for name, p in proms.items()}
            time.sleep(args.seconds)  # the measurement window itself
            after = {name: _live.cpu_seconds(p.pid) or 0.0 for name, p in proms.items()}
        finally:
            for prom in proms.values():
                prom.stop()
    cost = {}
    for name, gs in variants.items():
        cost[name] = (after[name] - before[name]) / args.seconds * 1000
        print(f"  {name:22} {len(gs):3d} groups, {evaluations_per_second(gs):.2f} evaluations/s: {cost[name]:.2f} ms/s")
    saved = evaluations_per_second(groups) - evaluations_per_second(variants["merged by interval"])
    print(f"one group evaluation: {(cost['as in the repository'] - cost['merged by interval']) / saved:.2f} ms of CPU; "
          f"{_live.loadavg()}")


if __name__ == "__main__":
    _live.run_main(main)
