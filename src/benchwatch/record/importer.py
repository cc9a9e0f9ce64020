"""``benchwatch import``: where a saved output comes from, when it started, and its run directory.

The samples themselves come from benchwatch.record.replay, as for a live run."""

from __future__ import annotations

import datetime as dt
import os
import re

from benchwatch.model.run import RunModel
from benchwatch.model.samples import Sample
from benchwatch.record import outcome, replay, rundir
from benchwatch.util import bounds


def parse_time(text: str) -> float:
    """RFC 3339 / ISO 8601 (a trailing Z is UTC; no zone means UTC) or Unix seconds."""
    text = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.timestamp()


def parse_start(text: str) -> float:
    """--start: a time (:func:`parse_time`) that can place a run, 1970 to 2286; ValueError for any other."""
    start = parse_time(text)
    problem = bounds.epoch_problem("the time", start)
    if problem is not None:
        raise ValueError(problem)
    return start


def read_source(path: str) -> tuple[bytes, float | None]:
    """A saved output file, or a run directory (its raw files, and the clock start it recorded)."""
    if not os.path.isdir(path):
        with open(path, "rb") as f:
            return f.read(), None
    data = replay.saved_output(path)
    if not data:
        raise FileNotFoundError(f"no pgbench or sysbench output in {path}")
    # A damaged meta.json's start (nan, 1e309, a string) places nothing: the file is placed as one without it.
    return data, bounds.epoch_or_none(rundir.RunDir(path).read_meta().get("clock_start_epoch"))


# A date (and time) in a file name: 2024-01-05, 20240105, 2024-01-05T02:00:00, 2024-01-05_0200, 20240105T020000.
_NAME_DATE = re.compile(r"(?<!\d)((?:19|20)\d\d)-?(0[1-9]|1[0-2])-?(0[1-9]|[12]\d|3[01])"
                        r"(?:[T_ -]?([01]\d|2[0-3])[:-]?([0-5]\d)(?:[:-]?([0-5]\d))?)?(?!\d)")

# How an imported run was placed in time (meta.json "placed_by", import's notes).
BY_START, BY_TIMESTAMPS, BY_NAME, BY_MTIME = "--start", "progress timestamps", "file name", "file mtime"


def name_date(path: str) -> float | None:
    """The start a file's name gives (UTC; the last date in the name, a directory's too), or None."""
    found = list(_NAME_DATE.finditer(path))
    if not found:
        return None
    y, mo, d, h, mi, sec = found[-1].groups()
    try:
        when = dt.datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(sec or 0), tzinfo=dt.UTC)
    except ValueError:  # 2023-02-30
        return None
    return when.timestamp()


def placement(path: str, data: bytes) -> tuple[float | None, str | None, str | None]:
    """Without --start: (start, how, note). Absolute progress timestamps (``--progress-timestamp``) place
    the runs themselves; else a date in the file name is the (first) run's start; else the file's mtime
    is taken for the end of its last run."""
    length = replay.saved_length(data)
    if length is None:
        runs, _ = replay.read_saved(data)
        if runs and any(replay.carries_epochs(r) for r in runs):
            return None, BY_TIMESTAMPS, "placed by its own progress timestamps (--progress-timestamp)"
        return None, None, None
    named = name_date(path)
    if named is not None:
        return named, BY_NAME, (f"no --start given: the date in the file name places its (first) run at "
                                f"{dt.datetime.fromtimestamp(named, dt.UTC).isoformat()}")
    start = os.path.getmtime(path) - length
    if bounds.epoch_problem("start", start) is not None:
        # Its runs' lengths add up to more than the file's age since 1970: figures no clock took.
        start = os.path.getmtime(path)
    return start, BY_MTIME, f"no --start given: assuming the (last) run ended when the file was last modified ({dt.datetime.fromtimestamp(start, dt.UTC).isoformat()} start)"


