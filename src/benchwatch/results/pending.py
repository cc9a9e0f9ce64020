"""What is not yet in the results database: one marker per run, ``<runs_dir>/.results-pending/<run_id>.json``.

A marker is written before a run's record is sent and removed once the database has it, so a database
that is down, a daemon killed mid-write or a host rebooted leaves the marker, and the next attempt
(the exporter's retry loop, the next run's end) writes the run through. The run directory itself is
never touched: it stays the truth. Markers sit in a dot directory of the runs directory, which no
reader of runs lists (a run directory is one with a meta.json)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

DIRNAME = ".results-pending"


@dataclass(frozen=True)
class Marker:
    run_id: str
    since: float
    attempts: int
    error: str | None


class Pending:
    def __init__(self, runs_dir: str):
        self.runs_dir = runs_dir
        self.dir = os.path.join(runs_dir, DIRNAME)

    def _path(self, run_id: str) -> str:
        if not run_id or "/" in run_id or run_id.startswith("."):
            raise ValueError(f"{run_id!r} is no run id")
        return os.path.join(self.dir, run_id + ".json")

    def get(self, run_id: str) -> Marker | None:
        try:
            with open(self._path(run_id), "rb") as f:
                data = json.loads(f.read())
        except FileNotFoundError:
            return None
        except ValueError:  # a marker cut short by a crash still says the run is pending
            data = {}
        if not isinstance(data, dict):
            data = {}
        since = data.get("since")
        attempts = data.get("attempts")
        error = data.get("error")
        return Marker(run_id, float(since) if isinstance(since, (int, float)) else 0.0,
                      attempts if isinstance(attempts, int) else 0, error if isinstance(error, str) else None)

    def mark(self, run_id: str, error: str | None = None, now: float | None = None) -> Marker:
        """The run is not (yet) in the database; ``error``: why the last attempt failed."""
        old = self.get(run_id)
        marker = Marker(run_id, old.since if old else (time.time() if now is None else now),
                        (old.attempts + 1) if old and error else (old.attempts if old else 0), error)
        os.makedirs(self.dir, exist_ok=True)
        path = self._path(run_id)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"run_id": run_id, "since": marker.since, "attempts": marker.attempts, "error": error}, f)
        os.replace(tmp, path)
        return marker

    def clear(self, run_id: str) -> None:
        try:
            os.unlink(self._path(run_id))
        except FileNotFoundError:
            pass

    def run_ids(self) -> list[str]:
        """Runs waiting, oldest marker first; a marker whose run directory is gone is dropped (nothing to write)."""
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            if not name.endswith(".json"):
                continue
            run_id = name[:-len(".json")]
            if not os.path.isdir(os.path.join(self.runs_dir, run_id)):
                self.clear(run_id)
                continue
            out.append(run_id)
        return sorted(out)

    def summary(self) -> dict:
        """What ``status`` says of the runs waiting, read only (nothing dropped): how many, since when (epoch
        seconds of the oldest marker), and the error of the most recent failed attempt."""
        try:
            names = sorted(n for n in os.listdir(self.dir) if n.endswith(".json"))
        except FileNotFoundError:
            names = []
        markers = [m for n in names if (m := self.get(n[:-len(".json")])) is not None]
        failed = [m for m in markers if m.error]
        return {"pending_runs": len(markers),
                "pending_since": min((m.since for m in markers), default=None),
                "last_error": max(failed, key=lambda m: (m.attempts, m.since)).error if failed else None}
