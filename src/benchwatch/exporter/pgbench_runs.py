"""Collector for pgbench runs: follows run directories and turns them into series.

Each live run directory (see benchwatch.record.rundir) is read as it grows; every line
goes through the run model, and the samples it returns are handed to the
sink (the remote writer) with pgbench's own timestamps. /metrics shows the
latest value of every series for scrapers that do not take remote write.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable

from benchwatch import loadgens
from benchwatch.collector import ORDER_RUNS, ExporterOptions, MetricsDoc, register_collector
from benchwatch.collector.follow import LineFollower
from benchwatch.exporter import self_metrics as sm
from benchwatch.exporter.delivery import DeliveryLog
from benchwatch.exporter.results_writer import ResultsWriter
from benchwatch.exporter.run_archiver import RunArchiver
from benchwatch.model import catalogue
from benchwatch.model.run import METRICS
from benchwatch.model.samples import Sample
from benchwatch.record import replay, rundir
from benchwatch.util import bounds, processes

log = logging.getLogger("benchwatch.exporter")

METRICS_DOC_SECTION = """
## pgbench runs (benchwatch exporter, `pgbench_runs` collector)

Every series carries `run_id` and `tool` (`pgbench`, or `sysbench` for the series a sysbench run
shares with pgbench runs: see the next section). They reach Prometheus by remote write at pgbench's own timestamps
(one sample per progress line); the exporter's /metrics shows their latest values. pgbench prints
milliseconds: every time here is in seconds. `pgbench_statement_*` also carry `script` and
`statement`; `benchmark_run_info` carries the run's description: `script`, `clients`, `threads`,
`protocol`, `duration_seconds`, `transactions_per_client`, `rate_limit_tps`, `scale`, `mode`,
`pgbench_version`, `server_version`, `hostname` (each where known).

