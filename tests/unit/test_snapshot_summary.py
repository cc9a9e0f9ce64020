"""Snapshot numbers on a run captured from the real stack (tests/fixtures/snapshot/README.md):
the expected figures come from pgbench's own output and the server log, read independently here."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import statistics

import pytest

from benchwatch.model.histogram import histogram_quantile
from benchwatch.query import frames, promql
from benchwatch.query.series import Series, merge, read_csv_dir, write_csv_dir
from benchwatch.record import rundir
from benchwatch.share import compare, rebuild, summary
from benchwatch.share.collect import scrub, snapshot_dashboard, window

HERE = os.path.dirname(os.path.dirname(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "snapshot")
RUN_ID = "20261122T181310Z-ece8"
RUN_DIR = os.path.join(FIXTURES, RUN_ID)
PGBENCH_FIXTURES = os.path.join(HERE, "fixtures", "pgbench")


def fixture_series(run_dir: str = RUN_DIR) -> list[Series]:
    run = rundir.RunDir(run_dir)
    pg = rebuild.samples_to_series(rebuild.run_samples(run))
    saved = [s for s in read_csv_dir(os.path.join(run_dir, "series")) if not rebuild.is_run_series(s.name)]
    return merge(pg, saved)


@pytest.fixture(scope="module")
def built() -> dict:
    run = rundir.RunDir(RUN_DIR)
    meta = run.read_meta()
    return summary.build(fixture_series(), meta, RUN_ID, window(meta))


def progress_tps(path: str) -> list[float]:
    with open(path, encoding="utf-8") as f:
        return [float(m.group(1)) for m in re.finditer(r"^progress: [\d.]+ s, ([\d.]+) tps", f.read(), re.M)]


def server_log_checkpoints() -> list[dict]:
    """(start, reason, end, total, buffers) from the server's own log lines."""
    out = []
    with open(os.path.join(FIXTURES, RUN_ID + ".server.log"), encoding="utf-8") as f:
        for line in f:
            m = re.match(r"(\S+ \S+) UTC \[\d+\] LOG:  checkpoint (starting|complete): (.*)", line)
            if not m:
                continue
            import datetime as dt
            t = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=dt.UTC).timestamp()
            if m.group(2) == "starting":
                out.append({"start": t, "reason": m.group(3).strip()})
            else:
                out[-1]["end"] = t
                out[-1]["total"] = float(re.search(r"total=([\d.]+) s", m.group(3)).group(1))
                out[-1]["buffers"] = int(re.search(r"wrote (\d+) buffers", m.group(3)).group(1))
                out[-1]["distance_kb"] = int(re.search(r"distance=(\d+) kB", m.group(3)).group(1))
    return out


# -- TPS ------------------------------------------------------------------------------

def test_tps_statistics_match_pgbench_progress_lines(built):
    tps = progress_tps(os.path.join(RUN_DIR, "stderr.log"))
    assert len(tps) == 12
    t = built["tps"]
    assert t["samples"] == 12
    assert t["mean"] == pytest.approx(statistics.fmean(tps))
    assert (t["min"], t["max"]) == (min(tps), max(tps))
    assert t["stddev"] == pytest.approx(statistics.pstdev(tps))
    assert t["cov"] == pytest.approx(statistics.pstdev(tps) / statistics.fmean(tps))
    assert t["median"] == pytest.approx(statistics.median(tps))
    # 428.0 is the only interval under half the median (877.05).
    assert t["below_half_median_s"] == 1.0


def test_run_totals_are_pgbench_summary(built):
    stdout = open(os.path.join(RUN_DIR, "stdout.log"), encoding="utf-8").read()
    assert built["tps"]["pgbench_summary_tps"] == float(re.search(r"tps = ([\d.]+)", stdout).group(1))
    assert built["tps"]["transactions"] == int(re.search(r"actually processed: (\d+)", stdout).group(1))
    assert built["latency"]["avg_s"] == pytest.approx(float(re.search(r"latency average = ([\d.]+) ms", stdout).group(1)) / 1000)
    assert built["latency"]["avg_source"] == "pgbench summary"
    assert built["latency"]["p99_s"] is None  # no -l histogram in this run: said, not invented


