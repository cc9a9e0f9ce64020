"""The benchwatch exporter daemon: collectors, a remote-write sink, /metrics.

Collectors can be switched like node_exporter's: --[no-]collector.NAME.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import cast

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from benchwatch.collector import Sample as SampleLike
from benchwatch.collector import Sink
from benchwatch.exporter import Collector, ExporterOptions, add_collector_flags, enabled_collectors, load_collectors
from benchwatch.exporter import self_metrics as sm
from benchwatch.exporter.dips import LowLines
from benchwatch.model.run import TPS
from benchwatch.model.samples import Sample
from benchwatch.sink.remote_write import BufferedRemoteWriter
from benchwatch.stack.config import DEFAULT_PORTS, LISTEN_HOST
from benchwatch.util.wake import Waker

log = logging.getLogger("benchwatch.exporter")

# How often files are checked for new lines where inotify is unavailable:
# bounds line-to-Prometheus latency (median 136 ms at 0.25 s, against a 1 s
# target) at a third of 0.1 s's CPU.
POLL_INTERVAL_S = 0.25
# With inotify the loop sleeps until a followed file changes, and at most this
# long: what depends on time passing, not on a file (stall zeros of a silent run,
# heartbeats of a checkpoint under way, a run whose process died), is looked at
# once a second.
IDLE_WAKE_S = 1.0
# After a change, wait this long before reading: the wrapper writes a line to
# two files and meta.json in a burst, read together in one poll.
SETTLE_S = 0.02
WRITE_PATH = "/api/v1/write"
# The collector whose lines tell that a run is live (ExporterOptions.run_live), and how long after its
# last TPS line a run still counts as live (a run at -P 10 prints every 10 s).
RUNS_COLLECTOR = "pgbench_runs"
RUN_LIVE_HOLD_S = 15.0


class ScrapeServer(ThreadingHTTPServer):
    """The daemon's HTTP server. A scraper that gives up first (Prometheus' 1 s scrape timeout on a busy
    machine) closes its connection before the body is written: that is its business, not a traceback
    on the daemon's stderr; any other error in a request is logged with its traceback."""

    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError):  # BrokenPipeError, ConnectionResetError, ...
            log.debug("client %s went away: %s", client_address, error)
            return
        log.error("request from %s failed", client_address, exc_info=error)

class RemoteWriteStats:
    """Self-metrics of the remote-write sink, as the writer counts them."""

    def __init__(self, writer: BufferedRemoteWriter):
        self.writer = writer

    def collect(self):
        stats = self.writer.stats()
        for name, value in ((sm.RW_SENT, stats.sent), (sm.RW_FAILED_REQUESTS, stats.failed_requests),
                            (sm.RW_REJECTED, stats.rejected), (sm.RW_DROPPED, stats.dropped),
                            (sm.RW_PENDING, stats.pending)):
            f = sm.family(name)
            f.add_metric([], value)
            yield f


