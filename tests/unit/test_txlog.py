"""Tests of benchwatch.loadgens.pgbench.txlog on real pgbench 15 per-transaction logs
(tests/fixtures/txlog and tests/fixtures/pgbench/txlog, see their README.md).

Expected values come from a deliberately simple, separate reading of the same
files (decode, split each line, compare to each bound), never from the
aggregator's own code paths.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from benchwatch.loadgens.pgbench.txlog import _TABLE_US, DEFAULT_BUCKETS, SILENT_SOURCE_SECONDS, TXLOG_METRICS, TxlogAggregator
from benchwatch.model.samples import group_by_series, validate_series

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TXLOG = FIXTURES / "txlog"
RUNS = ("threads", "rate_limit", "max_tries_rate", "sampling")
OLD = sorted((FIXTURES / "pgbench" / "txlog").glob("*.txlog"))
LES = [round(b * 1e6) for b in DEFAULT_BUCKETS]  # microseconds


# --------------------------------------------------------------------------
# independent reading of the logs
# --------------------------------------------------------------------------


class Expected:
    def __init__(self) -> None:
        self.latencies: list[int] = []
        self.by_second: dict[int, list[int]] = {}
        self.failed = 0
        self.skipped = 0
        self.lines = 0

    def add_file(self, path: Path) -> None:
        for line in path.read_text().splitlines():
            self.lines += 1
            f = line.split()
            sec = int(f[4])
            if f[2] == "skipped":
                self.skipped += 1
            elif f[2] in ("failed", "serialization", "deadlock"):
                self.failed += 1
            else:
                self.latencies.append(int(f[2]))
                self.by_second.setdefault(sec, []).append(int(f[2]))


def run_files(run: str) -> list[Path]:
    return sorted((TXLOG / run).glob("pgbench_log.*"))


def expected_for(files: list[Path]) -> Expected:
    e = Expected()
    for p in files:
        e.add_file(p)
    return e


def cumulative(latencies: list[int]) -> list[int]:
    """Count of latencies <= each bound, +Inf last."""
    return [sum(1 for v in latencies if v <= le) for le in LES] + [len(latencies)]


def summary_number(run: str, label: str) -> int:
    m = re.search(rf"^{re.escape(label)}: (\d+)", (TXLOG / run / "stdout").read_text(), re.M)
    assert m, label
    return int(m.group(1))


# --------------------------------------------------------------------------
# helpers over samples
# --------------------------------------------------------------------------


def feed_files(agg: TxlogAggregator, files: list[Path], chunk_lines: int | None = None) -> None:
    """Feed each file whole, or in chunks of ``chunk_lines`` complete lines, files in turn."""
    if chunk_lines is None:
        for p in files:
            agg.feed(p.name, p.read_bytes())
        return
    chunks = {}
    for p in files:
        lines = p.read_bytes().splitlines(keepends=True)
        chunks[p.name] = [b"".join(lines[i : i + chunk_lines]) for i in range(0, len(lines), chunk_lines)]
    while any(chunks.values()):
        for name, lst in chunks.items():
            if lst:
                agg.feed(name, lst.pop(0))


def by_series(samples) -> dict[tuple, list[tuple[int, float]]]:
    out: dict[tuple, list[tuple[int, float]]] = {}
    for s in samples:
        out.setdefault((s.name, s.labels), []).append((s.timestamp_ms, s.value))
    return out


def buckets_at(samples, ts: int | None = None) -> list[float]:
    """Cumulative bucket values (le order, +Inf last) at ``ts`` (default: the last)."""
    vals = {}
    for s in samples:
        if s.name == "benchmark_latency_seconds_bucket" and (ts is None or s.timestamp_ms == ts):
            vals[dict(s.labels)["le"]] = s.value  # later samples overwrite earlier ones
    les = sorted(vals, key=lambda le: math.inf if le == "+Inf" else float(le))
    return [vals[le] for le in les]


def last_value(samples, name: str) -> float:
    return [s.value for s in samples if s.name == name][-1]


def histogram_quantile(q: float, cum: list[float]) -> float:
    """Prometheus's histogram_quantile over DEFAULT_BUCKETS (seconds)."""
    bounds = list(DEFAULT_BUCKETS) + [math.inf]
    total = cum[-1]
    rank = q * total
    i = next(i for i, c in enumerate(cum) if c >= rank)
    if bounds[i] == math.inf:
        return bounds[-2]
    lo = 0.0 if i == 0 else bounds[i - 1]
    below = 0.0 if i == 0 else cum[i - 1]
    return lo + (bounds[i] - lo) * (rank - below) / (cum[i] - below)


