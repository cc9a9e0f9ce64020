"""A run directory as the results database's rows, and those rows back as a run directory: pure logic, no
connection (benchwatch.results.store writes and reads them).

The run directory stays the truth: the database holds a copy of every file a reader needs (meta.json,
summary.json, the raw output, the archived series, the CPU profile), each compressed, so that a run
written on one host is, materialized on another, the same directory to report, compare, snapshot and
explain. The columns beside (host, times, workload, figures, settings, stability, profile) are what people
query and what ``history --all-hosts`` lists without opening a file."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from benchwatch.record import outcome, rundir

# gzip level 1: a run's archived series are about 1.5 MB of CSV; level 1 compresses them about as well
# for these repetitive texts in a fifth of level 6's time (bench/bench_results.py).
GZIP_LEVEL = 1
# A file above this size (a per-transaction latency log of a long run) is listed, not copied: its row says
# its size with encoding "omitted" and no data.
MAX_FILE_BYTES = 64 * 1024 * 1024
GZIP, OMITTED = "gzip", "omitted"

OUTPUT_NAMES = frozenset(rundir.OUTPUT_FILES) | {rundir.ARRIVALS}


def kind_of(name: str) -> str:
    """What a file of a run directory is, by its path inside it: meta, summary, output, series, profile or other."""
    if name == rundir.META:
        return "meta"
    if name == outcome.SUMMARY:
        return "summary"
    if name in OUTPUT_NAMES:
        return "output"
    top = name.split("/", 1)[0]
    if top in ("series", "profile") and "/" in name:
        return top
    return "other"


def files_of(path: str) -> Iterator[str]:
    """The files of a run directory worth keeping, as paths inside it: not the exporter's bookkeeping (dot
    files: what it delivered, the results database's own marker) nor a half-written ``*.tmp``."""
    for top, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if name.startswith(".") or name.endswith(".tmp"):
                continue
            full = os.path.join(top, name)
            if os.path.isfile(full) and not os.path.islink(full):
                yield os.path.relpath(full, path)


@dataclass
class RunFile:
    name: str
    kind: str
    encoding: str
    size: int
    data: bytes

    def content(self) -> bytes | None:
        """The file's bytes; None for one too large to have been copied."""
        return gzip.decompress(self.data) if self.encoding == GZIP else None


@dataclass
class RunRecord:
    """One run as its ``runs`` row and its ``run_files`` rows."""

    run_id: str
    host: str
    meta: dict[str, Any]
    summary: dict[str, Any] | None
    files: list[RunFile] = field(default_factory=list)
    workload: str | None = None
    pooled_workload: str | None = None
    workload_key: dict[str, str] | None = None
    figures: dict[str, Any] | None = None

    def row(self) -> dict[str, Any]:
        """The ``runs`` row (jsonb columns as JSON text)."""
        meta, summary, key = self.meta, self.summary or {}, self.workload_key or {}
        stability = summary.get("stability") if isinstance(summary.get("stability"), dict) else None
        return {
            "run_id": self.run_id, "host": self.host,
            "started_at": _epoch(meta.get("started_at")), "ended_at": _epoch(meta.get("ended_at")),
            # A run stored before meta.json named its tool or engine: as its workload key reads it.
            "state": _text(meta.get("state")), "tool": _text(meta.get("tool")) or key.get("tool"),
            "engine": _text(meta.get("engine")) or key.get("engine"),
            "exit_code": meta.get("exit_code") if _is_int32(meta.get("exit_code")) else None,
            "workload": self.workload, "pooled_workload": self.pooled_workload,
            "workload_key": jsonb_text(self.workload_key), "figures": jsonb_text(self.figures),
            "meta": jsonb_text(meta), "summary": jsonb_text(self.summary),
            "settings": jsonb_text(meta.get("settings") if isinstance(meta.get("settings"), dict) else None),
            "stability": jsonb_text(stability),
            "profile": jsonb_text(meta.get("profile") if isinstance(meta.get("profile"), dict) else None),
        }


def jsonb_text(value: Any) -> str | None:
    """JSON text PostgreSQL's jsonb takes: NaN and infinities as null (allow_nan=False would refuse a run
    whose summary says NaN; jsonb refuses NaN too)."""
    return None if value is None else json.dumps(_finite(value), separators=(",", ":"), sort_keys=True)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _epoch(value: Any) -> float | None:
    from benchwatch.util import bounds

    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    return float(value) if bounds.epoch_problem("a time", float(value)) is None else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _is_int32(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -2**31 <= value < 2**31


def read_json(path: str) -> dict[str, Any] | None:
    """A JSON object from a file; None when it is missing, unreadable or not an object."""
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_run(path: str, host: str, index_entry: Mapping[str, Any] | None = None,
             pooled_workload: str | None = None) -> RunRecord:
    """The record of the run directory at ``path``, written from ``host``. ``index_entry``: what history's
    index keeps of the run (benchwatch.history.index.read_entry: workload, key, figures), computed by the
    caller above history. Raises :class:`rundir.CorruptMeta` for a damaged meta.json and FileNotFoundError
    when there is none."""
    run = rundir.RunDir(path)
    if not os.path.isfile(run.file(rundir.META)):
        raise FileNotFoundError(f"{path}: no {rundir.META}: not a run directory")
    meta = run.read_meta()
    files = []
    for name in files_of(path):
        full = os.path.join(path, name)
        size = os.path.getsize(full)
        if size > MAX_FILE_BYTES:
            files.append(RunFile(name, kind_of(name), OMITTED, size, b""))
            continue
        with open(full, "rb") as f:
            data = f.read()
        files.append(RunFile(name, kind_of(name), GZIP, len(data), gzip.compress(data, GZIP_LEVEL, mtime=0)))
    entry = index_entry or {}
    return RunRecord(run_id=run.run_id, host=host, meta=meta, summary=read_json(run.file(outcome.SUMMARY)),
                     files=files, workload=entry.get("workload"), pooled_workload=pooled_workload,
                     workload_key=entry.get("key"), figures=entry.get("figures"))


def materialize(files: list[RunFile], runs_dir: str, run_id: str) -> rundir.RunDir:
    """A run's files written back as ``<runs_dir>/<run_id>/``, meta.json last (a run directory is one once
    meta.json is there: a reader never sees half of it). A run already there is left as it is: the local
    directory is the truth."""
    if not run_id or "/" in run_id or run_id in (".", ".."):
        raise ValueError(f"{run_id!r} is no run id")
    target = os.path.join(runs_dir, run_id)
    if os.path.isfile(os.path.join(target, rundir.META)):
        return rundir.RunDir(target)
    meta_file = None
    for f in files:
        content = f.content()
        if content is None:
            continue
        parts = f.name.split("/")
        if f.name.startswith("/") or ".." in parts:
            raise ValueError(f"run {run_id}: a file named {f.name!r} would be written outside its directory")
        if f.name == rundir.META:
            meta_file = content
            continue
        full = os.path.join(target, *parts)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as out:
            out.write(content)
    if meta_file is None:
        raise ValueError(f"run {run_id}: the results database holds no {rundir.META} of it")
    os.makedirs(target, exist_ok=True)
    tmp = os.path.join(target, rundir.META + ".tmp")
    with open(tmp, "wb") as out:
        out.write(meta_file)
    os.replace(tmp, os.path.join(target, rundir.META))
    return rundir.RunDir(target)
