"""A run's last progress line is drawn: the dashboard's queries against a real Prometheus.

The samples are what the exporter's runs collector remote-writes for a finished
run directory, and what ``benchwatch import`` writes for the same output; the
panels are queried the way Grafana does (query_range at the dashboard's step).
"""

from __future__ import annotations

import json
import math
import os
import struct

from benchwatch.exporter.pgbench_runs import PgbenchRunsCollector
from benchwatch.loadgens.pgbench import output as po
from benchwatch.query import grafana
from benchwatch.record import replay, rundir
from benchwatch.share import rebuild
from benchwatch.sink.remote_write import RemoteWriter
from tests.helpers.prometheus import REMOTE_WRITE_CONFIG, start_prometheus

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "pgbench")
DASHBOARD = os.path.join(ROOT, "dashboards", "pgbench-run.json")
PANELS = ("panel 1 'TPS' A", "panel 9 'Latency' A", "panel 9 'Latency' B")

# Real captures: a clock start off the step grid (as almost every run's is), one on it
# (the end must not add a point either), and absolute times (--progress-timestamp).
CASES = [("stall_off_grid", "pg15_stall", 1795370000.604),
         ("stall_on_grid", "pg15_stall", 1795370100.0),
         ("timestamps", "pg15_progress_timestamp", None)]


def read(name: str) -> tuple[bytes, bytes]:
    with open(os.path.join(FIXTURES, name + ".stderr"), "rb") as f:
        err = f.read()
    with open(os.path.join(FIXTURES, name + ".stdout"), "rb") as f:
        return err, f.read()


def progress_lines(data: bytes, start: float | None) -> list[tuple[float, po.Progress]]:
    """(Unix time, line) of every progress line, as pgbench printed it."""
    parser = po.PgbenchOutputParser()
    out = []
    for line in data.split(b"\n"):
        for ev in parser.feed(line):
            if isinstance(ev, po.Progress):
                out.append((ev.time_s if ev.absolute else start + ev.time_s, ev))
    return out


def sample_key(s) -> tuple:
    return s.name, s.labels, s.timestamp_ms, struct.pack("<d", s.value)  # NaN markers compare by their bits


def finished_run_dir(runs_dir: str, run_id: str, err: bytes, out: bytes, start: float, end: float) -> None:
    run = rundir.create_run_dir(runs_dir, run_id)
    for name, data in (("stderr.log", err), ("stdout.log", out)):
        with open(run.file(name), "wb") as f:
            f.write(data)
    run.write_meta({"run_id": run_id, "state": rundir.FINISHED, "clock_start_epoch": start, "ended_at": end,
                    "exit_code": 0, "progress_interval": 1, "argv": ["pgbench", "-P", "1", "-T", "8", "postgres"]})


def test_every_progress_line_is_a_point_of_the_panels(tmp_path):
    with open(DASHBOARD, encoding="utf-8") as f:
        queries = {q.source: q for q in grafana.dashboard_queries(json.load(f))}
    runs_dir = str(tmp_path / "runs")
    os.makedirs(runs_dir)
    samples = []
    expected = {}
    for case, fixture, start in CASES:
        err, out = read(fixture)
        lines = progress_lines(err, start)
        clock_start = start if start is not None else lines[0][0] - 1.0
        # pgbench ends a little after its last progress line.
        finished_run_dir(runs_dir, f"live-{case}", err, out, clock_start, lines[-1][0] + 0.05)
        model, imported = replay.replay_output(err + out, f"import-{case}", start)
        samples += imported + model.end_markers()  # what `benchwatch import` writes
        for run_id in (f"live-{case}", f"import-{case}"):
            expected[run_id] = lines
    live = []
    PgbenchRunsCollector(runs_dir, live.extend).poll()
    samples += live
    assert {dict(s.labels)["run_id"] for s in samples} == set(expected)
    # A snapshot rebuilt from the run directory draws the same: the same samples, end markers included.
    rebuilt = [s for name in os.listdir(runs_dir) for s in rebuild.run_samples(rundir.RunDir(os.path.join(runs_dir, name)))]
    assert sorted(map(sample_key, rebuilt)) == sorted(map(sample_key, live))

    with start_prometheus(tmp_path / "prom", REMOTE_WRITE_CONFIG, ["--web.enable-remote-write-receiver"]) as prom:
        RemoteWriter(prom.remote_write_url).send(samples)
        for run_id, lines in expected.items():
            # Grafana aligns the range to the step (1 s for a range this short).
            start_s = math.floor(lines[0][0]) - 3
            end_s = math.ceil(lines[-1][0]) + 10
            for source in PANELS:
                result = grafana.run_query(prom.url, queries[source], {"run_id": run_id}, start_s, end_s)
                assert len(result) == 1, (run_id, source, result)
                points = [(float(t), float(v)) for t, v in result[0]["values"]]
                assert len(points) == len(lines), (run_id, source, points, [t for t, _ in lines])
                if source == PANELS[0]:
                    assert [v for _, v in points] == [ev.tps for _, ev in lines], (run_id, points)
                # Each point is drawn at the first step at or after its line.
                assert [t for t, _ in points] == [math.ceil(round(t, 3)) for t, _ in lines], (run_id, source, points)