def exact_quantile(q: float, latencies_us: list[int]) -> float:
    v = sorted(latencies_us)
    return v[max(0, math.ceil(q * len(v)) - 1)] / 1e6


def bucket_index(seconds: float) -> int:
    """Index of the bucket holding ``seconds`` (le inclusive)."""
    us = seconds * 1e6
    return next((i for i, le in enumerate(LES) if us <= le + 1e-6), len(LES))


# --------------------------------------------------------------------------
# the bucket ladder
# --------------------------------------------------------------------------


def test_default_buckets_ladder():
    assert DEFAULT_BUCKETS[0] == 0.0001 and DEFAULT_BUCKETS[-1] == 10.0
    assert len(DEFAULT_BUCKETS) == 51
    ratios = [b / a for a, b in zip(DEFAULT_BUCKETS, DEFAULT_BUCKETS[1:])]
    assert min(ratios) > 1.0 and max(ratios) <= 4 / 3 + 1e-9
    assert LES[:10] == [100, 125, 150, 200, 250, 300, 400, 500, 600, 800]


def test_le_labels_and_series_names():
    agg = TxlogAggregator("r1")
    feed_files(agg, run_files("threads"))
    samples = agg.samples(final=True)
    les = [dict(s.labels)["le"] for s in samples if s.name == "benchmark_latency_seconds_bucket"][:52]
    assert les[:4] == ["0.0001", "0.000125", "0.00015", "0.0002"]
    assert les[-3:] == ["8.0", "10.0", "+Inf"]
    for (name, labels), _ in group_by_series(samples).items():
        validate_series(name, labels)
        assert dict(labels)["run_id"] == "r1"
        base = name.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
        assert base in TXLOG_METRICS


# --------------------------------------------------------------------------
# totals against the independent reading and pgbench's own summary
# --------------------------------------------------------------------------


@pytest.mark.parametrize("run", RUNS)
def test_totals_match_independent_count(run):
    files = run_files(run)
    exp = expected_for(files)
    agg = TxlogAggregator("r1")
    feed_files(agg, files)
    samples = agg.samples() + agg.samples(final=True)

    assert agg.lines == exp.lines
    assert agg.unparsed_lines == 0 and agg.slow_lines == 0  # real logs take the fast path
    assert agg.failed == exp.failed and agg.skipped == exp.skipped
    assert last_value(samples, "benchmark_latency_seconds_count") == len(exp.latencies)
    assert last_value(samples, "benchmark_latency_seconds_sum") == pytest.approx(sum(exp.latencies) / 1e6, abs=1e-9)
    assert last_value(samples, "pgbench_txlog_failed_transactions_total") == exp.failed
    assert last_value(samples, "pgbench_txlog_skipped_transactions_total") == exp.skipped
    assert last_value(samples, "pgbench_txlog_unparsed_lines_total") == 0
    assert buckets_at(samples) == cumulative(exp.latencies)