| metric | type | meaning |
| --- | --- | --- |
"""

INGESTED_MARKER = ".ingested"
# Ended runs kept on /metrics; older ones live on in Prometheus and the run directory.
KEEP_ENDED = 10
# Bytes read per file per poll: a long backlog (a restart, a 1M-line attach) is
# caught up in slices rather than turned into millions of samples at once.
READ_SLICE = 1 << 20
# Samples waiting for Prometheus beyond which no more lines are read: the run
# directory holds the rest, so the queue stays bounded and nothing is dropped.
MAX_BACKLOG = 100_000


def _consumed(follower: LineFollower) -> int:
    """Bytes of the file turned into samples: up to the last complete line read."""
    return follower.offset - len(follower.partial)


def _read_prefix(path: str, size: int) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError:
        return b""


class RunFollower:
    def __init__(self, run: rundir.RunDir):
        self.run = run
        meta = run.read_meta()
        self.model = replay.model_for_run(run.run_id, meta)
        self.followers = {name: LineFollower(run.file(name)) for name in replay.FILE_ORDER}
        self.arrivals = LineFollower(run.file(replay.ARRIVALS))
        self.txlog_prefix = meta.get("txlog_prefix")
        self.generator = loadgens.by_name(meta.get("tool"))
        self.txlog = self.generator.latency_log_reader(run.run_id) if self.txlog_prefix else None
        self.txlog_files: dict[str, LineFollower] = {}
        self.done = False
        self.delivery = DeliveryLog(run.path)
        acked = self.delivery.load()
        if acked:
            self._resume(acked, meta)

    def _resume(self, acked: dict[str, int], meta: dict) -> None:
        """Rebuild the model from the bytes Prometheus already has, sending none of them again."""
        if bounds.epoch_or_none(meta.get("clock_start_epoch")) is not None:
            self.model.start_epoch = bounds.epoch_or_none(meta["clock_start_epoch"])
        arrival = meta.get("ended_at")
        self.model.add_arrivals(replay.read_arrivals(b"\n".join(self.arrivals.read_lines(1 << 30)) + b"\n"))
        for name, follower in self.followers.items():
            size = acked.get(name, 0)
            if size:
                replay.feed_lines(self.model, replay.split_lines(_read_prefix(follower.path, size)), arrival)
                follower.offset = size
        if self.txlog is not None:
            for path, size in acked.items():
                if os.path.isabs(path) and size:
                    follower = self.txlog_files[path] = LineFollower(path)
                    self.txlog.expect(path)
                    data = _read_prefix(path, size)
                    self.txlog.feed(path, data[:data.rfind(b"\n") + 1])
                    follower.offset = size
            self.txlog.samples(final=False)  # windows already sent

    def offsets(self) -> dict[str, int]:
        """What this follower has turned into samples so far, per file (txlog files by absolute path)."""
        out = {name: _consumed(f) for name, f in self.followers.items() if f.offset}
        out.update({os.path.abspath(path): _consumed(f) for path, f in self.txlog_files.items() if f.offset})
        return out

    def on_delivered(self):
        """A callback recording this moment's offsets (and, once the run is done, .ingested) when called."""
        offsets, final = self.offsets(), self.done

        def record() -> None:
            self.delivery.save(offsets)
            if final:
                try:
                    with open(self.run.file(INGESTED_MARKER), "w", encoding="ascii") as f:
                        f.write(f"{time.time()}\n")
                except OSError:
                    pass
        return record

    def _poll_txlog(self, final: bool) -> list[Sample]:
        """pgbench's per-thread transaction logs (<prefix>.<pid>, <prefix>.<pid>.<n>): every file, then one samples() call."""
        if self.txlog is None or not self.txlog_prefix:  # one is set with the other
            return []
        directory, base = os.path.split(self.txlog_prefix)
        try:
            names = os.listdir(directory or ".")
        except FileNotFoundError:
            names = []
        for name in names:
            path = os.path.join(directory, name)
            if path not in self.txlog_files and self.generator.latency_log_file(base, name):
                self.txlog_files[path] = LineFollower(path)
                self.txlog.expect(path)
        for path, follower in self.txlog_files.items():
            data = follower.read_chunk(READ_SLICE)
            if data:
                self.txlog.feed(path, data)
            if final:
                rest = follower.take_partial()
                if rest:
                    self.txlog.feed(path, rest + b"\n")
        return self.txlog.samples(final=final)

    def poll(self, now: float) -> list[Sample]:
        batches = [(name, f.read_lines(READ_SLICE)) for name, f in self.followers.items()]
        # Read meta and the arrivals after the lines: the writer stamps pgbench's clock start into
        # meta.json, and a line's arrival, before it writes the line.
        self.model.add_arrivals(replay.read_arrivals(b"\n".join(self.arrivals.read_lines()) + b"\n"))
        meta = self.run.read_meta()
        if self.model.start_epoch is None:
            # As recorded, unless damaged (nan, 1e309, a string): then the first line's arrival sets the clock.
            self.model.start_epoch = bounds.epoch_or_none(meta.get("clock_start_epoch"))
        out: list[Sample] = []
        for _name, lines in batches:
            out.extend(replay.feed_lines(self.model, lines, now))
        ended = meta.get("state") != rundir.RUNNING or not processes.process_alive(meta.get("pid"))
        if ended and any(self._unread(f) for f in [*self.followers.values(), *self.txlog_files.values()]):
            # Still catching up (slices of READ_SLICE): the end comes once everything is read.
            out.extend(self._poll_txlog(final=False))
            return out
        if ended:
            # Whatever the writer left unterminated, then the end of the run.
            for follower in self.followers.values():
                lines = follower.read_lines()
                rest = follower.take_partial()
                if rest is not None:
                    lines.append(rest)
                out.extend(replay.feed_lines(self.model, lines, now))
            out.extend(replay.close(self.model, meta.get("ended_at", now), meta.get("exit_code")))
            out.extend(self._poll_txlog(final=True))
            # .ingested is written once Prometheus has acknowledged these last samples (on_delivered).
            self.done = True
        else:
            out.extend(self.model.tick(now))
            out.extend(self._poll_txlog(final=False))
        return out

    @staticmethod
    def _unread(follower: LineFollower) -> bool:
        try:
            return os.stat(follower.path).st_size > follower.offset
        except OSError:
            return False


