"""``benchwatch import``: where a saved output comes from, when it started, and its run directory.

The samples themselves come from benchwatch.model.replay, as for a live run."""

from __future__ import annotations

import datetime as dt
import os
import re

from benchwatch.model import replay
from benchwatch.model.run import RunModel
from benchwatch.record import rundir


def parse_time(text: str) -> float:
    """RFC 3339 / ISO 8601 (a trailing Z is UTC; no zone means UTC) or Unix seconds."""
    text = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.timestamp()


def read_source(path: str) -> tuple[bytes, float | None]:
    """A saved output file, or a run directory (its raw files, and the clock start it recorded)."""
    if not os.path.isdir(path):
        with open(path, "rb") as f:
            return f.read(), None
    data = replay.saved_output(path)
    if not data:
        raise FileNotFoundError(f"no pgbench or sysbench output in {path}")
    return data, rundir.RunDir(path).read_meta().get("clock_start_epoch")


def default_start(path: str, data: bytes) -> tuple[float | None, str | None]:
    """Without --start: absolute progress timestamps need none; else the file's mtime minus the run length."""
    length = replay.saved_length(data)
    if length is None:
        return None, None
    start = os.path.getmtime(path) - length
    return start, f"no --start given: assuming the run ended when the file was last modified ({dt.datetime.fromtimestamp(start, dt.UTC).isoformat()} start)"


def save_import(runs_dir: str, run_id: str, source: str, data: bytes, start_epoch: float | None,
                model: RunModel) -> rundir.RunDir:
    run = rundir.create_run_dir(runs_dir, run_id)
    with open(run.file("output.log"), "wb") as f:
        f.write(data)
    run.write_meta({
        "run_id": run_id, "mode": "import", "tool": model.tool, "state": rundir.FINISHED, "source_file": os.path.abspath(source),
        "clock_start_epoch": model.start_epoch, "started_at": model.start_epoch,
        "ended_at": (model.last_ts_ms or 0) / 1000.0, "progress_interval": model.interval_s,
        "summary": {k: v for k, v in model.summary.items()}, "output": "output.log",
    })
    return run
