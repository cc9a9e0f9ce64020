"""Tests of benchwatch.loadgens.pgbench.output against captured and hand-written
pgbench output (tests/fixtures/pgbench, see its README.md)."""

from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path

import pytest

from benchwatch.loadgens.pgbench.output import (
    ClientAborted,
    ErrorLine,
    Event,
    Ignored,
    PgbenchOutputParser,
    Progress,
    RunAborted,
    ScriptHeader,
    ScriptStat,
    ScriptSummary,
    StatementLatency,
    Summary,
    Unparsed,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pgbench"
REAL = sorted(p.name for p in FIXTURES.glob("pg15_*.std*"))
HANDWRITTEN = sorted(
    p.name for p in FIXTURES.glob("pg*.std*") if not p.name.startswith("pg15_")
)
ALL_TEXT_FIXTURES = REAL + HANDWRITTEN


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def raw_lines(name: str) -> list[bytes]:
    return (FIXTURES / name).read_bytes().splitlines(keepends=True)


def parse_lines(lines) -> list[tuple[object, list]]:
    parser = PgbenchOutputParser()
    out = [(line, parser.feed(line)) for line in lines]
    tail = parser.flush()
    if tail:
        out.append((b"<flush>", tail))
    return out


def parse(name: str) -> list:
    return [e for _, events in parse_lines(raw_lines(name)) for e in events]


def of(events, cls) -> list:
    return [e for e in events if isinstance(e, cls)]


def summary(events) -> dict:
    out = {}
    for e in of(events, Summary):
        assert e.key not in out, f"duplicate summary key {e.key}"
        out[e.key] = e.value
    return out


def same(a, b) -> bool:
    """Equality with float tolerance and NaN == NaN."""
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return False
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b and type(a) is type(b)


def eq(a, b) -> bool:
    """Event (or list of events) equality with float tolerance."""
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(map(eq, a, b))
    if type(a) is not type(b):
        return False
    return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))


def assert_summary(events, expected: dict) -> None:
    got = summary(events)
    assert set(got) == set(expected), (sorted(got), sorted(expected))
    for key, value in expected.items():
        assert same(got[key], value), (key, got[key], value)


def expected_progress(text: str) -> dict:
    """An independent (split-based) reading of a progress line."""
    head, *fields = text.rstrip("\r\n").split(", ")
    _, time_text, unit = head.split(" ")
    assert unit == "s"
    tps_text, tps_word = fields[0].split(" ")
    assert tps_word == "tps"
    lat_words = fields[1].split(" ")
    assert lat_words[0] == "lat" and lat_words[2] == "ms" and lat_words[3] == "stddev"
    out = {
        "time_s": float(time_text),
        "absolute": float(time_text) > 1e8,
        "tps": float(tps_text),
        "latency_s": float(lat_words[1]) / 1000,
        "stddev_s": float(lat_words[4]) / 1000,
        "lag_s": None,
        "failed": None,
        "skipped": None,
        "retried": None,
        "retries": None,
    }
    for field in fields[2:]:
        words = field.split(" ")
        if words[0] == "lag":
            out["lag_s"] = float(words[1]) / 1000
        else:
            out[words[1]] = int(words[0])
    return out


def table_rows(lines: list[str]) -> list[tuple[str, int]]:
    """(row text, number of count columns) of every -r table row."""
    rows, cols = [], None
    for line in lines:
        if "statement latencies in milliseconds" in line:
            cols = 2 if "failures and retries" in line else 1 if "and failures" in line else 0
            continue
        if cols is not None and line[:1] in (" ", "\t") and not line.startswith(" - "):
            rows.append((line, cols))
        else:
            cols = None
    return rows