class PgbenchRunsCollector:
    """Discovers runs in runs_dir, follows the live ones, exposes their latest values."""

    def __init__(self, runs_dir: str, sink: Callable[[list[Sample]], None],
                 clock: Callable[[], float] = time.time, rescan_s: float = 0.5,
                 on_finished: Callable[[rundir.RunDir], None] | None = None,
                 mark: Callable[[Callable[[], None]], None] | None = None,
                 backlog: Callable[[], int] | None = None):
        """``mark(callback)``: call back once everything given to ``sink`` so far is delivered
        (without it the sink is taken to deliver at once); ``backlog()``: samples not yet delivered."""
        self.runs_dir = runs_dir
        self.sink = sink
        self.mark = mark
        self.backlog = backlog
        self.on_finished = on_finished
        self.clock = clock
        self.following: dict[str, RunFollower] = {}
        self.ended: list[RunFollower] = []
        self.seen: set[str] = set()
        self.pending: set[str] = set()  # run directories without meta.json yet
        # run id -> why it is not followed (damaged meta.json, a follower that raised): one bad
        # run is set aside, counted and logged once; the others go on.
        self.unreadable: dict[str, str] = {}
        # A new run's first line is as prompt as the others: runs_dir is listed when it changes,
        # not only every rescan_s (which alone delayed it up to 450 ms).
        self._new_runs = rundir.NewRuns(runs_dir, rescan_s)

    def _set_aside(self, run_id: str, error: Exception) -> None:
        self.unreadable[run_id] = f"{type(error).__name__}: {error}"
        log.error("run %s is not followed: %s", run_id, self.unreadable[run_id])

    def poll(self) -> int:
        now = self.clock()
        if self._new_runs.due(now, waiting=bool(self.pending)):
            self._discover()
        produced = 0
        for run_id, follower in list(self.following.items()):
            if self.backlog is not None and self.backlog() > MAX_BACKLOG:
                break  # the rest waits in the run directories
            try:
                samples = follower.poll(now)
            except Exception as e:  # a damaged run directory; raw files stay for import
                del self.following[run_id]
                self._set_aside(run_id, e)
                continue
            if samples:
                produced += len(samples)
                self.sink(samples)
            if self.mark is not None:
                self.mark(follower.on_delivered())
            else:
                follower.on_delivered()()
            if follower.done:
                del self.following[run_id]
                self.ended = (self.ended + [follower])[-KEEP_ENDED:]
                if self.on_finished:
                    self.on_finished(follower.run)
        return produced

    def watch_paths(self) -> list[str]:
        """What to wake on: new run directories, meta.json of those not described yet, the followed runs' files.

        Not the transaction logs: they are written all the time, and are read with
        each progress line and at least once a second anyway."""
        paths = [self.runs_dir]
        paths += [os.path.join(self.runs_dir, name, rundir.META) for name in self.pending]
        for follower in self.following.values():
            paths += [f.path for f in follower.followers.values()]
            paths.append(follower.run.file(rundir.META))
        return paths

    def _discover(self) -> None:
        try:
            names = os.listdir(self.runs_dir)
        except FileNotFoundError:
            return
        self.pending.clear()
        for name in names:
            if name in self.seen:
                continue
            run = rundir.RunDir(os.path.join(self.runs_dir, name))
            try:
                meta = run.read_meta()
            except (rundir.CorruptMeta, OSError) as e:
                self.seen.add(name)
                self._set_aside(name, e)
                continue
            if not meta:
                self.pending.add(name)
                continue  # meta.json not written yet: look again next scan
            self.seen.add(name)
            if meta.get("mode") == "import" or os.path.exists(run.file(INGESTED_MARKER)):
                continue
            try:
                self.following[name] = RunFollower(run)
            except Exception as e:  # meta.json of the wrong shape (argv not a list, ...)
                self._set_aside(name, e)

    def collect(self) -> Iterable:
        by_name: dict[str, list] = {}
        for follower in list(self.following.values()) + list(self.ended):
            for series in follower.model.current():
                by_name.setdefault(series.name, []).append(series)
        families = []
        for name, members in by_name.items():
            # Runs may differ in label names (e.g. scale known or not): expose the union, "" where absent.
            labels = sorted({k for s in members for k in s.labels})
            family = catalogue.family(replay.run_metrics(), name, labels)
            for s in members:
                family.add_metric([s.labels.get(k, "") for k in labels], s.value)
            families.append(family)
        unreadable = sm.family(sm.RUNS_UNREADABLE)
        unreadable.add_metric([], len(self.unreadable))
        families.append(unreadable)
        return families


@register_collector("pgbench_runs", "follow pgbench run directories and remote-write their series", order=ORDER_RUNS)
def _build(options: ExporterOptions) -> PgbenchRunsCollector:
    archiver = None
    if options.archive_url:
        results = ResultsWriter.from_environ(options.runs_dir, options.environ)
        archiver = RunArchiver(options.archive_url, results)
        options.registry.register(archiver)  # its collect() has the results writer's counts too
    return PgbenchRunsCollector(options.runs_dir, options.sink, clock=options.clock, on_finished=archiver,
                                mark=options.mark, backlog=options.backlog)


def metrics_doc() -> MetricsDoc:
    """The run model's series, then each load generator's own section."""
    return MetricsDoc([(METRICS_DOC_SECTION, METRICS),
                       *((g.metrics_doc, {**g.metrics, **g.latency_log_metrics})
                         for g in loadgens.load_generators().values())])