def test_statements_in_pgbench_order_with_latency_in_seconds(built):
    stdout = open(os.path.join(RUN_DIR, "stdout.log"), encoding="utf-8").read()
    table = re.findall(r"^\s+([\d.]+)\s+(\d+)\s+(.+)$", stdout, re.M)
    order = [stmt for _, _, stmt in table]
    from benchwatch.loadgens.pgbench.summary import order_statements

    rows = order_statements(built["statements"], order)
    assert [r["statement"] for r in rows] == order
    for (ms, failures, _), row in zip(table, rows):
        assert row["latency_s"] == pytest.approx(float(ms) / 1000)
        assert row["failures"] == int(failures)


# -- checkpoints ------------------------------------------------------------------------

def test_checkpoint_table_matches_the_server_log(built):
    logged = server_log_checkpoints()
    rows = built["checkpoints"]
    assert [r["reason"] for r in rows] == [c["reason"] for c in logged] == ["wal", "immediate force wait", "wal"]
    for row, log in zip(rows, logged):
        assert row["start"] == pytest.approx(log["start"], abs=0.0011)
        if "end" in log:
            assert row["completed"]
            assert row["end"] == pytest.approx(log["end"], abs=0.0011)
            assert row["duration_s"] == log["total"]
            assert row["buffers"] == log["buffers"]
            assert row["distance_bytes"] == log["distance_kb"] * 1024
        else:
            # Still running when the snapshot's range ended: no invented figures.
            assert not row["completed"] and row["buffers"] is None


def test_tps_during_and_around_a_checkpoint(built):
    tps = dict(zip([1.0 * i for i in range(1, 13)], progress_tps(os.path.join(RUN_DIR, "stderr.log"))))
    start = json.load(open(os.path.join(RUN_DIR, "meta.json")))["clock_start_epoch"]
    row = built["checkpoints"][1]  # the manual CHECKPOINT, 143 ms at 6.16 s into the run
    offset = row["start"] - start
    covering = [v for t, v in tps.items() if t > offset and t - 1 < row["end"] - start]
    assert len(covering) == 1 and row["tps_during"] == pytest.approx(covering[0])
    around = [v for t, v in tps.items() if offset - summary.AROUND_S <= t <= offset
              or row["end"] - start + 1 < t <= row["end"] - start + 1 + summary.AROUND_S]
    assert row["tps_around"] == pytest.approx(statistics.fmean(around))
    assert row["change_pct"] == pytest.approx((row["tps_during"] / row["tps_around"] - 1) * 100)


def test_settings_and_host(built):
    s = built["settings"]
    assert s["shared_buffers_bytes"] == 128 * 1024 * 1024
    assert s["max_wal_size_bytes"] == 64 * 1024 * 1024
    assert s["checkpoint_timeout_seconds"] == 30
    assert built["host"]["cpus"] == 2
    assert [d["device"] for d in built["host"]["disks"]] == ["vda"]  # zram0 is swap, not a disk
    assert built["host"]["memory_bytes"] > 1 << 30


# -- stalls, thresholds, histograms -------------------------------------------------------

def test_stall_from_a_real_locked_run(tmp_path):
    run_dir = tmp_path / "20240101T000000Z-0001"
    run_dir.mkdir()
    data = b"".join(open(os.path.join(PGBENCH_FIXTURES, "pg15_stall" + ext), "rb").read() for ext in (".stderr", ".stdout"))
    (run_dir / "output.log").write_bytes(data)
    (run_dir / "meta.json").write_text(json.dumps({"mode": "import", "clock_start_epoch": 1_700_000_000.0}))
    series = rebuild.samples_to_series(rebuild.run_samples(rundir.RunDir(str(run_dir))))
    tps = summary.one(series, "benchmark_progress_tps").samples
    stalls = summary.stalls(tps, 1.0)
    # "progress: 4.0 s, 0.0 tps" and "5.0 s, 0.0 tps": one stall from 3 s to 5 s.
    assert stalls == [{"start": 1_700_000_003.0, "end": 1_700_000_005.0, "seconds": 2.0}]


