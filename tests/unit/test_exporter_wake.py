"""The exporter's poll loop sleeps until a followed file changes (inotify), and polls where it cannot."""

from __future__ import annotations

import os
import threading
import time

from benchwatch.exporter import server
from benchwatch.util import net
from benchwatch.util.wake import Waker


def append(path: str, data: bytes, delay: float) -> threading.Thread:
    def write():
        time.sleep(delay)  # the change must come while wait() sleeps
        with open(path, "ab") as f:
            f.write(data)

    t = threading.Thread(target=write)
    t.start()
    return t


def test_wakes_on_a_watched_file_not_on_its_neighbours(tmp_path):
    w = Waker()
    assert w.active, "inotify is available on Linux"
    followed, other = str(tmp_path / "output.log"), str(tmp_path / "txlog.1")
    w.watch([followed])  # need not exist yet
    t = append(other, b"x\n", 0.05)
    t0 = time.monotonic()
    assert not w.wait(0.5)
    assert time.monotonic() - t0 >= 0.45
    t.join()
    t = append(followed, b"progress\n", 0.05)
    t0 = time.monotonic()
    assert w.wait(10)
    assert time.monotonic() - t0 < 5
    t.join()
    w.close()


def test_a_watched_directory_wakes_on_a_new_entry_and_renames_are_seen(tmp_path):
    w = Waker()
    w.watch([str(tmp_path), str(tmp_path / "meta.json")])
    threading.Timer(0.05, lambda: os.mkdir(tmp_path / "run1")).start()
    assert w.wait(10)
    w.watch([str(tmp_path / "run1" / "meta.json")])  # the directory itself is no longer watched
    (tmp_path / "run1" / "meta.json.tmp").write_text("{}")
    threading.Timer(0.05, lambda: os.replace(tmp_path / "run1" / "meta.json.tmp", tmp_path / "run1" / "meta.json")).start()
    assert w.wait(10)
    w.close()


def test_wake_ends_a_wait_and_without_inotify_wait_is_a_sleep(tmp_path):
    for w in (Waker(), Waker(use_inotify=False)):
        threading.Timer(0.05, w.wake).start()
        t0 = time.monotonic()
        assert w.wait(10)
        assert time.monotonic() - t0 < 5
        assert not w.wait(0.05)
        w.close()
    w = Waker(use_inotify=False)
    assert not w.active
    w.watch([str(tmp_path)])  # nothing to do
    w.close()


def run_exporter(tmp_path, **kwargs):
    runs = tmp_path / "runs"
    runs.mkdir()
    log = tmp_path / "postgresql.log"
    e = server.Exporter(runs_dir=str(runs), remote_write_url="http://127.0.0.1:9/api/v1/write",
                        server_log=str(log), archive_runs=False, **kwargs)
    polls = []
    original = e.poll_once

    def counted():
        polls.append(time.monotonic())
        original()

    e.poll_once = counted
    stop = threading.Event()
    t = threading.Thread(target=e.serve, args=("127.0.0.1", net.free_port(), stop))
    t.start()
    return e, stop, t, polls, log


def test_an_idle_exporter_polls_once_a_second_and_a_log_line_wakes_it(tmp_path):
    e, stop, t, polls, log = run_exporter(tmp_path)
    try:
        time.sleep(3.0)  # the idle window measured
        # Polling every 0.25 s made 12 polls here; waiting on inotify, one a second.
        assert len(polls) <= 5, polls
        before = len(polls)
        t0 = time.monotonic()
        with open(log, "ab") as f:
            f.write(b"2026-01-01 00:00:00.000 UTC [1] LOG:  checkpoint starting: time\n")
        deadline = time.monotonic() + 10
        while len(polls) == before and time.monotonic() < deadline:
            time.sleep(0.005)
        assert len(polls) > before
        # Read at once, not at the next idle wake-up (up to 1 s away).
        assert polls[before] - t0 < 0.5, polls[before] - t0
    finally:
        e.stop_soon(stop)
        t.join(10)
    assert not t.is_alive()


def test_without_inotify_the_exporter_polls_as_before(tmp_path):
    e, stop, t, polls, _ = run_exporter(tmp_path, use_inotify=False)
    try:
        time.sleep(1.5)
    finally:
        e.stop_soon(stop)
        t.join(10)
    assert len(polls) >= 1.5 / server.POLL_INTERVAL_S - 2, polls
