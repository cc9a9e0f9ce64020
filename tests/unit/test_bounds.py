"""Every number from the input is bounded before it becomes a time, an id, a duration or a count (issue 32):
the line (or run) it came from is reported and skipped, the rest of the file imported."""

from __future__ import annotations

import io
import math
import os
import time
from collections import Counter

import pytest

from benchwatch import cli, loadgens
from benchwatch.model.run import METRICS
from benchwatch.record import replay, rundir
from benchwatch.sink.openmetrics import write_openmetrics
from benchwatch.sink.remote_write import encode_write_request
from benchwatch.util import bounds, processes
from tests.helpers import fuzz

START = 1_452_074_400.0  # 2016-01-06T10:00:00Z
START_TEXT = "2016-01-06T10:00:00Z"


def pgbench_run(progress_lines: list[bytes], duration: bytes = b"3") -> bytes:
    """A pgbench run as a saved output holds it (stderr then stdout), with the given progress lines."""
    with open(os.path.join(fuzz.FIXTURES, "pgbench", "pg15_log.stdout"), "rb") as f:
        summary = f.read().replace(b"duration: 3 s", b"duration: " + duration + b" s")
    return b"starting vacuum...end.\n" + b"".join(line + b"\n" for line in progress_lines) + summary


def line(time_s: bytes, tps: bytes = b"1107.9") -> bytes:
    return b"progress: " + time_s + b" s, " + tps + b" tps, lat 0.894 ms stddev 0.379, 0 failed"


GOOD = [line(b"1.0"), line(b"2.0", b"1166.1")]


def tps_of(read: replay.ReadRun) -> list[tuple[float, float]]:
    return [(s.timestamp_ms / 1000 - read.start_epoch, s.value) for s in read.samples if s.name == "benchmark_progress_tps"]


def imported(data: bytes, start: float | None = START) -> list[replay.ReadRun]:
    """As ``import`` does it: each run named by its start (rundir.new_run_id, the issue's traceback)."""
    reads, _ = replay.replay_saved(data, lambda k, s: rundir.new_run_id(s), start)
    for r in reads:
        assert all(bounds.ms_in_range(s.timestamp_ms) for s in r.samples), r.run_id
    return reads


def test_a_run_whose_end_came_from_an_absurd_number_places_the_next_one_right():
    # The file: runs placed one after the other, one of them with a progress time of three years
    # (elapsed), one with a duration of three years, one with a Unix time of the year 2286 (pgbench
    # --progress-timestamp, damaged). Each such line is reported; the next run starts where the run's
    # clock really went, seconds later, not centuries.
    data = (pgbench_run(GOOD) + pgbench_run([GOOD[0], line(b"99999999.0"), GOOD[1]])
            + pgbench_run(GOOD, duration=b"99999999") + pgbench_run([GOOD[0], line(b"9999999999.999")])
            + pgbench_run(GOOD))
    reads = imported(data)
    kept = [r for r in reads if r.skipped is None]
    assert kept == reads
    assert all(START <= r.start_epoch < START + 60 for r in reads), [r.start_epoch for r in reads]
    for before, after in zip(reads, reads[1:], strict=False):
        assert before.start_epoch < after.start_epoch
    # Every good progress line stored, at its own time in its run.
    good = [(t, v) for r in reads for t, v in tps_of(r)]
    assert sorted(v for _, v in good) == [1107.9] * 5 + [1166.1] * 4  # the fourth run has one good line
    reasons = " | ".join(why for r in reads for _, why, _ in r.unread)
    assert "more than a week" in reasons and "in the future" in reasons, reasons


def test_a_run_placed_past_2286_is_reported_and_skipped():
    # The first run placed (by --start) at the last second a clock may show: its end goes past it, so the
    # next run, placed after it, would have no time a run id or a timestamp can hold.
    reads = imported(pgbench_run(GOOD) + pgbench_run(GOOD), start=bounds.MAX_EPOCH_S - 3)
    assert [r.skipped is None for r in reads] == [True, False]
    assert "2286" in (reads[1].skipped or "") and reads[1].samples == [] and reads[1].run_id == ""
    assert "not imported" in reads[1].unread[0][1]


