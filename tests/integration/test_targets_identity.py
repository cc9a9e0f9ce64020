"""A target is its name and host, judged on what is watched now (issue 19's second defect), against a
real Prometheus that received, by remote write, what an earlier sharded demo, a later one, and an
earlier MariaDB stack left in it: the series of the first demo's instances (other ports) and the
`mysql` job of `local` stopped 90 s ago, and are still inside Prometheus' 5 min lookback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from benchwatch.demokit import newest_by_target
from benchwatch.model.samples import sample
from benchwatch.query import targets
from benchwatch.sink.remote_write import RemoteWriter
from tests.helpers.prometheus import REMOTE_WRITE_CONFIG, query, start_prometheus

HOST = "benchhost"


def _series(name: str, labels: dict, value: float, start: float, end: float) -> list:
    """One sample a second from ``start`` to ``end`` (epoch seconds, whole seconds)."""
    return [sample(name, labels, value, int(t * 1000)) for t in range(int(start), int(end) + 1)]


def _pushed(now: float) -> list:
    old_end, new_start = now - 90, now - 20  # first demo stopped 90 s ago; the second began 20 s ago
    out: list = []
    for i in (1, 2, 3):
        target = f"shard-pg{i}"
        for port, start, end in ((41000 + i, now - 150, old_end), (42000 + i, new_start, now)):
            if i == 3 and port > 42000:
                continue  # shard-pg3 did not come back: silent
            value = 0.0 if i == 2 and port > 42000 else 1.0  # the second demo's shard-pg2 exporter is down
            common = {"target": target, "host": HOST, "instance": f"127.0.0.1:{port}"}
            out += _series("up", {**common, "job": "postgres", "postgres_server": f"127.0.0.1:{port + 1000}"},
                           value, start, end)
            out += _series("up", {**common, "job": "node"}, 1.0, start, end)
            out += _series("pg_stat_database_xact_commit", {**common, "job": "postgres", "datname": "shard01"},
                           float(port), start, end)
    local = {"target": "local", "host": HOST}
    out += _series("up", {**local, "job": "mysql", "instance": "127.0.0.1:19104"}, 1.0, now - 300, old_end)
    out += _series("up", {**local, "job": "postgres", "instance": "127.0.0.1:19187", "postgres_server": "embedded"},
                   1.0, now - 300, now)
    out += _series("up", {**local, "job": "node", "instance": "127.0.0.1:19100"}, 1.0, now - 300, now)
    return out


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    with start_prometheus(tmp_path_factory.mktemp("prom"), REMOTE_WRITE_CONFIG, ["--web.enable-remote-write-receiver"]) as p:
        now = float(int(time.time()))
        RemoteWriter(p.url + "/api/v1/write").send(_pushed(now))
        yield p, now


def test_a_target_restarted_on_other_ports_is_judged_on_its_current_series(prom):
    p, now = prom
    listed = {t["target"]: t for t in targets.list_targets(p.url, now=now)}
    assert sorted(listed) == ["local", "shard-pg1", "shard-pg2", "shard-pg3"]
    one = listed["shard-pg1"]
    assert one["healthy"] and one["problems"] == [], one
    assert one["instance"] == "127.0.0.1:43001" and one["engine"] == "postgresql"  # the current server, not the old
    assert one["jobs"] == {"postgres": True, "node": True}
    local = listed["local"]
    assert local["healthy"] and local["engine"] == "postgresql" and set(local["jobs"]) == {"postgres", "node"}, local
    # Health is still judged: a current exporter that is down, and a target that stopped sending.
    two = listed["shard-pg2"]
    assert not two["healthy"] and two["jobs"] == {"postgres": False, "node": True}
    assert two["problems"] == ["postgres at 127.0.0.1:42002 is down (up=0)"]
    three = listed["shard-pg3"]
    assert not three["healthy"] and three["last_sample_age_s"] >= 89
    assert three["problems"] == [f"no sample for {three['last_sample_age_s']:.0f} s"]


def test_the_sharded_demo_waits_on_each_targets_newest_sample(prom):
    p, now = prom
    selector = 'pg_stat_database_xact_commit{target=~"shard-pg1|shard-pg2"}'
    assert newest_by_target(p.url, selector) == {"shard-pg1": now, "shard-pg2": now}
    # What the demo read before: the first demo's series held the minimum at their end, 90 s ago.
    (old,) = query(p.url, f"min(timestamp({selector}))", now)
    assert float(old["value"][1]) == now - 90


def test_targets_command_says_why_it_exits_1(prom, tmp_path):
    p, _now = prom
    port = p.url.rsplit(":", 1)[1]
    r = subprocess.run([sys.executable, "-m", "benchwatch", "targets", "--json", "--state-dir", str(tmp_path),
                        "--prometheus-port", port], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 1, r.stderr
    listed = {t["target"]: t["healthy"] for t in json.loads(r.stdout)["targets"]}
    assert listed == {"local": True, "shard-pg1": True, "shard-pg2": False, "shard-pg3": False}
    lines = [line for line in r.stderr.splitlines() if line.startswith("benchwatch:")]
    assert any("shard-pg2" in line and "postgres at 127.0.0.1:42002 is down" in line for line in lines), r.stderr
    assert any("shard-pg3" in line and "no sample for" in line for line in lines), r.stderr
    assert not any("shard-pg1" in line or "local" in line for line in lines), r.stderr
