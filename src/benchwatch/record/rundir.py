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

import json
import os
import secrets
import time
from dataclasses import dataclass
from typing import Any

META = "meta.json"
OUTPUT_FILES = ("stdout.log", "stderr.log", "output.log")

# A run's lifecycle as recorded in meta.json["state"].
RUNNING = "running"
FINISHED = "finished"


def new_run_id(now: float | None = None) -> str:
    """Sortable, unique, safe as a label value and a directory name."""
    now = time.time() if now is None else now
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    return f"{stamp}-{secrets.token_hex(2)}"


@dataclass
class RunDir:
    path: str

    @property
    def run_id(self) -> str:
        return os.path.basename(self.path.rstrip("/"))

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def read_meta(self) -> dict[str, Any]:
        try:
            with open(self.file(META), encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            return {}

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
    run_id = run_id or new_run_id()
    path = os.path.join(runs_dir, run_id)
    os.makedirs(path, exist_ok=False)
    return RunDir(path)


def list_runs(runs_dir: str) -> list[RunDir]:
    """Run directories, oldest first (run ids sort by start time)."""
    try:
        names = sorted(os.listdir(runs_dir))
    except FileNotFoundError:
        return []
    return [RunDir(os.path.join(runs_dir, n)) for n in names if os.path.isfile(os.path.join(runs_dir, n, META))]


def find_run(runs_dir: str, run_id: str | None) -> RunDir | None:
    """The named run, or the latest one when run_id is None."""
    runs = list_runs(runs_dir)
    if run_id is None:
        return runs[-1] if runs else None
    for run in runs:
        if run.run_id == run_id:
            return run
    return None