def test_stalls_edges():
    assert summary.stalls([], 1.0) == []
    assert summary.stalls([(1000, 0.0), (2000, 5.0), (3000, 0.0)], 1.0) == [
        {"start": 0.0, "end": 1.0, "seconds": 1.0}, {"start": 2.0, "end": 3.0, "seconds": 1.0}]
    assert summary.seconds_below([10, 4, 6, 1], 5, 2.0) == 4.0


@pytest.mark.parametrize("q, expected", [(0.5, 0.125), (0.9, 0.35), (0.99, 0.485), (1.0, 0.5)])
def test_histogram_quantile_like_prometheus(q, expected):
    # 100 observations: 40 under 0.1 s, 40 in (0.1, 0.2], 20 in (0.2, 0.5].
    buckets = [(0.1, 40.0), (0.2, 80.0), (0.5, 100.0), (math.inf, 100.0)]
    assert histogram_quantile(q, buckets) == pytest.approx(expected)


def test_histogram_quantile_degenerate():
    assert histogram_quantile(0.5, []) is None
    assert histogram_quantile(0.5, [(0.1, 5.0)]) is None          # no +Inf bucket
    assert histogram_quantile(0.5, [(0.1, 0.0), (math.inf, 0.0)]) is None
    assert histogram_quantile(0.99, [(0.1, 1.0), (math.inf, 10.0)]) == 0.1  # in +Inf: last bound


def test_percentiles_from_run_histogram_series():
    series = [Series("benchmark_latency_seconds_bucket", {"run_id": "r", "le": le}, [(1, 0.0), (2, c)])
              for le, c in (("0.001", 50.0), ("0.01", 90.0), ("+Inf", 100.0))]
    p = summary.latency_percentiles(series, "r")
    assert p["p50_s"] == pytest.approx(0.001)
    assert p["p95_s"] == pytest.approx(0.01)
    assert p["percentile_source"] == "pgbench -l per-transaction log (histogram)"


# -- regions --------------------------------------------------------------------------------

def test_state_regions_at_sample_times():
    s = Series("pg_checkpoint_in_progress", {"reason": "wal"},
               [(999, 0.0), (1000, 1.0), (2000, 1.0), (2500, 0.0), (9000, 1.0), (10000, 1.0)])
    assert frames.boolean_regions(s) == [(1000, 2500), (9000, 10000)]
    stale = Series("pg_checkpoint_info", {}, [(1000, 1.0), (2000, 1.0), (9000, 1.0), (9500, float("nan"))])
    assert frames.boolean_regions(stale) == [(1000, 2000), (9000, 9500)]


def test_pushed_series_win_over_scraped_copies():
    pushed = Series("pg_checkpoint_in_progress", {"kind": "checkpoint", "reason": "wal"})
    scraped = Series("pg_checkpoint_in_progress", {"kind": "checkpoint", "reason": "wal", "job": "benchwatch",
                                                   "instance": "127.0.0.1:1", "component": "x"})
    other = Series("node_load1", {"job": "node", "instance": "127.0.0.1:2"})
    assert frames.prefer_pushed([pushed, scraped, other]) == [pushed, other]


def test_grafana_annotation_regions_merge_steps():
    result = [{"metric": {"reason": "wal", "kind": "checkpoint"},
               "values": [[10, "1"], [11, "1"], [12, "1"], [20, "1"], [21, "0"]]}]
    events = frames.grafana_annotation_events(result, 1.0, "{{kind}} ({{reason}})", "", "reason")
    assert events == [{"time": 10000, "timeEnd": 12000, "title": "checkpoint (wal)", "text": "", "tags": ["wal"]},
                      {"time": 20000, "timeEnd": 20000, "title": "checkpoint (wal)", "text": "", "tags": ["wal"]}]


