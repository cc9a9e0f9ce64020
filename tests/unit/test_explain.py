"""Dip detection and cause scoring (benchwatch.explain) on fixtures: real pgbench outputs, a real run's
series, and small hand-made series where a signal has to be exactly so."""

from __future__ import annotations

import json
import os

import pytest

from benchwatch import cli
from benchwatch.explain import causes, dips, report
from benchwatch.exporter.dips import dip_samples
from benchwatch.model.samples import is_stale_marker
from benchwatch.query.series import Series
from benchwatch.record import replay, rundir
from benchwatch.share import rebuild, summary
from tests.unit.test_snapshot_summary import RUN_DIR, RUN_ID, fixture_series

HERE = os.path.dirname(os.path.dirname(__file__))
PGBENCH = os.path.join(HERE, "fixtures", "pgbench")
T0 = 1_700_000_000.0
LEVELSHIFT_RUN = "20261128T134410.797Z-34e3"  # tests/fixtures/levelshift/README.md


def fixture_run(name: str) -> list[Series]:
    with open(os.path.join(PGBENCH, f"{name}.stderr"), "rb") as f:
        data = f.read()
    with open(os.path.join(PGBENCH, f"{name}.stdout"), "rb") as f:
        data += f.read()
    _model, samples = replay.replay_output(data, "r", T0)
    return rebuild.samples_to_series(samples)


def tps_of(name: str) -> list[tuple[int, float]]:
    return report.tps_samples(fixture_run(name), "r")


def curve(values: list[float], t0: float = T0) -> list[tuple[int, float]]:
    return [(int((t0 + i + 1) * 1000), v) for i, v in enumerate(values)]


# -- the detector --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["pg15_stall", "pg10_report_stall"])
def test_lock_stall_of_pg15_and_pg10_is_one_deep_dip(name):
    # 3.0 s: 428.6 tps, 4.0 and 5.0 s: 0.0 tps, 6.0 s: 1141.2 (still under 80%), then back.
    found = dips.detect(tps_of(name))
    assert len(found) == 1, found
    d = found[0]
    assert (d.start - T0, d.end - T0) == (2.0, 6.0)
    assert d.level == "deep" and d.stall and d.lines == 4 and d.depth == 1.0
    # Lost against the steady level, second by second: (b - 428.6) + b + b + (b - 1141.2).
    b = d.baseline_tps
    assert d.lost_transactions == pytest.approx(4 * b - 428.6 - 1141.2, abs=0.1)


def test_catch_up_burst_of_pgbench_94_is_one_dip_counted_once():
    # 2.0 s, then 5.2 s three times (146.5, then two empty 0/0 lines 1 ms apart): one report for
    # the 3.2 s stall, and catch-up lines that cover no time.
    found = dips.detect(tps_of("pg94_report_stall"))
    assert len(found) == 1, found
    d = found[0]
    assert d.start - T0 == pytest.approx(2.0) and d.end - T0 == pytest.approx(5.202)
    assert d.min_tps == 146.5 and not d.stall  # the empty catch-up lines are not intervals of 0 tps
    assert d.lost_transactions == pytest.approx((d.baseline_tps - 146.5) * 3.2 + d.baseline_tps * 0.002, abs=0.1)


@pytest.mark.parametrize("name", ["pg15_plain", "pg15_report", "pg15_prepared", "pg15_rate", "pg14_report_timestamp",
                                  "pg96_multi_script_timestamp", "pg15_abort_terminated"])
def test_steady_fixtures_have_no_dip(name):
    assert dips.detect(tps_of(name)) == []


def test_ramp_up_and_wind_down_are_not_dips():
    values = [100, 400, 800] + [1000] * 20 + [300]
    assert dips.detect(curve(values)) == []
    # While the run goes on, a low last line is a dip under way.
    (d,) = dips.detect(curve(values), ongoing=True)
    assert d.ongoing and d.level == "deep" and d.end == T0 + len(values)


def test_one_mild_line_is_noise_two_are_a_dip():
    assert dips.detect(curve([1000] * 10 + [700] + [1000] * 10)) == []
    (d,) = dips.detect(curve([1000] * 10 + [700, 700] + [1000] * 10))
    assert d.level == "mild" and d.depth == pytest.approx(0.3) and d.lost_transactions == pytest.approx(600)
    (d,) = dips.detect(curve([1000] * 10 + [400] + [1000] * 10))
    assert d.level == "deep" and d.seconds == 1.0


def test_a_long_dip_does_not_lower_its_own_reference():
    # 20 s at a third of the level within a 60 s window: the second pass leaves it out of the median.
    (d,) = dips.detect(curve([900] * 20 + [300] * 20 + [900] * 10))
    assert d.baseline_tps == 900 and d.seconds == 20 and d.lost_transactions == pytest.approx(12000)


def test_too_few_lines_give_no_dips():
    assert dips.detect(curve([1000, 0, 1000, 1000])) == []



# -- a level shift is a dip (issue 32) -------------------------------------------------------------

def test_a_collapse_that_lasts_is_one_dip_to_the_end():
    # pgbench_accounts' primary key dropped after the 10th line of a real 30 s run: about 300 TPS, then 0-4.
    # The whole run fits in the rolling window, whose median is the collapsed level: held against the level before.
    found = dips.detect(tps_of("pg15_collapse_dropped_pkey"))
    assert len(found) == 1, found
    d = found[0]
    assert (d.start - T0, d.end - T0) == (10.0, 30.0)
    assert d.lasting and d.level == "deep" and d.depth >= 0.95 and not d.ongoing
    assert 250 < d.baseline_tps < 350  # the lower median of the lines before it (401, 615, 515, 332, ...)
    values = [float(v) for _, v in tps_of("pg15_collapse_dropped_pkey")][10:]
    assert d.lost_transactions == pytest.approx(sum(d.baseline_tps - v for v in values), abs=0.1)


def test_a_run_slow_from_its_start_has_no_dip():
    # The same change before the run: 0-4 TPS from the first line, nothing to fall from; lines of 1 or 2
    # transactions against a level of 3 are how a count that small falls, not dips.
    assert dips.detect(tps_of("pg15_slow_dropped_pkey")) == []
    assert dips.detect(curve([3, 4, 2, 3, 1, 4, 3, 2, 3, 3, 4, 1, 3, 2, 3] * 4)) == []


def test_a_collapse_after_the_first_third_of_a_run_is_held_to_the_end():
    # 15 s at 2900, then 8 TPS for 30 s (the run): one dip, 15 s to the end, 99.7 % deep.
    (d,) = dips.detect(curve([2900.0 + 40 * (i % 3) for i in range(15)] + [8.0] * 30))
    assert (d.start - T0, d.end - T0) == (15.0, 45.0) and d.lasting and d.depth > 0.99
    assert d.lost_transactions == pytest.approx((d.baseline_tps - 8) * 30, abs=0.1)
    # Live, the same dip is under way at its last line.
    (d,) = dips.detect(curve([2900.0] * 15 + [8.0] * 30), ongoing=True)
    assert d.ongoing and d.lasting and d.start - T0 == 15.0


def test_a_slow_slide_is_one_dip_against_the_level_before():
    # 60 s at 1000, then 1 % less every second for 60 s, then flat at 550 for 60 s: the rolling level follows
    # it down; against the level before, it is one dip from where it fell below 80 % to the end.
    values = [1000.0] * 60 + [1000 * 0.99 ** k for k in range(1, 61)] + [550.0] * 60
    (d,) = dips.detect(curve(values))
    below = next(i for i, v in enumerate(values) if v < 800)
    assert d.lasting and d.level == "mild" and d.baseline_tps == 1000
    assert d.start - T0 == below and d.end - T0 == len(values)


def test_a_stall_longer_than_half_the_window_is_one_dip():
    # 90 s at zero between two minutes at 1000: the rolling median of the middle of it is zero.
    (d,) = dips.detect(curve([1000.0] * 60 + [0.0] * 90 + [1000.0] * 60))
    assert (d.start - T0, d.end - T0) == (60.0, 150.0) and d.stall and d.lasting
    assert d.lost_transactions == pytest.approx(90_000)


def test_warm_up_and_a_short_burst_at_the_start_are_not_dips():
    # A ramp rises to its level; a first burst of fewer lines than half of those that make a level is no level.
    assert dips.detect(curve([100.0 * k for k in range(1, 21)] + [2000.0] * 60)) == []
    assert dips.detect(curve([2000.0] * 5 + [1000.0] * 60)) == []


def test_the_collapsed_run_s_cause_is_the_update_whose_time_per_call_rose():
    run_dir = os.path.join(HERE, "fixtures", "levelshift", LEVELSHIFT_RUN)
    meta = rundir.RunDir(run_dir).read_meta()
    result = report.explain(fixture_series(run_dir), meta, LEVELSHIFT_RUN)
    (d,) = result["dips"]
    first = report.tps_samples(fixture_series(run_dir), LEVELSHIFT_RUN)[0][0] / 1000
    assert d["start"] == pytest.approx(first + 9.0, abs=0.01) and d["lasting"] and d["depth"] >= 0.95
    assert d["cause"] == "statement", json.dumps(d, indent=1)
    details = d["candidates"][0]["details"]
    assert details["statement"].startswith("UPDATE pgbench_accounts"), details
    assert details["ms_per_call_in_dip"] > 100 * details["ms_per_call_before"], details
    assert "(deep, stall, lasting)" in report.text_table(result)


