"""Benchmark: what an agent's Prometheus costs before it ships a single sample.

Run from the repository root::

    .venv/bin/python bench/bench_agent_floor.py [--seconds 20] [--rounds 4]

Side by side on free ports with temporary data dirs, Prometheus 2.42 in agent mode
(``--enable-feature=agent``, as ``benchwatch agent up`` starts it), in three variants:

* ``no remote write``: no scrape target, no remote_write section;
* ``remote write, idle``: no scrape target, one remote_write queue to a receiver
  (benchwatch's private Prometheus, ``query.launch.start_prometheus``);
* ``remote write, node``: that queue plus a node_exporter scraped every second, with
  the agent's 250 ms ``batch_send_deadline``;

and, with ``--gomaxprocs``, the last two again under ``GOMAXPROCS=1``.
After 8 s of settling, each one's CPU (utime+stime of /proc/<pid>/stat) is printed
per window of --seconds. What ``remote write, idle`` costs above ``no remote write``
is the floor of Prometheus 2.42's remote write: its WAL watcher looks at the WAL
every 10 ms (``readPeriod`` in tsdb/wlog/watcher.go) whether or not anything was
written, and no setting changes that.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import yaml

import _live
from benchwatch.query import launch
from benchwatch.stack.native import binary
from benchwatch.util import net, processes

SETTLE_S = 8.0
BATCH_SEND_DEADLINE = "250ms"  # as the agent's configuration


def spawn(directory: str, argv: list[str], ready_url: str, env: dict | None = None) -> int:
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "log"), "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True,
                                env={**os.environ, **(env or {})})
    if not processes.wait_until(lambda: net.http_ok(ready_url), 60, 0.2):
        raise RuntimeError(f"{argv[0]} in {directory} did not get ready (see {directory}/log)")
    return proc.pid


def start_agent(directory: str, receiver: str | None, node: str | None, env: dict | None = None) -> int:
    config: dict = {"global": {"scrape_interval": "1s"}, "scrape_configs": []}
    if node:
        config["scrape_configs"].append({"job_name": "node", "static_configs": [{"targets": [node]}]})
    if receiver:
        config["remote_write"] = [{"url": f"{receiver}/api/v1/write",
                                   "queue_config": {"batch_send_deadline": BATCH_SEND_DEADLINE}}]
    os.makedirs(directory)
    with open(os.path.join(directory, "agent.yml"), "w", encoding="utf-8") as f:
        yaml.safe_dump(config, f)
    port = net.free_port()
    return spawn(directory, [binary("prometheus"), "--enable-feature=agent", f"--config.file={directory}/agent.yml",
                             f"--storage.agent.path={directory}/data", f"--web.listen-address=127.0.0.1:{port}"],
                 f"http://127.0.0.1:{port}/-/ready", env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--gomaxprocs", action="store_true", help="also the remote-write variants under GOMAXPROCS=1")
    args = parser.parse_args()
    print(f"Prometheus agents side by side, {_live.NPROC} cores; {_live.loadavg()}")
    pids: dict[str, int] = {}
    helpers: list[int] = []
    receiving: launch.PrometheusProcess | None = None
    with tempfile.TemporaryDirectory(prefix="bench-agent-floor-") as tmp:
        try:
            receiving = launch.start_prometheus(os.path.join(tmp, "receiver"))  # nothing to scrape, takes pushes
            receiver, node = receiving.url, f"127.0.0.1:{net.free_port()}"
            helpers.append(spawn(os.path.join(tmp, "node"), [
                binary("node_exporter"), f"--web.listen-address={node}"], f"http://{node}/metrics"))
            variants: dict[str, tuple] = {
                "no remote write": (None, None, None),
                "remote write, idle": (receiver, None, None),
                "remote write, node": (receiver, node, None),
            }
            if args.gomaxprocs:
                variants["remote write, idle, GOMAXPROCS=1"] = (receiver, None, {"GOMAXPROCS": "1"})
                variants["remote write, node, GOMAXPROCS=1"] = (receiver, node, {"GOMAXPROCS": "1"})
            for i, (name, (rw, scrape, env)) in enumerate(variants.items()):
                pids[name] = start_agent(os.path.join(tmp, f"agent{i}"), rw, scrape, env)
            time.sleep(SETTLE_S)  # start-up (WAL creation, first scrapes) out of the windows, not a readiness wait
            costs: dict[str, list[float]] = {name: [] for name in pids}
            for r in range(args.rounds):
                before = {name: _live.cpu_seconds(pid) or 0.0 for name, pid in pids.items()}
                time.sleep(args.seconds)  # the measurement window itself
                after = {name: _live.cpu_seconds(pid) or 0.0 for name, pid in pids.items()}
                for name in pids:
                    costs[name].append((after[name] - before[name]) / args.seconds * 1000)
                print(f"  round {r + 1}: " + ", ".join(f"{name} {costs[name][-1]:.1f}" for name in pids) + " ms/s")
        finally:
            for pid in list(pids.values()) + helpers:
                processes.stop_pid(pid)
            if receiving is not None:
                receiving.stop()
    print(f"ms of CPU per second, mean of {args.rounds} windows of {args.seconds:.0f} s (10 ms ticks):")
    for name, values in costs.items():
        print(f"  {name:34} {statistics.mean(values):6.1f}  (min {min(values):.1f}, max {max(values):.1f})")
    floor = statistics.mean(costs["remote write, idle"]) - statistics.mean(costs["no remote write"])
    print(f"remote write's floor (idle queue above none): {floor:.1f} ms/s; {_live.loadavg()}")


if __name__ == "__main__":
    _live.run_main(main)