# -- PromQL selectors ------------------------------------------------------------------------

def test_selectors_of_every_dashboard_query():
    from benchwatch.query import grafana as gq
    dash = snapshot_dashboard(json.load(open(os.path.join(HERE, "..", "dashboards", "pgbench-run.json"))))
    for q in gq.dashboard_queries(dash):
        sels = promql.selectors(gq.expand(q.expr, {"run_id": "R"}, 60))
        assert sels, q.source
        for sel in sels:
            name, matchers = promql.parse_matchers(sel)
            if not name:  # a run series under its name now or its old one (benchwatch.model.names)
                assert ("__name__", "=~", next(m[2] for m in matchers if m[0] == "__name__")) in matchers, (q.source, sel)
                continue
            assert re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", name), (q.source, sel)
            assert name not in ("sum", "rate", "by", "le", "on", "bool", "end", "scalar"), (q.source, sel)


def test_query_variable_without_a_query_gives_no_query():
    # Grafana saves a new "query" variable with no query text; it runs nothing, so neither do we
    # (it used to become a Query whose expr was None, and expand() raised TypeError).
    from benchwatch.query import grafana as gq
    dash = {"title": "d", "panels": [], "templating": {"list": [
        {"type": "query", "name": "a", "query": {"refId": "PrometheusVariableQueryEditor-VariableQuery"}},
        {"type": "query", "name": "b"},
        {"type": "query", "name": "c", "query": "label_values(up, job)"},
    ]}}
    queries = gq.dashboard_queries(dash)
    assert [(q.source, q.expr) for q in queries] == [("variable c", "up")]
    for q in queries:
        gq.expand(q.expr, {}, 60)


@pytest.mark.parametrize("expr, expected", [
    ('histogram_quantile(0.99, sum by (le) (rate(x_bucket{run_id="a"}[5m])))', ['x_bucket{run_id="a"}']),
    ("sum without(cpu) (irate(a[3s])) / on(instance) group_left(n) b > bool 0.5 offset 5m", ["a", "b"]),
    ('a{l="}{,\\"x"} and ignoring(z) b @ end()', ['a{l="}{,\\"x"}', "b"]),
    ('{__name__=~"pg_settings_.*", job="p"}', ['{__name__=~"pg_settings_.*",job="p"}']),
    ("1 + 2e3 * count(up)", ["up"]),
])
def test_selectors(expr, expected):
    assert promql.selectors(expr) == expected


@pytest.mark.parametrize("expr, sel", [
    ("pg_checkpoint_in_progress == 1", "pg_checkpoint_in_progress"),
    ('max_over_time(pg_checkpoint_info{reason=~"time.*"}[1s])', 'pg_checkpoint_info{reason=~"time.*"}'),
    ("max_over_time(pg_checkpoint_in_progress[1s]) == 1", "pg_checkpoint_in_progress"),
    ("rate(x[1m]) > 0", None),
])
def test_state_selector_forms(expr, sel):
    assert promql.boolean_selector(expr) == sel


def test_matchers():
    name, m = promql.parse_matchers('x{a=~"t.*", b!="q\\"z"}')
    assert name == "x" and m == [("a", "=~", "t.*"), ("b", "!=", 'q"z')]
    assert promql.matches({"a": "time"}, m) and not promql.matches({"a": "wal"}, m)
    assert promql.matches({}, [("a", "!~", "x.*")]) and not promql.matches({}, [("a", "=~", ".+")])


# -- CSV, metadata ----------------------------------------------------------------------------

def test_series_csv_round_trip_is_exact(tmp_path):
    original = fixture_series()
    extra = Series("weird:metric", {"a": "x,y\"z"}, [(1000, float("nan")), (1001, float("inf")), (1002, 0.1 + 0.2)])
    write_csv_dir(str(tmp_path), original + [extra])
    back = {s.key: s for s in read_csv_dir(str(tmp_path))}
    for s in original + [extra]:
        got = back[s.key].samples
        assert [t for t, _ in got] == [t for t, _ in s.samples]
        assert all((a == b) or (math.isnan(a) and math.isnan(b)) for (_, a), (_, b) in zip(got, s.samples))


