"""Every run's workload, start and figures, read once: ``<state>/history/index.json``.

Listing workloads reads every run directory; reading 10,000 meta.json and summary.json files each time
would cost seconds. The index keeps what history needs of each run, keyed by run id and checked against
the mtimes of the run's meta.json and summary.json (two stats per run): a run that changed, or that the
index has not seen, is read again; a run directory removed leaves the index. The index is a cache:
deleting it loses nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from benchwatch.history import workload
from benchwatch.record import outcome, rundir
from benchwatch.results.store import StoredRun
from benchwatch.stability import runs as stability_runs

INDEX = "index.json"
VERSION = 2  # 2: the stability measures among the figures (an index of version 1 is read again)


@dataclass(frozen=True)
class Entry:
    run_id: str
    started_at: float | None
    state: str | None
    workload: str
    key: dict[str, str]
    figures: dict[str, float | None]   # outcome.METRICS name -> value
    host: str | None = None            # where the run was made, for runs pooled over hosts (history --all-hosts)

    def value(self, metric: str) -> float | None:
        return self.figures.get(metric)


def _stamps(path: str) -> list[int | None]:
    out: list[int | None] = []
    for name in (rundir.META, outcome.SUMMARY):
        try:
            out.append(os.stat(os.path.join(path, name)).st_mtime_ns)
        except OSError:
            out.append(None)
    return out


def _started(run_id: str, meta: dict[str, Any]) -> float | None:
    started = meta.get("started_at")
    if isinstance(started, (int, float)) and not isinstance(started, bool):
        return float(started)
    ms = rundir._stamp_ms(run_id)
    return ms / 1000.0 if ms is not None else None


def read_entry(run: rundir.RunDir) -> dict[str, Any] | None:
    """What the index keeps of one run; None for a directory whose meta.json is damaged."""
    try:
        meta = run.read_meta()
    except rundir.CorruptMeta:
        return None
    state = meta.get("state")
    # A run still going has no result yet (its summary is read once it finished and meta.json changed).
    # A run stored before summary.json version 2 gets its stability profile from its raw output.
    figures = stability_runs.outcome(run) if state != rundir.RUNNING else {}
    k = workload.key(meta)
    return {"started_at": _started(run.run_id, meta), "state": state, "key": k, "workload": workload.workload_id(k),
            "figures": {m: outcome.value(figures, m) for m in outcome.METRICS}}


class Index:
    """The index of one runs directory, kept in ``history_dir``."""

    def __init__(self, runs_dir: str, history_dir: str):
        self.runs_dir, self.history_dir = runs_dir, history_dir
        self.path = os.path.join(history_dir, INDEX)

    def _load(self) -> dict[str, Any]:
        try:
            with open(self.path, "rb") as f:
                data = json.loads(f.read())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != VERSION or data.get("runs_dir") != self.runs_dir:
            return {}
        runs = data.get("runs")
        return runs if isinstance(runs, dict) else {}

    def _save(self, runs: dict[str, Any]) -> None:
        try:
            os.makedirs(self.history_dir, exist_ok=True)
            tmp = f"{self.path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                # dumps, not dump: dump streams through the pure-Python encoder, 5x slower at 10,000 runs
                f.write(json.dumps({"version": VERSION, "runs_dir": self.runs_dir, "runs": runs}, separators=(",", ":")))
            os.replace(tmp, self.path)
        except OSError:
            pass  # a cache that cannot be written is read again next time, nothing is lost

    def entries(self) -> list[Entry]:
        """Every run of the runs directory, oldest first."""
        cached = self._load()
        fresh: dict[str, Any] = {}
        changed = False
        try:
            names = os.listdir(self.runs_dir)
        except FileNotFoundError:
            names = []
        for name in names:
            path = os.path.join(self.runs_dir, name)
            stamps = _stamps(path)
            if stamps[0] is None:
                continue  # not a run directory (yet)
            old = cached.get(name)
            if isinstance(old, dict) and old.get("stamps") == stamps:
                fresh[name] = old
                continue
            entry = read_entry(rundir.RunDir(path))
            changed = True
            if entry is None:
                continue
            fresh[name] = {**entry, "stamps": stamps}
        if changed or len(fresh) != len(cached):
            self._save(fresh)
        out = [Entry(n, e.get("started_at"), e.get("state"), e["workload"], e["key"], e["figures"])
               for n, e in fresh.items()]
        out.sort(key=lambda e: (e.started_at if e.started_at is not None else float("inf"), rundir.sort_key(e.run_id)))
        return out


def pooled(stored: Iterable[StoredRun], local: Iterable[Entry], host: str) -> list[Entry]:
    """Every host's runs of the results database and this host's own that it lacks yet (a run whose record is
    pending while the database is down), each under its pooled workload (the key without its host,
    workload.pooled_id), oldest first."""
    out: dict[str, Entry] = {}
    pooled_keys: dict[str, tuple[str, dict[str, str]]] = {}  # by the host's workload id: one digest per workload
    for r in stored:
        if not r.key:
            continue  # a record written without history's entry (no workload): nothing to place it in
        known = pooled_keys.get(r.workload or "")
        if known is None:
            key = workload.pooled_key(r.key)
            known = (workload.workload_id(key), key)
            if r.workload:
                pooled_keys[r.workload] = known
        out[r.run_id] = Entry(r.run_id, r.started_at, r.state, known[0], known[1],
                              {m: v for m, v in r.figures.items() if isinstance(v, (int, float))}, r.host)
    for e in local:
        if e.run_id not in out:
            key = workload.pooled_key(e.key)
            out[e.run_id] = Entry(e.run_id, e.started_at, e.state, workload.workload_id(key), key, e.figures, host)
    return sorted(out.values(), key=lambda e: (e.started_at if e.started_at is not None else float("inf"),
                                               rundir.sort_key(e.run_id)))


def pooled_ids(stored: Iterable[StoredRun], local: Iterable[Entry]) -> dict[str, str]:
    """Each host's workload id (the database's runs' and this host's own) -> its pooled workload id."""
    out: dict[str, str] = {}
    for r in stored:
        if r.workload and r.key and r.workload not in out:
            out[r.workload] = workload.workload_id(workload.pooled_key(r.key))
    for e in local:
        if e.workload not in out:
            out[e.workload] = workload.workload_id(workload.pooled_key(e.key))
    return out


def by_workload(entries: Iterable[Entry]) -> dict[str, list[Entry]]:
    out: dict[str, list[Entry]] = {}
    for e in entries:
        out.setdefault(e.workload, []).append(e)
    return out