@pytest.mark.parametrize(
    "run, failed, skipped",
    [("threads", 0, 0), ("rate_limit", 0, 14), ("max_tries_rate", 33, 0)],
)
def test_totals_match_pgbench_summary(run, failed, skipped):
    agg = TxlogAggregator("r1")
    feed_files(agg, run_files(run))
    samples = agg.samples(final=True)
    assert last_value(samples, "benchmark_latency_seconds_count") == summary_number(
        run, "number of transactions actually processed"
    )
    assert agg.failed == failed and agg.skipped == skipped
    if failed:
        assert failed == summary_number(run, "number of failed transactions")
    if skipped:
        assert skipped == summary_number(run, "number of transactions skipped")


def test_sampling_rate_logs_about_half():
    agg = TxlogAggregator("r1")
    feed_files(agg, run_files("sampling"))
    logged = last_value(agg.samples(final=True), "benchmark_latency_seconds_count")
    processed = summary_number("sampling", "number of transactions actually processed")
    assert logged == 397 and 0.4 < logged / processed < 0.6


@pytest.mark.parametrize("path", OLD, ids=[p.name for p in OLD])
def test_other_captures(path):
    exp = expected_for([path])
    agg = TxlogAggregator("r1")
    agg.feed(path.name, path.read_bytes())
    samples = agg.samples(final=True)
    assert agg.slow_lines == 0 and agg.unparsed_lines == 0
    assert agg.failed == exp.failed
    assert buckets_at(samples) == cumulative(exp.latencies)


def test_aggregate_interval_lines_are_counted_not_parsed():
    agg = TxlogAggregator("r1")
    feed_files(agg, run_files("aggregate"))
    samples = agg.samples(final=True)
    assert agg.aggregate_lines == 3 and agg.unparsed_lines == 3
    assert last_value(samples, "pgbench_txlog_unparsed_lines_total") == 3
    assert last_value(samples, "benchmark_latency_seconds_count") == 0
    # Their interval starts still give the time: one write per interval.
    first = int((TXLOG / "aggregate").glob("pgbench_log.*").__next__().read_text().split()[0])
    stamps = sorted({s.timestamp_ms for s in samples})
    assert stamps == [first * 1000, (first + 1) * 1000, (first + 2) * 1000, (first + 3) * 1000]


# --------------------------------------------------------------------------
# percentiles
# --------------------------------------------------------------------------


@pytest.mark.parametrize("run", RUNS)
def test_whole_run_percentiles_within_one_bucket(run):
    files = run_files(run)
    exp = expected_for(files)
    agg = TxlogAggregator("r1")
    feed_files(agg, files)
    cum = buckets_at(agg.samples(final=True))
    for q in (0.5, 0.95, 0.99):
        est = histogram_quantile(q, cum)
        exact = exact_quantile(q, exp.latencies)
        assert abs(bucket_index(est) - bucket_index(exact)) <= 1, (q, est, exact)
        # and the ladder's bound: within a factor 4/3 either way
        assert exact * 0.75 <= est <= exact * 4 / 3, (q, est, exact)


def test_per_second_percentiles_within_one_bucket():
    """The increase between two writes is one second of transactions: its
    quantiles are those of the lines whose time_epoch is that second."""
    files = run_files("threads")
    exp = expected_for(files)
    agg = TxlogAggregator("r1")
    feed_files(agg, files, chunk_lines=50)
    samples = agg.samples() + agg.samples(final=True)
    stamps = sorted({s.timestamp_ms for s in samples})
    checked = 0
    for prev, ts in zip(stamps, stamps[1:]):
        sec = ts // 1000 - 1
        lat = exp.by_second.get(sec, [])
        before, after = buckets_at(samples, prev), buckets_at(samples, ts)
        incr = [a - b for a, b in zip(after, before)]
        assert incr == cumulative(lat)
        if len(lat) >= 100:
            for q in (0.5, 0.95, 0.99):
                est = histogram_quantile(q, incr)
                assert abs(bucket_index(est) - bucket_index(exact_quantile(q, lat))) <= 1
            checked += 1
    assert checked >= 2


# --------------------------------------------------------------------------
# chunking and the two parse paths
# --------------------------------------------------------------------------


