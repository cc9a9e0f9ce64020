"""The benchwatch exporter daemon: collectors, a remote-write sink, /metrics.

Collectors can be switched like node_exporter's: --[no-]collector.NAME.
"""

from __future__ import annotations

import argparse
import json
import logging
import queue
import signal
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from benchwatch.exporter import COLLECTORS
from benchwatch.exporter.checkpoints import CheckpointCollector
from benchwatch.exporter.pgbench_runs import PgbenchRunsCollector
from benchwatch.sink.remote_write import BufferedRemoteWriter

log = logging.getLogger("benchwatch.exporter")

# How often files are checked for new lines: bounds line-to-Prometheus latency
# (median 136 ms at 0.25 s, against a 1 s target) at a third of 0.1 s's CPU.
POLL_INTERVAL_S = 0.25

# The daemon's own figures, on /metrics only: name as exposed -> (type, help).
EXPORTER_METRICS = {
    "benchwatch_exporter_remote_write_samples_total": ("counter", "Samples delivered to Prometheus by remote write."),
    "benchwatch_exporter_remote_write_failed_requests_total": ("counter", "Remote-write requests that failed."),
    "benchwatch_exporter_remote_write_dropped_samples_total": ("counter", "Samples dropped because the pending buffer was full."),
    "benchwatch_exporter_remote_write_pending_samples": ("gauge", "Samples waiting to be delivered."),
    "benchwatch_exporter_run_series_saved_total": ("counter", "Finished runs whose series were saved to their run directory."),
    "benchwatch_exporter_run_series_save_failures_total": ("counter", "Finished runs whose series could not be saved."),
    "benchwatch_exporter_alert_notifications_total": ("counter", "Alerts received from Alertmanager's webhook, by status."),
}


def _counter(name: str, labels: list[str] | None = None) -> CounterMetricFamily:
    return CounterMetricFamily(name[:-len("_total")], EXPORTER_METRICS[name][1], labels=labels)


class WriterStats:
    """Self-metrics of the remote-write sink."""

    def __init__(self, writer: BufferedRemoteWriter):
        self.writer = writer

    def collect(self):
        w = self.writer
        c = _counter("benchwatch_exporter_remote_write_samples_total")
        c.add_metric([], getattr(w, "sent_samples", 0))
        yield c
        c = _counter("benchwatch_exporter_remote_write_failed_requests_total")
        c.add_metric([], getattr(w, "failed_requests", 0))
        yield c
        c = _counter("benchwatch_exporter_remote_write_dropped_samples_total")
        c.add_metric([], getattr(w, "dropped_samples", 0))
        yield c
        g = GaugeMetricFamily("benchwatch_exporter_remote_write_pending_samples",
                              EXPORTER_METRICS["benchwatch_exporter_remote_write_pending_samples"][1])
        g.add_metric([], float(w.pending_count()) if hasattr(w, "pending_count") else 0.0)
        yield g


class RunArchiver:
    """Saves each finished run's series into its run directory, so a later snapshot needs no Prometheus.

    In a thread of its own: saving waits until Prometheus has scraped a few
    seconds past the run, and the poll loop must not wait with it.
    """

    def __init__(self, prometheus_url: str):
        self.prometheus_url = prometheus_url
        self.queue: queue.Queue = queue.Queue()
        self.saved = 0
        self.failed = 0
        threading.Thread(target=self._work, daemon=True, name="run-archiver").start()

    def __call__(self, run) -> None:
        self.queue.put(run)

    def _work(self) -> None:
        from benchwatch.share.archive import save_run_series

        while True:
            run = self.queue.get()
            try:
                save_run_series(run.path, self.prometheus_url)
                self.saved += 1
            except Exception:  # Prometheus away, a run without data: the raw output is still there
                self.failed += 1
                log.exception("could not save the series of run %s", run.run_id)

    def collect(self):
        c = _counter("benchwatch_exporter_run_series_saved_total")
        c.add_metric([], self.saved)
        yield c
        c = _counter("benchwatch_exporter_run_series_save_failures_total")
        c.add_metric([], self.failed)
        yield c


