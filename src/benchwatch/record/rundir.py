"""The run directory: the durable record of one pgbench run.

Layout of ``<runs_dir>/<run_id>/``:
  meta.json     what the run was (argv, versions, times, state); rewritten atomically
  stdout.log    pgbench's raw stdout, byte for byte   (run)
  stderr.log    pgbench's raw stderr, byte for byte   (run)
  output.log    the raw stream read from stdin         (attach, import)

The exporter follows live runs by reading these files, so raw output is the
source of truth: it is written before anything else sees it and survives a
Prometheus or exporter outage.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from benchwatch.util import bounds

META = "meta.json"
# Arrival time of each progress line of a tool whose lines carry no time (benchwatch.record.stream.ClockStamper).
ARRIVALS = "arrivals.log"
OUTPUT_FILES = ("stdout.log", "stderr.log", "output.log")

# A run's lifecycle as recorded in meta.json["state"].
RUNNING = "running"
FINISHED = "finished"


# Run ids: "20240101T120000.123Z-ab12", the start time to the millisecond (UTC) and a random
# suffix that keeps ids from different machines apart. Ids before milliseconds were added,
# "20240101T120000Z-ab12", are still read; they sort as if started at .000 of their second.
_RUN_ID = re.compile(r"(\d{8}T\d{6})(?:\.(\d{3}))?Z-")
_last_ms = 0  # the newest stamp given out by this process
_last_ms_lock = threading.Lock()
# A newer id further ahead than this means a clock stepped back or an import from a clock
# ahead: ids then keep the true start time rather than drift after it.
_MAX_AHEAD_MS = 1000


def _stamp_ms(run_id: str) -> int | None:
    """Start time in ms that a benchwatch run id records; None for any other name."""
    m = _RUN_ID.match(run_id)
    if not m:
        return None
    try:
        second = calendar.timegm(time.strptime(m.group(1), "%Y%m%dT%H%M%S"))
    except ValueError:  # digits that are no date
        return None
    return second * 1000 + int(m.group(2) or 0)


def _stamp(ms: int) -> str:
    """The start-time part of a run id: "20240101T120000.123Z"."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def sort_key(name: str) -> str:
    """Key under which run ids sort by start time, old and new formats alike.

    Other names (``import --run-id NAME``) keep their plain string order against ids."""
    m = _RUN_ID.match(name)
    if m is None or _stamp_ms(name) is None:
        return name
    return f"{m.group(1)}.{m.group(2) or '000'}{name[m.end() - 2:]}"  # from the "Z-" on


def new_run_id(now: float | None = None, after: str | None = None) -> str:
    """Sortable, unique, safe as a label value and a directory name.

    Without ``now``, the stamp is made 1 ms later than ``after`` and than this process's
    previous id when the clock has not passed them: runs started in the same ms still sort
    in creation order. An id never runs more than a second ahead of the clock for that; an
    explicit ``now`` (an imported run's recorded start) is kept as it is."""
    global _last_ms
    if now is not None and bounds.epoch_problem("a run's start", now) is not None:
        # A start read from input is checked where it is read (benchwatch.util.bounds): this is a caller's bug.
        raise ValueError(f"no run id for {bounds.epoch_problem('a start', now)}")
    ms = int((time.time() if now is None else now) * 1000)
    if now is None:
        with _last_ms_lock:
            floor = max(_last_ms, _stamp_ms(after or "") or 0)
            if ms <= floor < ms + _MAX_AHEAD_MS:
                ms = floor + 1
            _last_ms = max(_last_ms, ms)
    return f"{_stamp(ms)}-{secrets.token_hex(2)}"


class CorruptMeta(ValueError):
    """meta.json exists but holds no JSON object (written atomically, so this is damage, not a race)."""


@dataclass
class RunDir:
    path: str

    @property
    def run_id(self) -> str:
        return os.path.basename(self.path.rstrip("/"))

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def read_meta(self) -> dict[str, Any]:
        """meta.json's object; {} when there is none yet. Raises :class:`CorruptMeta` when it is no JSON object."""
        try:
            with open(self.file(META), "rb") as f:
                meta = json.loads(f.read())
        except FileNotFoundError:
            return {}
        except ValueError as e:  # not JSON, not UTF-8
            raise CorruptMeta(f"{self.file(META)}: {e}") from None
        if not isinstance(meta, dict):
            raise CorruptMeta(f"{self.file(META)}: a JSON {type(meta).__name__}, not an object")
        return meta

    def write_meta(self, meta: dict[str, Any]) -> None:
        # Atomic replace: the exporter may read meta.json at any moment.
        tmp = self.file(META + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, self.file(META))

    def update_meta(self, **changes: Any) -> dict[str, Any]:
        meta = self.read_meta()
        meta.update(changes)
        self.write_meta(meta)
        return meta

    def output_files(self) -> list[str]:
        return [self.file(n) for n in OUTPUT_FILES if os.path.exists(self.file(n))]


def create_run_dir(runs_dir: str, run_id: str | None = None) -> RunDir:
    os.makedirs(runs_dir, exist_ok=True)
    if run_id is None:
        # Another process may have made a run a moment ago (pgbench -i, then the measured run):
        # start after the newest id present, directories without meta.json yet included.
        ids = [n for n in os.listdir(runs_dir) if _stamp_ms(n) is not None]
        run_id = new_run_id(after=max(ids, key=sort_key) if ids else None)
    path = os.path.join(runs_dir, run_id)
    os.makedirs(path, exist_ok=False)
    return RunDir(path)


class NewRuns:
    """When a follower of runs_dir should list it again, without listing it to find out.

    Due when the directory's mtime moved (a run directory was made or removed), while the
    caller still waits for a run's meta.json (``waiting``), and every ``every_s`` anyway: two
    changes within one mtime tick leave the mtime as it was."""

    def __init__(self, runs_dir: str, every_s: float):
        self.runs_dir, self.every_s = runs_dir, every_s
        self._mtime: int | None = None
        self._listed: float | None = None

    def due(self, now: float, waiting: bool = False) -> bool:
        try:
            mtime = os.stat(self.runs_dir).st_mtime_ns
        except FileNotFoundError:
            return False
        if mtime == self._mtime and not waiting and self._listed is not None and now - self._listed < self.every_s:
            return False
        self._mtime, self._listed = mtime, now
        return True


def _start_key(run: RunDir) -> str:
    """sort_key of a run; a run named otherwise (``import --run-id NAME``) is placed by the start
    its meta.json records, so that it is "the latest run" only if it started last."""
    name = run.run_id
    if _stamp_ms(name) is not None:
        return sort_key(name)
    try:
        started = run.read_meta().get("started_at")
    except CorruptMeta:
        return name
    if not isinstance(started, (int, float)):
        return name
    return f"{_stamp(int(round(started * 1000)))}-{name}"


def list_runs(runs_dir: str) -> list[RunDir]:
    """Run directories, oldest first (run ids sort by start time)."""
    try:
        names = os.listdir(runs_dir)
    except FileNotFoundError:
        return []
    runs = [RunDir(os.path.join(runs_dir, n)) for n in names if os.path.isfile(os.path.join(runs_dir, n, META))]
    return sorted(runs, key=_start_key)


def find_run(runs_dir: str, run_id: str | None) -> RunDir | None:
    """The named run, or the latest one when run_id is None."""
    runs = list_runs(runs_dir)
    if run_id is None:
        return runs[-1] if runs else None
    for run in runs:
        if run.run_id == run_id:
            return run
    return None
