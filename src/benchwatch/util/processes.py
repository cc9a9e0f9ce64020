"""Processes by PID (read, check, stop) and polling with a deadline."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from benchwatch.util import bounds


def wait_until(check: Callable[[], bool], timeout: float, interval: float = 0.05,
               abort: Callable[[], bool] | None = None) -> bool:
    """Poll ``check`` until it is true or the deadline passes; ``abort`` stops early (e.g. process died)."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        if abort is not None and abort():
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def read_pid(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None


def process_alive(pid: int | None) -> bool:
    if bounds.pid_or_none(pid) is None:  # none, or a damaged meta.json's ("self", 1e30, -1, true)
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def process_cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [p.decode(errors="replace") for p in f.read().split(b"\0") if p]
    except FileNotFoundError:
        return []


def stop_pid(pid: int | None, sig: int = signal.SIGTERM, timeout: float = 20.0) -> bool:
    """Signal a process, wait for it to exit, escalate to SIGKILL after the deadline."""
    if pid is None or not process_alive(pid):
        return True
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return True
    _reap(pid)

    def gone() -> bool:
        _reap(pid)  # our own child stays a zombie (alive to /proc) until reaped
        return not process_alive(pid)

    if wait_until(gone, timeout):
        return True
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    return wait_until(gone, 5.0)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