@pytest.mark.parametrize("chunk_lines", [1, 7, 100, 4096])
def test_chunk_size_does_not_change_totals(chunk_lines):
    files = run_files("max_tries_rate")
    whole = TxlogAggregator("r1")
    feed_files(whole, files)
    ref = whole.samples(final=True)
    agg = TxlogAggregator("r1")
    feed_files(agg, files, chunk_lines=chunk_lines)
    samples = agg.samples() + agg.samples(final=True)
    assert buckets_at(samples) == buckets_at(ref)
    assert last_value(samples, "benchmark_latency_seconds_sum") == last_value(ref, "benchmark_latency_seconds_sum")
    assert agg.failed == whole.failed == 33
    assert agg.slow_lines == 0


def test_4k_block_cuts_keep_partial_lines_out():
    """As a follower sees pgbench's 4096-byte writes: it keeps the partial
    line and feeds complete ones only."""
    data = b"".join(p.read_bytes() for p in run_files("rate_limit"))
    agg = TxlogAggregator("r1")
    partial = b""
    for i in range(0, len(data), 4096):
        block = partial + data[i : i + 4096]
        cut = block.rfind(b"\n") + 1
        block, partial = block[:cut], block[cut:]
        agg.feed("pgbench_log.1", block)
    assert partial == b""
    assert agg.lines == data.count(b"\n") and agg.skipped == 14 and agg.unparsed_lines == 0


def test_slow_path_gives_the_same_histogram():
    files = run_files("max_tries_rate")
    fast = TxlogAggregator("r1")
    feed_files(fast, files)
    slow = TxlogAggregator("r1")
    for p in files:
        slow.feed(p.name, p.read_bytes() + b"not a transaction line\n")  # forces line by line
    a, b = fast.samples(final=True), slow.samples(final=True)
    assert slow.slow_lines == fast.lines + len(files) and slow.unparsed_lines == len(files)
    assert buckets_at(a) == buckets_at(b)
    assert last_value(a, "benchmark_latency_seconds_sum") == last_value(b, "benchmark_latency_seconds_sum")
    assert slow.failed == fast.failed == 33


def test_missing_final_newline_is_tolerated():
    data = run_files("threads")[0].read_bytes()
    agg = TxlogAggregator("r1")
    agg.feed("f", data.rstrip(b"\n"))
    assert agg.lines == data.count(b"\n") and agg.unparsed_lines == 0


# --------------------------------------------------------------------------
# malformed input
# --------------------------------------------------------------------------

MALFORMED = [
    b"0 12 1234 0 1795370195\n",  # truncated: 5 fields
    b"0 12 1234 0 1795370195 1234 5 6 7\n",  # 9 fields
    b"0 12 12a4 0 1795370195 123456\n",  # latency not a number
    b"0 12 +1234 0 1795370195 123456\n",  # int() would take it
    b"0 12 fade 0 1795370195 123456\n",  # letters, not a word
    b"0 12 1234 0 179537019 123456\n",  # 9-digit epoch
    b"0 12 1234 0 1795370195 12x456\n",
    b"0  12 1234 0 1795370195\n",  # double space
    b"0 12 1234 0 1795370195 123456\r\n",  # CRLF
    b"\n",  # empty line
    b"\x00\xff\xfe garbage \x80\n",
    b"x" * 10000 + b"\n",
    b"0 12 1234 0 0 0\n",  # Windows pgbench before 14: no timestamp
]