class PollStats:
    """Per-collector health, like node_exporter's node_scrape_collector_*: the last poll's outcome and time."""

    def __init__(self, names):
        self.lock = threading.Lock()
        self.errors = dict.fromkeys(names, 0)
        self.last: dict[str, tuple[bool, float]] = {}  # name -> (success, seconds); absent until polled
        self.cpu = dict.fromkeys(names, 0.0)  # CPU seconds of the polls (the collectors' threads: cpu_of)
        self.remote_write_cpu = 0.0
        self.threads: dict[str, object] = {}  # name -> collector with thread_cpu_seconds

    def record(self, name: str, ok: bool, seconds: float, cpu: float = 0.0) -> bool:
        """Note a poll; returns whether the previous one (if any) had succeeded."""
        with self.lock:
            before = self.last.get(name, (True, 0.0))[0]
            self.last[name] = (ok, seconds)
            self.cpu[name] = self.cpu.get(name, 0.0) + cpu
            if not ok:
                self.errors[name] += 1
        return before

    def cpu_of(self, name: str) -> float:
        return self.cpu.get(name, 0.0) + float(getattr(self.threads.get(name), "thread_cpu_seconds", 0.0))

    def collect(self):
        success = sm.family(sm.COLLECTOR_SUCCESS, ["collector"])
        duration = sm.family(sm.COLLECTOR_DURATION, ["collector"])
        errors = sm.family(sm.COLLECTOR_ERRORS, ["collector"])
        with self.lock:
            for name, (ok, seconds) in self.last.items():
                success.add_metric([name], 1.0 if ok else 0.0)
                duration.add_metric([name], seconds)
            for name, n in self.errors.items():
                errors.add_metric([name], n)
            cpu = sm.family(sm.COLLECTOR_CPU, ["collector"])
            for name in self.errors:
                cpu.add_metric([name], round(self.cpu_of(name), 6))
            rw = sm.family(sm.RW_CPU)
            rw.add_metric([], round(self.remote_write_cpu, 6))
        return [success, duration, errors, cpu, rw]


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
        c = sm.family(sm.ALERT_NOTIFICATIONS, ["status"])
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
    """Collectors from the registry (:func:`benchwatch.exporter.load_collectors`), a remote-write sink,
    self-metrics.

    ``collectors`` switches collectors by name (the rest keep their default);
    ``registry`` is where /metrics comes from (a fresh one unless given);
    ``timer`` times polls for the self-metrics; ``environ`` is where the engines' collectors find their
    server's connection (the daemon's environment; none unless given).
    """

    def __init__(self, *, runs_dir: str, remote_write_url: str, server_log: str | None = None,
                 collectors: dict[str, bool] | None = None, clock: Callable[[], float] = time.time,
                 registry: CollectorRegistry | None = None, archive_runs: bool = True,
                 timer: Callable[[], float] = time.perf_counter, cpu_timer: Callable[[], float] = time.thread_time,
                 database_labels: dict[str, str] | None = None,
                 use_inotify: bool = True, environ: Mapping[str, str] | None = None):
        registered = load_collectors()
        unknown = sorted(set(collectors or {}) - set(registered))
        if unknown:
            raise ValueError(f"unknown collectors {unknown}; known: {sorted(registered)}")
        enabled = {name: spec.default for name, spec in registered.items()}
        enabled.update(collectors or {})
        self.registry = registry if registry is not None else CollectorRegistry()
        self.writer = BufferedRemoteWriter(remote_write_url)
        self.lock = threading.Lock()
        self.timer = timer
        self.cpu_timer = cpu_timer
        self.last_run_line = -math.inf  # time.monotonic() of the last TPS line of a followed run sent
        archive_url = None
        if archive_runs and remote_write_url.endswith(WRITE_PATH):
            archive_url = remote_write_url[:-len(WRITE_PATH)]
        self.subscribers: list[Sink] = []
        self.low_lines: LowLines | None = None  # made when a collector asks for on_possibly_low
        options = ExporterOptions(runs_dir=runs_dir, sink=self.send, registry=self.registry,
                                  server_log=server_log, clock=clock, archive_url=archive_url,
                                  database_labels=dict(database_labels or {}),
                                  mark=self.writer.mark, backlog=lambda: self.writer.stats().pending,
                                  subscribe=self.subscribers.append, on_possibly_low=self.on_possibly_low,
                                  environ=dict(environ or {}),
                                  run_live=self.run_live if enabled.get(RUNS_COLLECTOR) else None)
        self.collectors: dict[str, Collector] = {}
        for name, spec in registered.items():
            collector = spec.factory(options) if enabled[name] else None
            if collector is not None:
                self.collectors[name] = collector
                self.registry.register(LockedCollector(collector, self.lock))
        self.poll_stats = PollStats(self.collectors)
        self.poll_stats.threads = {n: c for n, c in self.collectors.items() if hasattr(c, "thread_cpu_seconds")}
        self.registry.register(self.poll_stats)
        self.registry.register(RemoteWriteStats(self.writer))
        self.alert_receiver = AlertReceiver()
        self.registry.register(self.alert_receiver)
        # The daemon's own CPU, memory, open files, garbage collection and Python
        # version, as any client_python exporter shows them: read at scrape time.
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.server_log = server_log
        # Wakes the poll loop when a followed file changes (inotify), else it polls.
        self.waker = Waker(use_inotify=use_inotify)

    def send(self, samples: Sequence[SampleLike]) -> None:
        """The collectors' sink: queue for remote write, then show the batch to the subscribers."""
        if not isinstance(samples, list):
            samples = list(samples)  # read more than once (the writer, run_live, the subscribers)
        # The interface types samples by their fields (it sits below benchwatch.model); every collector
        # sends benchwatch.model.samples.Sample, which the writer encodes.
        self.writer.enqueue(cast("list[Sample]", samples))
        if any(s.name == TPS for s in samples):
            self.last_run_line = time.monotonic()
        for callback in self.subscribers:
            try:
                callback(samples)
            except Exception:  # a watcher's bookkeeping must not cost the producer its lines
                log.exception("sample subscriber failed")

    def run_live(self) -> bool:
        """ExporterOptions.run_live: a followed run sent a TPS line in the last RUN_LIVE_HOLD_S."""
        return time.monotonic() - self.last_run_line < RUN_LIVE_HOLD_S

    def on_possibly_low(self, callback: Callable[[], None]) -> None:
        """ExporterOptions.on_possibly_low: ``callback()`` when a batch sent holds a possibly low TPS line."""
        if self.low_lines is None:
            self.low_lines = LowLines()
            self.subscribers.append(self.low_lines.observe)
        self.low_lines.callbacks.append(callback)

    def poll_once(self) -> None:
        with self.lock:
            for name, collector in self.collectors.items():
                start, cpu0 = self.timer(), self.cpu_timer()
                error: Exception | None = None
                try:
                    collector.poll()
                except Exception as exc:  # one bad run or log must not stop the others, nor the daemon
                    error = exc
                ok = error is None
                was_ok = self.poll_stats.record(name, ok, self.timer() - start, self.cpu_timer() - cpu0)
                # The traceback once when a collector starts failing, not 4 times a second.
                if was_ok and not ok:
                    log.error("collector %s failed (benchwatch_exporter_collector_errors_total counts the next)", name,
                              exc_info=error)
                elif ok and not was_ok:
                    log.info("collector %s works again", name)
        cpu0 = self.cpu_timer()
        self.writer.flush()
        self.poll_stats.remote_write_cpu += self.cpu_timer() - cpu0

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

        httpd = ScrapeServer((host, port), Handler)
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        log.info("listening on http://%s:%d/metrics", host, port)
        try:
            while not stop.is_set():
                self.poll_once()
                self.wait_for_change(stop)
            self.poll_once()
        finally:
            httpd.shutdown()
            self.waker.close()

    def watch_paths(self) -> list[str]:
        """Files and directories whose change means a collector has something to read."""
        paths: list[str] = []
        for collector in self.collectors.values():
            watched = getattr(collector, "watch_paths", None)
            if watched is not None:
                paths.extend(watched())
        return paths

    def wait_for_change(self, stop: threading.Event) -> None:
        """Until a followed file changes (inotify) or IDLE_WAKE_S pass; without inotify, POLL_INTERVAL_S."""
        if not self.waker.active:
            stop.wait(POLL_INTERVAL_S)
            return
        self.waker.watch(self.watch_paths())
        if self.waker.wait(IDLE_WAKE_S) and not stop.is_set():
            stop.wait(SETTLE_S)

    def stop_soon(self, stop: threading.Event) -> None:
        """Set ``stop`` and end the current wait (callable from a signal handler)."""
        stop.set()
        self.waker.wake()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="benchwatch exporter", description="The benchwatch exporter daemon (started by up).")
    listen = f"{LISTEN_HOST}:{DEFAULT_PORTS['benchwatch_exporter']}"
    parser.add_argument("--listen", default=listen, help=f"address of /metrics and /alerts (default {listen})")
    parser.add_argument("--runs-dir", required=True)
    parser.add_argument("--remote-write-url", required=True)
    parser.add_argument("--server-log", help="the database server's log to follow (checkpoints and other events)")
    parser.add_argument("--label", action="append", default=[], metavar="NAME=VALUE", type=_label,
                        help="a label on every series about the database (checkpoints), e.g. target=db1 host=h1; repeatable")
    parser.add_argument("--long-term-write-url", help="the long-term store's remote-write endpoint: each finished "
                        "run's samples Prometheus did not forward are written there (docs/long-term.md)")
    parser.add_argument("--long-term-query-url", help="the long-term store's Prometheus query API (base URL)")
    parser.add_argument("--long-term-bearer-token-file", help="file (0600) holding the long-term store's bearer token")
    add_collector_flags(parser)
    return parser


def _label(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", name) or name.startswith("__"):
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE with a Prometheus label name")
    return name, value


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    host, _, port = args.listen.rpartition(":")
    if args.long_term_write_url and args.long_term_query_url and args.remote_write_url.endswith(WRITE_PATH):
        from benchwatch.query import longterm

        longterm.configure(args.remote_write_url[:-len(WRITE_PATH)], longterm.Store(
            args.long_term_write_url, args.long_term_query_url, longterm.bearer_headers(args.long_term_bearer_token_file)))
    exporter = Exporter(runs_dir=args.runs_dir, remote_write_url=args.remote_write_url,
                        server_log=args.server_log, collectors=enabled_collectors(args),
                        database_labels=dict(args.label), environ=os.environ)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: exporter.stop_soon(stop))
    exporter.serve(host or "127.0.0.1", int(port), stop)
    return 0