# --------------------------------------------------------------------------
# every fixture, real or hand-written
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_TEXT_FIXTURES)
def test_progress_events_match_printed_lines(name):
    lines = [l.decode() for l in raw_lines(name)]
    progress_lines = [l for l in lines if l.startswith("progress:")]
    events = parse(name)
    progress = of(events, Progress)
    assert len(progress) == len(progress_lines)
    for line, event in zip(progress_lines, progress):
        want = expected_progress(line)
        for field, value in want.items():
            assert same(getattr(event, field), value), (line, field)


@pytest.mark.parametrize("name", ALL_TEXT_FIXTURES)
def test_every_line_is_understood(name):
    """No Unparsed at all; every line gives events, except a 'SQL script N:'
    header, which waits for its '- weight:' line."""
    for line, events in parse_lines(raw_lines(name)):
        assert not of(events, Unparsed), (line, events)
        if not events:
            assert line.startswith(b"SQL script "), line


@pytest.mark.parametrize("name", ALL_TEXT_FIXTURES)
def test_statement_rows(name):
    lines = [l.decode().rstrip("\n") for l in raw_lines(name)]
    rows = table_rows(lines)
    got = of(parse(name), StatementLatency)
    assert len(got) == len(rows)
    for (text, cols), event in zip(rows, got):
        parts = text.split(None, cols + 1)
        assert event.statement == parts[-1]
        assert same(event.latency_s, float(parts[0]) / 1000)
        assert event.failures == (int(parts[1]) if cols >= 1 else None)
        assert event.retries == (int(parts[2]) if cols >= 2 else None)


@pytest.mark.parametrize("name", ALL_TEXT_FIXTURES)
def test_str_and_bytes_and_newlines_agree(name):
    as_bytes = parse(name)
    lines = [l.decode() for l in raw_lines(name)]
    for variant in (
        lines,
        [l.rstrip("\n") for l in lines],
        [l.rstrip("\n") + "\r\n" for l in lines],
    ):
        parser = PgbenchOutputParser()
        events = [e for l in variant for e in parser.feed(l)] + parser.flush()
        assert len(events) == len(as_bytes)
        for a, b in zip(events, as_bytes):
            assert type(a) is type(b)
            for field in dataclasses.fields(a):
                assert same(getattr(a, field.name), getattr(b, field.name))