def test_malformed_lines_are_counted_never_fatal():
    good = run_files("threads")[0].read_bytes().splitlines(keepends=True)
    exp = expected_for([run_files("threads")[0]])
    agg = TxlogAggregator("r1")
    # Interleave: some good lines, one bad line, in chunks of varied size.
    chunk = []
    bad = iter(MALFORMED)
    for i, line in enumerate(good):
        chunk.append(line)
        if i % 40 == 39:
            chunk.append(next(bad, b""))
            agg.feed("pgbench_log.1", b"".join(chunk))
            chunk = []
    agg.feed("pgbench_log.1", b"".join(chunk))
    junk = (FIXTURES / "pgbench" / "malformed.bin").read_bytes()
    agg.feed("pgbench_log.1", junk if junk.endswith(b"\n") else junk + b"\n")
    samples = agg.samples(final=True)

    junk_lines = (junk if junk.endswith(b"\n") else junk + b"\n").count(b"\n")
    assert agg.unparsed_lines == len(MALFORMED) + junk_lines
    assert last_value(samples, "pgbench_txlog_unparsed_lines_total") == agg.unparsed_lines
    assert buckets_at(samples) == cumulative(exp.latencies)  # every good line still counted


def test_malformed_only_feed_writes_nothing_until_time_is_known():
    agg = TxlogAggregator("r1")
    agg.feed("f", b"garbage\n\n")
    assert agg.samples() == [] and agg.samples(final=True) == []
    assert agg.unparsed_lines == 2 and agg.lines == 2


def test_unparsed_after_the_last_second_still_written_at_final():
    agg = TxlogAggregator("r1")
    agg.feed("f", b"0 1 1000 0 1795370195 1\n")
    first = agg.samples(final=True)
    agg.feed("f", b"garbage\n")
    more = agg.samples(final=True)
    assert max(s.timestamp_ms for s in more) > max(s.timestamp_ms for s in first)
    assert last_value(more, "pgbench_txlog_unparsed_lines_total") == 1


# --------------------------------------------------------------------------
# watermark, late lines, timestamps
# --------------------------------------------------------------------------


def lines_for(second: int, n: int, latency: int = 1000, client: int = 0) -> bytes:
    return b"".join(b"%d %d %d 0 %d %d\n" % (client, i + 1, latency, second, i * 10) for i in range(n))


S = 1795370200


