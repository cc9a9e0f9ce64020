"""The dips collector's cheap seconds: a pass only when a line might be low, the same dips written.

The watcher sees the lines the exporter sends (ExporterOptions.subscribe); its reads of
Prometheus go to ``FakePrometheus``, which answers from what the test sent, so these
tests need no stack (tests/integration/test_explain.py runs the real thing).
"""

from __future__ import annotations

import math
import os
import random

import pytest

from benchwatch.explain import dips, report
from benchwatch.exporter import dips as dips_collector
from benchwatch.exporter.dips import KEEP_S, RECHECK_S, DipWatcher, possibly_low
from benchwatch.model.samples import STALE_NAN, Sample, is_stale_marker, sample
from benchwatch.query.series import Series
from benchwatch.record import rundir

T0 = 1_800_000_000.0
RUN = "r"


class FakePrometheus:
    """Stands in for query.series.fetch: the run's benchmark_progress_tps as sent, over the same window."""

    def __init__(self):
        self.samples: list[Sample] = []
        self.calls: list[str] = []  # "tps" (the look) or "evidence" (everything a full pass reads)

    def fetch(self, base, selectors, start, end):
        self.calls.append("tps" if selectors[0].startswith("benchmark_progress_tps{") else "evidence")
        since = end - max(1, math.ceil(end - start))
        points = [(s.timestamp_ms, s.value) for s in self.samples
                  if s.name == "benchmark_progress_tps" and since * 1000 < s.timestamp_ms <= end * 1000]
        return [Series("benchmark_progress_tps", {"run_id": RUN, "tool": "pgbench"}, points)] if points else []


class Harness:
    """One live run, fed a progress line at a time; the watcher polled after each, its pass waited for."""

    def __init__(self, tmp_path, *, observing: bool = True, interval: float = 1.0):
        self.run = rundir.create_run_dir(str(tmp_path / "runs"), RUN)
        self.run.write_meta({"run_id": RUN, "mode": "run", "state": rundir.RUNNING, "pid": os.getpid(),
                             "progress_interval": interval, "clock_start_epoch": T0, "pgbench_version": "15.18",
                             "argv": ["pgbench", "-c", "2", "-P", str(interval)]})
        self.clock = [T0]
        self.prom = FakePrometheus()
        self.subscribers: list = []
        self.out: list[Sample] = []
        self.watcher = DipWatcher(str(tmp_path / "runs"), "http://prometheus.invalid", sink=self.out.extend,
                                  clock=lambda: self.clock[0], subscribe=self.subscribers.append if observing else None)
        self.watcher.fetch = self.prom.fetch

    def send(self, samples: list[Sample]) -> None:
        self.prom.samples.extend(samples)
        for callback in self.subscribers:
            callback(samples)

    def line(self, ts_ms: int, tps: float) -> None:
        """A progress line (or staleness marker) at ts_ms, then the poll of that moment."""
        self.send([sample("benchmark_progress_tps", {"run_id": RUN, "tool": "pgbench"}, tps, ts_ms)])
        self.poll(ts_ms / 1000 + 0.05)

    def poll(self, now: float) -> None:
        self.clock[0] = now
        self.watcher.poll()
        if self.watcher.thread is not None:
            self.watcher.thread.join(10)
        self.watcher.poll()  # hands over what the pass wrote (no pass: the same second)

    def end(self, now: float) -> None:
        self.run.write_meta({**self.run.read_meta(), "state": rundir.FINISHED, "ended_at": now, "exit_code": 0})
        for dt in (0.5, 1.5, 2.6, 3.7):
            self.poll(now + dt)

    def leading(self) -> list[Sample]:
        return [s for s in self.out if s.name == "benchmark_dip_leading_cause_info"]

    def finished(self) -> list[dict]:
        return [dict(s.labels) for s in self.out if s.name == "benchmark_dip_info" and not is_stale_marker(s.value)]


def steady(n: int, rng: random.Random, level: float = 1000.0, noise: float = 0.03) -> list[float]:
    return [level * (1 + rng.uniform(-noise, noise)) for _ in range(n)]


def feed(h: Harness, values: list[float]) -> list[int]:
    """One line a second; returns how many fetches had been made after each line."""
    seen = []
    for i, v in enumerate(values):
        h.line(int((T0 + i + 1) * 1000), v)
        seen.append(len(h.prom.calls))
    return seen


def test_a_steady_run_costs_one_look_then_nothing(tmp_path):
    h = Harness(tmp_path)
    feed(h, steady(200, random.Random(1)))
    # The first look reads the run back once (after an exporter restart, its past); then not
    # a single query in 200 s, though the detector ran on the lines in memory as a safety net.
    assert h.prom.calls == ["tps"]
    assert h.out == []
    # Bounded: what a pass would read (KEEP_S), and a little more, not the whole run.
    kept = h.watcher.lines[RUN].points
    assert set(h.watcher.lines) == {RUN} and KEEP_S < (kept[-1][0] - kept[0][0]) / 1000 <= KEEP_S + 15