def default_start(path: str, data: bytes) -> tuple[float | None, str | None]:
    """Without --start: absolute progress timestamps need none; else a date in the file name, else the file's
    mtime minus the run length (:func:`placement`)."""
    start, _, note = placement(path, data)
    return start, note


# What a run recorded live keeps and a saved output cannot tell (meta.json's "lacks" of an imported run):
# history's "what changed" has nothing to compare for these.
IMPORT_LACKS = ("argv", "server_version", "server_settings", "data_filesystem", "host")


def save_import(runs_dir: str, run_id: str, source: str, data: bytes, start_epoch: float | None,
                model: RunModel, samples: list[Sample] | None = None, placed_by: str | None = None,
                stability: outcome.StabilityProfiler | None = None) -> rundir.RunDir:
    """The run directory of one imported run: its lines, meta.json and summary.json (``samples``: the run's
    progress samples, for a TPS when the output has no summary). ``placed_by`` says where its start came from."""
    run = rundir.create_run_dir(runs_dir, run_id)
    with open(run.file("output.log"), "wb") as f:
        f.write(data)
    meta = {
        "run_id": run_id, "mode": "import", "tool": model.tool, "state": rundir.FINISHED, "source_file": os.path.abspath(source),
        "clock_start_epoch": model.start_epoch, "started_at": model.start_epoch,
        "ended_at": (model.last_ts_ms or 0) / 1000.0, "progress_interval": model.interval_s,
        "summary": {k: v for k, v in model.summary.items()}, "output": "output.log",
        "info_labels": dict(model.info_labels), "lacks": list(IMPORT_LACKS),
    }
    if placed_by:
        meta["placed_by"] = placed_by
    run.write_meta(meta)
    outcome.keep(run, outcome.summarize(model, samples or [], stability=stability))  # history computes it again if it cannot be
    return run


# -- what an import read, for the terminal and --json -------------------------------------------

def when(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat().replace("+00:00", "Z")


def run_lines(data: bytes, run: replay.ReadRun) -> bytes:
    """The bytes of a run's own lines of a saved output (what its run directory keeps)."""
    lines = data.split(b"\n")
    chunk = b"\n".join(lines[run.first_line - 1:run.last_line])
    return chunk + b"\n" if chunk and not chunk.endswith(b"\n") else chunk


def run_report(run: replay.ReadRun, samples: int) -> dict[str, object]:
    """One run of an import as --json reports it."""
    summary = run.model.summary
    return {
        "run": run.index, "run_id": run.run_id, "tool": run.model.tool,
        "lines": [run.first_line, run.last_line],
        "start": when(run.start_epoch), "end": when(run.end_epoch),
        "placed_after_previous_run": run.placed_after_previous,
        "progress_lines": run.model.progress_lines, "samples": samples,
        "summary": {k: summary[k] for k in ("tps", "latency_avg_s", "transactions", "transactions_processed",
                                             "duration_s", "total_time_s") if k in summary},
        "labels": {k: v for k, v in run.model.info_labels.items() if k != "mode"},
        "read_nothing": run.read_nothing,
        "unread": [{"line": n, "reason": why, "text": text} for n, why, text in run.unread],
    }


def short_unread(run: replay.ReadRun, limit: int = 5) -> list[str]:
    """The lines of a run not read, in short for stderr: the first ``limit`` by number and reason."""
    notes = [f"line {number}: {reason}; not read (kept in the raw output)" for number, reason, _ in run.unread[:limit]]
    rest = len(run.unread) - len(notes)
    if rest > 0:
        notes.append(f"... and {rest} more line{'s' if rest > 1 else ''} not read (--verbose lists them)")
    return notes


EXPECTED = ("expected pgbench output (progress lines like 'progress: 5.0 s, 1185.2 tps, lat 13.498 ms stddev 2.124', "
            "or a summary with 'tps = …') or sysbench output ('[ 10s ] thds: …' / '[  10s] threads: …' lines, "
            "or a summary with 'transactions: N (X per sec.)')")