def test_with_one_reading_of_the_statements_before_the_collapse_the_update_is_still_named():
    # The collector reads the statements every 5 s until a line might be low (this run's disk stall at 5 s
    # made it read every second from then): as if it had not, one reading of the 10 s before the drop.
    run_dir = os.path.join(HERE, "fixtures", "levelshift", LEVELSHIFT_RUN)
    meta = rundir.RunDir(run_dir).read_meta()
    series = fixture_series(run_dir)
    drop = report.tps_samples(series, LEVELSHIFT_RUN)[0][0] / 1000 + 9.0
    kept = []
    for s in series:
        if s.name.startswith("pg_statement_"):
            every_5s: list[int] = []
            for ts in sorted({ts for ts, _ in s.samples if ts / 1000 < drop}):
                if not every_5s or ts - every_5s[-1] >= 4900:
                    every_5s.append(ts)
            s = Series(s.name, s.labels, [(ts, v) for ts, v in s.samples if ts / 1000 >= drop or ts in every_5s])
        kept.append(s)
    (d,) = report.explain(kept, meta, LEVELSHIFT_RUN)["dips"]
    assert d["cause"] == "statement", json.dumps(d, indent=1)
    assert d["candidates"][0]["details"]["statement"].startswith("UPDATE pgbench_accounts")

# -- attribution on series ---------------------------------------------------------------------------

def gauge(name: str, labels: dict, points: list[tuple[float, float]]) -> Series:
    return Series(name, labels, [(int(t * 1000), v) for t, v in points])


def run_with_dip(zero_from: int = 10, zero_to: int = 15, seconds: int = 30) -> list[Series]:
    values = [0.0 if zero_from <= i < zero_to else 500.0 for i in range(seconds)]
    return [gauge("benchmark_progress_tps", {"run_id": "r"}, [(T0 + i + 1, v) for i, v in enumerate(values)]),
            gauge("benchmark_run_info", {"run_id": "r", "clients": "2", "pgbench_version": "15.18"}, [(T0 + 1, 1)])]


META = {"clock_start_epoch": T0, "ended_at": T0 + 30, "progress_interval": 1.0}
# sysbench on MariaDB, as run records it since meta.json says the engine.
MYSQL_META = {**META, "tool": "sysbench", "engine": "mysql", "server_version": "10.11.6-MariaDB",
              "capabilities": {"performance_schema": False}}
PG_META = {**META, "tool": "pgbench", "engine": "postgresql", "server_version": "16.4",
           "capabilities": {"pg_stat_wal": True, "pg_stat_io": True, "pg_stat_checkpointer": False,
                            "pg_stat_io_wal": False, "pg_stat_statements": False}}


def only_dip(series: list[Series], meta: dict | None = None) -> dict:
    result = report.explain(series, meta or META, "r")
    assert len(result["dips"]) == 1, result
    return result["dips"][0]


def test_lock_waits_during_the_dip_name_the_lock():
    waits = gauge("pg_stat_activity_waits_sessions", {"wait_event_type": "Lock", "wait_event": "relation"},
                  [(T0 + t, 2) for t in range(10, 16)])
    routine = gauge("pg_stat_activity_waits_sessions", {"wait_event_type": "Lock", "wait_event": "transactionid"},
                    [(T0 + 4, 1), (T0 + 22, 1)])
    d = only_dip(run_with_dip() + [waits, routine])
    assert d["cause"] == "lock" and "relation 2" in d["evidence"]
    assert d["candidates"][0]["strength"] > 0.9
    # With postgres_exporter's sample of the waiting statements: which one waited, and who blocked it.
    stmt = gauge("pg_stat_activity_lock_waits_sessions",
                 {"statement": "UPDATE pgbench_branches SET bbalance = bbalance + ? WHERE bid = ?;", "wait_event": "relation",
                  "blocker": "idle in transaction: LOCK TABLE pgbench_branches IN ACCESS EXCLUSIVE MODE;"},
                 [(T0 + t, 2) for t in range(10, 16)])
    d = only_dip(run_with_dip() + [waits, routine, stmt])
    assert d["cause"] == "lock" and d["evidence"].endswith(
        "; UPDATE pgbench_branches SET bbalance = bbalance + ? WHERE bid = ?; waited on Lock:relation, blocked by a "
        "session idle in transaction: LOCK TABLE pgbench_branches IN ACCESS EXCLUSIVE MODE;"), d


def test_innodb_flushing_pressure_during_the_dip_is_the_cause():
    # sysbench on InnoDB: the pressure series of prometheus/rules/mysql.yml, 1 through the dip.
    pressure = gauge("instance:mysql_innodb_flushing_pressure:bool", {"target": "mariadb-2"},
                     [(T0 + t, 1 if 9 <= t <= 16 else 0) for t in range(0, 30)])
    d = only_dip(run_with_dip() + [pressure], MYSQL_META)
    assert d["cause"] == "innodb_flushing" and "mariadb-2" in d["evidence"], d
    # Pressure elsewhere in the run is not this dip's cause.
    calm = gauge("instance:mysql_innodb_flushing_pressure:bool", {"target": "local"},
                 [(T0 + t, 1 if t >= 25 else 0) for t in range(0, 30)])
    assert only_dip(run_with_dip() + [calm], MYSQL_META)["cause"] == report.NO_CAUSE


# -- the run's engine decides which signals are weighed ------------------------------------------------

def innodb_pressure(target: str = "mariadb-2") -> Series:
    return gauge("instance:mysql_innodb_flushing_pressure:bool", {"target": target},
                 [(T0 + t, 1 if 9 <= t <= 16 else 0) for t in range(0, 30)])


def test_a_postgresql_run_is_not_blamed_on_innodb_of_another_target():
    # One Prometheus watching a MariaDB target too: its flushing pressure overlaps the pgbench run's dip.
    d = only_dip(run_with_dip() + [innodb_pressure()], PG_META)
    assert d["cause"] == report.NO_CAUSE and d["candidates"] == [], d
    # The run's own engine's signals still count beside it.
    ckpt = checkpoint("immediate force wait", T0 + 8.5, T0 + 9.2)
    d = only_dip(run_with_dip() + [innodb_pressure()] + ckpt, PG_META)
    assert d["cause"] == "checkpoint" and {c["cause"] for c in d["candidates"]} == {"checkpoint"}, d


def test_a_mysql_run_is_not_blamed_on_a_postgresql_checkpoint():
    pg = (checkpoint("immediate force wait", T0 + 8.5, T0 + 9.2)
          + [gauge("pg_stat_activity_waits_sessions", {"wait_event_type": "Lock", "wait_event": "relation"},
                   [(T0 + t, 2) for t in range(10, 16)]),
             gauge("pg_up", {"target": "local"}, [(T0 + t, 0.0 if 10 <= t <= 15 else 1.0) for t in range(31)])])
    d = only_dip(run_with_dip() + pg, MYSQL_META)
    assert d["cause"] == report.NO_CAUSE and d["candidates"] == [], d
    # Its own target down is read from mysqld_exporter's mysql_up.
    down = gauge("mysql_up", {"target": "mariadb-2"}, [(T0 + t, 0.0 if 10 <= t <= 15 else 1.0) for t in range(31)])
    d = only_dip(run_with_dip() + pg + [down], MYSQL_META)
    assert d["cause"] == "target_down" and "mariadb-2 down (mysql_up 0)" in d["evidence"], d


def test_the_report_says_which_signals_were_weighed():
    result = report.explain(run_with_dip(), MYSQL_META, "r")
    assert result["engine"] == "mysql"
    assert result["signals"] == {"weighed": ["client_stall", "clients_aborted", "disk", "innodb_flushing", "lock",
                                             "target_down", "cpu_contention", "database_cpu_bound", "io_pressure"],
                                 "absent": {}}
    # A run of an engine this benchwatch does not know: every signal, as before engines had their own.
    down = gauge("mysql_up", {"target": "m"}, [(T0 + t, 0.0 if 10 <= t <= 15 else 1.0) for t in range(31)])
    unknown = report.explain(run_with_dip() + [down], {**META, "engine": "oracle"}, "r")
    assert unknown["engine"] is None and unknown["dips"][0]["cause"] == "target_down"
    assert {"checkpoint", "innodb_flushing"} <= set(unknown["signals"]["weighed"])
    pg = report.explain(run_with_dip(), PG_META, "r")
    # A server without pg_stat_statements: the statement signal is absent, and the report says what is missing.
    assert pg["engine"] == "postgresql" and pg["signals"]["absent"] == {
        "statement": "pg_stat_statements is not in shared_preload_libraries"}
    assert "absent: statement (pg_stat_statements is not in shared_preload_libraries)" in report.text_table(pg)
    assert {"checkpoint", "wal_fpi", "autovacuum", "lock", "target_down"} <= set(pg["signals"]["weighed"])
    assert "innodb_flushing" not in pg["signals"]["weighed"]
    # Every key explain --json had before is still there.
    assert {"run_id", "interval_s", "run_start", "dips", "lost_transactions", "method"} <= set(pg)
    assert "signals weighed (postgresql): client_stall, clients_aborted, disk, checkpoint" in report.text_table(pg)


def fpi_burst() -> list[Series]:
    total, points = 0.0, []
    for t in range(0, 31):
        total += 5000 if 9 <= t <= 15 else 10
        points.append((T0 + t, total))
    return [gauge("pg_stat_wal_wal_fpi", {"target": "local"}, points)]


@pytest.mark.parametrize("facts", [
    {"server_version": "13.4"},  # recorded before capabilities were: from the version
    {"server_version": "13.4", "capabilities": {"pg_stat_wal": False, "pg_stat_statements": False}},
])
def test_absent_signals_are_listed_with_the_reason(facts):
    meta = {**META, "tool": "pgbench", "engine": "postgresql", **facts}
    ckpt = checkpoint("time", T0 + 7, T0 + 8)
    result = report.explain(run_with_dip() + ckpt + fpi_burst(), meta, "r")
    absent = {"wal_fpi": "pg_stat_wal needs PostgreSQL 14 (server 13.4)"}
    if "capabilities" in facts:  # a run recorded before did not say whether pg_stat_statements was loaded
        absent["statement"] = "pg_stat_statements is not in shared_preload_libraries"
    assert result["signals"]["absent"] == absent
    assert "wal_fpi" not in result["signals"]["weighed"] and "checkpoint" in result["signals"]["weighed"]
    (d,) = result["dips"]
    assert "wal_fpi" not in {c["cause"] for c in d["candidates"]}, d
    assert "absent: wal_fpi (pg_stat_wal needs PostgreSQL 14 (server 13.4))" in report.text_table(result)
    # The same series on a server that has pg_stat_wal: weighed.
    has = report.explain(run_with_dip() + ckpt + fpi_burst(), PG_META, "r")
    assert "wal_fpi" in {c["cause"] for c in has["dips"][0]["candidates"]}


