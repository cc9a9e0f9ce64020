"""`benchwatch demo --engine mariadb --instances 4`: four real MariaDB instances, four sysbench runs side by side."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from benchwatch.query.prometheus import query
from benchwatch.stack.config import load_config
from benchwatch.stack.native import Stack
from tests.helpers import throwaway
from tests.helpers.throwaway import BENCHWATCH
from tests.helpers.tools import require_tool

pytestmark = pytest.mark.integration


def test_demo_runs_four_instances_side_by_side_and_prints_their_sum():
    for tool in ("sysbench", "mariadbd", "prometheus-mysqld-exporter"):
        require_tool(tool)
    state_dir = throwaway.make_state_dir()
    ports = throwaway.free_ports()
    env = dict(os.environ, BENCHWATCH_STATE_DIR=state_dir, **{f"BENCHWATCH_{c.upper()}_PORT": str(p) for c, p in ports.items()})
    stack = None
    try:
        r = subprocess.run([BENCHWATCH, "demo", "--engine", "mariadb", "--instances", "4", "--duration", "8"],
                           env=env, capture_output=True, text=True, timeout=900)
        stack = Stack(load_config(state_dir))
        assert r.returncode == 0, r.stderr + r.stdout
        names = [f"mariadb-{i}" for i in range(1, 5)]
        # Four servers, each with its own port, data directory and exporter, each scraped with its target label.
        instances = stack.status()["mysql"]["instances"]
        assert [i["target"] for i in instances] == names
        assert len({i["port"] for i in instances}) == 4 and len({i["data_dir"] for i in instances}) == 4
        assert all(i["healthy"] for i in instances)
        up = query(stack.cfg.url("prometheus"), 'mysql_up{job="mysql"} == 1')
        assert sorted(x["metric"]["target"] for x in up) == names
        # One line per instance with its run and TPS, then the sum of their means.
        lines = {m.group(1): float(m.group(3)) for m in re.finditer(r"^  (mariadb-\d) +run (\S+)  TPS mean ([0-9.]+)", r.stdout, re.M)}
        assert sorted(lines) == names and all(v > 0 for v in lines.values()), r.stdout
        total = float(re.search(r"^  sum +TPS mean ([0-9.]+)", r.stdout, re.M).group(1))
        assert abs(total - sum(lines.values())) < 0.2, r.stdout
        # Each run's stability profile, as its summary.json keeps it, under its line.
        assert len(re.findall(r"^ {13}stability: CoV [0-9.]+, p5/median ", r.stdout, re.M)) == 4, r.stdout
        # The four runs are one experiment, each run_info naming the instance it drove.
        experiment = re.search(r"^experiment (\S+):", r.stdout, re.M).group(1)
        infos = query(stack.cfg.url("prometheus"), f'last_over_time(benchmark_run_info{{experiment="{experiment}"}}[10m])')
        assert sorted(x["metric"]["target"] for x in infos) == names
        runs = [d for d in os.listdir(stack.cfg.runs_dir)]
        metas = [json.load(open(os.path.join(stack.cfg.runs_dir, d, "meta.json"))) for d in runs]
        assert sorted(m["info"]["target"] for m in metas if m.get("experiment") == experiment) == names
    finally:
        if stack is not None:
            stack.down()
            assert not [c for c in stack.components() if stack.pid(c) is not None]
        subprocess.run(["rm", "-rf", state_dir])