def written_seconds(samples) -> list[int]:
    return [s.timestamp_ms // 1000 - 1 for s in samples if s.name == "benchmark_latency_seconds_count"]


def test_watermark_waits_for_the_slower_source():
    agg = TxlogAggregator("r1")
    agg.feed("a", lines_for(S, 3) + lines_for(S + 1, 3) + lines_for(S + 2, 3) + lines_for(S + 3, 3))
    agg.feed("b", lines_for(S, 5, 2000) + lines_for(S + 1, 5, 2000))
    first = agg.samples()
    # b's newest second S+1 may still grow: only S is complete everywhere.
    assert agg.watermark() == S
    assert written_seconds(first) == [S - 1, S]  # zeros at the start of S, then S
    assert last_value(first, "benchmark_latency_seconds_count") == 8
    agg.feed("b", lines_for(S + 1, 2, 2000) + lines_for(S + 2, 5, 2000) + lines_for(S + 3, 1, 2000))
    second = agg.samples()
    assert written_seconds(second) == [S + 1, S + 2]
    assert [s.value for s in second if s.name == "benchmark_latency_seconds_count"] == [8 + 3 + 7, 8 + 10 + 8]
    final = agg.samples(final=True)
    assert written_seconds(final) == [S + 3]
    assert last_value(final, "benchmark_latency_seconds_count") == 12 + 18
    assert agg.late_lines == 0
    assert agg.samples(final=True) == []  # nothing new: nothing written again


def test_silent_source_stops_holding_back_and_its_late_lines_go_to_the_next_second():
    agg = TxlogAggregator("r1")
    agg.feed("b", lines_for(S, 2, 2000))
    agg.feed("a", lines_for(S, 1))
    for sec in range(S + 1, S + SILENT_SOURCE_SECONDS + 1):
        agg.feed("a", lines_for(sec, 1))
    agg.samples()
    assert agg.watermark() == S - 1  # b is 5 s behind: still waited for
    agg.feed("a", lines_for(S + SILENT_SOURCE_SECONDS + 1, 1))
    out = agg.samples()
    assert agg.watermark() == S + SILENT_SOURCE_SECONDS  # b ignored now
    assert written_seconds(out)[-1] == S + SILENT_SOURCE_SECONDS
    # b's buffer finally flushes: seconds already written.
    agg.feed("b", lines_for(S + 1, 4, 2000) + lines_for(S + 2, 4, 2000))
    assert agg.late_lines == 8
    agg.feed("a", lines_for(S + SILENT_SOURCE_SECONDS + 2, 1))
    out = agg.samples(final=True)
    incr = [s.value for s in out if s.name == "benchmark_latency_seconds_count"]
    assert written_seconds(out)[0] == S + SILENT_SOURCE_SECONDS + 1
    assert incr[0] - (2 + SILENT_SOURCE_SECONDS + 1) == 1 + 8  # a's own line plus b's 8 late ones
    assert last_value(out, "pgbench_txlog_late_lines_total") == 8
    assert last_value(out, "benchmark_latency_seconds_count") == 2 + 8 + SILENT_SOURCE_SECONDS + 3


def test_expected_source_holds_back_until_silent():
    agg = TxlogAggregator("r1")
    agg.expect("b")
    for sec in range(S, S + 4):
        agg.feed("a", lines_for(sec, 1))
    assert agg.samples() == []  # b may still bring S
    agg.feed("b", lines_for(S, 3))
    assert agg.samples() == []  # S may still grow in b
    agg.feed("b", lines_for(S + 1, 1))
    out = agg.samples()
    assert written_seconds(out) == [S - 1, S]
    assert last_value(out, "benchmark_latency_seconds_count") == 4 and agg.late_lines == 0

    lonely = TxlogAggregator("r2")
    lonely.expect("b")
    for sec in range(S, S + SILENT_SOURCE_SECONDS + 2):
        lonely.feed("a", lines_for(sec, 1))
    assert written_seconds(lonely.samples())[-1] == S + SILENT_SOURCE_SECONDS


def test_timestamps_strictly_increase_and_values_never_decrease():
    files = run_files("max_tries_rate")
    agg = TxlogAggregator("r1")
    agg.expect(files[1].name)
    samples = []
    chunks = {p.name: p.read_bytes().splitlines(keepends=True) for p in files}
    # Thread 1's file arrives in bigger, later blocks than thread 0's.
    step = {files[0].name: 20, files[1].name: 120}
    pos = dict.fromkeys(chunks, 0)
    while any(pos[n] < len(chunks[n]) for n in chunks):
        for name, lines in chunks.items():
            if pos[name] < len(lines):
                agg.feed(name, b"".join(lines[pos[name] : pos[name] + step[name]]))
                pos[name] += step[name]
        samples += agg.samples()
    samples += agg.samples(final=True)
    series = by_series(samples)
    assert len(series) == len(DEFAULT_BUCKETS) + 1 + 2 + 4
    for (name, _), points in series.items():
        stamps = [t for t, _ in points]
        assert stamps == sorted(set(stamps)), name  # strictly increasing: nothing written twice
        values = [v for _, v in points]
        assert values == sorted(values), name  # counters
        assert all(t % 1000 == 0 for t in stamps)
    for ts in {s.timestamp_ms for s in samples}:
        cum = buckets_at(samples, ts)
        assert cum == sorted(cum)
        count = [s.value for s in samples if s.name == "benchmark_latency_seconds_count" and s.timestamp_ms == ts]
        assert count == [cum[-1]]
    exp = expected_for(files)
    assert buckets_at(samples) == cumulative(exp.latencies)


def test_first_write_is_zero_at_the_start_of_the_first_second():
    agg = TxlogAggregator("r1")
    agg.feed("a", lines_for(S, 2) + lines_for(S + 1, 1))
    out = agg.samples()
    first_ts = min(s.timestamp_ms for s in out)
    assert first_ts == S * 1000
    assert all(s.value == 0 for s in out if s.timestamp_ms == first_ts)
    assert [s.value for s in out if s.name == "benchmark_latency_seconds_count"] == [0, 2]


def test_empty_seconds_are_written_so_rate_sees_a_stall():
    agg = TxlogAggregator("r1")
    agg.feed("a", lines_for(S, 2) + lines_for(S + 4, 1))
    out = agg.samples(final=True)
    counts = [(s.timestamp_ms // 1000 - 1, s.value) for s in out if s.name == "benchmark_latency_seconds_count"]
    assert counts == [(S - 1, 0), (S, 2), (S + 1, 2), (S + 2, 2), (S + 3, 2), (S + 4, 3)]


@pytest.mark.parametrize("slow", [False, True], ids=["table-only", "with-bisect"])
def test_bucket_edges_are_inclusive(slow):
    """Latencies find their bucket in a table below _TABLE_US, by bisect above."""
    edges = (1, 100, 101, 125, 126, 100_000, 100_001, 125_000, _TABLE_US - 1)
    extra = (10_000_000, 10_000_001, _TABLE_US) if slow else ()
    agg = TxlogAggregator("r1")
    agg.feed("a", b"".join(lines_for(S, 1, us) for us in edges + extra))
    cum = buckets_at(agg.samples(final=True))
    assert cum == cumulative(list(edges + extra))
    assert cum[0] == 2 and cum[1] == 4 and cum[2] == 5
    if slow:
        assert cum[-2] == len(edges) + 2 and cum[-1] == len(edges) + 3


def test_memory_stays_bounded_over_many_seconds():
    agg = TxlogAggregator("r1")
    for sec in range(S, S + 2000):
        agg.feed("a", b"".join(lines_for(sec, 1, us) for us in (sec % 977 * 13 + 50, sec % 89 * 1000 + 7)))
        agg.samples()
    assert len(agg._pending) <= 2
    assert agg._table is TxlogAggregator("r2")._table  # one bucket table per ladder


def test_empty_latency_field_is_unparsed_on_the_fast_path():
    path = run_files("threads")[0]
    lines = path.read_bytes().splitlines(keepends=True)
    f = lines[10].split(b" ")
    lines[10] = b" ".join(f[:2] + [b""] + f[3:])  # "c n  s epoch us": a double space
    exp = expected_for([path])
    agg = TxlogAggregator("r1")
    agg.feed(path.name, b"".join(lines))
    samples = agg.samples(final=True)
    assert agg.slow_lines == 0 and agg.unparsed_lines == 1
    assert last_value(samples, "benchmark_latency_seconds_count") == len(exp.latencies) - 1


def test_a_bad_line_slows_only_its_piece():
    good = b"".join(lines_for(sec, 300, 1000 + sec % 7) for sec in range(S, S + 40))  # ~330 KiB
    cut = good.index(b"\n", len(good) // 2) + 1
    agg = TxlogAggregator("r1")
    agg.feed("a", good[:cut] + b"0 1 1000 0\n" + good[cut:])
    samples = agg.samples(final=True)
    assert agg.unparsed_lines == 1 and agg.lines == 40 * 300 + 1
    assert 0 < agg.slow_lines < 70 * 1024 // 30  # one 64 KiB piece at most
    assert last_value(samples, "benchmark_latency_seconds_count") == 40 * 300


def test_custom_buckets():
    agg = TxlogAggregator("r1", buckets=(0.001, 0.005, 0.3, float("inf")))
    exp = expected_for(run_files("threads"))
    feed_files(agg, run_files("threads"))
    samples = agg.samples(final=True)
    les = sorted({dict(s.labels)["le"] for s in samples if s.name == "benchmark_latency_seconds_bucket"})
    assert les == ["+Inf", "0.001", "0.005", "0.3"]
    cum = buckets_at(samples)
    assert cum == [sum(1 for v in exp.latencies if v <= le) for le in (1000, 5000, 300_000)] + [len(exp.latencies)]
    with pytest.raises(ValueError):
        TxlogAggregator("r1", buckets=(0.0, 1.0))