class AlertReceiver:
    """Alertmanager's webhook target: logs each notification's alerts and counts them.

    The stack's Alertmanager sends here by default (alertmanager/alertmanager.yml);
    point it elsewhere, or add receivers, to be told by mail or chat.
    """

    def __init__(self):
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()

    def receive(self, body: bytes) -> bool:
        try:
            message = json.loads(body)
            alerts = message.get("alerts", [])
        except (ValueError, AttributeError):
            return False
        with self.lock:
            for alert in alerts:
                status = str(alert.get("status", "unknown"))
                self.counts[status] = self.counts.get(status, 0) + 1
                labels = alert.get("labels", {})
                log.info("alert %s %s run=%s: %s", status, labels.get("alertname"), labels.get("run_id", "-"),
                         alert.get("annotations", {}).get("summary", ""))
        return True

    def collect(self):
        c = _counter("benchwatch_exporter_alert_notifications_total", labels=["status"])
        with self.lock:
            for status, n in sorted(self.counts.items()):
                c.add_metric([status], n)
        yield c


class LockedCollector:
    """Serialises a collector's collect() with the poll loop that mutates it."""

    def __init__(self, inner, lock: threading.Lock):
        self.inner, self.lock = inner, lock

    def collect(self):
        with self.lock:
            return list(self.inner.collect())


class Exporter:
    def __init__(self, *, runs_dir: str, remote_write_url: str, server_log: str | None = None,
                 collectors: dict[str, bool] | None = None, clock: Callable[[], float] = time.time,
                 registry: CollectorRegistry | None = None, archive_runs: bool = True):
        enabled = dict.fromkeys(COLLECTORS, True)
        enabled.update(collectors or {})
        self.registry = registry or CollectorRegistry()
        self.writer = BufferedRemoteWriter(remote_write_url)
        self.lock = threading.Lock()
        self.pollers = []
        if enabled["pgbench_runs"]:
            archiver = None
            if archive_runs and remote_write_url.endswith("/api/v1/write"):
                archiver = RunArchiver(remote_write_url[:-len("/api/v1/write")])
                self.registry.register(archiver)
            runs = PgbenchRunsCollector(runs_dir, self.writer.enqueue, clock=clock, on_finished=archiver)
            self.pollers.append(runs)
            self.registry.register(LockedCollector(runs, self.lock))
        if enabled["checkpoints"] and server_log:
            checkpoints = CheckpointCollector(server_log, self.writer.enqueue, clock=clock)
            self.pollers.append(checkpoints)
            self.registry.register(LockedCollector(checkpoints, self.lock))
        self.registry.register(WriterStats(self.writer))
        self.alert_receiver = AlertReceiver()
        self.registry.register(self.alert_receiver)
        self.server_log = server_log

    def poll_once(self) -> None:
        with self.lock:
            for poller in self.pollers:
                try:
                    poller.poll()
                except Exception:  # one bad run must not stop the others
                    log.exception("collector %s failed", type(poller).__name__)
        self.writer.flush()

    def serve(self, host: str, port: int, stop: threading.Event) -> None:
        registry = self.registry

        alerts = self.alert_receiver

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                if not self.path.startswith("/alerts"):
                    self.send_error(404)
                    return
                length = int(self.headers.get("Content-Length") or 0)
                ok = alerts.receive(self.rfile.read(min(length, 1 << 20)))
                self.send_response(200 if ok else 400)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self):
                if self.path.startswith("/metrics"):
                    body, ctype = generate_latest(registry), CONTENT_TYPE_LATEST
                elif self.path.startswith("/healthz"):
                    body, ctype = b"ok\n", "text/plain"
                else:
                    body, ctype = b"benchwatch exporter: /metrics /healthz\n", "text/plain"
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, fmt, *args):  # scrapes every second: keep the log quiet
                pass

        httpd = ThreadingHTTPServer((host, port), Handler)
        httpd.daemon_threads = True
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        log.info("listening on http://%s:%d/metrics", host, port)
        try:
            while not stop.is_set():
                self.poll_once()
                stop.wait(POLL_INTERVAL_S)
            self.poll_once()
        finally:
            httpd.shutdown()


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    host, _, port = args.listen.rpartition(":")
    exporter = Exporter(runs_dir=args.runs_dir, remote_write_url=args.remote_write_url,
                        server_log=args.server_log,
                        collectors={name: getattr(args, f"collector_{name}") for name in COLLECTORS})
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    exporter.serve(host or "127.0.0.1", int(port), stop)
    return 0