@pytest.mark.parametrize(("meta", "signal", "engine"), [
    ({**META, "pgbench_version": "15.18"}, "checkpoint", "postgresql"),  # pgbench, before meta.json had a tool
    ({**META, "tool": "sysbench", "argv": ["sysbench", "oltp_read_write", "run"]}, "innodb_flushing", "mysql"),
])
def test_a_run_recorded_without_an_engine_explains_as_before(meta, signal, engine):
    series = run_with_dip() + checkpoint("immediate force wait", T0 + 8.5, T0 + 9.2) + [innodb_pressure()]
    result = report.explain(series, meta, "r")
    assert result["engine"] == engine and result["signals"]["absent"] == {}
    assert result["dips"][0]["cause"] == signal, result


def test_mysql_lock_waits_from_the_processlist_and_innodb_row_locks():
    """A LOCK TABLES: sysbench's threads wait on the table's metadata lock (mysqld_exporter's processlist
    collector); InnoDB's row lock waits count too. Read for MySQL runs only."""
    mdl = gauge("mysql_info_schema_processlist_threads", {"target": "mariadb", "command": "query",
                                                          "state": "waiting_for_table_metadata_lock"},
                [(T0 + t, 2 if 10 <= t <= 15 else 0) for t in range(31)])
    sleeping = gauge("mysql_info_schema_processlist_threads", {"target": "mariadb", "command": "query", "state": "user_sleep"},
                     [(T0 + t, 1) for t in range(31)])
    d = only_dip(run_with_dip() + [mdl, sleeping], MYSQL_META)
    assert d["cause"] == "lock" and "waiting_for_table_metadata_lock 2" in d["evidence"], d
    rows = gauge("mysql_global_status_innodb_row_lock_current_waits", {"target": "mariadb"},
                 [(T0 + t, 2 if 10 <= t <= 15 else 0) for t in range(31)])
    d = only_dip(run_with_dip() + [rows], MYSQL_META)
    assert d["cause"] == "lock" and "row lock 2" in d["evidence"], d
    assert only_dip(run_with_dip() + [rows, mdl], PG_META)["cause"] == report.NO_CAUSE


def test_routine_row_lock_waits_are_not_a_cause():
    waits = gauge("pg_stat_activity_waits_sessions", {"wait_event_type": "Lock", "wait_event": "transactionid"},
                  [(T0 + t, 1) for t in (3, 12, 19, 25)])
    assert only_dip(run_with_dip() + [waits])["cause"] == report.NO_CAUSE


def checkpoint(reason: str, start: float, end: float, **figures: str) -> list[Series]:
    labels = {"kind": "checkpoint", "reason": reason}
    beats = [start + i for i in range(int(end - start) + 1)]  # the exporter's 1 s heartbeat
    return [gauge("pg_checkpoint_in_progress", labels, [(t, 1) for t in beats] + [(end, 0)]),
            gauge("pg_checkpoint_info", {**labels, **figures}, [(t, 1) for t in beats] + [(end, 1)])]


def test_an_immediate_checkpoint_just_before_the_dip_is_the_cause():
    d = only_dip(run_with_dip() + checkpoint("immediate force wait", T0 + 8.5, T0 + 9.2, buffers="40000",
                                             write_seconds="0.5", sync_seconds="0.2"))
    assert d["cause"] == "checkpoint"
    assert "immediate force wait" in d["evidence"] and "40000 buffers" in d["evidence"]


def test_a_spread_checkpoint_merely_under_way_is_not_a_cause():
    d = only_dip(run_with_dip() + checkpoint("time", T0 - 5, T0 + 25))
    assert d["cause"] == report.NO_CAUSE
    # Under way through the whole run: as much outside the dip as in it, not even a candidate.
    assert d["candidates"] == [], d
    # Under way in the dip only (and not starting or ending there): shown, below the bar.
    d = only_dip(run_with_dip() + checkpoint("time", T0 + 2, T0 + 25))
    assert d["cause"] == report.NO_CAUSE and [c["cause"] for c in d["candidates"]] == ["checkpoint"], d


def test_checkpoints_every_few_seconds_explain_no_dip_but_a_rare_one_does():
    """The base rate: the stack's small max_wal_size makes a checkpoint start or end in almost any window
    of a run, so one doing so in the dip's is no evidence (issue 23: busy loops were blamed on one)."""
    storm = [s for a in range(0, 30, 5) for s in checkpoint("wal", T0 + a + 0.3, T0 + a + 3.3)]
    d = only_dip(run_with_dip() + storm, PG_META)
    assert d["cause"] == report.NO_CAUSE, d
    # The same kind of checkpoint, once in the run, starting as TPS falls: the cause.
    d = only_dip(run_with_dip() + checkpoint("wal", T0 + 9.5, T0 + 12.5), PG_META)
    assert d["cause"] == "checkpoint" and d["candidates"][0]["details"]["chance"] == 0.0, d
    # A forced checkpoint keeps its weight among routine ones: its own kind is rare.
    d = only_dip(run_with_dip() + storm + checkpoint("immediate force wait", T0 + 8.6, T0 + 9.2), PG_META)
    assert d["cause"] == "checkpoint" and "immediate" in d["evidence"], d
    # A checkpoint's own end, after the dip, is not one "elsewhere in the run".
    d = only_dip(run_with_dip() + checkpoint("immediate force wait", T0 + 9.5, T0 + 19.0), PG_META)
    assert d["cause"] == "checkpoint" and d["candidates"][0]["details"]["chance"] == 0.0, d


def test_a_state_as_common_outside_the_dip_as_in_it_is_no_cause():
    always = gauge("pg_autovacuum_workers", {"target": "local"}, [(T0 + t, 1) for t in range(0, 31)])
    d = only_dip(run_with_dip() + [always], PG_META)
    assert d["cause"] == report.NO_CAUSE and d["candidates"] == [], d
    only_then = gauge("pg_autovacuum_workers", {"target": "local"},
                      [(T0 + t, 1 if 8 <= t <= 15 else 0) for t in range(0, 31)])
    assert only_dip(run_with_dip() + [only_then], PG_META)["cause"] == "autovacuum"


def autovacuum_runs(*runs: tuple[str, str, float, float, dict]) -> list[Series]:
    """The server log's runs (table, kind, start, end, figures) as the exporter writes them."""
    from benchwatch.engines.postgresql.autovacuum import AutovacuumModel
    from benchwatch.engines.postgresql.server_log import AutovacuumRun

    model = AutovacuumModel({"target": "local"})
    samples = []
    for table, kind, start, end, figures in sorted(runs, key=lambda r: r[3]):
        run = AutovacuumRun(kind, "bench", table, round(end - start, 2), fields=figures)
        samples += model.feed(run, round(end * 1000))
    return rebuild.samples_to_series(samples)


# pgbench_branches and pgbench_tellers vacuumed every 3 s for 10 ms, all run long (autovacuum_naptime).
ROUTINE = [(f"public.pgbench_{t}", "vacuum", T0 + a, T0 + a + 0.01, {"tuples_removed": 40.0})
           for a in range(0, 30, 3) for t in ("branches", "tellers")]


def test_a_long_vacuum_of_a_big_table_in_the_dip_is_its_cause_the_routine_ones_are_not():
    """The server log's runs, each against its own table's usual (issue 23)."""
    d = only_dip(run_with_dip() + autovacuum_runs(*ROUTINE), PG_META)
    assert d["cause"] == report.NO_CAUSE and d["candidates"] == [], d
    big = ("public.pgbench_accounts", "vacuum", T0 + 8.0, T0 + 16.5, {"tuples_removed": 250000.0, "pages_removed": 0.0})
    d = only_dip(run_with_dip() + autovacuum_runs(*ROUTINE, big), PG_META)
    assert d["cause"] == "autovacuum", d
    top = d["candidates"][0]
    assert top["details"]["table"] == "public.pgbench_accounts" and top["details"]["kind"] == "vacuum", top
    assert top["details"]["seconds"] == 8.5 and top["details"]["tuples_removed"] == 250000, top
    assert "vacuum of public.pgbench_accounts" in d["evidence"] and "8.5 s" in d["evidence"], d
    assert "250000 dead tuples" in d["evidence"] and "more autovacuum run(s)" in d["evidence"], d


def test_a_table_vacuumed_all_run_long_explains_nothing():
    back_to_back = [("public.pgbench_accounts", "vacuum", T0 + a, T0 + a + 2.9, {}) for a in range(0, 30, 3)]
    d = only_dip(run_with_dip() + autovacuum_runs(*back_to_back), PG_META)
    assert d["cause"] == report.NO_CAUSE, d


def test_autoanalyze_is_named_as_such():
    d = only_dip(run_with_dip() + autovacuum_runs(("public.big", "analyze", T0 + 9.0, T0 + 15.0, {})), PG_META)
    assert d["cause"] == "autovacuum" and "analyze of public.big" in d["evidence"], d