def test_the_safety_net_runs_the_detector_on_the_lines_in_memory(tmp_path, monkeypatch):
    h = Harness(tmp_path)
    runs = []
    real = dips.detect
    monkeypatch.setattr(dips, "detect", lambda *a, **kw: runs.append(len(a[0])) or real(*a, **kw))
    feed(h, steady(95, random.Random(2)))
    # The first look, then one run of the detector every RECHECK_S on what is in memory.
    assert runs[0] == 1 and len(runs) == 1 + int((95 - 1) // RECHECK_S)
    assert runs[-1] > 80 and h.prom.calls == ["tps"]


def test_a_drop_to_40_percent_calls_for_a_pass_on_its_first_line(tmp_path):
    h = Harness(tmp_path)
    values = steady(60, random.Random(3)) + [400.0] * 5 + steady(30, random.Random(4))
    seen = feed(h, values)
    assert seen[59] == 1  # nothing before the drop
    # The first low line: the detector on the lines in memory finds the dip, so the evidence is
    # read (and only it: no look back at the TPS Prometheus holds); the leading cause is written at once.
    assert h.prom.calls[1:2] == ["evidence"] and seen[60] == 2
    lead = h.leading()
    assert lead[0].value == 1.0 and dict(lead[0].labels)["cause"] == report.NO_CAUSE
    assert lead[0].timestamp_ms == int((T0 + 61 + 0.05) * 1000) + 1
    # The evidence once at the dip's start, then the detector on the lines in memory each second (the
    # leading cause written every second all the same), the evidence again when it ends (ONGOING_EVERY_S
    # after the first, at the latest): the finished dip written on the line after it, then quiet.
    assert seen[64] == 2 and seen[65] == 3 and seen[-1] == seen[65]
    assert [s.timestamp_ms for s in lead if s.value == 1.0] == [int((T0 + t + 0.05) * 1000) + 1 for t in range(61, 66)]
    assert is_stale_marker(lead[-1].value)
    (dip,) = {tuple(sorted(d.items())) for d in h.finished()}
    assert dict(dip)["level"] == "deep" and dict(dip)["dip"] == "1"
    span = [s.timestamp_ms for s in h.out if s.name == "benchmark_dip_info"]
    assert span[0] == int((T0 + 60) * 1000) and span[-2] == int((T0 + 65) * 1000)


def test_a_mild_two_line_dip_at_75_percent_is_written(tmp_path):
    h = Harness(tmp_path)
    values = steady(60, random.Random(5), noise=0.01) + [750.0, 750.0] + steady(40, random.Random(6), noise=0.01)
    seen = feed(h, values)
    # Line 61 alone is no dip yet (a mild one needs 2 intervals): the detector on the lines in
    # memory says so, and Prometheus is not asked at all.
    assert seen[60] == 1
    # Line 62 makes it one: the evidence and the leading cause; line 63 ends it: the dip.
    assert seen[61] == 2 and [s.value for s in h.leading()][0] == 1.0
    found = h.finished()
    assert [(d["level"], d["dip"]) for d in found[:1]] == [("mild", "1")]
    h.end(T0 + len(values) + 1)
    expected = dips.detect([(int((T0 + i + 1) * 1000), v) for i, v in enumerate(values)])
    assert [(d.start, d.end, d.level) for d in expected] == [(T0 + 60, T0 + 62, "mild")]
    span = [s.timestamp_ms for s in h.out if s.name == "benchmark_dip_info"]
    assert span[0] == int((T0 + 60) * 1000) and span[-2] == int((T0 + 62) * 1000)


def test_the_run_s_end_still_gets_its_final_pass(tmp_path):
    h = Harness(tmp_path)
    feed(h, steady(40, random.Random(7)))
    h.end(T0 + 41)
    assert h.prom.calls == ["tps", "evidence"]
    assert RUN in h.watcher.done and RUN not in h.watcher.lines and not h.watcher.runs


# -- the pre-check is a superset of the detector --------------------------------------------------

def random_run(rng: random.Random, interval: float) -> list[tuple[int, float]]:
    """(ms, tps) as the run model writes them: noise, ramps, steps, dips, stalls (zeros once an
    interval), old pgbench's catch-up lines 1 ms apart, staleness markers."""
    out: list[tuple[int, float]] = []
    t = T0 * 1000
    level = rng.uniform(50, 5000)
    noise = rng.choice([0.005, 0.03, 0.1, 0.25])
    n = rng.randint(40, 150)
    i = 0
    if rng.random() < 0.5:  # ramp-up
        for k in range(rng.randint(2, 15)):
            t += interval * 1000
            out.append((int(t), level * (k + 1) / 16))
    while i < n:
        i += 1
        r = rng.random()
        if r < 0.03:
            level *= rng.choice([0.4, 0.6, 0.75, 1.3, 1.8, 2.5])  # a step
        elif r < 0.06:  # a ramp to a new level
            target = level * rng.uniform(0.3, 3)
            steps = rng.randint(3, 30)
            for k in range(steps):
                t += interval * 1000
                out.append((int(t), level + (target - level) * (k + 1) / steps))
            level = target
            continue
        t += interval * 1000 * rng.uniform(0.97, 1.03)
        if r < 0.10:  # a dip of a few lines
            depth = rng.choice([0.0, 0.2, 0.45, 0.55, 0.7, 0.78, 0.82, 0.9])
            for _ in range(rng.randint(1, 5)):
                out.append((int(t), level * depth * (1 + rng.uniform(-noise, noise))))
                t += interval * 1000
        elif r < 0.13:  # a stall, then (sometimes) old pgbench's burst of catch-up lines
            stall = rng.randint(2, 12)
            for _ in range(stall):
                out.append((int(t), 0.0))
                t += interval * 1000
            if rng.random() < 0.6:
                for _ in range(rng.randint(1, stall)):
                    out.append((int(t), rng.choice([0.0, level * rng.uniform(0.1, 3)])))
                    t += 1
        elif r < 0.15:
            out.append((int(t), STALE_NAN))
            continue
        elif r < 0.17:  # no line at all for a while (the exporter was down), a burst after it
            t += rng.uniform(10, 70) * 1000
            for _ in range(rng.choice([0, 0, 3, 6])):
                out.append((int(t), level * rng.uniform(0.1, 2)))
                t += 1
        out.append((int(t), max(0.0, level * (1 + rng.gauss(0, noise)))))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_possibly_low_fires_for_every_line_the_detector_finds_in_an_ongoing_dip(seed):
    rng = random.Random(seed)
    ongoing = fired = lines = 0
    for _ in range(4):
        interval = rng.choice([1.0, 1.0, 2.0, 0.5])
        samples = random_run(rng, interval)
        points: list[tuple[int, float]] = []
        for k, (ts, v) in enumerate(samples):
            if v != v:
                continue
            points.append((ts, v))
            lines += 1
            # What a pass reads: the last KEEP_S of lines (a run this short: all of them).
            window = [p for p in samples[:k + 1] if p[0] > ts - KEEP_S * 1000]
            found = dips.detect(window, interval, ongoing=True)
            flagged = possibly_low(points, len(points) - 1, (interval,))
            fired += flagged
            # A lasting dip (held against the level before a fall, dips.Dip.lasting) is the watcher's once its
            # first line was possibly low or the RECHECK_S safety net found it:
            # test_a_collapse_that_lasts_is_under_way_until_the_run_ends_then_one_dip.
            if any(d.ongoing and not d.lasting for d in found):
                ongoing += 1
                assert flagged, (seed, interval, k, samples[max(0, k - 40):k + 1])
    # Not vacuous (these runs are far rougher than a real one: test_a_steady_run_... for that).
    assert 0 < ongoing <= fired < lines, (ongoing, fired, lines)


def test_after_a_silence_the_level_is_another_line_s():
    # 30 lines at 1000, nothing for 40 s, then 700: alone in its window, the line is measured
    # against the level of the lines before the silence (dips._nearest).
    points = [(int(T0 * 1000 + 1000 * k), 1000.0) for k in range(30)] + [(int(T0 * 1000 + 70_000), 700.0)]
    assert [d.ongoing for d in dips.detect(points, 1.0, ongoing=True)] == [True]
    assert possibly_low(points, 30, (1.0,))
    # Then old pgbench's catch-up lines 1 ms apart: five lines in the window, still one full interval.
    burst = points + [(points[-1][0] + k, 700.0) for k in range(1, 5)]
    assert [d.ongoing for d in dips.detect(burst, 1.0, ongoing=True)] == [True]
    assert possibly_low(burst, 34, (1.0,))


def test_possibly_low_holds_for_each_interval_it_may_be_given():
    # Lines 0.6 s apart: full intervals at 1 s, not at 2 s (too few lines then: another line's level).
    points = [(int(T0 * 1000 + 600 * k), 1000.0) for k in range(8)] + [(int(T0 * 1000 + 600 * 8), 700.0)]
    assert possibly_low(points, 8, (1.0,))
    assert possibly_low(points, 8, (1.0, 2.0))
    assert not possibly_low(points[:3] + [(points[3][0], 0.0)], 3, (1.0,))  # fewer than MIN_LINES: no dip


def test_a_collapse_that_lasts_is_under_way_until_the_run_ends_then_one_dip(tmp_path):
    # 40 s at 1000, then 5 TPS for 200 s, longer than a pass's look-back (LOOKBACK_S): the leading cause is
    # written on the collapse's first line and stays under way to the end; one dip from the collapse to the end.
    h = Harness(tmp_path)
    values = steady(40, random.Random(3)) + [5.0 + (i % 3) for i in range(200)]
    written_at = []
    for i, v in enumerate(values):
        before = len(h.leading())
        h.line(int((T0 + i + 1) * 1000), v)
        if len(h.leading()) > before:
            written_at.append(i)
    assert written_at and written_at[0] == 40, written_at
    assert all(not is_stale_marker(s.value) for s in h.leading()), "the dip ended before the run did"
    h.end(T0 + len(values) + 1)
    (d,) = {tuple(sorted(labels.items())) for labels in h.finished()}
    stamps = sorted(s.timestamp_ms for s in h.out if s.name == "benchmark_dip_info" and not is_stale_marker(s.value))
    assert (stamps[0], stamps[-1]) == (int((T0 + 40) * 1000), int((T0 + 240) * 1000)), (stamps[0], stamps[-1])
    assert dict(d)["level"] == "deep"


def test_a_slow_slide_is_found_by_the_safety_net(tmp_path):
    # 60 s at 1000, then 1 % less each second for 60 s, then flat at 550: no line falls below 80% of the 30 s
    # before it, so the first look comes from RECHECK_S: under way within it of the first lasting line.
    h = Harness(tmp_path)
    values = steady(60, random.Random(5), noise=0.01) + [1000 * 0.99 ** k for k in range(1, 61)] + [550.0] * 60
    first_lasting = next(k for k in range(len(values)) if any(
        d.ongoing and d.lasting for d in dips.detect([(int((T0 + i + 1) * 1000), v) for i, v in enumerate(values[:k + 1])],
                                                     ongoing=True)))
    for i, v in enumerate(values):
        h.line(int((T0 + i + 1) * 1000), v)
        if h.leading():
            break
    assert h.leading() and i <= first_lasting + RECHECK_S + 1, (i, first_lasting)


# -- the same outputs as a pass every second --------------------------------------------------------

@pytest.mark.parametrize("seed", [11, 12, 13])
def test_the_same_leading_causes_and_dips_as_a_pass_every_second(tmp_path, seed):
    rng = random.Random(seed)
    values = steady(40, rng)
    for _ in range(4):
        values += [1000 * rng.choice([0.0, 0.3, 0.7, 0.76])] * rng.randint(1, 4) + steady(rng.randint(8, 25), rng)
    outputs = []
    for observing in (True, False):
        h = Harness(tmp_path / str(observing), observing=observing)
        feed(h, values)
        h.end(T0 + len(values) + 1)
        outputs.append(h)
    new, old = outputs
    assert new.leading() == old.leading() and len(old.leading()) > 2
    assert new.finished() == old.finished() and len({d["dip"] for d in old.finished()}) >= 3
    assert len(new.prom.calls) < len(old.prom.calls) / 2


def test_the_exporter_shows_the_dips_collector_every_batch_sent(tmp_path):
    from benchwatch.exporter.server import Exporter

    e = Exporter(runs_dir=str(tmp_path / "runs"), remote_write_url="http://127.0.0.1:9/api/v1/write")
    watcher = e.collectors["dips"]
    assert watcher.observing
    line = sample("benchmark_progress_tps", {"run_id": RUN, "tool": "pgbench"}, 812.5, int(T0 * 1000))
    e.send([line, sample("benchmark_progress_latency_seconds", {"run_id": RUN}, 0.002, int(T0 * 1000))])
    assert watcher.lines[RUN].points == [(int(T0 * 1000), 812.5)]
    assert e.writer.pending == 2  # and queued for Prometheus as before


def test_a_long_dip_reads_its_evidence_every_ongoing_every_s_not_every_second(tmp_path):
    h = Harness(tmp_path)
    values = steady(60, random.Random(8)) + [300.0] * 20 + steady(30, random.Random(9))
    seen = feed(h, values)
    # One evidence read at its start, then every ONGOING_EVERY_S while it lasts (20 lines: 4 more),
    # and one when it ends; the leading cause still written every second of it.
    reads = seen[80] - seen[59]
    assert reads == 1 + int(20 // dips_collector.ONGOING_EVERY_S), seen[59:82]
    assert len([s for s in h.leading() if s.value == 1.0]) == 20
