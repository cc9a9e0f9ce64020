"""What Prometheus evaluates every second, and what the dashboards read instead of slower rules.

Each rule group evaluated every second costs Prometheus about a millisecond of
CPU per second (docs/benchmarks.md): only what the 1 s alerts need runs that
often, and the dashboards compute the slower recording rules at query time.
"""

from __future__ import annotations

import glob
import json
import os
import re

import yaml

from benchwatch.grafana import rules
from benchwatch.query import grafana as gq
from benchwatch.query import promql

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAST_ALERTS = {"PgbenchTPSDrop", "PgbenchStalled"}
# The InnoDB overlay (rules/mysql.yml says why); a PostgreSQL stack does not load it.
FAST_GROUPS = {"mysql_innodb"}
# Constant series (rules/thresholds.yml): any evaluation within the lookback serves.
CONSTANT = re.compile(r"^benchwatch:(threshold|setting):")
# What a 1 s alert may read recorded every 5 s: a run's baseline, the higher of its TPS medians over one and five
# minutes, which moves little in 5 s (alerts/pgbench.yml, group pgbench_baseline; issue 32: recorded every
# second, those three rules were half of Prometheus' rule time).
SLOW_BY_DESIGN = {"run_id:benchmark_progress_tps:baseline": 5.0}


def seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", duration))


def groups() -> list[tuple[dict, float]]:
    with open(os.path.join(ROOT, "prometheus", "prometheus.yml"), encoding="utf-8") as f:
        default = seconds(yaml.safe_load(f)["global"]["evaluation_interval"])
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "prometheus", "*", "*.yml"))):
        with open(path, encoding="utf-8") as f:
            for g in yaml.safe_load(f)["groups"]:
                out.append((g, seconds(g["interval"]) if "interval" in g else default))
    return out


def test_only_what_the_one_second_alerts_need_runs_every_second():
    fast = {r.get("alert") or r.get("record") for g, i in groups() if i <= 1 and g["name"] not in FAST_GROUPS
            for r in g["rules"]}
    assert all(i <= 1 for g, i in groups() if g["name"] in FAST_GROUPS)
    assert {r for r in fast if not r.startswith("run_id:")} == FAST_ALERTS, fast
    slow = [g["name"] for g, i in groups() if 1 < i < 5]
    assert not slow, f"groups between 1 s and 5 s: {slow}"


def test_the_one_second_alerts_read_only_series_recorded_every_second():
    interval = {r["record"]: i for g, i in groups() for r in g["rules"] if "record" in r}
    for g, i in groups():
        for r in g["rules"]:
            if r.get("alert") not in FAST_ALERTS:
                continue
            assert i == 1, (r["alert"], i)
            for name in re.findall(r"[a-z_]+:[a-z0-9_]+:[a-z0-9_]+", r["expr"]):
                assert CONSTANT.match(name) or interval[name] <= SLOW_BY_DESIGN.get(name, 1), \
                    (r["alert"], name, interval[name])


def test_dashboards_read_no_recording_rule_slower_than_a_second():
    interval = {r["record"]: i for g, i in groups() for r in g["rules"] if "record" in r}
    checked = 0
    for path in sorted(glob.glob(os.path.join(ROOT, "dashboards", "*.json"))):
        with open(path, encoding="utf-8") as f:
            dash = json.load(f)
        for q in gq.dashboard_queries(dash):
            for sel in promql.selectors(q.expr):
                metric, _ = promql.parse_matchers(sel)
                checked += 1
                if metric in interval:
                    assert interval[metric] <= 1, f"{os.path.basename(path)} {q.source}: {metric} every {interval[metric]} s"
    assert checked


def test_inlined_rule_is_the_rule_with_the_panels_matchers():
    rule = rules.recorded()["instance_datname:pg_xact:rate1s"]
    got = rules.expr("instance_datname:pg_xact:rate1s", 'target=~"$target"')
    assert got == "(" + rule.replace('{datname!=""}', '{datname!="", target=~"$target"}') + ")"
    # A selector without matchers gets the panel's, and function names are left alone.
    got = rules.expr("instance_device:node_disk_io_time_seconds:rate1s", 'target=~"$target", device="sda"')
    assert got == '(irate(node_disk_io_time_seconds_total{target=~"$target", device="sda"}[3s]))'
    # Every selector of a multi-counter rule is filtered.
    got = rules.expr("instance_device:node_disk_await_seconds:mean1s", 'target="a"')
    assert got.count("[3s]") == got.count('target="a"}[3s]') == 7
    assert all(promql.parse_matchers(s)[1].count(("target", "=", "a")) == 1 for s in promql.selectors(got))