def test_workers_a_logged_run_accounts_for_are_not_counted_twice_those_still_running_are():
    """The worker count is the fallback: for a run stored before the server log's runs (the test above,
    pg_autovacuum_workers alone), and for a run the log has not reported yet (it is still going)."""
    worker = gauge("pg_autovacuum_workers", {"target": "local"}, [(T0 + t, 1 if 10 <= t <= 15 else 0) for t in range(0, 31)])
    short = ("public.pgbench_branches", "vacuum", T0 + 9.2, T0 + 15.9, {})
    d = only_dip(run_with_dip() + [worker] + autovacuum_runs(short), PG_META)
    assert d["cause"] == "autovacuum" and d["candidates"][0]["details"]["source"] == "server_log", d
    d = only_dip(run_with_dip() + [worker] + autovacuum_runs(*ROUTINE), PG_META)
    assert d["cause"] == "autovacuum" and d["candidates"][0]["details"]["source"] == "workers", d


def test_no_progress_lines_is_a_client_stall():
    # Rebuilt from the output: no line from 10 s to 15 s (no stall zeros, just a gap).
    tps = gauge("benchmark_progress_tps", {"run_id": "r"},
                [(T0 + t, 500.0) for t in range(1, 11)] + [(T0 + 15, 100.0)] + [(T0 + t, 500.0) for t in range(16, 31)])
    d = only_dip([tps, *run_with_dip()[1:]])
    assert d["cause"] == "client_stall" and "5.0 s" in d["evidence"]


def test_live_stall_zeros_are_not_lines():
    # As the exporter writes a stall: TPS 0 and benchmark_progress_stalled 1 once a second.
    lines = [(T0 + t, 500.0) for t in range(1, 11)] + [(T0 + t, 500.0) for t in range(15, 31)]
    zeros = [(T0 + t + 0.6, 0.0) for t in range(11, 14)]
    tps = gauge("benchmark_progress_tps", {"run_id": "r"}, sorted(lines + zeros))
    stalled = gauge("benchmark_progress_stalled", {"run_id": "r"}, [(t, 1.0) for t, _ in zeros] + [(T0 + 15, 0.0)])
    assert only_dip([tps, stalled, *run_with_dip()[1:]])["cause"] == "client_stall"


def test_pgbench_94_burst_is_a_weaker_client_stall():
    result = report.explain(fixture_run("pg94_report_stall"), {"clock_start_epoch": T0, "pgbench_version": "9.4.26"}, "r")
    (d,) = result["dips"]
    assert d["cause"] == "client_stall" and d["candidates"][0]["strength"] == 0.5


VDA = {"instance": "h:9100", "device": "vda"}  # node_exporter's labels of the disk in the disk tests


def test_disk_far_above_its_baseline():
    busy = host_counter("node_disk_io_time_seconds_total", VDA, lambda t: 0.95 if 9 <= t <= 15 else 0.1)
    zram = host_counter("node_disk_io_time_seconds_total", VDA, lambda t: 1.0)  # not a disk
    zram.labels["device"] = "zram0"
    d = only_dip(run_with_dip() + [busy, zram])
    assert d["cause"] == "disk" and "vda" in d["evidence"] and "%util 95%" in d["evidence"]


def test_await_of_an_idle_disk_is_no_cause():
    """A handful of writes taking 5 ms instead of 0.1 on a disk busy 1 % of the time held nobody up (CI: a
    point-select sysbench run beside busy loops was blamed on "disk vda: await 1.0 ms")."""
    in_dip = range(9, 16)
    disk = [host_counter("node_disk_io_time_seconds_total", VDA, lambda t: 0.01),
            host_counter("node_disk_writes_completed_total", VDA, lambda t: 5.0),
            host_counter("node_disk_write_time_seconds_total", VDA, lambda t: 0.025 if t in in_dip else 0.0005),
            host_counter("node_disk_reads_completed_total", VDA, lambda t: 0.0),
            host_counter("node_disk_read_time_seconds_total", VDA, lambda t: 0.0)]
    assert "disk" not in [c["cause"] for c in only_dip(run_with_dip() + disk)["candidates"]]
    # The same await on a disk busy a third of the time is the disk's.
    disk[0] = host_counter("node_disk_io_time_seconds_total", VDA, lambda t: 0.35 if t in in_dip else 0.3)
    assert only_dip(run_with_dip() + disk)["cause"] == "disk"


def vda(busy: set[int], await_ms: float = 6.4, util: float = 0.6) -> list[Series]:
    """vda as node_exporter gives it: 200 writes/s at 0.3 ms and 8 % busy, but in the seconds ending at ``busy``."""
    def hot(t: float) -> bool:
        return round(t) in busy
    return [host_counter("node_disk_io_time_seconds_total", VDA, lambda t: util if hot(t) else 0.08),
            host_counter("node_disk_writes_completed_total", VDA, lambda t: 200.0),
            host_counter("node_disk_write_time_seconds_total", VDA, lambda t: 200 * (await_ms if hot(t) else 0.3) / 1000),
            host_counter("node_disk_reads_completed_total", VDA, lambda t: 0.0),
            host_counter("node_disk_read_time_seconds_total", VDA, lambda t: 0.0)]


def test_a_disk_busy_while_an_immediate_checkpoint_wrote_ranks_below_it():
    """Issue 28, the shapes of real runs of test_manual_checkpoint_with_many_dirty_buffers (vda, pgbench -c 4 at
    about 280 tps): TPS already sagging one line before the CHECKPOINT is logged (the machine's own noise: the
    dip began 1.1 s before it), then the commits queue behind the checkpoint's writes, vda's await at 6.4 ms.
    explain led with "disk vda: await 6.4 ms" (the disk up for the whole dip, overlap 1) and put the checkpoint
    second (overlap 0.63); the disk was busy because of the checkpoint, which is the answer."""
    tps = [280.0] * 30
    tps[9:12] = [200.0, 150.0, 5.0]  # the lines at 10, 11 and 12 s: the dip is 9 s to 12 s
    series = [gauge("benchmark_progress_tps", {"run_id": "r"}, [(T0 + i + 1, v) for i, v in enumerate(tps)]),
              *run_with_dip()[1:]]
    ckpt = checkpoint("immediate force wait", T0 + 10.1, T0 + 12.6, buffers="213640", write_seconds="0.9",
                      sync_seconds="1.5")
    d = only_dip(series + ckpt + vda({10, 11, 12, 13}), PG_META)
    assert (d["start"] - T0, d["end"] - T0) == (9.0, 12.0), d
    assert d["cause"] == "checkpoint" and "immediate force wait" in d["evidence"], json.dumps(d, indent=1)
    by_cause = {c["cause"]: c for c in d["candidates"]}
    assert by_cause["checkpoint"]["overlap"] == pytest.approx(0.633, abs=0.001), by_cause
    disk = by_cause["disk"]
    assert disk["details"]["ranked_below"] == "checkpoint" and "await 6.4 ms" in disk["evidence"], disk
    assert disk["score"] < by_cause["checkpoint"]["score"]
    # The same disk busy before the checkpoint started (3 s of its 4): not the checkpoint's doing, it leads.
    d = only_dip(series + ckpt + vda({7, 8, 9, 10}), PG_META)
    assert d["cause"] == "disk" and "ranked_below" not in d["candidates"][0]["details"], json.dumps(d, indent=1)
    # Nor below a spread (timed) checkpoint, which paces its writes: a disk busy then is busy with something else.
    timed = checkpoint("time", T0 + 10.1, T0 + 12.6)
    d = only_dip(series + timed + vda({10, 11, 12, 13}), PG_META)
    assert d["cause"] == "disk", json.dumps(d, indent=1)


def test_a_checkpoint_that_starts_within_the_dips_first_interval_holds_the_whole_dip():
    """A progress line stands for the interval ending at it: the dip starts at the start of its first low line's
    interval, and a checkpoint logged 0.13 s into that interval (as in a real run: "started 0.1 s after the dip
    began") holds all of it, not 97 %."""
    d = only_dip(run_with_dip() + checkpoint("immediate force wait", T0 + 10.13, T0 + 16.8), PG_META)
    assert d["cause"] == "checkpoint" and "started 0.1 s after the dip began" in d["evidence"], d
    assert d["candidates"][0]["overlap"] == 1.0, d
    # One logged in the dip's second interval is late for its first.
    d = only_dip(run_with_dip() + checkpoint("immediate force wait", T0 + 11.13, T0 + 16.8), PG_META)
    assert d["candidates"][0]["overlap"] == pytest.approx(0.774, abs=0.001), d


def test_aborted_clients_and_a_target_down():
    aborted = gauge("benchmark_aborted_clients_total", {"run_id": "r"}, [(T0 + 1, 0), (T0 + 10, 2)])
    assert only_dip(run_with_dip() + [aborted])["cause"] == "clients_aborted"
    down = gauge("pg_up", {"target": "shard2"}, [(T0 + t, 0.0 if 10 <= t <= 15 else 1.0) for t in range(31)])
    d = only_dip(run_with_dip() + [down])
    assert d["cause"] == "target_down" and "shard2" in d["evidence"]


def test_nothing_stands_out():
    d = only_dip(run_with_dip())
    assert d["cause"] == report.NO_CAUSE and d["evidence"] == "" and d["candidates"] == []
    assert "no cause found" in report.text_table(report.explain(run_with_dip(), META, "r"))


# -- a real run: the snapshot fixture's manual CHECKPOINT 6 s in -------------------------------------

def test_real_run_with_a_manual_checkpoint():
    meta = rundir.RunDir(RUN_DIR).read_meta()
    result = report.explain(fixture_series(), meta, RUN_ID)
    (d,) = result["dips"]
    assert d["cause"] == "checkpoint" and "immediate force wait" in d["evidence"]
    assert 5.0 <= d["start"] - meta["clock_start_epoch"] <= 7.0
    table = report.text_table(result)
    assert table.splitlines()[0].split() [:3] == ["dip", "when", "depth"] and "checkpoint" in table


