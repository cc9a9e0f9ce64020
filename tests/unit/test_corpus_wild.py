"""Every real saved output of the wild corpus imported exactly (issue 20).

The expectations are read from each file's text with loose patterns of their own (not the
parsers'): every progress line one sample at start + elapsed (per run where the elapsed time starts
again: runs in file order, not overlapping), every summary TPS and average latency, every ``-r``
statement line. The corpus lives beside the checkout (``<repo>/../shared/corpus/wild``, as in CI);
without it this test fails, it does not skip."""

from __future__ import annotations

import os
import re

import pytest

from benchwatch.record import replay
from tests.helpers.corpus import corpus_files

START = 1_452_074_400.0  # 2016-01-06T10:00:00Z
FILES = corpus_files()  # raises when the corpus is missing: a failure of the run, not a skip

# The corpus's own runs that hold nothing to import (SOURCES.md: "Run that never starts").
NOTHING_TO_READ = {"008"}
# Lines no tool printed, reported as not read (018: the tuning harness's own lines); every other line is read.
NOT_READ = {"018": [1, 2, 3, 4, 24, 25]}
_ABORT = re.compile(r"[Cc]lient \d+ (?:script \d+ )?aborted")

_PG_PROGRESS = re.compile(r"progress: (\d+\.\d) s, (\d+\.\d) tps")
_SB_PROGRESS = re.compile(r"^\s*\[ *(\d+(?:\.\d+)?)s ?\] (?:thds|threads): \d+,? tps: (\d+\.\d+)")
_PG_TPS = re.compile(r"tps = (\d+\.\d+) \((?:excluding connections|without initial|including reconnection)")
_SB_TPS = re.compile(r"^\s*transactions: +\d+ +\((\d+\.\d+) per sec\.\)")
_PG_LAT = re.compile(r"latency average[:=] (\d+\.\d+) ms")
_SB_AVG = re.compile(r"^\s*avg: +(\d+\.\d+)(?:ms)?\s*$")
_TABLE = re.compile(r"statement latencies in milliseconds")
_ROW = re.compile(r"^\s+(\d+\.\d+)(?:\s+\d+)*\s+(\S.*?)\s*$")


def _number(path: str) -> str:
    return os.path.basename(path)[:3]


def expected(text: str):
    """(progress lines as [(line, elapsed, tps)] per run, summaries [(line, tps)], latencies [(line, s)], rows)."""
    runs: list[list[tuple[int, float, float]]] = [[]]
    tps, lat, rows = [], [], []
    in_table = False
    for number, line in enumerate(text.split("\n"), 1):
        m = _PG_PROGRESS.search(line) or _SB_PROGRESS.match(line)
        if m:
            elapsed = float(m.group(1))
            if runs[-1] and elapsed < runs[-1][-1][1]:
                runs.append([])
            runs[-1].append((number, elapsed, float(m.group(2))))
        m = _PG_TPS.search(line) or _SB_TPS.match(line)
        if m:
            tps.append((number, float(m.group(1))))
        m = _PG_LAT.search(line) or _SB_AVG.match(line)
        if m:
            lat.append((number, float(m.group(1)) / 1000.0))
        if _TABLE.search(line):
            in_table = True
            continue
        if in_table:
            m = _ROW.match(line)
            if m:
                rows.append((number, float(m.group(1)) / 1000.0, m.group(2)))
            else:
                in_table = False
    return [r for r in runs if r], tps, lat, rows


def last(run, name, **labels):
    found = [s for s in run.samples if s.name == name and all(dict(s.labels).get(k) == v for k, v in labels.items())]
    return found[-1].value if found else None


@pytest.mark.parametrize("path", FILES, ids=_number)
def test_corpus_file_imports_exactly(path):
    with open(path, "rb") as f:
        data = f.read()
    reads, _ = replay.replay_saved(data, lambda k, s: f"wild-{k}", START)
    progress, tps, lat, rows = expected(data.decode("utf-8", "replace"))
    if _number(path) in NOTHING_TO_READ:
        assert all(r.read_nothing for r in reads)
        return
    assert not all(r.read_nothing for r in reads)
    # Each run of progress lines is one run of the import, in file order, placed one after the other.
    with_progress = [r for r in reads if r.model.progress_lines]
    assert len(with_progress) == len(progress)
    assert reads[0].start_epoch == START
    for run, lines in zip(with_progress, progress, strict=True):
        tps_samples = [(s.timestamp_ms, s.value) for s in run.samples if s.name == "benchmark_progress_tps"]
        assert tps_samples == [(int(round((run.start_epoch + t) * 1000)), v) for _, t, v in lines], run.index
        assert all(run.first_line <= n <= run.last_line for n, _, _ in lines)
    for before, after in zip(reads, reads[1:], strict=False):
        assert after.first_line > before.last_line
        assert min(s.timestamp_ms for s in after.samples) > max(s.timestamp_ms for s in before.samples)
        assert after.start_epoch >= before.end_epoch
    # Every summary's TPS and average latency, in the run whose lines hold it.
    def run_of(number):
        (run,) = [r for r in reads if r.first_line <= number <= r.last_line]
        return run

    for number, value in tps:
        assert last(run_of(number), "benchmark_result_tps") == pytest.approx(value), number
    for number, value in lat:
        assert last(run_of(number), "benchmark_result_latency_seconds") == pytest.approx(value), number
    assert sum(1 for r in reads if last(r, "benchmark_result_tps") is not None) == len(tps)
    assert [n for r in reads for n, _, _ in r.unread] == NOT_READ.get(_number(path), [])
    aborts = sum(1 for line in data.decode("utf-8", "replace").split("\n") if _ABORT.search(line))
    assert sum(last(r, "benchmark_aborted_clients_total") or 0 for r in reads) == aborts
    for number, value, statement in rows:
        assert last(run_of(number), "pgbench_statement_latency_seconds", statement=statement) == pytest.approx(value), number


def test_the_corpus_is_all_there():
    assert len(FILES) == 29
