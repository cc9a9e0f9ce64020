"""The exporter's remote-write self-metrics against a real Prometheus that refuses samples."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from benchwatch.exporter.server import Exporter
from benchwatch.model.samples import sample
from benchwatch.record.replay import replay_run_dir
from benchwatch.util import processes
from tests.helpers.prometheus import REMOTE_WRITE_CONFIG, free_port, query, start_prometheus
from tests.unit.test_exporter_exposition import make_run

OLD_RUN = "19800101T000000Z-0001"
PREFIX = "benchwatch_exporter_remote_write_"
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def scrape(url: str) -> dict[str, float]:
    """The exporter's unlabelled remote-write samples, read from /metrics as Prometheus would."""
    with _OPENER.open(url, timeout=5) as response:
        text = response.read().decode()
    return {s.name.removeprefix(PREFIX): s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name.startswith(PREFIX)}


def test_rejected_samples_are_counted_and_exposed(tmp_path):
    port = free_port()
    # Like the stack's: it scrapes (here itself), so its TSDB head starts now; an
    # empty head would take samples of any age.
    config = REMOTE_WRITE_CONFIG + f"""\
scrape_configs:
  - job_name: prometheus
    scrape_interval: 1s
    static_configs:
      - targets: ["127.0.0.1:{port}"]
"""
    prom = start_prometheus(tmp_path / "prom", config, ["--web.enable-remote-write-receiver"], port=port)
    stop = threading.Event()
    daemon = None
    try:
        assert processes.wait_until(lambda: query(prom.url, 'up{job="prometheus"}') != [], 30)
        runs = tmp_path / "runs"
        runs.mkdir()
        # A run from 1980, replayed: older than the stack's 30-year out-of-order
        # window, Prometheus refuses every sample of it ("too old sample").
        make_run(str(runs), OLD_RUN, "pg15_report", ["pgbench", "-n", "-r", "-c", "1", "-T", "5", "-P", "1"],
                 start=315_532_800.0)
        # The run's samples alone: the processes collector's (at now) would share the writer's requests and
        # counts (a request holding both is refused, then sent again in two halves by age).
        exporter = Exporter(runs_dir=str(runs), remote_write_url=prom.remote_write_url, registry=CollectorRegistry(),
                            archive_runs=False, collectors={"processes": False})
        exporter_port = free_port()
        daemon = threading.Thread(target=exporter.serve, args=("127.0.0.1", exporter_port, stop), daemon=True)
        daemon.start()
        metrics_url = f"http://127.0.0.1:{exporter_port}/metrics"
        seen: dict = {}

        def settled(check) -> bool:
            try:
                seen.update(scrape(metrics_url))
            except OSError:  # the daemon's HTTP server not up yet
                return False
            return check(seen)

        with open(runs / OLD_RUN / "meta.json", encoding="utf-8") as f:
            run_samples = len(replay_run_dir(str(runs / OLD_RUN), json.load(f)))
        assert run_samples > 50
        assert processes.wait_until(
            lambda: settled(lambda m: m.get("rejected_samples_total", 0) >= run_samples), 30), (seen, run_samples)
        assert seen["samples_total"] == 0 and seen["pending_samples"] == 0 and seen["dropped_samples_total"] == 0
        assert seen["failed_requests_total"] == 1  # the whole run went in one request
        assert query(prom.url, f'benchmark_running{{run_id="{OLD_RUN}"}}', time=315_532_900) == []
        old_run_samples = seen["rejected_samples_total"]

        # A 4xx: a second value for a sample Prometheus already has ("duplicate sample for timestamp", 400).
        now_ms = int(time.time() * 1000)
        exporter.writer.enqueue([sample("bwtest_rejected", {}, 1.0, now_ms)])
        assert processes.wait_until(lambda: settled(lambda m: m["samples_total"] == 1), 30), seen
        exporter.writer.enqueue([sample("bwtest_rejected", {}, 2.0, now_ms)])
        assert processes.wait_until(lambda: settled(lambda m: m["rejected_samples_total"] == old_run_samples + 1), 30), seen
        assert exporter.writer.last_error.status == 400
        assert (seen["samples_total"], seen["failed_requests_total"], seen["pending_samples"]) == (1, 2, 0)
        (kept,) = query(prom.url, "bwtest_rejected", time=now_ms / 1000)
        assert kept["value"][1] == "1"  # Prometheus kept the first value: the second was refused
    finally:
        stop.set()
        if daemon is not None:
            daemon.join(timeout=10)
        prom.stop()
