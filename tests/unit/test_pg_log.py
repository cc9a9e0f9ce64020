"""Server log parsing and the checkpoint collector, on logs captured from PostgreSQL 15 (and hand-written older/newer ones)."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
from collections import Counter
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from benchwatch.engines.postgresql import server_log as pg_log
from benchwatch.engines.postgresql.checkpoints import HEARTBEAT_MS
from benchwatch.engines.postgresql.collectors.checkpoints import CheckpointCollector
from benchwatch.model.samples import validate_series
from tests.helpers.tools import require_tool

HERE = os.path.dirname(os.path.dirname(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "pglog")
HAND = os.path.join(FIXTURES, "handwritten")
UTC = ZoneInfo("UTC")


def fixture(name: str) -> str:
    return os.path.join(FIXTURES, name)


def epoch(text: str, fmt: str = "%Y-%m-%d %H:%M:%S.%f") -> float:
    return datetime.strptime(text, fmt).replace(tzinfo=UTC).timestamp()


def read_events(path: str, log_format: str = "auto", local_tz=UTC):
    reader = pg_log.RecordReader(log_format, path=path, local_tz=local_tz)
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f.read().split("\n"):
            for rec in reader.feed(line):
                ev = pg_log.classify(rec)
                if ev is not None:
                    out.append((rec.timestamp, ev))
    return reader, out


def shape(events):
    return [(ev.event, ev.kind, ev.reason) for _, ev in events]


CK = "checkpoint"
A_SHAPE = [("server_restart", CK, "")] * 2 + [  # "starting PostgreSQL", "database system was shut down at"
    ("too_frequent", CK, ""), ("start", CK, "wal"), ("complete", CK, "")] * 3 + [
    ("too_frequent", CK, ""), ("start", CK, "immediate force wait wal"), ("complete", CK, ""),
    ("start", CK, "time"), ("complete", CK, "")]
B_SHAPE = [("too_frequent", CK, ""), ("start", CK, "wal"), ("complete", CK, "")] * 4 + [
    ("start", CK, "immediate force wait"), ("complete", CK, ""), ("start", CK, "time"), ("complete", CK, ""),
    ("start", CK, "shutdown immediate"), ("complete", CK, ""), ("server_restart", CK, "")]


# -- timestamps --------------------------------------------------------------------


def test_timestamps_with_zones():
    assert pg_log.parse_timestamp("2026-11-22 18:00:08.920 UTC") == epoch("2026-11-22 18:00:08.920")
    assert pg_log.parse_timestamp("2026-11-22 19:00:08 CET", UTC) == epoch("2026-11-22 18:00:08.0")
    assert pg_log.parse_timestamp("2026-07-01 20:00:08 CEST", UTC) == epoch("2026-07-01 18:00:08.0")
    assert pg_log.parse_timestamp("2026-11-22 21:00:08.5 +03", UTC) == epoch("2026-11-22 18:00:08.5")
    assert pg_log.parse_timestamp("2026-11-22 14:30:08 -0330", UTC) == epoch("2026-11-22 18:00:08.0")
    # The local zone wins over the table, and knows daylight saving for that date.
    berlin = ZoneInfo("Europe/Berlin")
    assert pg_log.parse_timestamp("2026-07-01 20:00:08 CEST", berlin) == epoch("2026-07-01 18:00:08.0")
    chicago = ZoneInfo("America/Chicago")
    assert pg_log.parse_timestamp("2026-07-01 13:00:00 CDT", chicago) == epoch("2026-07-01 18:00:00.0")
    # An abbreviation nobody knows: no guess hours off.
    assert pg_log.parse_timestamp("2026-11-22 18:00:08 XYZT", UTC) is None
    assert pg_log.parse_timestamp("not a time") is None


def test_first_timestamp_of_any_prefix():
    find = lambda prefix: pg_log.find_timestamp(prefix, UTC)  # noqa: E731
    assert find("2026-11-22 18:00:08.920 UTC [77] ") == epoch("2026-11-22 18:00:08.920")
    assert find("[77] app=x 2026-11-22 18:00:08 UTC db=y ") == epoch("2026-11-22 18:00:08.0")
    assert find("1795370408.920 [77] ") == 1795370408.920  # %n
    assert find("<2026-11-22 18:00:08.920 UTC> <2026-11-22 17:00:00 UTC> ") == epoch("2026-11-22 18:00:08.920")
    assert find("[77] ") is None
    rec = pg_log.parse_stderr_line("[4242] user=x LOG:  checkpoint starting: time")
    assert rec == pg_log.LogRecord(None, "LOG", "checkpoint starting: time")
    # Glued to the prefix, and not fooled by a word ending in a severity.
    rec = pg_log.parse_stderr_line("2026-11-22 18:00:08 UTC[77]CATALOG:  x LOG:  checkpoint starting: wal", UTC)
    assert rec.severity == "LOG" and rec.message == "checkpoint starting: wal"


def test_detect_format():
    assert pg_log.detect_format("anything", "/x/postgresql.csv") == "csvlog"
    assert pg_log.detect_format("anything", "/x/postgresql.json") == "jsonlog"
    with open(fixture("pg15_a.log")) as f:
        assert pg_log.detect_format(f.readline()) == "stderr"
    with open(fixture("pg15_a.csv")) as f:
        assert pg_log.detect_format(f.readline()) == "csvlog"
    with open(fixture("pg15_a.json")) as f:
        assert pg_log.detect_format(f.readline()) == "jsonlog"


# -- real PostgreSQL 15 logs -------------------------------------------------------


@pytest.mark.parametrize("name", ["pg15_a.log", "pg15_a.csv", "pg15_a.json"])
def test_phase_a_events(name):
    reader, events = read_events(fixture(name))
    assert reader.malformed == 0 and reader.foreign == 0
    assert shape(events) == A_SHAPE
    t, first_complete = events[4]
    assert t == epoch("2026-11-22 18:09:12.891")
    assert first_complete.fields == pytest.approx({
        "buffers_written": 33, "buffers_written_ratio": 0.008, "wal_files_added": 0, "wal_files_removed": 1,
        "wal_files_recycled": 0, "write_seconds": 0.142, "sync_seconds": 0.060, "total_seconds": 0.239,
        "sync_files": 30, "sync_longest_seconds": 0.055, "sync_average_seconds": 0.002,
        "distance_bytes": 12616 * 1024, "estimate_bytes": 12616 * 1024})
    assert events[2][1].fields == {"apart_seconds": 0.0}


@pytest.mark.parametrize("name", ["pg15_b.log", "pg15_b.csv", "pg15_b.json"])
def test_phase_b_events(name):
    reader, events = read_events(fixture(name))
    assert reader.malformed == 0 and reader.foreign == 0
    assert shape(events) == B_SHAPE
    # %t in Europe/Berlin: "19:10:57 CET" is 18:10:57 UTC, whole seconds.
    assert events[-2][0] == pytest.approx(epoch("2026-11-22 18:10:57.0"), abs=1)


def test_formats_agree_on_times():
    for phase, resolution in (("a", 0.0), ("b", 1.0)):
        _, stderr = read_events(fixture(f"pg15_{phase}.log"))
        _, csvlog = read_events(fixture(f"pg15_{phase}.csv"))
        _, jsonlog = read_events(fixture(f"pg15_{phase}.json"))
        assert [t for t, _ in csvlog] == [t for t, _ in jsonlog]
        for (ts, _), (tc, _) in zip(stderr, csvlog):
            assert tc - resolution <= ts <= tc + 1e-6  # %t truncates to the second


def test_csv_records_spanning_lines_match_the_csv_module():
    for name in ("pg15_a.csv", "pg15_b.csv"):
        with open(fixture(name), newline="") as f:
            rows = list(csv.reader(f))
        reader = pg_log.RecordReader(path=fixture(name), local_tz=UTC)
        records = []
        with open(fixture(name), encoding="utf-8") as f:
            for line in f.read().split("\n"):
                records.extend(reader.feed(line))
        assert [r.message for r in records] == [row[13] for row in rows]
        errors = [r for r in records if r.severity == "ERROR"]
        assert [r.message for r in errors] == ["division by zero"]
    assert any("\n" in row[19] for row in rows)  # the multi-line statement really spans lines


def test_stderr_continuations_are_not_records():
    reader, _ = read_events(fixture("pg15_a.log"))
    with open(fixture("pg15_a.log")) as f:
        lines = f.read().splitlines()
    assert reader.records == sum(1 for l in lines if not l.startswith("\t"))


# -- other versions, hand-written ------------------------------------------------------


def test_pg94_transaction_log_and_xlog():
    reader, events = read_events(os.path.join(HAND, "pg94_pgbadger_prefix.log"))
    assert reader.foreign == 0
    assert shape(events) == [("start", CK, "xlog"), ("complete", CK, ""), ("too_frequent", CK, ""),
                             ("start", CK, "xlog"), ("complete", CK, ""), ("start", CK, "immediate force wait"),
                             ("complete", CK, ""), ("start", CK, "shutdown immediate"), ("complete", CK, ""),
                             ("server_restart", CK, "")]
    assert events[0][0] == epoch("2016-01-06 09:00:01.0")  # CET
    fields = events[1][1].fields
    assert fields["wal_files_recycled"] == 3 and fields["total_seconds"] == 27.061
    assert "distance_bytes" not in fields  # before 9.5


def test_pg96_csvlog_without_backend_type_ignores_client_raise():
    reader, events = read_events(os.path.join(HAND, "pg96_csvlog.csv"))
    assert reader.malformed == 0 and reader.records == 7
    # Row 5 is a client's RAISE LOG 'checkpoint starting: time' (user_name set): not a checkpoint.
    assert shape(events) == [("start", CK, "time"), ("complete", CK, ""), ("too_frequent", CK, ""),
                             ("start", CK, "xlog"), ("complete", CK, "")]
    assert events[0][0] == epoch("2016-07-01 07:00:00.101")  # CEST
    assert events[1][1].fields["distance_bytes"] == 32768 * 1024


def test_pg12_epoch_prefix_and_crash():
    _, events = read_events(os.path.join(HAND, "pg12_epoch_prefix_crash.log"))
    assert shape(events) == [("start", CK, "time"), ("server_restart", CK, ""), ("server_restart", CK, ""),
                             ("server_restart", CK, ""), ("start", CK, "end-of-recovery immediate wait"),
                             ("complete", CK, "")]
    assert events[0][0] == 1570000000.123


def test_pg17_restartpoints_and_lsn():
    _, events = read_events(os.path.join(HAND, "pg17_standby_restartpoints.log"))
    assert shape(events)[1:] == [("start", "restartpoint", "time"), ("complete", "restartpoint", ""),
                                 ("start", CK, "force"), ("complete", CK, "")]
    fields = events[2][1].fields
    assert fields["lsn"] == 0x5000060 and fields["redo_lsn"] == 0x5000028


def test_pg18_slru_and_no_timestamp():
    reader, events = read_events(os.path.join(HAND, "pg18_no_timestamp_prefix.log"))
    assert reader.foreign == 1  # pg_ctl's "waiting for server to shut down"
    assert [t for t, _ in events] == [None, None]
    fields = events[1][1].fields
    assert fields["buffers_written"] == 10 and fields["slru_buffers_written"] == 2
    assert fields["lsn"] == float(0x1A2B3C4D)


def test_jsonlog_spoof_and_garbage():
    reader, events = read_events(os.path.join(HAND, "pg15_spoof_and_garbage.json"))
    assert reader.malformed == 1
    assert shape(events) == [("start", CK, "wal"), ("complete", CK, "")]


def test_unclosed_csv_quote_is_dropped_not_fatal(monkeypatch):
    monkeypatch.setattr(pg_log, "MAX_CSV_RECORD_CHARS", 200)
    reader = pg_log.RecordReader("csvlog", local_tz=UTC)
    assert reader.feed('2026-11-22 18:00:00.000 UTC,,,1,,x,1,,,,0,LOG,00000,"unclosed') == []
    for _ in range(10):
        reader.feed("x" * 30)
    assert reader.malformed == 6  # the record given up on, then 5 lines that are not records either
    good = '2026-11-22 18:00:01.000 UTC,,,1,,x,2,,,,0,LOG,00000,"checkpoint starting: time",,,,,,,,,"","checkpointer",,0'
    assert [r.message for r in reader.feed(good)] == ["checkpoint starting: time"]


# -- the collector -----------------------------------------------------------------


class Clock:
    def __init__(self, t: float):
        self.t = t

    def __call__(self) -> float:
        return self.t


def make_collector(path: str, now: float, **kw):
    sent: list = []
    clock = Clock(now)
    c = CheckpointCollector(path, sent.extend, clock=clock, local_tz=UTC, **kw)
    registry = CollectorRegistry()
    registry.register(c)
    return c, registry, sent, clock


def series(sent, name, **labels):
    want = tuple(sorted(labels.items()))
    return [(s.timestamp_ms, s.value) for s in sent if s.name == name and s.labels == want]


def regions(points):
    """[(start_ms, end_ms)] from raw 0/1 samples: 0->1 opens, 1->0 closes."""
    out, start, prev = [], None, 0.0
    for t, v in points:
        if v == 1 and prev != 1:
            start = t
        elif v == 0 and prev == 1:
            out.append((start, t))
        prev = v
    return out


def log_pairs(path):
    """(reason, start_ms, end_ms) from the log, independently of the parser."""
    import re
    pairs, start = [], None
    with open(path) as f:
        for line in f:
            m = re.match(r"(\S+ \S+) UTC \[\d+\] LOG:  checkpoint (starting|complete): ?([^;]*)", line)
            if not m:
                continue
            ms = round(epoch(m.group(1)) * 1000)
            if m.group(2) == "starting":
                start = (m.group(3).strip(), ms)
            else:
                pairs.append((start[0], start[1], ms))
    return pairs


def test_collector_regions_match_the_log(tmp_path):
    path = str(tmp_path / "postgresql.log")
    shutil.copy(fixture("pg15_a.log"), path)
    c, registry, sent, _ = make_collector(path, epoch("2026-11-22 19:00:00.0"))
    assert c.poll() == len(sent) > 0
    for s in sent:
        validate_series(s.name, s.labels)
    by_series: dict = {}
    for s in sent:
        by_series.setdefault(s.series, []).append(s.timestamp_ms)
    for key, stamps in by_series.items():
        assert stamps == sorted(set(stamps)), key  # strictly increasing: in order for Prometheus

    pairs = log_pairs(path)
    assert len(pairs) == 5
    for reason in {r for r, _, _ in pairs}:
        want = [(s, e) for r, s, e in pairs if r == reason]
        got = regions(series(sent, "pg_checkpoint_in_progress", kind=CK, reason=reason))
        assert len(got) == len(want)
        for (gs, ge), (ws, we) in zip(got, want):
            # Exact, but for a start logged in the same millisecond as the end of the
            # previous one of the same reason: one series cannot hold 0 and 1 at one instant.
            assert ge == we and gs - ws in (0, 1), (reason, got, want)
    # The 26.7 s timed checkpoint: a heartbeat every second on a grid from its start.
    (_, t0, t1), = [p for p in pairs if p[0] == "time"]
    beats = [t for t, v in series(sent, "pg_checkpoint_in_progress", kind=CK, reason="time") if v == 1]
    assert beats == list(range(t0, t1, HEARTBEAT_MS))
    # The counter is written (unchanged) at each start, +1 at each end.
    assert [v for _, v in series(sent, "pg_checkpoints_completed_total", kind=CK, reason="wal")] == [0, 1, 1, 2, 2, 3]
    assert [t for t, _ in series(sent, "pg_checkpoints_completed_total", kind=CK, reason="wal")][1::2] == [
        p[2] for p in pairs[:3]]

    get = registry.get_sample_value
    assert get("pg_checkpoints_completed_total", {"kind": CK, "reason": "wal"}) == 3
    assert get("pg_checkpoints_completed_total", {"kind": CK, "reason": "immediate force wait wal"}) == 1
    assert get("pg_checkpoints_completed_total", {"kind": CK, "reason": "time"}) == 1
    assert get("pg_checkpoints_too_frequent_total") == 4
    assert get("pg_checkpoint_in_progress", {"kind": CK, "reason": "time"}) == 0
    assert get("pg_checkpoint_last_duration_seconds", {"kind": CK, "phase": "write"}) == 26.693
    assert get("pg_checkpoint_last_duration_seconds", {"kind": CK, "phase": "sync"}) == 0.015
    assert get("pg_checkpoint_last_duration_seconds", {"kind": CK, "phase": "total"}) == 26.711
    assert get("pg_checkpoint_last_buffers_written", {"kind": CK}) == 884
    assert get("pg_checkpoint_last_buffers_written_ratio", {"kind": CK}) == pytest.approx(0.216)
    assert get("pg_checkpoint_last_distance_bytes", {"kind": CK}) == 6861 * 1024
    assert get("pg_checkpoint_last_estimate_bytes", {"kind": CK}) == 18660 * 1024
    assert get("pg_checkpoint_last_start_timestamp_seconds", {"kind": CK}) == t0 / 1000
    assert get("pg_checkpoint_last_end_timestamp_seconds", {"kind": CK}) == t1 / 1000
    assert get("pg_checkpoint_last_too_frequent_apart_seconds") == 3
    assert get("benchwatch_exporter_checkpoints_log_present", {"format": "stderr"}) == 1
    assert get("benchwatch_exporter_checkpoints_malformed_records_total") == 0
    assert get("benchwatch_exporter_checkpoints_unmatched_total", {"event": "start_without_complete"}) == 0


def test_three_formats_give_the_same_samples(tmp_path):
    got = []
    for ext in ("log", "csv", "json"):
        path = str(tmp_path / f"postgresql.{ext}")
        shutil.copy(fixture(f"pg15_a.{ext}"), path)
        c, _, sent, _ = make_collector(path, epoch("2026-11-22 19:00:00.0"))
        c.poll()
        got.append(sent)
    assert got[0] == got[1] == got[2]


def test_live_reading_gives_the_samples_of_a_batch_read(tmp_path):
    """Line by line as the server writes them, with the clock just past each line: same samples, plus live heartbeats."""
    with open(fixture("pg15_a.log")) as f:
        lines = f.read().splitlines(keepends=True)
    path = str(tmp_path / "postgresql.log")
    c, registry, sent, clock = make_collector(path, epoch("2026-11-22 18:09:12.0"))
    c.poll()
    seen_running = False
    with open(path, "w") as out:
        for line in lines:
            ts = pg_log.parse_stderr_line(line.rstrip("\n"), UTC)
            if ts is not None and ts.timestamp is not None:
                if ts.message.startswith("checkpoint complete") and sent and \
                        registry.get_sample_value("pg_checkpoint_in_progress", {"kind": CK, "reason": "time"}) == 1:
                    # While the timed checkpoint runs, 10.5 s in: heartbeats up to a second ago.
                    t0 = epoch("2026-11-22 18:09:46.402")
                    clock.t = t0 + 10.5
                    c.poll()
                    beats = [t for t, v in series(sent, "pg_checkpoint_in_progress", kind=CK, reason="time") if v == 1]
                    assert beats == [round(t0 * 1000) + k * HEARTBEAT_MS for k in range(10)]
                    seen_running = True
                clock.t = ts.timestamp + 0.05
            out.write(line)
            out.flush()
            c.poll()
    assert seen_running
    live = sent
    batch_c, _, batch, _ = make_collector(path, clock.t)
    batch_c.poll()
    assert sorted(live, key=lambda s: (s.series, s.timestamp_ms)) == sorted(batch, key=lambda s: (s.series, s.timestamp_ms))


def test_rotation_rename_then_new_file(tmp_path):
    path = str(tmp_path / "postgresql.log")
    shutil.copy(fixture("pg15_a.log"), path)
    c, registry, _sent, clock = make_collector(path, epoch("2026-11-22 19:00:00.0"))
    c.poll()
    get = registry.get_sample_value
    assert get("pg_checkpoints_completed_total", {"kind": CK, "reason": "wal"}) == 3
    os.rename(path, path + ".1")  # logrotate: rename, then the server opens a new file
    assert c.poll() == 0
    shutil.copy(fixture("pg15_b.log"), path + ".tmp")
    os.rename(path + ".tmp", path)
    clock.t = epoch("2026-11-22 19:30:00.0")
    c.poll()
    assert get("pg_checkpoints_completed_total", {"kind": CK, "reason": "wal"}) == 7
    assert get("pg_checkpoints_completed_total", {"kind": CK, "reason": "immediate force wait"}) == 1
    assert get("pg_checkpoints_completed_total", {"kind": CK, "reason": "shutdown immediate"}) == 1
    assert get("pg_checkpoints_too_frequent_total") == 8
    assert get("benchwatch_exporter_checkpoints_log_rotations_total") == 1
    # copytruncate: the same file emptied, then written again.
    with open(path, "w") as f:
        f.write("2026-11-22 19:40:00 CET [9]: user=,db=,app=,client= LOG:  checkpoint starting: time\n")
    c.poll()
    assert get("benchwatch_exporter_checkpoints_log_rotations_total") == 2
    assert get("pg_checkpoint_in_progress", {"kind": CK, "reason": "time"}) == 1


def test_log_that_does_not_exist_yet(tmp_path):
    path = str(tmp_path / "logs" / "postgresql.csv")
    c, registry, sent, _clock = make_collector(path, epoch("2026-11-22 19:00:00.0"))
    assert c.poll() == 0 and sent == []
    assert registry.get_sample_value("benchwatch_exporter_checkpoints_log_present", {"format": ""}) == 0
    assert registry.get_sample_value("pg_checkpoints_too_frequent_total") == 0
    os.makedirs(os.path.dirname(path))
    shutil.copy(fixture("pg15_b.csv"), path)
    assert c.poll() > 0
    assert registry.get_sample_value("benchwatch_exporter_checkpoints_log_present", {"format": "csvlog"}) == 1
    assert registry.get_sample_value("pg_checkpoints_completed_total", {"kind": CK, "reason": "time"}) == 1


def test_complete_without_start_and_late_end(tmp_path):
    path = str(tmp_path / "postgresql.log")
    with open(path, "w") as f:
        f.write("2026-11-22 18:00:10.000 UTC [1] LOG:  checkpoint complete: wrote 1 buffers (0.0%); 0 WAL file(s) added, "
                "0 removed, 0 recycled; write=2.000 s, sync=0.250 s, total=2.500 s; sync files=1, longest=0.1 s, "
                "average=0.1 s; distance=1 kB, estimate=1 kB\n"
                "2026-11-22 18:01:00.000 UTC [1] LOG:  checkpoint starting: time\n")
    c, registry, sent, _clock = make_collector(path, epoch("2026-11-22 18:01:05.000"))
    c.poll()
    unknown = series(sent, "pg_checkpoint_in_progress", kind=CK, reason="unknown")
    t1 = round(epoch("2026-11-22 18:00:10.0") * 1000)
    assert regions(unknown) == [(t1 - 2500, t1)]
    assert registry.get_sample_value("benchwatch_exporter_checkpoints_unmatched_total",
                                     {"event": "complete_without_start"}) == 1
    # Heartbeats were sent up to 18:01:04; the end line comes late and says 18:01:03.5.
    with open(path, "a") as f:
        f.write("2026-11-22 18:01:03.500 UTC [1] LOG:  checkpoint complete: wrote 1 buffers (0.0%)\n")
    c.poll()
    t0 = round(epoch("2026-11-22 18:01:00.0") * 1000)
    assert regions(series(sent, "pg_checkpoint_in_progress", kind=CK, reason="time")) == [(t0, t0 + 4001)]
    assert registry.get_sample_value("benchwatch_exporter_checkpoints_late_ends_total") == 1


def test_crash_abandons_the_open_checkpoint(tmp_path):
    path = str(tmp_path / "postgresql.log")
    shutil.copy(os.path.join(HAND, "pg12_epoch_prefix_crash.log"), path)
    c, registry, sent, _ = make_collector(path, 1570000100.0)
    c.poll()
    assert regions(series(sent, "pg_checkpoint_in_progress", kind=CK, reason="time")) == [(1570000000123, 1570000003950)]
    get = registry.get_sample_value
    assert get("pg_checkpoints_completed_total", {"kind": CK, "reason": "time"}) == 0
    assert get("pg_checkpoints_completed_total", {"kind": CK, "reason": "end-of-recovery immediate wait"}) == 1
    assert get("benchwatch_exporter_checkpoints_unmatched_total", {"event": "start_without_complete"}) == 1


def test_restartpoints_have_their_own_kind(tmp_path):
    path = str(tmp_path / "postgresql.log")
    shutil.copy(os.path.join(HAND, "pg17_standby_restartpoints.log"), path)
    c, registry, _, _ = make_collector(path, epoch("2024-10-01 13:00:00.0"))
    c.poll()
    get = registry.get_sample_value
    assert get("pg_checkpoints_completed_total", {"kind": "restartpoint", "reason": "time"}) == 1
    assert get("pg_checkpoints_completed_total", {"kind": CK, "reason": "force"}) == 1
    assert get("pg_checkpoint_last_duration_seconds", {"kind": "restartpoint", "phase": "total"}) == 12.001
    assert get("pg_checkpoint_last_redo_lsn_bytes", {"kind": "restartpoint"}) == 0x5000028
    assert get("pg_checkpoint_last_lsn_bytes", {"kind": CK}) == 0x6000220


def test_no_timestamp_in_prefix_uses_the_read_clock(tmp_path):
    path = str(tmp_path / "postgresql.log")
    shutil.copy(os.path.join(HAND, "pg18_no_timestamp_prefix.log"), path)
    now = 1_800_000_000.0
    c, registry, sent, _ = make_collector(path, now)
    c.poll()
    reason = "immediate force wait"
    # Both lines read at once: the end is put 1 ms after the start rather than on it.
    assert regions(series(sent, "pg_checkpoint_in_progress", kind=CK, reason=reason)) == [(now * 1000, now * 1000 + 1)]
    assert registry.get_sample_value("benchwatch_exporter_checkpoints_clock_timestamps_total") == 2
    assert registry.get_sample_value("benchwatch_exporter_checkpoints_foreign_lines_total") == 1
    assert registry.get_sample_value("pg_checkpoint_last_slru_buffers_written", {"kind": CK}) == 2


def test_metrics_page_passes_promtool(tmp_path):
    require_tool("promtool")
    path = str(tmp_path / "postgresql.log")
    shutil.copy(fixture("pg15_b.log"), path)
    c, registry, _, _ = make_collector(path, epoch("2026-11-22 19:00:00.0"))
    c.poll()
    body = generate_latest(registry)
    check = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True)
    assert check.returncode == 0, (check.stdout + check.stderr).decode()
    names = Counter(l.split("{")[0].split(" ")[0] for l in body.decode().splitlines() if l and not l.startswith("#"))
    assert names["pg_checkpoints_completed_total"] == 4  # wal, immediate force wait, time, shutdown immediate


def test_server_events_beside_checkpoints_at_the_logs_own_times():
    """Deadlocks, lock timeouts, terminated sessions, out of memory and failed writes (explain's causes)."""
    path = os.path.join(HAND, "pg15_server_events.log")
    reader = pg_log.RecordReader("auto", path=path, local_tz=UTC,
                                 keep=lambda t: pg_log.mentions_checkpoint(t) or pg_log.mentions_event(t))
    events = []
    with open(path, encoding="utf-8") as f:
        for line in f.read().split("\n"):
            for rec in reader.feed(line):
                if (event := pg_log.server_event(rec)) is not None:
                    events.append((event, rec.timestamp))
    assert events == [("deadlock", epoch("2026-11-26 07:40:01.250")), ("deadlock", epoch("2026-11-26 07:40:02.400")),
                      ("lock_timeout", epoch("2026-11-26 07:40:03.000")),
                      ("connection_terminated", epoch("2026-11-26 07:40:04.000")),
                      ("out_of_memory", epoch("2026-11-26 07:40:05.000")), ("write_error", epoch("2026-11-26 07:40:06.000"))]


def test_the_collector_counts_server_events_at_the_logs_times(tmp_path):
    log = shutil.copy(os.path.join(HAND, "pg15_server_events.log"), tmp_path / "postgresql.log")
    sent = []
    c = CheckpointCollector(str(log), sent.extend, clock=lambda: epoch("2026-11-26 07:40:09.000"), local_tz=UTC,
                            labels={"target": "local"})
    c.poll()
    got = [(dict(s.labels)["event"], s.value, s.timestamp_ms / 1000) for s in sent if s.name == "pg_server_log_events_total"]
    assert got[:2] == [("deadlock", 1.0, epoch("2026-11-26 07:40:01.250")), ("deadlock", 2.0, epoch("2026-11-26 07:40:02.400"))]
    assert [e for e, _, _ in got[2:]] == ["lock_timeout", "connection_terminated", "out_of_memory", "write_error"]
    assert all(dict(s.labels)["target"] == "local" for s in sent if s.name == "pg_server_log_events_total")
    # The checkpoint around them is still read.
    assert any(s.name == "pg_checkpoints_completed_total" for s in sent)


# -- autovacuum and autoanalyze runs ------------------------------------------------------------


def read_autovacuum(path: str):
    reader = pg_log.RecordReader("auto", path=path, local_tz=UTC,
                                 keep=lambda t: pg_log.mentions_checkpoint(t) or pg_log.mentions_autovacuum(t))
    runs = []
    with open(path, encoding="utf-8") as f:
        for line in f.read().split("\n"):
            for rec in reader.feed(line):
                if (run := pg_log.autovacuum_run(rec)) is not None:
                    runs.append((rec.timestamp, run))
    return reader, runs


@pytest.mark.parametrize("ext", ["log", "csv", "json"])
def test_autovacuum_runs_of_a_real_pg15_log(ext):
    """The captured log's 45 runs, in every format, at the record's own time (the run's end)."""
    reader, runs = read_autovacuum(fixture(f"pg15_autovacuum.{ext}"))
    assert reader.malformed == 0
    assert len(runs) == 45
    assert Counter(r.kind for _, r in runs) == {"analyze": 28, "vacuum": 17}
    assert all(r.elapsed_seconds is not None for _, r in runs)
    assert sum(r.aggressive for _, r in runs) == 3  # pg_class, pg_depend, pg_statistic after the load
    t, last_vacuum = runs[-2]
    assert t == epoch("2026-11-26 10:13:22.172")
    assert (last_vacuum.kind, last_vacuum.database, last_vacuum.table) == ("vacuum", "postgres", "public.pgbench_accounts")
    assert last_vacuum.elapsed_seconds == 0.17
    assert last_vacuum.fields == {"index_scans": 1, "pages_removed": 0, "pages_remaining": 4100,
                                  "tuples_removed": 50003, "tuples_remaining": 200000}
    t, last = runs[-1]
    assert (t, last.kind, last.table, last.elapsed_seconds, last.fields) == (
        epoch("2026-11-26 10:13:22.265"), "analyze", "public.pgbench_accounts", 0.09, {})
    # The checkpoints around them are still read, and the stderr records after a multi-line run too.
    _, events = read_events(fixture(f"pg15_autovacuum.{ext}"))
    assert [e.reason for _, e in events if e.event == "start"][-1] == "shutdown immediate"


def test_the_three_formats_agree_on_autovacuum_runs():
    got = [read_autovacuum(fixture(f"pg15_autovacuum.{ext}"))[1] for ext in ("log", "csv", "json")]
    assert got[0] == got[1] == got[2]


def test_autovacuum_runs_of_pg12_and_pg18():
    _, runs = read_autovacuum(os.path.join(HAND, "pg12_pg18_autovacuum.log"))
    shown = [(t, r.kind, r.table, r.elapsed_seconds, r.aggressive, r.wraparound) for t, r in runs]
    assert shown == [
        (epoch("2026-11-26 09:00:00.100"), "vacuum", "public.pgbench_accounts", 20.01, False, False),
        (epoch("2026-11-26 09:00:00.250"), "analyze", "public.pgbench_accounts", 0.45, False, False),  # 12: one line
        (epoch("2026-11-26 09:00:01.000"), "vacuum", "pg_catalog.pg_class", 0.02, True, True),
        (epoch("2026-11-26 09:00:03.000"), "vacuum", "public.pgbench_branches", 0.01, False, False),  # 18
        (epoch("2026-11-26 09:00:03.500"), "analyze", "public.pgbench_branches", 0.0, False, False),
        (epoch("2026-11-26 09:00:04.000"), "vacuum", "public.pgbench_tellers", None, False, False),  # cut short
    ]
    assert runs[0][1].fields == {"index_scans": 1, "pages_removed": 0, "pages_remaining": 16394,
                                 "tuples_removed": 250000, "tuples_remaining": 1000000}
    assert runs[3][1].fields["tuples_removed"] == 410


def test_a_client_raise_log_of_autovacuum_text_is_not_a_run():
    fake = pg_log.LogRecord(1.0, "LOG", 'automatic vacuum of table "a.b.c": index scans: 0\nsystem usage: '
                            'CPU: user: 0.00 s, system: 0.00 s, elapsed: 9.00 s', user="mallory")
    assert pg_log.autovacuum_run(fake) is None
    assert pg_log.autovacuum_run(pg_log.LogRecord(1.0, "LOG", fake.message, backend_type="client backend")) is None
    assert pg_log.autovacuum_run(pg_log.LogRecord(1.0, "LOG", fake.message, backend_type="autovacuum worker")) is not None


def test_the_collector_writes_each_autovacuum_run_as_a_region_at_the_logs_times(tmp_path):
    """Each run a region from its end less its elapsed to its end (the record's time), its counters at the end."""
    from benchwatch.query.frames import boolean_regions
    from benchwatch.query.series import Series

    log = shutil.copy(fixture("pg15_autovacuum.log"), tmp_path / "postgresql.log")
    sent = []
    c = CheckpointCollector(str(log), sent.extend, clock=lambda: epoch("2026-11-26 10:14:00.000"), local_tz=UTC,
                            labels={"target": "local"})
    c.poll()
    for s in sent:
        validate_series(s.name, s.labels)
    by_series: dict = {}
    for s in sent:
        by_series.setdefault((s.name, s.labels), []).append((s.timestamp_ms, s.value))
    accounts = {"target": "local", "database": "postgres", "table": "public.pgbench_accounts", "kind": "vacuum"}
    samples = by_series[next(k for k in by_series if k[0] == "pg_autovacuum_in_progress" and dict(k[1]) == accounts)]
    regions = boolean_regions(Series("pg_autovacuum_in_progress", accounts, sorted(samples)))
    end1, end2 = epoch("2026-11-26 10:13:15.623"), epoch("2026-11-26 10:13:22.172")
    assert regions == [(round((end1 - 0.12) * 1000), round(end1 * 1000)), (round((end2 - 0.17) * 1000), round(end2 * 1000))]
    runs = [(v, t / 1000) for (n, labels), pts in by_series.items() if n == "pg_autovacuum_runs_total" and dict(labels) == accounts
            for t, v in pts]
    assert runs[-2:] == [(1.0, end1), (2.0, end2)] and runs[0][0] == 0
    seconds = [v for (n, labels), pts in by_series.items() if n == "pg_autovacuum_duration_seconds_total"
               and dict(labels) == accounts for _, v in pts]
    assert seconds[-1] == pytest.approx(0.29)
    removed = [v for (n, labels), pts in by_series.items() if n == "pg_autovacuum_last_tuples_removed"
               and dict(labels)["table"] == "public.pgbench_accounts" for _, v in pts]
    assert removed == [809, 50003]
    # /metrics: the counters, promtool-clean.
    registry = CollectorRegistry()
    registry.register(c)
    get = registry.get_sample_value
    assert get("pg_autovacuum_runs_total", accounts) == 2
    assert get("pg_autovacuum_duration_seconds_total", {**accounts, "kind": "analyze"}) == pytest.approx(0.24)


def test_the_dashboard_tests_read_the_same_autovacuum_runs_as_the_collector():
    """tests/helpers/dashboards.logged_autovacuums (what the annotation must draw) against the parser."""
    from tests.helpers.dashboards import logged_autovacuums

    _, runs = read_autovacuum(fixture("pg15_autovacuum.log"))
    logged = logged_autovacuums(fixture("pg15_autovacuum.log"), 0, 2e9)
    assert [(k, t.split(".", 1)[1], round(b, 3)) for k, t, _, b in logged] == [(r.kind, r.table, t) for t, r in runs]