def test_snapshot_summary_has_the_dips_table():
    meta = rundir.RunDir(RUN_DIR).read_meta()
    from benchwatch.share.collect import window
    s = summary.build(fixture_series(), meta, RUN_ID, window(meta))
    assert s["dips"][0]["cause"] == "checkpoint"
    tables = {title: rows for title, _header, rows in summary.tables(s)}
    assert "checkpoint" in tables["Dips and their causes"][0][4]
    assert "## Dips and their causes" in summary.to_markdown(s)
    assert s["dip_signals"]["absent"] == {} and "Signals the dips were not weighed on" not in tables
    # A summary saved before dips were explained still renders.
    old = {k: v for k, v in s.items() if k not in ("dips", "dip_signals")}
    assert "Dips and their causes" not in {t for t, _h, _r in summary.tables(old)}
    # A server without pg_stat_wal: the snapshot says which signal was absent and why.
    s13 = summary.build(fixture_series(), {**meta, "server_version": "13.4"}, RUN_ID, window(meta))
    tables = {title: rows for title, _header, rows in summary.tables(s13)}
    assert tables["Signals the dips were not weighed on"] == [["wal_fpi", "pg_stat_wal needs PostgreSQL 14 (server 13.4)"]]


def test_cli_explain_from_the_run_directory(tmp_path, capsys):
    runs = tmp_path / "runs"
    run = rundir.create_run_dir(str(runs), "20261123T100000.000Z-abcd")
    for ext in ("stdout", "stderr"):
        with open(os.path.join(PGBENCH, f"pg15_stall.{ext}"), "rb") as src, open(run.file(f"{ext}.log"), "wb") as dst:
            dst.write(src.read())
    run.write_meta({"run_id": run.run_id, "mode": "run", "argv": ["pgbench", "-c", "2", "-P", "1", "-T", "8"],
                    "progress_interval": 1.0, "clock_start_epoch": T0, "state": rundir.FINISHED,
                    "ended_at": T0 + 8.5, "exit_code": 0, "pgbench_version": "15.18"})
    assert cli.main(["explain", "--state-dir", str(tmp_path), "--source", "raw", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["source"] == "raw" and len(out["dips"]) == 1
    assert out["dips"][0]["start"] == T0 + 2.0 and out["dips"][0]["cause"] == report.NO_CAUSE
    assert out["engine"] == "postgresql" and "checkpoint" in out["signals"]["weighed"]
    assert cli.main(["explain", "--state-dir", str(tmp_path), "--source", "raw", run.run_id]) == 0
    assert "100% (deep, stall)" in capsys.readouterr().out
    assert cli.main(["explain", "--state-dir", str(tmp_path), "nope"]) == 2


# -- what the exporter writes -----------------------------------------------------------------------

def test_dip_samples_span_the_dip_and_end_with_it():
    d = {"start": T0 + 2.0, "end": T0 + 6.5, "level": "deep", "cause": "lock", "evidence": "up to 2 sessions"}
    out = dip_samples("r", 1, d)
    assert {s.name for s in out} == {"benchmark_dip_info"}
    assert dict(out[0].labels) == {"run_id": "r", "dip": "1", "level": "deep", "cause": "lock", "evidence": "up to 2 sessions"}
    assert [s.timestamp_ms for s in out[:-1]] == [int((T0 + x) * 1000) for x in (2, 3, 4, 5, 6, 6.5)]
    assert is_stale_marker(out[-1].value) and out[-1].timestamp_ms == int((T0 + 6.5) * 1000) + 1
    # The annotation's query reads it as a 0/1 state with exact edges.
    from benchwatch.explain import annotation
    from benchwatch.query import promql
    assert promql.boolean_selector(annotation.EXPR.replace("$run_id", "r")) == \
        '{__name__=~"benchmark_dip_info|pgbench_dip_info", run_id="r"}'


def test_signals_ignore_what_ended_long_before_the_run():
    old = gauge("pg_stat_activity_waits_sessions", {"wait_event_type": "Lock", "wait_event": "relation"},
                [(T0 - 600, 5)])
    ctx = report.context(META, run_with_dip(), "r")
    assert causes.Signals(run_with_dip() + [old], ctx).locks == {}


def test_live_watcher_writes_the_leading_cause_then_the_finished_dip(tmp_path):
    """The exporter's dips collector against a real Prometheus holding a live run: a lock under way."""
    from benchwatch.exporter.dips import DipWatcher
    from benchwatch.model.samples import sample
    from benchwatch.sink.remote_write import RemoteWriter
    from tests.helpers.prometheus import REMOTE_WRITE_CONFIG, start_prometheus

    now = float(int(__import__("time").time()))
    start = now - 40
    runs = str(tmp_path / "runs")
    run = rundir.create_run_dir(runs, "live")
    run.write_meta({"run_id": "live", "mode": "run", "argv": ["pgbench", "-c", "2", "-P", "1"], "progress_interval": 1.0,
                    "clock_start_epoch": start, "state": rundir.RUNNING, "pid": os.getpid(), "pgbench_version": "15.18"})
    # 1000 tps, an unexplained 2 s dip at 10 s, then TPS 0 for the last 5 s with both clients waiting on a lock.
    tps = [0.0 if 10 <= i < 12 or i >= 35 else 1000.0 for i in range(40)]
    samples = [sample("benchmark_progress_tps", {"run_id": "live"}, v, int((start + i + 1) * 1000)) for i, v in enumerate(tps)]
    samples.append(sample("benchmark_run_info", {"run_id": "live", "clients": "2"}, 1.0, int((start + 1) * 1000)))
    samples += [sample("pg_stat_activity_waits_sessions", {"wait_event_type": "Lock", "wait_event": "relation"}, 2.0,
                       int((start + i) * 1000)) for i in range(36, 41)]
    with start_prometheus(tmp_path / "prom", REMOTE_WRITE_CONFIG, ["--web.enable-remote-write-receiver"]) as prom:
        RemoteWriter(prom.remote_write_url).send(samples)
        clock = [now]
        watcher = DipWatcher(runs, prom.url, sink=lambda s: None, clock=lambda: clock[0])
        watcher._pass()
        out = watcher._outbox
        leading = [s for s in out if s.name == "benchmark_dip_leading_cause_info"]
        assert len(leading) == 1 and dict(leading[0].labels)["cause"] == "lock", out
        assert "relation 2" in dict(leading[0].labels)["evidence"]
        finished = [s for s in out if s.name == "benchmark_dip_info"]
        assert {dict(s.labels)["cause"] for s in finished} == {report.NO_CAUSE}
        assert finished[0].timestamp_ms == int((start + 10) * 1000) and is_stale_marker(finished[-1].value)
        # The run ends: after the settling time the lock dip is written and the leading series ended.
        watcher._outbox = []
        run.write_meta({**run.read_meta(), "state": rundir.FINISHED, "ended_at": now + 1, "exit_code": 0})
        clock[0] = now + 1
        watcher._pass()
        assert watcher._outbox == [] and "live" in watcher.runs  # settling
        clock[0] = now + 4
        watcher._pass()
        out = watcher._outbox
        assert any(s.name == "benchmark_dip_leading_cause_info" and is_stale_marker(s.value) for s in out), out
        assert not any(s.name == "benchmark_dip_info" and dict(s.labels)["cause"] == report.NO_CAUSE for s in out)
        assert "live" not in watcher.runs and "live" in watcher.done


def test_every_signal_is_the_neutral_ones_or_an_engines():
    """What an engine declares is what causes.py scores: no signal without a weight, none orphaned."""
    from benchwatch import engines

    declared = [s for e in engines.load_engines().values() for s in e.explain_signals]
    assert set(causes.NEUTRAL) | set(causes.HOST) | set(declared) == set(causes.WEIGHTS)
    assert not (set(causes.NEUTRAL) | set(causes.HOST)) & set(declared)
    for e in engines.load_engines().values():
        assert set(e.explain_needs) <= set(e.explain_signals), e
        assert e.up_metric in e.explain_selectors if "target_down" in e.explain_signals else True, e
        assert set(e.explain_selectors) <= set(causes.selectors())


def test_compare_says_which_signals_a_runs_dips_were_not_weighed_on(monkeypatch):
    from types import SimpleNamespace

    from benchwatch.share import compare
    from benchwatch.share.collect import window

    meta = rundir.RunDir(RUN_DIR).read_meta()
    runs = []
    for version in ("15.18", "13.4"):
        m = {**meta, "server_version": version}
        runs.append(SimpleNamespace(run_id=RUN_ID, meta=m, summary=summary.build(fixture_series(), m, RUN_ID, window(m))))
    text = compare.compare_markdown(["pg15", "pg13"], runs, None, [])  # type: ignore[arg-type]
    pg15, pg13 = (line for line in text.splitlines() if line.startswith("- **"))
    assert "not weighed" not in pg15
    assert "dips not weighed on wal_fpi (pg_stat_wal needs PostgreSQL 14 (server 13.4))" in pg13
    monkeypatch.setattr(compare, "compare_model", lambda *_a: {"panels": []})  # the charts are not the point
    assert "dips not weighed on wal_fpi" in compare.compare_page(["pg15", "pg13"], runs, None)  # type: ignore[arg-type]


# -- the host: other processes' CPU, pressure stall information --------------------------------------

def host_counter(name: str, labels: dict, per_second, every: float = 1.0) -> Series:
    total, points, t = 0.0, [], 0.0
    while t <= 30:
        total += per_second(t) * every
        points.append((T0 + t, total))
        t += every
    return gauge(name, {"target": "local", "host": "h", **labels}, points)


def busy_loops(start: float = 9, end: float = 15) -> list[Series]:
    """As the processes collector writes them (every 2 s): 1.6 CPUs of busy loops from ``start`` to ``end``."""
    def busy(t):
        return start <= t <= end
    other = host_counter("benchmark_host_cpu_seconds_total", {"group": "other"}, lambda t: 1.6 if busy(t) else 0.1, 2.0)
    db = host_counter("benchmark_host_cpu_seconds_total", {"group": "database"}, lambda t: 0.5 if busy(t) else 1.2, 2.0)
    top = [gauge("benchmark_host_top_process_cpu_ratio", {"host": "h", "comm": "sh", "pid": str(pid)},
                 [(T0 + t, 0.4) for t in range(10, 17, 2)]) for pid in (4242, 4243, 4244, 4245)]
    cpus = gauge("benchmark_host_cpus", {"host": "h"}, [(T0 + t, 2) for t in range(0, 31, 2)])
    return [other, db, cpus, *top]


def cpu_pressure(start: float = 9, end: float = 15) -> Series:
    return host_counter("node_pressure_cpu_waiting_seconds_total", {}, lambda t: 0.9 if start <= t <= end else 0.05)


def test_other_processes_taking_the_cpu_is_cpu_contention_not_a_routine_checkpoint():
    storm = [s for a in range(0, 30, 5) for s in checkpoint("wal", T0 + a + 0.3, T0 + a + 3.3)]
    d = only_dip(run_with_dip() + storm + busy_loops() + [cpu_pressure()], PG_META)
    assert d["cause"] == "cpu_contention", d
    # The loops took the database's CPU (its own fell): not the database being CPU-bound.
    assert "database_cpu_bound" not in {c["cause"] for c in d["candidates"]}, d
    assert "1.6 of 2 CPUs (0.1 usually)" in d["evidence"] and "sh (pid 4242) 0.40" in d["evidence"], d
    assert "waited for a CPU 90%" in d["evidence"], d
    assert d["candidates"][0]["details"]["busiest"][0] == {"process": "sh (pid 4242)", "cpus": 0.4}


def test_newcomers_on_a_machine_already_short_of_cpu_are_cpu_contention():
    """A machine whose CPUs were all in use already: the busy loops take their share from everyone, the
    other processes too, so only the CPU of processes started lately rises (as on the shared test machine)."""
    other = host_counter("benchmark_host_cpu_seconds_total", {"group": "other"}, lambda t: 0.3 if 9 <= t <= 15 else 1.0, 2.0)
    new = host_counter("benchmark_host_cpu_seconds_total", {"group": "new"}, lambda t: 0.7 if 9 <= t <= 15 else 0.1, 2.0)
    top = [gauge("benchmark_host_top_process_cpu_ratio", {"host": "h", "comm": comm, "pid": pid, "group": group},
                 [(T0 + t, cpus) for t in range(10, 17, 2)])
           for comm, pid, group, cpus in (("promtool", "17", "other", 0.3), ("sh", "4242", "new", 0.17))]
    cpus = gauge("benchmark_host_cpus", {"host": "h"}, [(T0 + t, 2) for t in range(0, 31, 2)])
    d = only_dip(run_with_dip() + [other, new, cpus, *top, cpu_pressure()], PG_META)
    assert d["cause"] == "cpu_contention", d
    assert d["evidence"].startswith("processes started lately used 0.7 of 2 CPUs (0.1 usually); busiest: sh (pid 4242)"), d


def test_a_process_that_ages_from_new_to_other_in_the_dip_is_named_once():
    # The newcomers' rise is the evidence (the others gave way to them), with python first new, then other.
    other = host_counter("benchmark_host_cpu_seconds_total", {"group": "other"}, lambda t: 0.1 if 9 <= t <= 15 else 0.5, 2.0)
    new = host_counter("benchmark_host_cpu_seconds_total", {"group": "new"}, lambda t: 0.9 if 9 <= t <= 15 else 0.1, 2.0)
    top = [gauge("benchmark_host_top_process_cpu_ratio", {"host": "h", "comm": "python", "pid": "17", "group": group},
                 [(T0 + t, 0.5) for t in times]) for group, times in (("new", (10, 12)), ("other", (14, 16)))]
    cpus = gauge("benchmark_host_cpus", {"host": "h"}, [(T0 + t, 2) for t in range(0, 31, 2)])
    d = only_dip(run_with_dip() + [other, new, cpus, *top, cpu_pressure()], PG_META)
    (c,) = [c for c in d["candidates"] if c["cause"] == "cpu_contention"]
    assert c["details"]["measure"] == "new" and c["details"]["busiest"] == [{"process": "python (pid 17)", "cpus": 0.5}], c


def test_other_processes_busy_while_the_database_got_its_usual_cpu_weigh_half():
    # A VACUUM FULL beside a CPU hog: the database's CPU did not fall, the disk is the better answer.
    loops = [s for s in busy_loops() if s.labels.get("group") != "database"]
    db = host_counter("benchmark_host_cpu_seconds_total", {"group": "database"}, lambda t: 1.2, 2.0)
    d = only_dip(run_with_dip() + loops + [db, cpu_pressure()], PG_META)
    (c,) = [c for c in d["candidates"] if c["cause"] == "cpu_contention"]
    assert c["strength"] == 0.5 and "the database and the load generator got 1.2 CPUs (1.2 usually)" in c["evidence"], c


def database_cpu(busy: float = 1.9, usually: float = 1.2, start: float = 9, end: float = 15) -> list[Series]:
    """The database's processes using ``busy`` CPUs of 2 from ``start`` to ``end`` (``usually`` else), the
    others idle, as the processes collector writes them (every 2 s)."""
    db = host_counter("benchmark_host_cpu_seconds_total", {"group": "database"},
                      lambda t: busy if start <= t <= end else usually, 2.0)
    other = host_counter("benchmark_host_cpu_seconds_total", {"group": "other"}, lambda t: 0.1, 2.0)
    cpus = gauge("benchmark_host_cpus", {"host": "h"}, [(T0 + t, 2) for t in range(0, 31, 2)])
    return [db, other, cpus]


def cpu_waiting(share: float, start: float = 9, end: float = 15) -> Series:
    return host_counter("node_pressure_cpu_waiting_seconds_total", {}, lambda t: share if start <= t <= end else 0.05)


def test_the_database_spending_the_cpus_is_database_cpu_bound_not_cpu_contention():
    # The database itself busy (its CPU up to nearly all of the machine's, pressure up, the others idle):
    # not "something else used the CPU" but a cause of its own.
    d = only_dip(run_with_dip() + database_cpu() + [cpu_waiting(0.45)], PG_META)
    assert d["cause"] == "database_cpu_bound" and "cpu_contention" not in {c["cause"] for c in d["candidates"]}, d
    assert d["evidence"] == ("the database's processes used 1.9 of 2 CPUs (1.2 usually); "
                             "tasks waited for a CPU 45% of the time"), d
    (c,) = d["candidates"]
    assert c["details"]["database_cpus"] == 1.9 and c["details"]["database_cpus_usually"] == 1.2, c
    # A symptom, not why: weighted below the specific causes (at most 0.5).
    assert c["score"] == pytest.approx(causes.WEIGHTS["database_cpu_bound"] * 0.7), c


def test_the_database_busy_while_other_processes_rose_is_cpu_contention_alone():
    # Whatever the database did, others taking CPU on the host is the answer there, not both.
    db = [s for s in database_cpu() if s.labels.get("group") == "database"]
    d = only_dip(run_with_dip() + db + busy_loops()[:1] + busy_loops()[2:] + [cpu_pressure()], PG_META)
    assert d["cause"] == "cpu_contention" and "database_cpu_bound" not in {c["cause"] for c in d["candidates"]}, d


def test_a_specific_cause_leads_over_the_database_being_cpu_bound():
    d = only_dip(run_with_dip() + database_cpu() + [cpu_waiting(0.45)]
                 + checkpoint("immediate force wait", T0 + 8.5, T0 + 9.2, buffers="40000"), PG_META)
    assert [c["cause"] for c in d["candidates"]] == ["checkpoint", "database_cpu_bound"], d


def test_why_the_server_spent_its_cpus_leads_even_when_it_scores_lower():
    # An autovacuum worker in the dip (0.6 x 0.5) while the database rose by half the machine (0.5 x 1):
    # the worker says why, the CPU is how it showed.
    worker = gauge("pg_autovacuum_workers", {}, [(T0 + t, 1.0 if 9 <= t <= 15 else 0.0) for t in range(31)])
    d = only_dip(run_with_dip() + database_cpu(busy=2.0, usually=1.0) + [cpu_waiting(0.45), worker], PG_META)
    assert [c["cause"] for c in d["candidates"]] == ["autovacuum", "database_cpu_bound"], d
    assert d["candidates"][1]["details"]["ranked_below"] == "autovacuum", d
    assert d["candidates"][1]["score"] == pytest.approx(0.9 * d["candidates"][0]["score"]), d


def test_a_run_cpu_bound_throughout_explains_no_dip_by_it():
    # 1.9 of 2 CPUs all run long, tasks always waiting: as much outside the dip as in it.
    d = only_dip(run_with_dip() + database_cpu(usually=1.9) + [cpu_waiting(0.45, 0, 30)], PG_META)
    assert d["cause"] == report.NO_CAUSE and d["candidates"] == [], d


def test_the_database_busier_but_with_cpu_to_spare_is_not_cpu_bound():
    # Its processes busier, but no task waited for a CPU (PSI): it used CPU that was idle, not held back by it.
    d = only_dip(run_with_dip() + database_cpu() + [cpu_waiting(0.02)], PG_META)
    assert "database_cpu_bound" not in {c["cause"] for c in d["candidates"]}, d
    # Up from 0.3 to 0.9 of 2 CPUs while tasks waited: not the machine's main user, what kept others waiting.
    d = only_dip(run_with_dip() + database_cpu(busy=0.9, usually=0.3) + [cpu_waiting(0.45)], PG_META)
    assert "database_cpu_bound" not in {c["cause"] for c in d["candidates"]}, d


def test_without_pressure_stall_information_the_cpus_are_full_when_every_process_used_them():
    d = only_dip(run_with_dip() + database_cpu(), PG_META)  # 1.9 + 0.1 of 2
    assert d["cause"] == "database_cpu_bound", d
    assert d["evidence"] == "the database's processes used 1.9 of 2 CPUs (1.2 usually); every process together used nearly all 2", d
    # 1.1 + 0.1 of 2: CPU to spare.
    d = only_dip(run_with_dip() + database_cpu(busy=1.1, usually=0.5), PG_META)
    assert "database_cpu_bound" not in {c["cause"] for c in d["candidates"]}, d


def test_what_the_database_got_is_read_over_the_dip_not_the_scans_before_it():
    # Scans every 2 s: the two in the 3 s before the dip stand for seconds when the database still had its
    # 1.2 CPUs; over the dip itself it got 1.0 (0.95, and 1.2 again in its last second): squeezed.
    loops = [s for s in busy_loops() if s.labels.get("group") != "database"]
    db = host_counter("benchmark_host_cpu_seconds_total", {"group": "database"}, lambda t: 0.95 if 11 <= t <= 14 else 1.2, 2.0)
    d = only_dip(run_with_dip() + loops + [db, cpu_pressure()], PG_META)
    (c,) = [c for c in d["candidates"] if c["cause"] == "cpu_contention"]
    assert c["strength"] == 1.0 and "the database and the load generator got 1.0 CPUs (1.2 usually)" in c["evidence"], c


def test_others_using_idle_cpu_without_pressure_weigh_half():
    d = only_dip(run_with_dip() + busy_loops() + [cpu_pressure(40, 41)], PG_META)
    (c,) = [c for c in d["candidates"] if c["cause"] == "cpu_contention"]
    assert c["strength"] == 0.5


def test_io_pressure_far_above_its_usual():
    io = host_counter("node_pressure_io_waiting_seconds_total", {}, lambda t: 0.95 if 9 <= t <= 15 else 0.02)
    d = only_dip(run_with_dip() + [io], PG_META)
    assert d["cause"] == "io_pressure" and "waited on I/O 95% of the time (2% usually)" in d["evidence"], d
    # Beside a busy disk, the disk is the answer (I/O pressure is what it does to the tasks).
    busy = host_counter("node_disk_io_time_seconds_total", {"device": "vda"}, lambda t: 0.95 if 9 <= t <= 15 else 0.1)
    assert only_dip(run_with_dip() + [io, busy], PG_META)["cause"] == "disk"


# -- the end of a run ---------------------------------------------------------------------------------

def saved(name: str) -> str:
    with open(os.path.join(PGBENCH, f"{name}.stderr"), encoding="utf-8") as f:
        return f.read()


def test_a_run_that_ended_as_planned_has_no_end():
    meta = {**PG_META, "ended_at": T0 + 30.2, "exit_code": 0, "argv": ["pgbench", "-T", "30", "-P", "1"]}
    assert report.explain(run_with_dip(), meta, "r")["end"] is None
    # Not yet ended: nothing to say either.
    assert report.explain(run_with_dip(), {**meta, "ended_at": None, "exit_code": None}, "r", ongoing=True)["end"] is None


def test_aborted_clients_end_a_run_early_with_their_message():
    # The real output of a run where pg_terminate_backend ended one client of four (pgbench exits 2).
    meta = {"clock_start_epoch": T0, "ended_at": T0 + 5.1, "exit_code": 2, "tool": "pgbench", "engine": "postgresql",
            "argv": ["pgbench", "-c", "4", "-T", "5", "-P", "1"]}
    result = report.explain(fixture_run("pg15_abort_terminated"), meta, "r", output=saved("pg15_abort_terminated"))
    end = result["end"]
    assert set(end) == {"early", "at", "at_s", "exit_code", "cause", "evidence"}
    assert end["early"] is True and end["exit_code"] == 2 and end["cause"] == "clients_aborted", end
    assert "administrator command" in end["evidence"] and "1 of 4 clients aborted" in end["evidence"], end
    assert end["at"] == pytest.approx(T0 + 4.0) and end["at_s"] == pytest.approx(4.0)
    assert "run ended early, 4.0 s in" in report.text_table(result)


def test_a_server_shutdown_under_the_run_is_a_server_restart():
    # The run asked for 30 s; its lines stop at 15 s, pgbench exits 2, the server log has a shutdown checkpoint.
    tps = gauge("benchmark_progress_tps", {"run_id": "r"}, [(T0 + t, 500.0) for t in range(1, 16)])
    info = gauge("benchmark_run_info", {"run_id": "r", "clients": "2", "duration_seconds": "30"}, [(T0 + 1, 1)])
    meta = {**PG_META, "ended_at": T0 + 15.5, "exit_code": 2}
    output = ("pgbench: error: client 0 script 0 aborted in command 5 query 0: FATAL:  terminating connection due to "
              "administrator command\nserver closed the connection unexpectedly\n")
    end = report.explain([tps, info, *checkpoint("shutdown immediate", T0 + 15.2, T0 + 15.3)], meta, "r",
                         output=output)["end"]
    assert end["cause"] == "server_restart" and "shutdown checkpoint (shutdown immediate)" in end["evidence"], end
    assert "last progress line came 15 s into a 30 s run" in end["evidence"] and end["at_s"] == 15.0
    # An end long before -T with exit code 0 and no clue: early, cause not found.
    end = report.explain([tps, info], {**meta, "exit_code": 0}, "r")["end"]
    assert end["early"] and end["cause"] == report.NO_CAUSE, end
    # Out of disk, from the output.
    end = report.explain([tps, info], meta, "r", output="ERROR:  could not extend file \"base/5/16397\": "
                         "No space left on device\n")["end"]
    assert end["cause"] == "out_of_disk", end


# -- the server log's events ---------------------------------------------------------------------------

def log_events(event: str, times: list[float]) -> Series:
    return gauge("pg_server_log_events_total", {"target": "local", "event": event},
                 [(T0 + t, n) for n, t in enumerate(times, 1)])


def test_deadlocks_in_the_dip_are_its_cause_before_the_lock_waits_they_made():
    waits = gauge("pg_stat_activity_waits_sessions", {"wait_event_type": "Lock", "wait_event": "transactionid"},
                  [(T0 + t, 2) for t in range(10, 16)])
    d = only_dip(run_with_dip() + [waits, log_events("deadlock", [11.2, 12.3, 13.4, 14.5])], PG_META)
    assert d["cause"] == "deadlock" and d["evidence"].startswith("4 deadlock(s) detected by the server"), d
    lock = next(c for c in d["candidates"] if c["cause"] == "lock")
    assert "(waits of the deadlocks)" in lock["evidence"]
    # Deadlocks all run long, as many outside the dip as in it: no cause of this dip.
    routine = log_events("deadlock", [t + 0.5 for t in range(0, 30)])
    assert only_dip(run_with_dip() + [routine], PG_META)["cause"] == report.NO_CAUSE


@pytest.mark.parametrize("event", ["lock_timeout", "connection_terminated", "out_of_memory", "write_error"])
def test_every_server_log_event_can_explain_a_dip(event):
    d = only_dip(run_with_dip() + [log_events(event, [10.5])], PG_META)
    assert d["cause"] == event, d
    # Not weighed for a MySQL run (another engine's target in the same Prometheus).
    assert only_dip(run_with_dip() + [log_events(event, [10.5])], MYSQL_META)["cause"] == report.NO_CAUSE


# -- statement: one statement's time per call (the exporter's statements collector) -----------------------

PG_STATEMENTS_META = {**PG_META, "capabilities": {**PG_META["capabilities"], "pg_stat_statements": True}}
ACCOUNTS_UPDATE = "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2"
ACCOUNTS_SELECT = "SELECT abalance FROM pgbench_accounts WHERE aid = $1"
TELLERS_UPDATE = "UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2"
# As the collector samples: every 5 s, every second while lines are low (from T0 + 9) and 10 s after.
SAMPLED = sorted({*range(0, 31, 5), *range(9, 26)})


def statement(qid: str, text: str, per_call, calls_per_s=lambda t: 100.0) -> list[Series]:
    """pg_statement_calls_total and pg_statement_exec_seconds_total of one statement whose calls that end in
    the second before t took per_call(t) seconds each."""
    labels = {"target": "local", "host": "h", "queryid": qid, "statement": text}
    calls = seconds = 0.0
    c_pts, s_pts = [], []
    for t in range(0, 31):
        if t:
            calls += calls_per_s(t)
            seconds += calls_per_s(t) * per_call(t)
        if t in SAMPLED:
            c_pts.append((T0 + t, calls))
            s_pts.append((T0 + t, seconds))
    return [gauge("pg_statement_calls_total", labels, c_pts), gauge("pg_statement_exec_seconds_total", labels, s_pts)]


def in_flight(qid: str, text: str, wait_type: str, wait_event: str, times, sessions: float = 2) -> Series:
    return gauge("pg_statement_active_sessions", {"target": "local", "host": "h", "queryid": qid, "statement": text,
                                                  "wait_event_type": wait_type, "wait_event": wait_event},
                 [(T0 + t, sessions) for t in times])


def in_dip(t: int) -> bool:
    return 11 <= t <= 15


def test_a_statement_that_slowed_alone_is_the_cause_with_its_time_per_call_before_and_after():
    """A dropped index: both statements on pgbench_accounts turn into sequential scans during the dip."""
    series = (run_with_dip()
              + statement("-1", ACCOUNTS_UPDATE, lambda t: 0.020 if in_dip(t) else 0.00005,
                          lambda t: 10 if in_dip(t) else 100)
              + statement("-2", ACCOUNTS_SELECT, lambda t: 0.015 if in_dip(t) else 0.00001,
                          lambda t: 10 if in_dip(t) else 100)
              + statement("-3", TELLERS_UPDATE, lambda t: 0.0001, lambda t: 10 if in_dip(t) else 100)
              + statement("-4", "UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2", lambda t: 0.0001,
                          lambda t: 10 if in_dip(t) else 100)
              + statement("-5", "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, "
                          "CURRENT_TIMESTAMP)", lambda t: 0.00001, lambda t: 10 if in_dip(t) else 100)
              + [in_flight("-1", ACCOUNTS_UPDATE, "CPU", "CPU", range(11, 16), 1),
                 in_flight("-2", ACCOUNTS_SELECT, "IO", "DataFileRead", range(11, 16), 1)])
    d = only_dip(series, PG_STATEMENTS_META)
    assert d["cause"] == "statement", d
    assert d["evidence"].startswith(f"{ACCOUNTS_UPDATE}: 0.05 ms → 20 ms per call"), d["evidence"]
    assert "in flight: sessions waited on CPU 100%" in d["evidence"], d["evidence"]
    top = d["candidates"][0]
    assert top["details"]["queryid"] == "-1" and top["details"]["ms_per_call_before"] == 0.05
    assert top["details"]["ms_per_call_in_dip"] == pytest.approx(20.0)
    assert top["score"] >= 0.8
    # The SELECT slowed too, a smaller share of the time: not the cause named, and no other cause weighs more.
    assert [c["cause"] for c in d["candidates"]] == ["statement"]
    # On a server without pg_stat_statements the same series are not weighed (the report says why).
    assert only_dip(series, PG_META)["cause"] == report.NO_CAUSE


def test_a_statement_slow_as_often_elsewhere_in_the_run_is_not_the_cause():
    def slow(t: int) -> bool:
        return in_dip(t) or 1 <= t <= 5 or 21 <= t <= 30
    d = only_dip(run_with_dip() + statement("-1", ACCOUNTS_UPDATE, lambda t: 0.020 if slow(t) else 0.00005), PG_STATEMENTS_META)
    assert d["cause"] == report.NO_CAUSE, d
    # A statement whose time per call hardly moved (twice its usual) is not one either.
    d = only_dip(run_with_dip() + statement("-1", ACCOUNTS_UPDATE, lambda t: 0.0001 if in_dip(t) else 0.00005),
                 PG_STATEMENTS_META)
    assert d["cause"] == report.NO_CAUSE, d


def test_a_lock_stays_the_cause_and_names_the_waiting_statement_its_time_per_call_and_the_blocker():
    """LOCK TABLE pgbench_tellers held through the dip: every client waits in UPDATE pgbench_tellers, whose calls
    end (slow) once it is released."""
    waits = gauge("pg_stat_activity_waits_sessions", {"wait_event_type": "Lock", "wait_event": "relation"},
                  [(T0 + t, 2) for t in range(10, 16)])
    waiting = gauge("pg_stat_activity_lock_waits_sessions",
                    {"statement": "UPDATE pgbench_tellers SET tbalance = tbalance + -? WHERE tid = ?;", "wait_event": "relation",
                     "blocker": "active: BEGIN; LOCK TABLE pgbench_tellers IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(?);",
                     "blocker_pid": "4242"},
                    [(T0 + t, 2) for t in range(10, 16)])
    # No call ends while the lock is held; the two stuck ones end in the second after, 5 s each.
    tellers = statement("-3", TELLERS_UPDATE, lambda t: 2.5 if t == 16 else 0.0001,
                        lambda t: 0 if in_dip(t) else 2 if t == 16 else 100)
    longest = gauge("pg_statement_active_seconds_max", {"target": "local", "host": "h", "queryid": "-3",
                                                        "statement": TELLERS_UPDATE, "wait_event_type": "Lock",
                                                        "wait_event": "relation"}, [(T0 + t, t - 10.0) for t in range(11, 16)])
    series = (run_with_dip() + [waits, waiting, longest, in_flight("-3", TELLERS_UPDATE, "Lock", "relation", range(11, 16))]
              + tellers + statement("-1", ACCOUNTS_UPDATE, lambda t: 0.00005, lambda t: 0 if in_dip(t) else 100))
    d = only_dip(series, PG_STATEMENTS_META)
    assert d["cause"] == "lock", d
    assert ("UPDATE pgbench_tellers SET tbalance = tbalance + -? WHERE tid = ?; waited on Lock:relation, blocked by a "
            "session active (pid 4242): BEGIN; LOCK TABLE pgbench_tellers") in d["evidence"], d["evidence"]
    assert d["evidence"].endswith("; 0.10 ms → 2,500 ms per call, in flight up to 5.0 s"), d["evidence"]
    lock = d["candidates"][0]
    assert lock["details"]["waiting_statement"] == {"statement": TELLERS_UPDATE, "queryid": "-3",
                                                    "ms_per_call_before": 0.1, "ms_per_call_in_dip": 2500.0,
                                                    "longest_in_flight_s": 5.0}
    # The statement is a candidate too, below the lock it waited on.
    (stmt,) = [c for c in d["candidates"] if c["cause"] == "statement"]
    assert stmt["score"] < lock["score"] and stmt["evidence"].endswith("(it waited on a lock)"), d["candidates"]


def test_without_in_flight_samples_the_waiter_is_found_by_the_lock_waits_text():
    """The statements collector sampled nothing in flight (every 5 s, the lock shorter): the lock-waits query's
    statement (literals as ?, pgbench's negative delta as -?) is matched to pg_stat_statements' text ($n)."""
    waits = gauge("pg_stat_activity_waits_sessions", {"wait_event_type": "Lock", "wait_event": "relation"},
                  [(T0 + t, 2) for t in range(10, 16)])
    waiting = gauge("pg_stat_activity_lock_waits_sessions",
                    {"statement": "UPDATE pgbench_tellers SET tbalance = tbalance + -? WHERE tid = ?;",
                     "wait_event": "relation", "blocker": "idle in transaction: SELECT ?;", "blocker_pid": "77"},
                    [(T0 + t, 2) for t in range(10, 16)])
    tellers = statement("-3", TELLERS_UPDATE, lambda t: 2.5 if t == 16 else 0.0001,
                        lambda t: 0 if in_dip(t) else 2 if t == 16 else 100)
    d = only_dip(run_with_dip() + [waits, waiting] + tellers, PG_STATEMENTS_META)
    assert d["cause"] == "lock" and "blocked by a session idle in transaction (pid 77): SELECT ?" in d["evidence"], d
    assert d["evidence"].endswith("; 0.10 ms → 2,500 ms per call"), d["evidence"]


def table_lock_series(qid: str, text: str) -> list[Series]:
    """A 6 s LOCK TABLE pgbench_tellers: sessions waiting on it (in flight as ``qid``/``text``, up to 6 s), while
    the tracked UPDATE's time per call stays 0.02 ms (the wait comes before execution)."""
    waits = gauge("pg_stat_activity_waits_sessions", {"wait_event_type": "Lock", "wait_event": "relation"},
                  [(T0 + t, 2) for t in range(10, 16)])
    labels = {"target": "local", "host": "h", "queryid": qid, "statement": text, "wait_event_type": "Lock",
              "wait_event": "relation"}
    longest = gauge("pg_statement_active_seconds_max", labels, [(T0 + t, t - 10.0) for t in range(11, 17)])
    tellers = statement("-3", TELLERS_UPDATE, lambda t: 0.00002, lambda t: 0 if in_dip(t) else 2 if t == 16 else 100)
    return run_with_dip() + [waits, longest, in_flight(qid, text, "Lock", "relation", range(11, 16))] + tellers


def test_a_waiter_in_flight_without_counters_takes_them_from_the_statement_of_the_same_text():
    """The sessions waiting on the lock were written under a queryid without counters (none yet, or another's of
    the same text): the lock's evidence still gives the tracked statement's time per call, and their wait."""
    waiter_text = "UPDATE pgbench_tellers SET tbalance = tbalance + -? WHERE tid = ?;"
    d = only_dip(table_lock_series("", waiter_text), PG_STATEMENTS_META)
    assert d["cause"] == "lock", d
    assert "0.02 ms → 0.02 ms per call, in flight up to 6.0 s" in d["evidence"], d["evidence"]
    assert d["candidates"][0]["details"]["waiting_statement"]["queryid"] == "-3"


def test_a_table_lock_wait_shows_in_flight_not_in_the_time_per_call():
    """As measured on PostgreSQL 15: through a 6 s LOCK TABLE pgbench_tellers the UPDATE's time per call stayed
    0.02 ms (the relation lock is taken while the statement is parsed, before execution); its sessions had been
    in flight for up to 6 s when sampled."""
    d = only_dip(table_lock_series("-3", TELLERS_UPDATE), PG_STATEMENTS_META)
    assert d["cause"] == "lock", d
    assert d["evidence"].endswith(f"; {TELLERS_UPDATE} waited on Lock:relation; 0.02 ms → 0.02 ms per call, in flight up "
                                  "to 6.0 s (a wait for a table lock comes before execution, outside pg_stat_statements' "
                                  "time)"), d["evidence"]
    assert "statement" not in {c["cause"] for c in d["candidates"]}  # its time per call did not rise


def test_every_statement_slowing_alike_is_not_a_statement_cause():
    """A CPU hog or a busy disk slows every statement about as much: no one statement is the answer."""
    slower = [statement(f"-{i}", text, lambda t: (0.0005 if in_dip(t) else 0.0001) * (i + 1),
                        lambda t: 30 if in_dip(t) else 100)
              for i, text in enumerate((ACCOUNTS_UPDATE, ACCOUNTS_SELECT, TELLERS_UPDATE))]
    d = only_dip(run_with_dip() + [s for pair in slower for s in pair], PG_STATEMENTS_META)
    assert d["cause"] == report.NO_CAUSE and "statement" not in {c["cause"] for c in d["candidates"]}, d
