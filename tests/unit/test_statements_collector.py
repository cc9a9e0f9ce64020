"""The statements collector: readings of pg_stat_statements and pg_stat_activity turned into samples, and its pace."""

from __future__ import annotations

import logging
import math

from benchwatch.engines.postgresql.collectors import statements
from benchwatch.exporter.dips import TPS, LowLines
from benchwatch.model.samples import Sample, sample

# pgbench's tpcb-like statements as pg_stat_statements shows them (PostgreSQL 15, -M simple).
TEXTS = {
    "-101": "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2",
    "-102": "SELECT abalance FROM pgbench_accounts WHERE aid = $1",
    "-103": "UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2",
    "-104": "UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2",
    "-105": "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)",
    "-106": "BEGIN",
    "-107": "END",
}


class Clock:
    def __init__(self, t: float = 1_800_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


class Server:
    """What the collector's Reader returns, set by the test (rows as the SQL gives them)."""

    def __init__(self):
        self.conn = None
        self.rows: list[statements.StatementRow] = []
        self.active_rows: list[statements.ActiveRow] = []
        self.text_rows = dict(TEXTS)
        self.down = False
        self.opened = 0
        self.readings = 0
        self.on_read = None  # called before each reading: the test's server at work

    def open(self):
        if self.down:
            raise OSError("connection to server at \"127.0.0.1\", port 15432 failed: Connection refused")
        self.opened += 1
        self.conn = object()

    def statements(self):
        if self.down:
            raise OSError("server closed the connection unexpectedly")
        self.readings += 1
        if self.on_read is not None:
            self.on_read()
        return list(self.rows)

    def texts(self, queryids):
        return [(q, self.text_rows[q]) for q in queryids if q in self.text_rows]

    def active(self):
        return list(self.active_rows)

    def close(self):
        self.conn = None


def by_name(samples: list[Sample], name: str) -> dict[str, float]:
    return {dict(s.labels)["queryid"] + ("/" + dict(s.labels)["wait_event"] if "wait_event" in dict(s.labels) else ""):
            s.value for s in samples if s.name == name}


def test_top_statements_by_time_since_the_last_reading_with_their_counters():
    clock, server, sent = Clock(), Server(), []
    c = statements.StatementsCollector(sent.extend, server, clock=clock, labels={"target": "local", "host": "h"})
    # The first reading is the starting point: pgbench -i's statements, run before, are not what runs now.
    server.rows = [("-101", 1000, 200.0), ("-102", 1000, 100.0), ("-106", 1000, 1.0), ("-900", 1, 9000.0)]
    assert c.sample_once() == []
    clock.t += 5
    server.rows = [("-101", 1100, 220.0), ("-102", 1100, 110.0), ("-106", 1100, 1.1), ("-900", 1, 9000.0)]
    got = c.sample_once()
    calls = by_name(got, "pg_statement_calls_total")
    assert calls == {"-101": 1100, "-102": 1100, "-106": 1100}
    seconds = by_name(got, "pg_statement_exec_seconds_total")
    assert seconds["-101"] == 0.22
    first = next(s for s in got if s.name == "pg_statement_calls_total" and dict(s.labels)["queryid"] == "-101")
    assert dict(first.labels) == {"target": "local", "host": "h", "queryid": "-101", "statement": TEXTS["-101"]}
    assert first.timestamp_ms == round(clock.t * 1000)
    # A new statement that took most of the time since joins; the others stay (sticky for TRACK_S).
    clock.t += 5
    server.rows = [("-101", 1200, 240.0), ("-102", 1200, 120.0), ("-106", 1200, 1.2), ("-103", 50, 900.0)]
    got = c.sample_once()
    assert set(by_name(got, "pg_statement_calls_total")) == {"-101", "-102", "-106", "-103"}


def test_a_cheap_statement_run_often_stays_written_beside_slower_monitoring_queries():
    """pgbench's UPDATE of pgbench_tellers takes 0.02 ms, 150 times a second; ten monitoring queries take
    4 ms once a second each. By time alone the UPDATE falls out of the top 8, and its usual time per
    call, which a lock's evidence needs, is never known (CI saw the lock's evidence without it)."""
    clock, server = Clock(), Server()
    server.text_rows = {**TEXTS, **{f"-{900 + i}": f"SELECT count(*) FROM pg_stat_activity WHERE {i} = $1" for i in range(10)}}
    c = statements.StatementsCollector([].extend, server, clock=clock)
    calls, ms = {q: 0.0 for q in server.text_rows}, {q: 0.0 for q in server.text_rows}
    got: list[Sample] = []
    for _ in range(3):
        for q in server.text_rows:
            monitoring = q.startswith("-9")
            calls[q] += 5 if monitoring else 750
            ms[q] += 20.0 if monitoring else 750 * (0.02 if q == "-103" else 0.05)
        server.rows = [(q, calls[q], ms[q]) for q in server.text_rows]
        got = c.sample_once()
        clock.t += 5
    assert "-103" in by_name(got, "pg_statement_calls_total")


def test_a_statement_that_turns_hot_gets_in_when_the_budget_is_full():
    clock, server = Clock(), Server()
    server.text_rows = {f"-{i}": f"SELECT {i} FROM t{i} WHERE id = $1" for i in range(100)}
    c = statements.StatementsCollector([].extend, server, clock=clock)
    total = dict.fromkeys((f"-{i}" for i in range(100)), 0.0)

    def reading(busy: list[str]) -> set[str]:
        for q in busy:
            total[q] += 10.0
        server.rows = [(q, 1.0 + ms, ms) for q, ms in total.items()]
        clock.t += 1
        return {dict(s.labels)["queryid"] for s in c.sample_once() if s.name == "pg_statement_calls_total"
                and not math.isnan(s.value)}
    reading([])
    reading([f"-{i}" for i in range(8)])
    reading([f"-{i}" for i in range(8, 16)])
    assert len(c.tracker.tracked) == statements.MAX_TRACKED
    # pgbench starts: its statements are written at once, in place of those longest out of the top.
    live = reading(["-50", "-51"])
    assert {"-50", "-51"} <= live and len(live) == statements.MAX_TRACKED
    assert len({f"-{i}" for i in range(8)} & live) == 6  # two of the first 8, out of the top the longest, left


def test_statements_left_out_of_the_top_stop_with_a_staleness_marker_and_the_budget_holds():
    clock, server = Clock(), Server()
    server.text_rows = {f"-{i}": f"SELECT {i} FROM t{i} WHERE id = $1" for i in range(100)}
    c = statements.StatementsCollector([].extend, server, clock=clock)
    # 40 statements, each the busiest once: at most MAX_TRACKED written at any time.
    for i in range(40):
        server.rows = [(f"-{j}", 10.0 * (j + 1), 10.0 * (j + 1) + (1000.0 if j == i else 0.0) + i) for j in range(40)]
        got = c.sample_once()
        live = {dict(s.labels)["queryid"] for s in got if s.name == "pg_statement_calls_total" and not math.isnan(s.value)}
        assert len(live) <= statements.MAX_TRACKED
        clock.t += 1
    # Nothing for TRACK_S: each tracked one leaves with one staleness marker per counter.
    clock.t += statements.TRACK_S + 1
    got = c.sample_once()
    gone = [s for s in got if math.isnan(s.value)]
    assert gone and all(s.name in ("pg_statement_calls_total", "pg_statement_exec_seconds_total") for s in gone)
    assert len(gone) == 2 * len({dict(s.labels)["queryid"] for s in gone})


def test_our_own_queries_are_left_out_and_literals_never_reach_a_label():
    clock, server = Clock(), Server()
    server.text_rows = {"-1": statements.MARK + "\nSELECT s.queryid::text ...", "-2": "LOCK TABLE t IN ACCESS EXCLUSIVE MODE",
                        "-3": "SET application_name = 'secret 42'"}
    c = statements.StatementsCollector([].extend, server, clock=clock)
    server.rows = [("-1", 0, 0.0), ("-2", 0, 0.0), ("-3", 0, 0.0)]
    c.sample_once()
    server.rows = [("-1", 10, 500.0), ("-2", 1, 10.0), ("-3", 1, 5.0)]
    got = c.sample_once()
    texts = {dict(s.labels)["queryid"]: dict(s.labels)["statement"] for s in got}
    assert texts == {"-2": "LOCK TABLE t IN ACCESS EXCLUSIVE MODE", "-3": "SET application_name = ?"}
    assert statements.normalize("UPDATE t SET v = 'x''y', w = 12.5\n   WHERE id = $1 AND k IN (1, 2)") == (
        "UPDATE t SET v = ?, w = ? WHERE id = $1 AND k IN (?, ?)")
    assert len(statements.normalize("SELECT " + "a, " * 100)) == statements.TEXT_CHARS


def test_statements_in_flight_by_wait_event_and_gone_ones_end():
    clock, server = Clock(), Server()
    c = statements.StatementsCollector([].extend, server, clock=clock)
    c.sample_once()
    server.rows = [("-103", 100, 10.0)]
    server.active_rows = [("-103", "Lock", "relation", 2.0, 5.8,
                           "UPDATE pgbench_tellers SET tbalance = tbalance + -4017 WHERE tid = 7;"),
                          ("-999", "CPU", "CPU", 1.0, 0.01, "SELECT * FROM big WHERE note = 'private'")]
    got = c.sample_once()
    active = {dict(s.labels)["queryid"]: s for s in got if s.name == "pg_statement_active_sessions"}
    assert dict(active["-103"].labels)["statement"] == TEXTS["-103"]  # pg_stat_statements' text for a known queryid
    assert dict(active["-103"].labels)["wait_event_type"] == "Lock" and active["-103"].value == 2.0
    assert dict(active["-999"].labels)["statement"] == "SELECT * FROM big WHERE note = ?"  # its own text, no literal
    longest = {dict(s.labels)["queryid"]: s.value for s in got if s.name == "pg_statement_active_seconds_max"}
    assert longest == {"-103": 5.8, "-999": 0.01}
    # Sessions waiting for a table lock while their statement is parsed have no query_id yet: the tracked
    # statement of the same text takes them (pgbench -M simple sends its literals), added to its group.
    clock.t += 1
    server.active_rows = [("-103", "Lock", "relation", 1.0, 2.0, "UPDATE pgbench_tellers SET tbalance = tbalance + 17 WHERE tid = 3;"),
                          ("", "Lock", "relation", 2.0, 6.5, "UPDATE pgbench_tellers SET tbalance = tbalance + -? WHERE tid = ?;"),
                          ("", "Lock", "relation", 1.0, 1.0, "UPDATE other SET v = ? WHERE id = ?")]
    got = {(dict(s.labels).get("queryid"), dict(s.labels)["statement"]): s.value for s in c.sample_once()
           if s.name == "pg_statement_active_sessions" and not math.isnan(s.value)}
    assert got == {("-103", TEXTS["-103"]): 3.0, (None, "UPDATE other SET v = ? WHERE id = ?"): 1.0}
    clock.t += 1
    server.active_rows = []
    got = c.sample_once()
    assert sorted((dict(s.labels).get("queryid", ""), s.name) for s in got if math.isnan(s.value)) == [
        ("", "pg_statement_active_seconds_max"), ("", "pg_statement_active_sessions"),
        ("-103", "pg_statement_active_seconds_max"), ("-103", "pg_statement_active_sessions")]


def tps(run: str, t: float, v: float) -> Sample:
    return sample(TPS, {"run_id": run, "tool": "pgbench"}, v, round(t * 1000))


def test_the_pace_turns_fast_while_a_line_is_possibly_low_and_back():
    clock = Clock()
    woken = []
    pace = statements.Schedule(clock, wake=lambda: woken.append(clock.t))
    # The exporter's on_possibly_low: the lines it sends, judged as the dips collector judges them.
    lines = LowLines()
    lines.callbacks.append(pace.hurry)
    t0 = clock.t
    for i in range(20):
        clock.t = t0 + i
        lines.observe([tps("r", clock.t, 150.0)])
    assert pace.step() == statements.EVERY_S and woken == []
    clock.t = t0 + 20
    lines.observe([tps("r", clock.t, 40.0)])  # a low line
    assert pace.step() == statements.FAST_S and woken == [clock.t]
    clock.t += statements.FAST_HOLD_S - 1
    assert pace.step() == statements.FAST_S
    clock.t += 2
    assert pace.step() == statements.EVERY_S
    # Other series (and staleness markers) change nothing.
    lines.observe([sample("benchmark_transactions_total", {"run_id": "r"}, 1.0, round(clock.t * 1000)),
                  tps("r", clock.t + 1, float("nan"))])
    assert pace.step() == statements.EVERY_S


def test_a_server_away_is_logged_once_and_retried(caplog):
    clock, server = Clock(), Server()
    sent: list[Sample] = []
    c = statements.StatementsCollector(sent.extend, server, clock=clock)
    server.down = True
    with caplog.at_level(logging.INFO, logger="benchwatch.exporter"):
        assert c.tick() == statements.RETRY_S
        assert c.tick() == statements.RETRY_S
        server.down = False
        assert c.tick() == statements.EVERY_S
        server.rows = [("-101", 10, 2.0)]
        assert c.tick() == statements.EVERY_S
    c.stop()  # before the first poll: its thread ends at once, the ticks above are the test's
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO"], caplog.records
    assert "Connection refused" in caplog.records[0].getMessage()
    assert c.poll() > 0 and {s.name for s in sent} == {"pg_statement_calls_total", "pg_statement_exec_seconds_total"}


def test_the_connection_comes_from_the_daemons_environment_without_a_password():
    env = {"PGHOST": "127.0.0.1", "PGPORT": "15432", "PGDATABASE": "pgbench", "PGUSER": "postgres",
           "PGPASSFILE": "/state/secrets/pgpass", "PGPASSWORD": "from-a-shell", "HOME": "/root"}
    assert statements.connection_params(env) == {"host": "127.0.0.1", "port": "15432", "dbname": "pgbench", "user": "postgres",
                                                  "passfile": "/state/secrets/pgpass"}
    assert statements.connection_params({"HOME": "/root", "PGDATABASE": "x"}) is None  # the stack gave it no server: no collector


def test_a_server_too_old_for_query_id_is_asked_again_only_every_few_minutes(caplog):
    class Old(Server):
        def open(self):
            raise statements.Unsupported("PostgreSQL 14 or later needed (pg_stat_activity.query_id); server 130004")
    c = statements.StatementsCollector([].extend, Old(), clock=Clock())
    with caplog.at_level(logging.INFO, logger="benchwatch.exporter"):
        assert c.tick() == statements.UNSUPPORTED_RETRY_S
        assert c.tick() == statements.UNSUPPORTED_RETRY_S
    assert [r.getMessage() for r in caplog.records] == [
        "statements collector: PostgreSQL 14 or later needed (pg_stat_activity.query_id); server 130004; trying again "
        "every 600 s"]


def test_between_runs_a_sample_every_idle_every_s_and_one_at_once_when_a_run_is_live():
    clock = Clock()
    live = [False]
    pace = statements.Schedule(clock, run_live=lambda: live[0])
    assert pace.due()  # the first: the starting point
    pace.taken()
    due = []
    for _ in range(int(statements.IDLE_EVERY_S / statements.EVERY_S) - 1):
        clock.t += statements.EVERY_S
        due.append(pace.due())
    assert not any(due)
    clock.t += statements.EVERY_S
    assert pace.due()
    pace.taken()
    clock.t += statements.EVERY_S
    live[0] = True
    assert pace.due()  # every wake of the loop (EVERY_S, FAST_S) samples while a run is live
    # A possibly low line between runs (an attach that just started) samples too.
    live[0] = False
    pace.taken()
    pace.hurry()
    assert pace.due()
    # A daemon that follows no runs (an agent's log follower): always due.
    assert statements.Schedule(clock).due()


def test_between_runs_the_loop_looks_again_within_a_second_so_a_run_is_read_from_its_start():
    clock = Clock()
    live = [False]
    c = statements.StatementsCollector(lambda samples: None, reader=None, clock=clock, run_live=lambda: live[0])
    c.schedule.taken()
    clock.t += statements.EVERY_S
    assert c.tick() == statements.FAST_S  # not due: no reading (reader=None would raise), a look in a second


def test_where_no_run_is_followed_the_pace_follows_the_servers_own_work():
    """An agent's follower sees no runs: its readings tell it whether the server works (other sessions in
    flight, or more statement calls than a monitoring scrape makes); idle, a reading every IDLE_EVERY_S."""
    clock, server = Clock(), Server()
    c = statements.StatementsCollector(lambda samples: None, server, clock=clock)
    readings = []

    def run(seconds: float) -> None:
        end = clock.t + seconds
        while clock.t < end:
            before = server.readings
            clock.t += c.tick()
            if server.readings > before:
                readings.append(clock.t)

    # A daemon just started knows nothing of the server: the full pace for BUSY_HOLD_S.
    server.rows = [("-101", 100.0, 5.0)]
    run(statements.BUSY_HOLD_S)
    assert len(readings) >= statements.BUSY_HOLD_S / statements.EVERY_S - 1
    # Only a monitoring scrape's calls (10 a second): a reading every IDLE_EVERY_S.
    readings.clear()

    def calls_grow(per_s: float):
        last = [clock.t]

        def grow():
            qid, calls, ms = server.rows[0]
            server.rows = [(qid, calls + per_s * (clock.t - last[0]), ms + 1.0)]
            last[0] = clock.t
        return grow
    server.on_read = calls_grow(10.0)
    run(3 * statements.IDLE_EVERY_S)
    assert 2 <= len(readings) <= 4, readings
    # A benchmark starts (hundreds of calls a second): found at the next reading, the full pace from then.
    readings.clear()
    server.on_read = calls_grow(500.0)
    run(statements.IDLE_EVERY_S + 30)
    assert len(readings) >= 30 / statements.EVERY_S, readings
    # A session in flight (a statement that runs for minutes, few calls) keeps the full pace too.
    server.on_read = None
    server.active_rows = [("-101", "CPU", "CPU", 1.0, 40.0, TEXTS["-101"])]
    readings.clear()
    run(2 * statements.BUSY_HOLD_S)
    assert len(readings) >= 2 * statements.BUSY_HOLD_S / statements.EVERY_S - 1
    # It ends: BUSY_HOLD_S more at the full pace, then the slow one.
    server.active_rows = []
    run(statements.BUSY_HOLD_S)
    readings.clear()
    run(2 * statements.IDLE_EVERY_S)
    assert 1 <= len(readings) <= 3, readings
