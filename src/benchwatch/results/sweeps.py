"""A sweep in the results database (table ``sweeps``): its row as the sweep's host gives it, and the markers of
rows not written yet, ``<state dir>/sweeps/.results-pending/<name>.json``.

A marker holds the whole row to write (no secret: the sweep's publisher made it so), written before each
attempt and replaced as the sweep goes on, so that whoever writes it through (the sweep itself, or the
exporter's retry loop once the database is back) writes the sweep as it is now. Clearing one is compared
under a lock: a marker replaced while an older row was being written stays for the next attempt."""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from benchwatch.results.record import read_json
from benchwatch.util.private import write_private

DIRNAME = ".results-pending"
SWEEPS_DIR = "sweeps"

# The row's columns as the publisher gives them (docs/results.md, "sweeps"); created_at in epoch seconds.
COLUMNS = ("host", "sweep", "state", "tool", "engine", "baseline", "variants", "cells", "repeat", "runs_planned",
           "runs_done", "run_ids", "plan", "events", "created_at")
JSONB = ("variants", "cells", "run_ids", "plan", "events")
# What the row's state says: the sweep's last word as its host wrote it.
RUNNING, COMPLETED, FAILED, INTERRUPTED, STOPPED = "running", "completed", "failed", "interrupted", "stopped"
STATES = (RUNNING, COMPLETED, FAILED, INTERRUPTED, STOPPED)


def pending_dir(state_dir: str) -> str:
    return os.path.join(state_dir, SWEEPS_DIR, DIRNAME)


class PendingSweeps:
    """The sweeps of one state directory whose latest row is not in the database yet."""

    def __init__(self, state_dir: str):
        self.dir = pending_dir(state_dir)

    def _path(self, name: str) -> str:
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"{name!r} is no sweep name")
        return os.path.join(self.dir, name + ".json")

    @contextmanager
    def _locked(self) -> Iterator[None]:
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(self.dir, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def mark(self, row: Mapping[str, Any], error: str | None = None) -> None:
        """The row to write next (replacing an older one), with why the last attempt failed, if it did."""
        with self._locked():
            self._write(row, error)

    def failed(self, row: Mapping[str, Any], error: str) -> None:
        """An attempt to write ``row`` failed: the marker says why, and keeps a newer row if one replaced it."""
        with self._locked():
            marker = self._read(self._path(str(row["sweep"])))
            self._write(marker["row"] if marker is not None else row, error)

    def _write(self, row: Mapping[str, Any], error: str | None) -> None:
        """(under the lock) The marker of ``row``; a marker of the same sweep keeps its age."""
        path = self._path(str(row["sweep"]))
        old = self._read(path)
        since = old["since"] if old is not None and isinstance(old.get("since"), (int, float)) else time.time()
        write_private(path, json.dumps({"row": row, "since": since, "error": error}, sort_keys=True))

    @staticmethod
    def _read(path: str) -> dict[str, Any] | None:
        data = read_json(path)
        return data if data is not None and isinstance(data.get("row"), dict) else None

    def row(self, name: str) -> dict[str, Any] | None:
        marker = self._read(self._path(name))
        return marker["row"] if marker is not None else None

    def clear(self, row: Mapping[str, Any]) -> bool:
        """Removes the marker if it still holds ``row`` (written now); False when a newer one replaced it."""
        with self._locked():
            path = self._path(str(row["sweep"]))
            marker = self._read(path)
            if marker is not None and marker["row"] != json.loads(json.dumps(row)):
                return False
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            return True

    def names(self) -> list[str]:
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        return sorted(n[:-len(".json")] for n in names if n.endswith(".json") and not n.startswith("."))

    def summary(self) -> dict[str, Any]:
        """What ``status`` says of the sweeps waiting: how many, and the last error."""
        markers = [m for n in self.names() if (m := self._read(self._path(n))) is not None]
        failed = [m for m in markers if m.get("error")]
        return {"pending_sweeps": len(markers),
                "sweeps_last_error": max(failed, key=lambda m: m.get("since") or 0)["error"] if failed else None}


def split_name(text: str) -> tuple[str, str | None]:
    """``NAME@HOST`` -> (NAME, HOST); ``NAME`` -> (NAME, None). A sweep's name holds no "@"."""
    name, at, host = text.partition("@")
    return name, (host if at else None)