def test_run_ids_refuse_a_start_no_clock_has():
    for absurd in (1e309, math.nan, -1.0, 1e19, bounds.MAX_EPOCH_S + 1):
        with pytest.raises(ValueError, match="no run id"):
            rundir.new_run_id(absurd)
    assert rundir.new_run_id(bounds.MAX_EPOCH_S).startswith("22861120T")


@pytest.mark.parametrize("start", ["1e300", "99999999999999999999", "nan", "2300-01-01T00:00:00Z"])
def test_import_refuses_a_start_no_clock_has(capsys, start):
    code = cli.main(["import", "--openmetrics", "--start", start, os.path.join(fuzz.FIXTURES, "pgbench", "pg15_log.stderr")])
    assert code == 2 and "--start" in capsys.readouterr().err


def test_the_helpers_bounds():
    assert bounds.figure_problem("tps", int("9" * 400)) == "tps is absurd (over 1e308)"
    assert bounds.figure_problem("tps", "12") is not None and bounds.figure_problem("tps", True) is not None
    assert bounds.epoch_problem("start", 1e11) == "start is past 2286-11-20 (1e+11)"
    assert bounds.epoch_or_none(START) == START and bounds.epoch_or_none(-0.0) == 0.0
    assert [bounds.interval_or_none(v) for v in (1, 0, -0.0, math.inf, 1e300, "1", 86400.0)] == \
        [1.0, None, None, None, None, None, 86400.0]
    assert [bounds.pid_or_none(v) for v in (1, 0, -1, True, 1 << 30, "12", 4.0)] == [1, None, None, None, None, None, None]
    assert not processes.process_alive(99999999999999999999) and not processes.process_alive("self")  # type: ignore[arg-type]
    assert bounds.ms_in_range(bounds.MAX_EPOCH_MS) and not bounds.ms_in_range(1 << 63) and not bounds.ms_in_range(-1)


def test_a_damaged_interval_is_none():
    model = replay.loadgens.by_name("pgbench").run_model("x", {"progress_interval": 1e309, "clock_start_epoch": "soon"}, {})
    assert model.interval_s is None and model.start_epoch is None
    model.interval_s = 5
    assert model.interval_s == 5.0


@pytest.mark.parametrize("pattern", ["pgbench/*", "sysbench/*.txt"])
def test_fuzzed_extremes_import_within_bounds(pattern):
    # Seed 11 as in the issue; fewer lines than its million (bench/bench_fuzz.py runs those).
    data = fuzz.fuzzed_output(20_000, 11, pattern)
    reads, _ = replay.replay_saved(data, lambda k, s: rundir.new_run_id(s), START)
    samples = [s for r in reads for s in r.samples]
    assert samples and all(bounds.ms_in_range(s.timestamp_ms) for s in samples)
    # No run placed centuries on: the relative runs go on from 2016, the fixtures' --progress-timestamp
    # runs sit when they were captured; nothing after now.
    assert max(s.timestamp_ms for s in samples) < (time.time() + bounds.MAX_STEP_S) * 1000
    # Every well-formed progress line around the bad ones stored: each line of a real output left intact.
    intact = set(fuzz.seed_lines(pattern))
    parser = loadgens.for_output(data).output_model([], "x", None, {}).model.new_parser()
    wanted = [e.tps for ln in replay.split_lines(data) if ln in intact for e in parser.feed(ln)
              if type(e).__name__ == "Progress" and bounds.figure_problem("tps", e.tps) is None]
    stored = Counter(s.value for s in samples if s.name == "benchmark_progress_tps")
    assert len(wanted) > 100 and not Counter(wanted) - stored
    out = io.StringIO()
    write_openmetrics(samples, out, types={k: v[0] for k, v in replay.run_metrics().items()},
                      help={k: v[1] for k, v in METRICS.items()})
    assert out.getvalue().endswith("# EOF\n")
    encode_write_request(samples + [m for r in reads for m in r.model.end_markers()])
