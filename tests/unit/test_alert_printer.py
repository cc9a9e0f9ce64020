"""AlertPrinter: Alertmanager snapshots in, one FIRING/RESOLVED line per change out.

Snapshots are GET /api/v2/alerts bodies captured from a real Alertmanager 0.25
on the native stack (tests/fixtures/alertmanager/, README there).
"""

from __future__ import annotations

import copy
import json
import os
import threading
import time
import urllib.error

import pytest

from benchwatch.alerting.printer import FIRING, RESOLVED, AlertPrinter

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "alertmanager")
RUN = "20261122T182352Z-0562"


def load(name: str) -> list[dict]:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return json.load(f)


class Script:
    """A fetch function that returns the given snapshots in turn (the last one forever)."""

    def __init__(self, *snapshots):
        self.snapshots = list(snapshots)
        self.calls = 0

    def __call__(self):
        item = self.snapshots[min(self.calls, len(self.snapshots) - 1)]
        self.calls += 1
        if isinstance(item, Exception):
            raise item
        return copy.deepcopy(item)


def watch(fetch, run_id=RUN, **kw) -> tuple[AlertPrinter, list[str]]:
    lines: list[str] = []
    return AlertPrinter(run_id, lines.append, fetch=fetch, **kw), lines


def test_stall_fires_once_and_resolves_once_inhibited_drop_never_shown():
    w, lines = watch(Script([], load("stalled.json"), load("stalled_drop_inhibited.json"),
                            load("stalled_drop_inhibited.json"), []))
    for _ in range(5):
        w.poll()
    summary = "Run 20261122T182352Z-0562 has printed no progress for 3 intervals"
    assert lines == [
        f"ALERT FIRING PgbenchStalled run={RUN} — {summary}",
        f"ALERT RESOLVED PgbenchStalled run={RUN} — {summary}",
    ]


def test_suppressed_alert_is_shown_when_it_becomes_active():
    inhibited = load("stalled_drop_inhibited.json")
    drop_only = [a for a in copy.deepcopy(inhibited) if a["labels"]["alertname"] == "PgbenchTPSDrop"]
    drop_only[0]["status"] = {"inhibitedBy": [], "silencedBy": [], "state": "active"}
    w, lines = watch(Script(inhibited, drop_only, drop_only, []))
    changes = [w.poll() for _ in range(4)]
    assert [[(t.state, t.alertname) for t in c] for c in changes] == [
        [(FIRING, "PgbenchStalled")],
        [(FIRING, "PgbenchTPSDrop"), (RESOLVED, "PgbenchStalled")],
        [],
        [(RESOLVED, "PgbenchTPSDrop")],
    ]
    assert lines[1] == (f"ALERT FIRING PgbenchTPSDrop run={RUN} — TPS of run {RUN} down 100% "
                        "from its baseline (0.0 vs 163.0)")


def test_other_runs_are_ignored_stack_wide_alerts_are_shown():
    captured = load("drop_and_checkpoints.json")  # another run's TPS drop, and a host-wide alert
    w, lines = watch(Script(captured, []))
    w.poll()
    w.poll()
    checkpoints = "Checkpoints are too frequent: 5 requested vs 1 timed in 2 min"
    assert lines == [f"ALERT FIRING PostgresCheckpointsTooFrequent — {checkpoints}",
                     f"ALERT RESOLVED PostgresCheckpointsTooFrequent — {checkpoints}"]
    w, lines = watch(Script(captured), include_stack_alerts=False)
    w.poll()
    assert lines == []
    w, lines = watch(Script(captured), run_id="20261122T182521Z-2e92", include_stack_alerts=False)
    w.poll()
    assert lines == ["ALERT FIRING PgbenchTPSDrop run=20261122T182521Z-2e92 — TPS of run 20261122T182521Z-2e92 "
                     "down 57.18% from its baseline (394.0 vs 920.0)"]


def test_same_alert_firing_again_after_resolving_is_told_again():
    w, lines = watch(Script(load("stalled.json"), [], load("stalled.json")))
    for _ in range(3):
        w.poll()
    assert [l.split(" — ")[0] for l in lines] == [
        f"ALERT FIRING PgbenchStalled run={RUN}", f"ALERT RESOLVED PgbenchStalled run={RUN}",
        f"ALERT FIRING PgbenchStalled run={RUN}"]


def test_unreachable_alertmanager_is_said_once_and_keeps_state():
    down = urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
    w, lines = watch(Script(load("stalled.json"), down, down, load("stalled.json"), down, []),
                     alertmanager_url="http://127.0.0.1:1")
    for _ in range(6):
        w.poll()
    told = ("ALERT watch: cannot read alerts from Alertmanager at http://127.0.0.1:1 "
            "(<urlopen error [Errno 111] Connection refused>); alerts of this run are not shown until it answers")
    assert [l.split(" — ")[0] for l in lines] == [
        f"ALERT FIRING PgbenchStalled run={RUN}",
        told,
        # no RESOLVED while Alertmanager was away; told again after it answered once
        told,
        f"ALERT RESOLVED PgbenchStalled run={RUN}",
    ]
    assert w.errors == 3


def test_malformed_answers_are_not_fatal():
    w, lines = watch(Script({"not": "a list"}, [None, "x", {"labels": None}], ValueError("bad json"), []))
    for _ in range(4):
        assert w.poll() == []  # nothing of this run in any of them: no transition, no exception
    assert len([l for l in lines if l.startswith("ALERT watch:")]) == 1


def test_background_thread_reports_and_stop_waits_for_the_resolution():
    fetch = Script(load("stalled.json"), load("stalled.json"), load("stalled.json"), [])
    lines: list[str] = []
    done = threading.Event()

    def on_line(line):
        lines.append(line)
        if "RESOLVED" in line:
            done.set()

    w = AlertPrinter(RUN, on_line, fetch=fetch, interval=0.01).start()
    assert w.stop(wait_resolved=10.0) is None
    assert done.is_set() and [l.split()[1] for l in lines] == ["FIRING", "RESOLVED"]
    calls = fetch.calls
    time.sleep(0.05)  # stopped: no more polling
    assert fetch.calls == calls


def test_needs_a_source():
    with pytest.raises(ValueError):
        AlertPrinter(RUN, print)
