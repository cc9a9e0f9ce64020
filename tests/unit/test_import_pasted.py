"""Saved outputs pasted into Markdown, READMEs and logs are read as a person reads them (issue 20):
a common indentation, code fences, a line wrapped in backticks, CRLF, a ``...`` elision, shell trace lines."""

from __future__ import annotations

import pytest

from benchwatch.model import pasted
from benchwatch.record import replay
from tests.helpers.corpus import corpus

START = 1_452_074_400.0  # 2016-01-06T10:00:00Z


def read(data: bytes):
    reads, set_aside = replay.replay_saved(data, lambda k, s: f"r{k}", START)
    return reads, set_aside


def values(samples, name):
    return [(s.timestamp_ms, s.value) for s in samples if s.name == name]


def tps_times(samples):
    return [ts for ts, _ in values(samples, "benchmark_progress_tps")]


def result(samples, name):
    found = values(samples, name)
    assert found, f"no {name}"
    return found[-1][1]


def test_indented_four_spaces_with_an_elided_head_is_read_whole():  # 017
    (run,), set_aside = read(corpus("017"))
    assert tps_times(run.samples) == [int((START + t) * 1000) for t in range(3060, 3601, 60)]
    assert result(run.samples, "benchmark_result_tps") == pytest.approx(732.605820)
    assert result(run.samples, "benchmark_result_latency_seconds") == pytest.approx(0.010920)
    assert run.unread == []
    assert set_aside == [(1, "an elision (lines left out where it was pasted)")]
    assert run.model.info_labels["clients"] == "8"


def test_indented_code_block_of_pgbench_95_is_read():  # 026
    (run,), _ = read(corpus("026"))
    assert result(run.samples, "benchmark_result_tps") == pytest.approx(348.004628)
    assert result(run.samples, "benchmark_result_latency_seconds") == 0.0
    assert run.unread == []


def test_a_line_wrapped_in_backticks_is_read():  # 020
    (run,), _ = read(corpus("020"))
    assert result(run.samples, "benchmark_result_tps") == pytest.approx(136.387648)
    assert len(tps_times(run.samples)) == 3
    assert run.unread == []


def test_shell_trace_lines_and_an_elision_between_progress_lines():  # 027
    (run,), set_aside = read(corpus("027"))
    assert tps_times(run.samples) == [int((START + t) * 1000) for t in (1, 2, 3, 7, 8, 9, 10)]
    assert run.unread == []
    assert [n for n, _ in set_aside] == [2, 5, 7]


def test_crlf_and_code_fences_read_as_the_plain_text():
    plain = corpus("015")
    (want,), _ = read(plain)
    pasted_md = b"Results:\r\n```text\r\n" + plain.replace(b"\n", b"\r\n") + b"```\r\n"
    (got,), set_aside = read(pasted_md)
    assert [(s.name, s.value, s.timestamp_ms) for s in got.samples if s.name.startswith("benchmark_progress")] == \
        [(s.name, s.value, s.timestamp_ms) for s in want.samples if s.name.startswith("benchmark_progress")]
    assert result(got.samples, "benchmark_result_tps") == result(want.samples, "benchmark_result_tps")
    assert [n for n, _ in set_aside] == [2, len(pasted_md.split(b"\r\n")) - 1]
    assert [n for n, _, _ in got.unread] == [1]  # "Results:" is prose, reported by its line number


def test_the_common_indentation_keeps_the_tables_relative_indentation():
    p = pasted.read_pasted(b"    statement latencies in milliseconds:\n            0.002  \\set aid\n")
    assert p.lines == [b"statement latencies in milliseconds:", b"        0.002  \\set aid"]
    assert p.numbers == [1, 2]