def test_events_are_frozen_slotted_dataclasses():
    for cls in (
        Progress, Summary, ScriptHeader, ScriptSummary, ScriptStat, StatementLatency,
        ClientAborted, RunAborted, ErrorLine, Ignored, Unparsed,
    ):
        assert dataclasses.is_dataclass(cls)
        assert cls.__dataclass_params__.frozen
        assert "__slots__" in cls.__dict__
    event = Summary("tps", 1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.value = 2.0  # type: ignore[misc]


# --------------------------------------------------------------------------
# real pgbench 15 captures
# --------------------------------------------------------------------------

PG15_HEAD = {
    "pgbench_version": "15.18",
    "transaction_type": "<builtin: TPC-B (sort of)>",
    "scaling_factor": 2,
    "query_mode": "simple",
    "clients": 1,
    "threads": 1,
    "max_tries": 1,
}


def test_pg15_plain():
    assert_summary(
        parse("pg15_plain.stdout"),
        PG15_HEAD
        | {
            "duration_s": 5,
            "transactions_processed": 7890,
            "failed_transactions": 0,
            "latency_avg_s": 0.000633,
            "latency_stddev_s": 0.000465,
            "initial_connection_time_s": 0.003472,
            "tps": 1577.704338,
        },
    )
    events = parse("pg15_plain.stderr")
    assert events[0] == Ignored("vacuum")
    assert eq(events[1], Progress(1.0, False, 1610.0, 0.000619, 0.000366, None, 0, None, None, None))
    assert [p.time_s for p in of(events, Progress)] == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_pg15_rate_latency_limit():
    assert_summary(
        parse("pg15_rate_latency_limit.stdout"),
        PG15_HEAD
        | {
            "clients": 4,
            "threads": 2,
            "duration_s": 5,
            "transactions_processed": 9426,
            "failed_transactions": 0,
            "skipped_transactions": 450,
            "latency_limit_s": 0.001,
            "late_transactions": 4833,
            "latency_avg_s": 0.001131,
            "latency_stddev_s": 0.000649,
            "lag_avg_s": 0.000173,
            "lag_max_s": 0.001836,
            "initial_connection_time_s": 0.00677,
            "tps": 1887.241240,
        },
    )
    first = of(parse("pg15_rate_latency_limit.stderr"), Progress)[0]
    assert eq(first, Progress(1.0, False, 1896.9, 0.001206, 0.000478, 0.000192, 0, 104, None, None))


def test_pg15_max_tries_with_failure_and_retry_columns():
    events = parse("pg15_max_tries.stdout")
    assert_summary(
        events,
        PG15_HEAD
        | {
            "transaction_type": "/tmp/parser-pg/scripts/serial.sql",
            "scaling_factor": 1,
            "clients": 8,
            "threads": 2,
            "max_tries": 5,
            "duration_s": 5,
            "transactions_processed": 8710,
            "failed_transactions": 2875,
            "retried_transactions": 7472,
            "total_retries": 21368,
            "latency_avg_s": 0.002487,
            "latency_stddev_s": 0.001978,
            "initial_connection_time_s": 0.011113,
            "tps": 1743.029433,
        },
    )
    rows = of(events, StatementLatency)
    assert [r.statement for r in rows] == [
        r"\set bid random(1, 2)",
        "BEGIN ISOLATION LEVEL REPEATABLE READ;",
        "SELECT bbalance FROM pgbench_branches WHERE bid = :bid;",
        "UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = :bid;",
        "END;",
    ]
    assert eq(rows[3], StatementLatency(0, rows[3].latency_s, 2875, 21371, rows[3].statement))
    assert same(rows[3].latency_s, 0.000252)
    progress = of(parse("pg15_max_tries.stderr"), Progress)
    assert eq(progress[0], Progress(1.0, False, 1832.7, 0.002343, 0.001883, None, 598, None, 1562, 4499))
    # per-interval counters: they sum to about the run's totals
    assert sum(p.failed for p in progress) == 2875
    assert sum(p.retries for p in progress) == 21362


def test_pg15_max_tries_detailed_and_rate():
    got = summary(parse("pg15_max_tries_detailed.stdout"))
    assert got["serialization_failures"] == 5184
    assert got["deadlock_failures"] == 0
    assert got["failed_transactions"] == 5184
    last = of(parse("pg15_max_tries_rate.stderr"), Progress)[-1]
    assert eq(last, Progress(4.0, False, 1174.9, 0.00138, 0.00089, 0.000134, 304, 3, 446, 496))


def test_pg15_multi_script_sections():
    events = parse("pg15_multi_script.stdout")
    assert of(events, ScriptHeader) == [
        ScriptHeader(1, "<builtin: TPC-B (sort of)>", 2),
        ScriptHeader(2, "<builtin: select only>", 1),
    ]
    assert of(events, ScriptSummary) == [
        ScriptSummary(1, 7330, 66.8, 1467.131158),
        ScriptSummary(2, 3645, 33.2, 729.562493),
    ]
    stats = {(s.index, s.key): s.value for s in of(events, ScriptStat)}
    assert stats == {
        (1, "failed_transactions"): 0,
        (1, "latency_avg_s"): pytest.approx(0.000634),
        (1, "latency_stddev_s"): pytest.approx(0.000297),
        (2, "failed_transactions"): 0,
        (2, "latency_avg_s"): pytest.approx(0.000094),
        (2, "latency_stddev_s"): pytest.approx(0.000120),
    }
    rows = of(events, StatementLatency)
    assert [r.script_index for r in rows] == [1] * 11 + [2] * 2
    assert rows[-1].statement == "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;"
    assert rows[-1].failures == 0 and rows[-1].retries is None
    assert summary(events)["transaction_type"] == "multiple scripts"
    # the header is emitted with the weight line, in order
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ScriptHeader") < kinds.index("ScriptSummary")


def test_pg15_multi_script_full_per_script_counters():
    events = parse("pg15_multi_script_full.stdout")
    stats = {(s.index, s.key): s.value for s in of(events, ScriptStat)}
    assert stats[(2, "failed_transactions")] == 54
    assert stats[(2, "serialization_failures")] == 54
    assert stats[(2, "retried_transactions")] == 511
    assert stats[(2, "total_retries")] == 625
    assert stats[(1, "skipped_transactions")] == 7
    rows = [r for r in of(events, StatementLatency) if r.failures]
    assert rows == [StatementLatency(2, rows[0].latency_s, 54, 625, rows[0].statement)]


def test_pg15_connect_and_transactions_modes():
    got = summary(parse("pg15_connect.stdout"))
    assert got["tps"] == 160.795548
    assert got["average_connection_time_s"] == pytest.approx(0.003711)
    assert "initial_connection_time_s" not in got
    got = summary(parse("pg15_transactions.stdout"))
    assert (got["transactions_per_client"], got["transactions_processed"], got["transactions_planned"]) == (
        300,
        600,
        600,
    )
    assert "duration_s" not in got


def test_pg15_progress_timestamp_is_absolute():
    progress = of(parse("pg15_progress_timestamp.stderr"), Progress)
    assert len(progress) == 4
    assert all(p.absolute for p in progress)
    assert progress[0].time_s == 1795370176.604
    assert [round(b.time_s - a.time_s, 3) for a, b in zip(progress, progress[1:])] == [1.0, 1.0, 1.0]


def test_pg15_stall_prints_zero_tps():
    progress = of(parse("pg15_stall.stderr"), Progress)
    assert [p.tps for p in progress] == [1706.8, 2032.1, 428.6, 0.0, 0.0, 1141.2, 1545.0, 1439.9]
    assert progress[3].latency_s == 0.0 and progress[3].stddev_s == 0.0
    assert progress[5].stddev_s == pytest.approx(0.126030)


def test_pg15_client_aborted_by_sql_error():
    assert parse("pg15_abort_div0.stderr") == [
        Ignored("vacuum"),
        ClientAborted(0, "client 0 script 0 aborted in command 2 query 0: ERROR:  division by zero"),
        ClientAborted(1, "client 1 script 0 aborted in command 2 query 0: ERROR:  division by zero"),
        RunAborted("Run was aborted; the above results are incomplete."),
    ]
    got = summary(parse("pg15_abort_div0.stdout"))
    assert got["transactions_processed"] == 0
    assert got["failed_transactions"] == 0  # printed as "0 (NaN%)"
    assert "tps" not in got


def test_pg15_client_aborted_by_terminated_backend():
    events = parse("pg15_abort_terminated.stderr")
    assert eq(events[3:6], [
        ClientAborted(
            2,
            "client 2 script 0 aborted in command 8 query 0: "
            "FATAL:  terminating connection due to administrator command",
        ),
        ErrorLine('CONTEXT:  while updating tuple (0,31) in relation "pgbench_branches"', continuation=True),
        Progress(3.0, False, 2890.1, 0.00121, 0.000782, None, 0, None, None, None),
    ])
    assert events[-1] == RunAborted("Run was aborted; the above results are incomplete.")


def test_pg15_init_output_is_ignored():
    events = parse("pg15_init.stderr")
    assert events and all(isinstance(e, Ignored) for e in events)
    assert {e.kind for e in events} == {"init", "notice"}


# --------------------------------------------------------------------------
# hand-written fixtures of older formats
# --------------------------------------------------------------------------


def test_pg94_summary_and_catch_up_burst():
    events = parse("pg94_report_stall.stdout")
    assert_summary(
        events,
        {
            "transaction_type": "TPC-B (sort of)",
            "scaling_factor": 2,
            "query_mode": "simple",
            "clients": 4,
            "threads": 2,
            "duration_s": 8,
            "transactions_processed": 9512,
            "latency_avg_s": 0.003121,
            "latency_stddev_s": 0.021776,
            "tps_including_connections": 1187.812291,
            "tps_excluding_connections": 1188.645937,
            "tps": 1188.645937,
        },
    )
    rows = of(events, StatementLatency)
    assert len(rows) == 14 and {r.script_index for r in rows} == {0}
    assert rows[0] == StatementLatency(0, rows[0].latency_s, None, None, r"\set nbranches 1 * :scale")
    assert same(rows[0].latency_s, 0.000002496)

    events = parse("pg94_report_stall.stderr")
    progress = of(events, Progress)
    assert [p.time_s for p in progress] == [1.0, 2.0, 5.2, 5.2, 5.2, 6.0, 7.0, 8.0]
    assert math.isnan(progress[3].latency_s) and math.isnan(progress[3].stddev_s)
    assert progress[3].tps == 0.0 and progress[3].failed is None
    aborted = of(events, ClientAborted)
    assert aborted == [ClientAborted(3, "Client 3 aborted in state 11: ERROR:  deadlock detected")]
    details = of(events, ErrorLine)
    assert len(details) == 4 and all(d.continuation for d in details)
    assert details[1].message.startswith("Process 21528 waits")


def test_pg94_several_files_and_throttling():
    events = parse("pg94_files_rate.stdout")
    got = summary(events)
    assert (got["transactions_processed"], got["transactions_planned"]) == (298, 300)
    assert got["lag_avg_s"] == pytest.approx(0.000052) and got["lag_max_s"] == pytest.approx(0.000941)
    assert got["tps"] == 99.330185
    rows = of(events, StatementLatency)
    assert [(r.script_index, r.statement) for r in rows] == [
        (1, r"\setrandom aid 1 100000"),
        (1, "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;"),
        (2, "SELECT 1;"),
    ]
    events = parse("pg94_files_rate.stderr")
    assert of(events, Progress)[0].lag_s == pytest.approx(0.000051)
    assert of(events, ClientAborted) == [
        ClientAborted(0, "Client 0 aborted in state 1. Execution of meta-command failed.")
    ]


def test_pg95_skipped_and_latency_limit():
    got = summary(parse("pg95_rate_latency_limit.stdout"))
    assert got["skipped_transactions"] == 450
    assert got["late_transactions"] == 4833 and got["latency_limit_s"] == 0.001
    assert got["latency_avg_s"] == pytest.approx(0.001131)
    assert got["tps"] == 1887.241240 and got["tps_including_connections"] == 1884.103120
    progress = of(parse("pg95_rate_latency_limit.stderr"), Progress)
    assert [p.skipped for p in progress] == [104, 66, 119, 96]
    assert all(p.failed is None and p.retried is None for p in progress)


def test_pg96_multi_script_and_timestamps():
    events = parse("pg96_multi_script_timestamp.stdout")
    assert of(events, ScriptHeader) == [
        ScriptHeader(1, "<builtin: TPC-B (sort of)>", 2),
        ScriptHeader(2, "<builtin: select only>", 1),
    ]
    assert of(events, ScriptSummary)[1] == ScriptSummary(2, 1623, 33.2, 540.868792)
    assert summary(events)["latency_avg_s"] == pytest.approx(0.000611)
    progress = of(parse("pg96_multi_script_timestamp.stderr"), Progress)
    assert all(p.absolute for p in progress) and progress[0].time_s == 1478523601.118


def test_pg10_script_statistics_and_nan_intervals():
    events = parse("pg10_report_stall.stdout")
    assert Ignored("script_statistics") in events
    rows = of(events, StatementLatency)
    assert len(rows) == 11 and {r.script_index for r in rows} == {0}
    assert summary(events)["tps"] == 1037.571320
    events = parse("pg10_report_stall.stderr")
    progress = of(events, Progress)
    assert len(progress) == 8
    assert math.isnan(progress[3].latency_s) and progress[3].tps == 0.0
    assert of(events, ClientAborted)[0].client == 1
    assert events[-3] == Ignored("blank")

    events = parse("pg10_progress_timestamp_rate.stdout")
    assert ScriptStat(0, "skipped_transactions", 2) in events
    progress = of(parse("pg10_progress_timestamp_rate.stderr"), Progress)
    assert eq(progress[1], Progress(1510000002.004, True, 201.0, 0.000861, 0.000198, 0.000058, None, 2, None, None))
    assert math.isnan(progress[2].lag_s)


def test_pg13_partitions_percent_with_space_and_run_aborted():
    events = parse("pg13_partitions_abort.stdout")
    got = summary(events)
    assert (got["partition_method"], got["partitions"]) == ("range", 4)
    assert got["skipped_transactions"] == 342 and got["late_transactions"] == 4102
    assert got["tps"] == 1625.112202
    events = parse("pg13_partitions_abort.stderr")
    assert of(events, ClientAborted) == [
        ClientAborted(
            3, "client 3 aborted in command 5 (SQL) of script 0; ERROR:  canceling statement due to user request"
        )
    ]
    assert events[-1] == RunAborted("Run was aborted; the above results are incomplete.")


def test_pg13_fatal_with_details():
    assert parse("pg13_no_tables.stderr") == [
        ErrorLine('could not count number of branches: ERROR:  relation "pgbench_branches" does not exist'),
        ErrorLine("LINE 1: select count(*) from pgbench_branches", continuation=True),
        ErrorLine("                             ^", continuation=True),
        ErrorLine('Perhaps you need to do initialization ("pgbench -i") in database "postgres"', continuation=True),
    ]


def test_pg14_formats():
    got = summary(parse("pg14_report_timestamp.stdout"))
    assert got["pgbench_version"] == "14.10"
    assert got["tps"] == 1195.002812 and "tps_excluding_connections" not in got
    assert got["initial_connection_time_s"] == pytest.approx(0.004117)
    progress = of(parse("pg14_report_timestamp.stderr"), Progress)
    assert eq(progress[0], Progress(1640995201.512, True, 1610.0, 0.000619, 0.000307, None, None, None, None, None))
    got = summary(parse("pg14_connect.stdout"))
    assert got["tps"] == 177.912230 and got["pgbench_version"] == "14.10"


def test_pg17_server_banner_and_pipeline_abort():
    got = summary(parse("pg17_server_banner.stdout"))
    assert (got["pgbench_version"], got["server_version"]) == ("17.2", "16.6")
    events = parse("pg17_server_banner.stderr")
    assert of(events, ClientAborted) == [
        ClientAborted(0, "client 0 aborted: end of script reached with pipeline open")
    ]


def test_master_split_script_lines():
    events = parse("pgmaster_multi_script.stdout")
    got = summary(events)
    assert got["pgbench_version"] == "19devel"
    assert got["other_failures"] == 3 and got["latency_avg_includes_failures"] == 1
    assert of(events, ScriptSummary)[0] == ScriptSummary(1, 2561, 50.0, None)
    stats = {(s.index, s.key): s.value for s in of(events, ScriptStat)}
    assert stats[(1, "transactions_processed")] == 2558
    assert stats[(1, "tps")] == 852.579313
    assert stats[(2, "other_failures")] == 0
    rows = of(events, StatementLatency)
    assert rows[7].failures == 3 and rows[7].statement.startswith("UPDATE pgbench_tellers")


# --------------------------------------------------------------------------
# malformed input, robustness
# --------------------------------------------------------------------------


def test_malformed_fixture_gives_unparsed():
    results = parse_lines(raw_lines("malformed.bin"))
    header = b"statement latencies in milliseconds and failures:\n"
    for line, events in results:
        if line == header:
            assert events == [Ignored("statement_table_header")]
        else:
            assert len(events) == 1 and isinstance(events[0], Unparsed), (line, events)
    texts = [events[0].text for line, events in results if line != header]
    assert texts[0] == "progress: 3.0 s, 12"
    assert "\ufffd" in texts[5]  # non-UTF-8 bytes decoded with replacement


def test_truncated_progress_does_not_disturb_what_follows():
    parser = PgbenchOutputParser()
    assert parser.feed(b"progress: 3.0 s, 12") == [Unparsed("progress: 3.0 s, 12")]
    assert isinstance(parser.feed("progress: 4.0 s, 10.0 tps, lat 1.000 ms stddev 0.100\n")[0], Progress)


def test_chunk_with_several_lines_and_carriage_returns():
    parser = PgbenchOutputParser()
    events = parser.feed(
        "100000 of 200000 tuples (50%) done (elapsed 0.07 s, remaining 0.07 s)\r"
        "200000 of 200000 tuples (100%) done (elapsed 0.19 s, remaining 0.00 s)\n"
    )
    assert events == [Ignored("init")]
    events = parser.feed("starting vacuum...end.\nprogress: 1.0 s, 5.0 tps, lat 1.000 ms stddev 0.100\n")
    assert events[0] == Ignored("vacuum") and isinstance(events[1], Progress)


def test_table_ends_at_first_non_row():
    parser = PgbenchOutputParser()
    parser.feed("statement latencies in milliseconds:\n")
    assert isinstance(parser.feed("         0.100  SELECT 1;\n")[0], StatementLatency)
    assert parser.feed("tps = 5.000000 (without initial connection time)\n") == [Summary("tps", 5.0)]
    assert isinstance(parser.feed("         0.100  SELECT 1;\n")[0], Unparsed)
    # after an error, such a line is taken as part of the error message
    parser.feed("statement latencies in milliseconds:\n")
    assert parser.feed("pgbench: error: Run was aborted; the above results are incomplete.\n") == [
        RunAborted("Run was aborted; the above results are incomplete.")
    ]
    assert parser.feed("         0.100  SELECT 1;\n") == [ErrorLine("         0.100  SELECT 1;", continuation=True)]


def test_header_without_weight_line_and_flush():
    parser = PgbenchOutputParser()
    assert parser.feed("SQL script 1: <builtin: select only>\n") == []
    assert parser.feed(" - 10 transactions (100.0% of total, tps = 5.000000)\n") == [
        ScriptHeader(1, "<builtin: select only>", None),
        ScriptSummary(1, 10, 100.0, 5.0),
    ]
    assert parser.feed("SQL script 2: x.sql\n") == []
    assert parser.flush() == [ScriptHeader(2, "x.sql", None)]
    assert parser.flush() == []


def test_unconfirmed_old_progress_form_is_accepted():
    parser = PgbenchOutputParser()
    assert eq(parser.feed("progress: 5.0 s, 1185.2 tps, 13.498 ms lat\n"), [
        Progress(5.0, False, 1185.2, 0.013498, None, None, None, None, None, None)
    ])
    assert parser.feed("progress 1: 5.0 s, 592.1 tps, lat 13.498 ms stddev 2.000\n") == [
        Ignored("progress_per_thread")
    ]


def test_non_text_input_never_raises():
    parser = PgbenchOutputParser()
    for value in (None, 12, 1.5, object(), [b"x"]):
        events = parser.feed(value)  # type: ignore[arg-type]
        assert len(events) == 1 and isinstance(events[0], Unparsed)
    assert parser.feed(bytearray(b"progress: 1.0 s, 1.0 tps, lat 1.000 ms stddev 0.000"))[0].tps == 1.0
    assert parser.feed(b"") == [Ignored("blank")]
    assert parser.feed("") == [Ignored("blank")]


def _corpus() -> list[bytes]:
    lines = []
    for name in ALL_TEXT_FIXTURES:
        lines.extend(raw_lines(name))
    lines.extend(raw_lines("malformed.bin"))
    return lines


def test_fuzz_truncations_of_real_lines_never_raise():
    corpus = _corpus()
    parser = PgbenchOutputParser()
    for line in corpus:
        body = line.rstrip(b"\n")
        for cut in range(len(body) + 1):
            events = parser.feed(body[:cut])
            assert all(isinstance(e, Event) for e in events), (body[:cut], events)
    # a progress line cut inside a number or a field is never a Progress
    full = b"progress: 2.0 s, 1886.0 tps, lat 1.094 ms stddev 0.453, 0 failed, lag 0.163 ms, 66 skipped"
    boundaries = {full.index(b", lat"), full.index(b", 0 failed"), full.index(b", lag"), full.index(b", 66")}
    for cut in range(len(full)):
        events = PgbenchOutputParser().feed(full[:cut])
        if cut not in boundaries:
            assert not of(events, Progress), full[:cut]


def test_fuzz_random_bytes_and_mutations_never_raise():
    rng = random.Random(20240611)
    corpus = _corpus()
    parser = PgbenchOutputParser()
    alphabet = b"progress: 0123456789.,-nast ms%()=:/\t\r\n\xff\xc3 client aborted SQL script"
    for _ in range(3000):
        kind = rng.randrange(4)
        if kind == 0:
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(120)))
        elif kind == 1:
            data = bytes(rng.choice(alphabet) for _ in range(rng.randrange(120)))
        else:
            data = bytearray(rng.choice(corpus))
            for _ in range(rng.randrange(1, 4)):
                if data:
                    data[rng.randrange(len(data))] = rng.randrange(256)
            data = bytes(data)
        events = parser.feed(data if rng.random() < 0.5 else data.decode("latin-1"))
        assert isinstance(events, list) and events is not None
        if kind == 0 and rng.random() < 0.1:
            parser = PgbenchOutputParser()
    parser.flush()