def test_scrub_removes_secrets():
    meta = {"argv": ["pgbench", "postgresql://u:hunter22@h/db", "password=hunter22 host=x"],
            "pg_dsn": "host=x password=hunter22", "token": "abc", "pid": 12, "nested": {"api_key": "k"}}
    text = json.dumps(scrub(meta))
    assert "hunter22" not in text and '"abc"' not in text and '"k"' not in text and "pid" not in text


# -- compare ---------------------------------------------------------------------------------

def test_side_by_side_and_sweep(built):
    a = built
    b = json.loads(json.dumps(built))
    b["tps"]["pgbench_summary_tps"] = a["tps"]["pgbench_summary_tps"] * 1.1
    b["run"]["labels"]["clients"] = "8"
    b["run"]["args"] = "pgbench -n -r -l -P 1 -c 8 -j 2 -T 12"
    header, rows = compare.side_by_side(["HEAD", "PATCH"], [a, b])
    assert header == ["", "HEAD", "PATCH", "change"]
    tps_row = next(r for r in rows if r[0] == "TPS (pgbench summary)")
    assert tps_row[3] == "+10.0%"
    sw = compare.sweep(["a", "b"], [a, b], "clients")
    assert sw["values"] == ["4", "8"] and sw["variants"] == ["-n -r -l -P 1 -T 12"]
    _h, r = compare.sweep_table(sw)
    assert [row[0] for row in r] == ["4", "8"]


def test_strip_options():
    assert compare.strip_options("-n -c 8 -j4 --client=2 -T 10 --jobs 2", ("-c", "--client", "-j", "--jobs")) == "-n -T 10"


def test_markdown_has_every_section(built):
    md = summary.to_markdown(built, ["source: test"], ["tps.png"])
    for title in ("## Throughput", "## Latency", "## Per-statement latency", "## Checkpoints", "## Server settings",
                  "![tps.png](tps.png)", "immediate force wait"):
        assert title in md


def tree_state(top: str) -> dict[str, tuple[int, int, str]]:
    """relative path -> (size, mtime in ns, sha256) of every file under top."""
    state = {}
    for folder, _, names in os.walk(top):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            st = os.stat(path)
            state[os.path.relpath(path, top)] = (st.st_size, st.st_mtime_ns, digest)
    return state


def test_fixture_run_dir_is_untouched():
    # run_samples reads; it must never write into a run directory (snapshots of shared runs):
    # no file added, removed, rewritten or even touched.
    before = tree_state(RUN_DIR)
    rebuild.run_samples(rundir.RunDir(RUN_DIR))
    assert tree_state(RUN_DIR) == before


def test_a_secret_in_any_file_stops_the_bundle(tmp_path):
    from benchwatch.share import bundle
    target = tmp_path / "snapshot-x"
    (target / "raw").mkdir(parents=True)
    (target / "raw" / "stderr.log").write_text("connection failed for password s3cr3t-pw\n")
    bundle.check_secrets(str(target), ["another-one"])  # not there: fine
    with pytest.raises(bundle.SecretFound, match=r"raw/stderr\.log"):
        bundle.check_secrets(str(target), ["s3cr3t-pw"])
    assert not target.exists()


def test_a_text_carries_a_secret_by_the_bundles_rule():
    """The one rule for a comment or a report leaving the host (commands' write_comment, report's results row)
    and for the bundle's files: a secret of 4 characters or more, anywhere in the text."""
    from benchwatch.share.bundle import carries_secret

    assert carries_secret("| dsn | host=db password=s3cr3t-é |", ["s3cr3t-é"])
    assert not carries_secret("| note | abc |", ["abc", "", "s3cr3t"])  # 3 characters: not looked for
    assert not carries_secret("nothing here", [])
