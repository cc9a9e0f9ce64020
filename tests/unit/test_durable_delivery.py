"""Durable delivery (issue 12): acknowledged offsets per run, resume without loss or resend, bounded reading."""

from __future__ import annotations

import os

from benchwatch.exporter.delivery import DELIVERED, DeliveryLog
from benchwatch.exporter.pgbench_runs import INGESTED_MARKER, MAX_BACKLOG, PgbenchRunsCollector
from benchwatch.record import rundir
from benchwatch.sink.remote_write import BufferedRemoteWriter

START = 1_700_000_000.0
RUN_ID = "20231114T221320Z-00aa"


def progress(i: int) -> bytes:
    return f"progress: {i}.0 s, {100 + i}.0 tps, lat 1.{i:03d} ms stddev 0.100, 0 failed\n".encode()


def live_run(runs_dir: str, lines: int, *, made: bool = False) -> rundir.RunDir:
    """``made``: the wrapper already made the directory (and has not written meta.json yet)."""
    run = rundir.RunDir(os.path.join(runs_dir, RUN_ID)) if made else rundir.create_run_dir(runs_dir, RUN_ID)
    with open(run.file("stderr.log"), "wb") as f:
        f.write(b"".join(progress(i) for i in range(1, lines + 1)))
    open(run.file("stdout.log"), "wb").close()
    # This test process stands in for the live wrapper: alive, so the run is running.
    run.write_meta({"run_id": RUN_ID, "mode": "run", "state": rundir.RUNNING, "pid": os.getpid(), "argv": ["pgbench"],
                    "progress_interval": 1.0, "clock_start_epoch": START})
    return run


def values(samples, name: str) -> list[float]:
    """The series' values, without the staleness marker (NaN) that ends a run's curves."""
    return [s.value for s in samples if s.name == name and s.value == s.value]


def test_restart_resumes_after_the_acknowledged_lines(tmp_path):
    run = live_run(str(tmp_path), 5)
    first: list = []
    PgbenchRunsCollector(str(tmp_path), first.extend, clock=lambda: START + 5.5).poll()
    assert values(first, "benchmark_progress_tps") == [101, 102, 103, 104, 105]
    assert DeliveryLog(run.path).load() == {"stderr.log": os.path.getsize(run.file("stderr.log"))}
    with open(run.file("stderr.log"), "ab") as f:
        f.write(progress(6) + progress(7) + progress(8))
    # A new exporter process: only the three new lines are sent, and the model goes on where it was.
    second: list = []
    PgbenchRunsCollector(str(tmp_path), second.extend, clock=lambda: START + 8.5).poll()
    assert values(second, "benchmark_progress_tps") == [106, 107, 108]
    assert values(second, "benchmark_progress_lines_total")[-1] == 8


def test_done_only_once_the_last_samples_are_acknowledged(tmp_path):
    run = live_run(str(tmp_path), 3)
    run.update_meta(state=rundir.FINISHED, exit_code=0, ended_at=START + 3.2)
    marks: list = []
    sent: list = []
    c = PgbenchRunsCollector(str(tmp_path), sent.extend, clock=lambda: START + 4, mark=marks.append)
    c.poll()
    assert values(sent, "benchmark_running")[-1] == 0
    assert not os.path.exists(run.file(INGESTED_MARKER)) and not os.path.exists(run.file(DELIVERED))
    # A crash here: the next exporter sends the run again, whole, since nothing was acknowledged.
    again: list = []
    PgbenchRunsCollector(str(tmp_path), again.extend, clock=lambda: START + 5).poll()
    assert values(again, "benchmark_progress_tps") == [101, 102, 103]
    assert os.path.exists(run.file(INGESTED_MARKER))
    for record in marks:  # the first process's acknowledgements, late: harmless
        record()


def test_writer_marks_fire_after_acknowledgement_only(tmp_path):
    # Nobody listens on port 9 of a closed socket: flush fails, the mark stays.
    w = BufferedRemoteWriter("http://127.0.0.1:9/api/v1/write", timeout_s=0.5)
    fired = []
    live = live_run(str(tmp_path), 1)
    from benchwatch.model.samples import sample

    w.enqueue([sample("x", {"run_id": live.run_id}, 1.0, 1)])
    w.mark(lambda: fired.append(1))
    w.flush()
    assert fired == [] and w.stats().pending == 1


def test_reading_stops_while_the_backlog_is_full(tmp_path):
    live_run(str(tmp_path), 4)
    sent: list = []
    c = PgbenchRunsCollector(str(tmp_path), sent.extend, clock=lambda: START + 5, backlog=lambda: MAX_BACKLOG + 1)
    c.poll()
    assert sent == []  # the lines wait in the run directory, nothing is dropped
    c.backlog = lambda: 0
    c.poll()
    assert values(sent, "benchmark_progress_tps") == [101, 102, 103, 104]


def test_unreadable_delivery_record_sends_everything_again(tmp_path):
    run = live_run(str(tmp_path), 2)
    with open(run.file(DELIVERED), "w") as f:
        f.write("{not json")
    sent: list = []
    PgbenchRunsCollector(str(tmp_path), sent.extend, clock=lambda: START + 3).poll()
    assert values(sent, "benchmark_progress_tps") == [101, 102]



def test_a_new_run_is_found_at_once_not_at_the_next_rescan(tmp_path):
    # The clock stands still: only the runs directory's change can make the collector look.
    sent: list = []
    c = PgbenchRunsCollector(str(tmp_path), sent.extend, clock=lambda: START + 2.5)
    c.poll()
    assert sent == []
    live_run(str(tmp_path), 2)
    c.poll()
    assert values(sent, "benchmark_progress_tps") == [101, 102]


def test_a_run_waiting_for_meta_json_is_looked_at_again_each_poll(tmp_path):
    sent: list = []
    c = PgbenchRunsCollector(str(tmp_path), sent.extend, clock=lambda: START + 1.5)
    os.mkdir(tmp_path / RUN_ID)  # the wrapper made the directory; meta.json comes next
    c.poll()
    assert c.pending == {RUN_ID} and sent == []
    mtime = os.stat(tmp_path).st_mtime_ns
    live_run(str(tmp_path), 1, made=True)
    assert os.stat(tmp_path).st_mtime_ns == mtime  # files in the run directory: the runs directory unchanged
    c.poll()
    assert values(sent, "benchmark_progress_tps") == [101]


def test_an_unchanged_runs_dir_is_not_listed_again(tmp_path, monkeypatch):
    sent: list = []
    now = [START + 5.5]
    c = PgbenchRunsCollector(str(tmp_path), sent.extend, clock=lambda: now[0])
    c.poll()
    listed = []
    real_listdir = os.listdir
    monkeypatch.setattr(os, "listdir", lambda path: listed.append(path) or real_listdir(path))
    c.poll()
    assert listed == []
    now[0] += 0.5  # the timed rescan, for changes within one mtime tick
    c.poll()
    assert listed == [str(tmp_path)]