def test_pg15_setup_errors():
    events = parse("pg15_vacuum_errors.stderr")
    assert [type(e).__name__ for e in events] == ["ErrorLine"] * 6 + ["Ignored"]
    assert [e.continuation for e in events[:6]] == [False, True] * 3
    assert events[0].message.startswith("starting vacuum...pgbench: error: ERROR:  relation")
    assert summary(parse("pg15_vacuum_errors.stdout"))["transactions_planned"] == 5
    assert parse("pg15_connection_refused.stderr") == [
        ErrorLine(
            'connection to server on socket "/tmp/parser-pg/.s.PGSQL.26433" failed: No such file or directory'
        ),
        ErrorLine("\tIs the server running locally and accepting connections on that socket?", continuation=True),
        ErrorLine("could not create connection for setup"),
    ]
    events = parse("pg15_no_tables.stderr")
    assert events[0] == ErrorLine(
        'could not count number of branches: ERROR:  relation "pgbench_branches" does not exist'
    )
    assert all(e.continuation for e in events[1:]) and len(events) == 4


def test_pg15_verbose_errors():
    events = parse("pg15_verbose_errors.stderr")
    errors = of(events, ErrorLine)
    assert len(errors) == len(events) - 1 == 32
    new = [e for e in errors if not e.continuation]
    assert len(new) == 16 and all(" got an error in command 3 (SQL) of script 0; " in e.message for e in new)
    assert errors[1] == ErrorLine("client 1 repeats the transaction after the error (try 1/2)", continuation=True)
    got = summary(parse("pg15_verbose_errors.stdout"))
    assert got["latency_avg_includes_failures"] == 1 and got["latency_avg_s"] == pytest.approx(0.000884)
    assert (got["transactions_processed"], got["transactions_planned"], got["failed_transactions"]) == (36, 40, 4)
