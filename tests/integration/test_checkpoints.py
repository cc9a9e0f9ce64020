"""Checkpoints in the server log -> Prometheus, at the log's own times, on the real native stack."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections import Counter
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from benchwatch.engines.postgresql.server import pg_bindir
from benchwatch.util import processes
from tests.helpers.prometheus import query, query_range

pytestmark = pytest.mark.integration

# Read with a regex of its own, not with benchwatch.engines.postgresql.server_log: the stack's prefix is '%m [%p] '.
LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) \S+ \[\d+\] LOG:  (checkpoint|restartpoint) "
                  r"(starting|complete):(.*)$")
TOO_FREQUENT = re.compile(r"^\S+ \S+ \S+ \[\d+\] LOG:  checkpoints are occurring too frequently")


def log_checkpoints(path: str, tz: ZoneInfo):
    """([(kind, reason, start, end)], the start still open or None, "too frequently" count)."""
    pairs, open_, too_frequent = [], None, 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            too_frequent += bool(TOO_FREQUENT.match(line))
            m = LINE.match(line.rstrip("\n"))
            if not m:
                continue
            ts = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=tz).timestamp()
            if m.group(3) == "starting":
                open_ = (m.group(2), " ".join(m.group(4).split()), ts)
            elif open_ is not None:
                pairs.append((*open_, ts))
                open_ = None
    return pairs, open_, too_frequent


def raw_regions(prom: str) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """Regions from the raw remote-written samples ({job=""}: not the scraped copies of /metrics)."""
    out = {}
    for item in query(prom, 'pg_checkpoint_in_progress{job=""}[2h]'):
        key = (item["metric"]["kind"], item["metric"]["reason"])
        regions, start, prev = [], None, 0.0
        for t, v in item["values"]:
            t, v = float(t), float(v)
            if v == 1 and prev != 1:
                start = t
            elif v == 0 and prev == 1:
                regions.append((start, t))
            prev = v
        out[key] = regions
    return out


def contiguous(stamps: list[float], step: float = 1.001) -> list[list[float]]:
    """Sorted evaluation times split into the stretches a 1 s step query drew without a gap."""
    stretches: list[list[float]] = []
    for t in sorted(stamps):
        if stretches and t - stretches[-1][-1] <= step:
            stretches[-1].append(t)
        else:
            stretches.append([t])
    return stretches


def test_checkpoints_land_at_log_times(live_stack):
    live = live_stack
    log = live.stack.log_file("postgres")
    tz = ZoneInfo(live.psql("SHOW log_timezone"))
    prom = live.prometheus
    began = time.time()
    # Spread checkpoints over 10% of checkpoint_timeout (30 s): a timed one lasts ~3 s, not 27.
    live.psql("ALTER SYSTEM SET checkpoint_completion_target = 0.1")
    live.psql("SELECT pg_reload_conf()")
    load = subprocess.Popen([os.path.join(pg_bindir(), "pgbench"), "-n", "-c", "2", "-j", "2", "-T", "20"],
                            env=live.pg_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        live.psql("CHECKPOINT")
        # ~60 MB of WAL against max_wal_size=64MB: checkpoints for "wal" (and "too frequently").
        live.psql("CREATE TABLE bw_ckpt_wal AS SELECT g, repeat('x', 200) AS pad FROM generate_series(1, 250000) g")
        live.psql("DROP TABLE bw_ckpt_wal")

        def done() -> bool:
            pairs, open_, _ = log_checkpoints(log, tz)
            manual = [p for p in pairs if p[2] >= began - 0.01 and "immediate force wait" in p[1]]
            return open_ is None and bool(manual) and \
                any(set(p[1].split()) & {"wal", "time"} for p in pairs if p[2] > manual[0][2])
        assert processes.wait_until(done, 40, 0.2), open(log, errors="replace").read()[-3000:]
    finally:
        if load.poll() is None:
            load.terminate()
        load.wait(timeout=30)
        live.psql("ALTER SYSTEM RESET checkpoint_completion_target")
        live.psql("SELECT pg_reload_conf()")
        live.psql("DROP TABLE IF EXISTS bw_ckpt_wal")

    # Counters equal the completed checkpoints per reason in the log (re-read each time:
    # a timed checkpoint may still come along).
    def counts():
        pairs, _, too_frequent = log_checkpoints(log, tz)
        want = Counter((k, r) for k, r, _, _ in pairs)
        got = {(m["metric"]["kind"], m["metric"]["reason"]): float(m["value"][1])
               for m in query(prom, 'last_over_time(pg_checkpoints_completed_total{job=""}[2h])')}
        tf = query(prom, 'last_over_time(pg_checkpoints_too_frequent_total{job=""}[2h])')
        return want, got, too_frequent, (float(tf[0]["value"][1]) if tf else 0.0)

    def counts_match():
        want, got, tf_log, tf_prom = counts()
        return dict(want) == got and tf_log == tf_prom
    assert processes.wait_until(counts_match, 20, 0.2), counts()
    pairs, _open, too_frequent = log_checkpoints(log, tz)
    assert too_frequent >= 1  # the bulk load outran max_wal_size

    # Every starting/complete pair is one region of the raw samples, edges within 1 s (in fact 1 ms).
    regions = raw_regions(prom)
    worst = 0.0
    for key, want in Counter((k, r) for k, r, _, _ in pairs).items():
        got = regions.get(key, [])
        assert len(got) == want, (key, got)
        mine = [(s, e) for k, r, s, e in pairs if (k, r) == key]
        for (gs, ge), (ws, we) in zip(got, mine):
            assert abs(gs - ws) <= 1.0 and abs(ge - we) <= 1.0, (key, (gs, ge), (ws, we))
            worst = max(worst, abs(gs - ws), abs(ge - we))
    print(f"checkpoints: {len(pairs)} pairs, worst edge error {worst * 1000:.0f} ms")
    assert worst <= 0.002

    # The annotation query, as Grafana runs it (step 1 s): every checkpoint of the test
    # lies under a region of its labels, and every region holds a checkpoint.
    # Evaluation points must exist after the last checkpoint: wait for the clock to pass it.
    start, end = began - 2, pairs[-1][3] + 2
    assert processes.wait_until(lambda: time.time() > end, 5, 0.1)
    result = query_range(prom, 'max_over_time(pg_checkpoint_in_progress{job=""}[1s]) == 1', start, end, 1)
    drawn = []
    for item in result:
        key = (item["metric"]["kind"], item["metric"]["reason"])
        stamps = [float(t) for t, _ in item["values"]]
        run = [stamps[0]]
        for t in stamps[1:]:
            if t - run[-1] > 1.001:
                drawn.append((key, run[0], run[-1]))
                run = [t]
            else:
                run.append(t)
        drawn.append((key, run[0], run[-1]))
    ours = [p for p in pairs if p[2] >= start + 1]
    assert ours
    for kind, reason, s, e in ours:
        assert any(k == (kind, reason) and rs <= s + 1 and re_ >= e - 1 for k, rs, re_ in drawn), (kind, reason, s, e, drawn)
    for key, rs, re_ in drawn:
        assert any((k, r) == key and s <= re_ + 1 and e >= rs - 1 for k, r, s, e in pairs), (key, rs, re_)

    # The annotations with text: pg_checkpoint_info spans each completed checkpoint, carries its
    # figures, and ends with it (staleness marker) instead of lingering for the 5-minute lookback.
    info = query_range(prom, 'max_over_time(pg_checkpoint_info{job=""}[1s])', start, end + 10, 1)
    for kind, reason, s, e in ours:
        # This checkpoint's own span starts with it: a checkpoint following within a second
        # also has points inside [s - 1, e + 1], and is not this one.
        # (Two checkpoints with the same figures share one series: split it where points stop.)
        spans = [(i["metric"], stretch) for i in info if (i["metric"]["kind"], i["metric"]["reason"]) == (kind, reason)
                 for stretch in contiguous([float(t) for t, _ in i["values"]]) if s - 1 <= stretch[0] <= s + 1]
        assert spans, (kind, reason, s, e)
        assert float(spans[0][0]["total_seconds"]) >= 0 and spans[0][0]["buffers"].isdigit()
        last_point = max(stretch[-1] for _, stretch in spans)
        assert last_point <= e + 1.001, (reason, last_point, e)
    # Without the staleness marker a plain selector would still see the last one 2 s after its end.
    kind, reason, s, e = ours[-1]
    lingering = [i for i in query(prom, 'pg_checkpoint_info{job=""}', e + 2)
                 if (i["metric"]["kind"], i["metric"]["reason"]) == (kind, reason)]
    assert lingering == [], lingering
