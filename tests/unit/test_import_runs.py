"""Several runs in one saved file, and an import that is never silently wrong (issue 20)."""

from __future__ import annotations

import json
import os

import pytest

from benchwatch import cli
from benchwatch.record import replay
from tests.helpers.corpus import CORPUS, corpus

START = 1_452_074_400.0
START_TEXT = "2016-01-06T10:00:00Z"


def path(number: str) -> str:
    (name,) = [n for n in os.listdir(CORPUS) if n.startswith(number + "_")]
    return os.path.join(CORPUS, name)


def runs(number: str):
    reads, _ = replay.replay_saved(corpus(number), lambda k, s: f"r{k}", START)
    return reads


def tps_times(run):
    return [s.timestamp_ms for s in run.samples if s.name == "benchmark_progress_tps"]


def test_four_sysbench_runs_concatenated_are_four_runs_in_order():  # 011
    reads = runs("011")
    assert [r.model.info_labels["threads"] for r in reads] == ["8", "16", "32", "64"]
    assert [r.model.summary["tps"] for r in reads] == [222.13, 239.21, 248.2, 267.64]
    assert [r.model.progress_lines for r in reads] == [60, 60, 60, 60]
    for before, after in zip(reads, reads[1:], strict=False):
        assert after.placed_after_previous
        # right after the run before ended (its summary's total time) and after its last sample
        assert before.end_epoch <= after.start_epoch <= before.end_epoch + 0.002
        assert min(s.timestamp_ms for s in after.samples) > max(s.timestamp_ms for s in before.samples)
    for r in reads:
        assert tps_times(r) == [int(round((r.start_epoch + 5 * i) * 1000)) for i in range(1, 61)]
        (info,) = {s.labels for s in r.samples if s.name == "benchmark_run_info"}
        assert dict(info)["threads"] == r.model.info_labels["threads"]
        assert {dict(s.labels)["run_id"] for s in r.samples} == {r.run_id}
    assert not reads[0].placed_after_previous and reads[0].start_epoch == START


def test_a_harness_log_with_two_pgbench_runs():  # 018
    first, second = runs("018")
    assert (first.model.info_labels["clients"], second.model.info_labels["clients"]) == ("32", "64")
    assert (first.model.summary["tps"], second.model.summary["tps"]) == (2841.072322, 4559.802884)
    assert tps_times(first) == [int((START + t) * 1000) for t in (30, 60, 90, 120)]
    assert START + 120 < second.start_epoch <= START + 120.002  # after run 1's last line at 120 s and its end samples
    assert tps_times(second) == [int(round((second.start_epoch + t) * 1000)) for t in range(60, 601, 60)]
    assert [n for n, _, _ in first.unread] == [1, 2, 3, 4]  # the harness's own lines, reported by number
    assert [n for n, _, _ in second.unread] == [24, 25]


def test_one_run_files_stay_one_run():
    for number in ("010", "012", "015", "027"):
        assert len(runs(number)) == 1, number


