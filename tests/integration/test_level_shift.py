"""A level shift is a dip (issue 32): a real run collapsed by a dropped index, against one slow from its start.

`pgbench -M prepared -c 4` at scale 10 on a stack of this module's own: dropping pgbench_accounts' primary
key turns every UPDATE and SELECT by aid into a sequential scan, and TPS falls by two orders of magnitude
for as long as the key is gone. Dropped mid-run, that is one dip from the drop to the end, caused by the
UPDATE whose time per call rose; dropped before the run, the run is slow throughout and has no dip.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from benchwatch.util import processes
from tests.helpers import throwaway
from tests.helpers.explain import explain_finished
from tests.helpers.prometheus import query

pytestmark = pytest.mark.integration

PGBENCH = ("pgbench", "-M", "prepared", "-n", "-c", "4", "-j", "2", "-P", "1")
DROP = "ALTER TABLE pgbench_accounts DROP CONSTRAINT pgbench_accounts_pkey"
RESTORE = ("DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'pgbench_accounts_pkey') THEN "
           "ALTER TABLE pgbench_accounts ADD PRIMARY KEY (aid); END IF; END $$")


@pytest.fixture(scope="module")
def scale10():
    live = throwaway.start(scale=10)
    try:
        yield live
    finally:
        left = live.close()
        assert not left, f"still running after down: {left}"


def progress_lines(run_dir: str) -> int:
    try:
        with open(os.path.join(run_dir, "stderr.log"), "rb") as f:
            return sum(1 for line in f if line.startswith(b"progress:"))
    except FileNotFoundError:
        return 0


def finished(live, run: throwaway.BackgroundRun) -> dict:
    assert run.wait(120) == 0, run.out
    with open(os.path.join(run.run_dir(), "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)
    return explain_finished(live, run.run_id, meta["ended_at"])


def test_a_collapse_by_a_dropped_index_is_one_dip_to_the_end_caused_by_the_update(scale10):
    live = scale10
    run = throwaway.BackgroundRun(live, *PGBENCH, "-T", "25")
    try:
        run_dir = run.run_dir()
        assert processes.wait_until(lambda: progress_lines(run_dir) >= 10, 60, 0.1), run.lines
        asked = time.time()
        live.psql(DROP)
        dropped = time.time()
        report = finished(live, run)
    finally:
        if run.proc.poll() is None:
            run.proc.terminate()
            run.proc.wait(30)
        live.psql(RESTORE)
    tps = query(live.prometheus, f'benchmark_progress_tps{{run_id="{run.run_id}"}}[10m]')
    last_line = max(float(t) for s in tps for t, _ in s["values"])
    after = [d for d in report["dips"] if d["end"] > dropped]
    assert len(after) == 1, json.dumps(report["dips"], indent=1)
    dip = after[0]
    # It starts where the interval of the drop's line starts, and ends with the run's last line (the first 10
    # lines make the level it fell from: dips.HELD_LINES).
    assert asked - 1.5 < dip["start"] < dropped + 0.5 and dip["end"] == pytest.approx(last_line, abs=0.01), \
        (asked, dropped, last_line, json.dumps(dip, indent=1))
    assert dip["depth"] >= 0.95 and dip["lasting"] and dip["lost_transactions"] > 0, json.dumps(dip, indent=1)
    assert dip["cause"] == "statement", json.dumps(dip, indent=1)
    details = dip["candidates"][0]["details"]
    assert details["statement"].startswith("UPDATE pgbench_accounts"), details
    assert "UPDATE pgbench_accounts" in dip["evidence"] and details["ms_per_call_in_dip"] > 10 * details["ms_per_call_before"]
    # The live dips collector: under way while the run was (leading cause), then the dashboard's annotation of
    # the finished dip over the same span.
    selector = f'benchmark_dip_info{{run_id="{run.run_id}"}}'
    assert processes.wait_until(lambda: bool(query(live.prometheus, f"{selector}[10m]")), 30, 0.5)
    assert query(live.prometheus, f'benchmark_dip_leading_cause_info{{run_id="{run.run_id}"}}[10m]')
    spans = [(float(s["values"][0][0]), float(s["values"][-1][0]), s["metric"]) for s in
             query(live.prometheus, f"{selector}[10m]")]
    assert any(abs(a - dip["start"]) < 1.5 and abs(b - dip["end"]) < 1.5 and m["cause"] == "statement"
               for a, b, m in spans), (spans, dip["start"], dip["end"])


def test_a_run_slow_from_its_start_has_no_dip(scale10):
    live = scale10
    live.psql(DROP)
    try:
        run = throwaway.BackgroundRun(live, *PGBENCH, "-T", "15")
        report = finished(live, run)
    finally:
        live.psql(RESTORE)
    assert report["dips"] == [], json.dumps(report["dips"], indent=1)