def main(capsys, *argv):
    code = cli.main(["import", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_list_shows_the_runs_and_writes_nothing(capsys, tmp_path):
    code, out, err = main(capsys, "--list", "--start", START_TEXT, "--state-dir", str(tmp_path), path("011"))
    assert code == 0
    assert out == ""
    assert err.count("0 unparsed lines") == 4
    assert "run 2 placed right after run 1 ends, at 2016-01-06T10:05:00.0" in err
    assert not os.path.exists(tmp_path / "runs") or not os.listdir(tmp_path / "runs")


def test_run_id_is_refused_for_a_file_with_several_runs(capsys):
    code, _, err = main(capsys, "--run-id", "x", "--openmetrics", "--start", START_TEXT, path("018"))
    assert code == 2
    assert "holds 2 runs" in err


def test_openmetrics_of_several_runs_holds_each_run(capsys):
    code, out, _ = main(capsys, "--openmetrics", "--start", START_TEXT, path("018"))
    assert code == 0
    ids = {line.split('run_id="')[1].split('"')[0] for line in out.splitlines() if 'run_id="' in line}
    assert len(ids) == 2
    assert out.endswith("# EOF\n")


def test_a_file_nothing_was_read_from_exits_non_zero(capsys, tmp_path):
    prose = tmp_path / "notes.md"
    prose.write_text("We ran pgbench yesterday.\nIt was fast.\n")
    code, out, err = main(capsys, "--openmetrics", "--start", START_TEXT, str(prose))
    assert code == 1
    assert out == ""
    assert "benchwatch: " in err and "nothing read: expected pgbench output" in err
    code, out, err = main(capsys, "--openmetrics", "--start", START_TEXT, path("008"))  # a run that never started
    assert code == 1


def test_strict_refuses_a_partial_read_and_verbose_lists_the_lines(capsys):
    code, out, err = main(capsys, "--openmetrics", "--strict", "--verbose", "--start", START_TEXT, path("018"))
    assert code == 1
    assert out == ""
    assert "benchwatch: line 3: not a line pgbench prints; not read: VACUUM" in err
    code, out, _ = main(capsys, "--openmetrics", "--strict", "--start", START_TEXT, path("015"))
    assert code == 0 and out.endswith("# EOF\n")


def test_json_reports_per_file_and_run(capsys):
    code, out, _ = main(capsys, "--json", "--list", "--start", START_TEXT, path("018"), path("017"), path("008"))
    assert code == 1  # 008 read nothing
    report = json.loads(out)
    f018, f017, f008 = report["files"]
    assert [r["progress_lines"] for r in f018["runs"]] == [4, 10]
    assert [u["line"] for u in f018["runs"][0]["unread"]] == [1, 2, 3, 4]
    assert f018["runs"][1]["placed_after_previous_run"] is True
    assert f018["runs"][1]["labels"]["clients"] == "64"
    assert f017["set_aside"] == [{"line": 1, "reason": "an elision (lines left out where it was pasted)"}]
    assert f017["runs"][0]["summary"]["tps"] == pytest.approx(732.60582)
    assert f008["error"] == "nothing read"


def test_without_start_the_last_run_ends_when_the_file_was_last_modified():
    from benchwatch.record import importer

    start, note = importer.default_start(path("018"), corpus("018"))
    assert start == pytest.approx(os.path.getmtime(path("018")) - 720)  # run 1: 120 s, run 2: 600 s
    assert note and "(last) run ended" in note


def test_each_run_is_saved_and_its_id_printed(capsys, tmp_path, monkeypatch):
    from benchwatch.sink import remote_write

    sent = []
    monkeypatch.setattr(remote_write.RemoteWriter, "send", lambda self, samples: sent.extend(samples))
    code, out, err = main(capsys, "--start", START_TEXT, "--state-dir", str(tmp_path), path("018"))
    assert code == 0, err
    ids = out.split()
    assert len(ids) == 2 and ids == sorted(ids)
    assert {dict(s.labels)["run_id"] for s in sent} == set(ids)
    for run_id, (first, last) in zip(ids, [(1, 23), (24, 50)], strict=True):
        meta = json.load(open(tmp_path / "runs" / run_id / "meta.json"))
        with open(tmp_path / "runs" / run_id / "output.log", "rb") as f:
            assert f.read() == b"".join(corpus("018").splitlines(keepends=True)[first - 1:last])
        assert meta["mode"] == "import"
    # A rebuilt run (snapshot) is the run import wrote.
    rebuilt = replay.replay_run_dir(str(tmp_path / "runs" / ids[1]), meta)
    assert [s for s in rebuilt if s.name == "benchmark_progress_tps"] == \
        [s for s in sent if s.name == "benchmark_progress_tps" and dict(s.labels)["run_id"] == ids[1]]


def test_a_replayed_run_repeats_its_heartbeat_each_minute_not_each_line():  # 012: 12 hours at 2 s
    (run,) = runs("012")
    tps = tps_times(run)
    for name in ("benchmark_run_info", "benchmark_running", "benchmark_run_start_timestamp_seconds"):
        times = [s.timestamp_ms for s in run.samples if s.name == name]
        assert times[0] == tps[0], name                      # with the first line
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        assert max(gaps) <= replay.REPLAY_HEARTBEAT_MS + 2000, name  # every instant finds it within the lookback
        assert len(times) < len(tps) / 20, name              # not with every line
    running = [s for s in run.samples if s.name == "benchmark_running"]
    assert running[-1].value == 0.0 and running[-1].timestamp_ms >= tps[-1]  # and at the end


def test_a_single_run_file_is_parsed_once_with_the_same_samples():
    data = corpus("012")
    (once,), _ = replay.replay_saved(data, lambda k, s: "r", START)
    saved, set_aside = replay.read_saved(data)
    saved[0].parser = saved[0].events = None   # make the replay parse every line again
    (twice,), _ = replay.replay_saved(data, lambda k, s: "r", START, saved=(saved, set_aside))
    assert once.samples == twice.samples and once.model.summary == twice.model.summary
