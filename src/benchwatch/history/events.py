"""What people tell history, kept in ``<state>/history/``: annotations, accepted changes, workload names.

- ``annotations.jsonl``: one JSON object a line, ``{"at": epoch, "text": ..., "run_id": ...}``, appended and
  synced (``benchwatch annotate``): a deploy, a remount, a firmware update. "What changed" lists those
  between the runs around a change point; the History dashboard shows them.
- ``accepted.json``: ``{workload: [run_id, ...]}`` (``history accept RUN_ID``): a change accepted as the new
  baseline; ``--fail-on-regression`` no longer fails on it nor on what came before it.
- ``names.json``: ``{name: workload}`` (``history WORKLOAD --name NAME``).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

ANNOTATIONS = "annotations.jsonl"
ACCEPTED = "accepted.json"
NAMES = "names.json"


def history_dir(state_dir: str) -> str:
    return os.path.join(state_dir, "history")


def _read_json(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except FileNotFoundError:
        return {}
    except ValueError as e:
        raise ValueError(f"{path} is damaged ({e}): fix or remove it") from None
    return data if isinstance(data, dict) else {}


def _write_json(path: str, data: dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def annotate(hdir: str, text: str, run_id: str | None = None, now: float | None = None) -> dict[str, Any]:
    """Record an event at ``now``; returns it. Synced before returning: a note said is a note kept."""
    event: dict[str, Any] = {"at": time.time() if now is None else now, "text": text}
    if run_id:
        event["run_id"] = run_id
    os.makedirs(hdir, exist_ok=True)
    fd = os.open(os.path.join(hdir, ANNOTATIONS), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(event, sort_keys=True) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return event


def read_annotations(hdir: str) -> list[dict[str, Any]]:
    """Every annotation, oldest first; a line cut short by a crash is skipped."""
    out = []
    try:
        with open(os.path.join(hdir, ANNOTATIONS), "rb") as f:
            for line in f:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and isinstance(event.get("at"), (int, float)) and "text" in event:
                    out.append(event)
    except FileNotFoundError:
        pass
    return sorted(out, key=lambda e: e["at"])


def accepted(hdir: str) -> dict[str, list[str]]:
    return {k: [str(r) for r in v] for k, v in _read_json(os.path.join(hdir, ACCEPTED)).items() if isinstance(v, list)}


def accept(hdir: str, workload: str, run_id: str) -> None:
    data = accepted(hdir)
    if run_id not in data.setdefault(workload, []):
        data[workload].append(run_id)
    _write_json(os.path.join(hdir, ACCEPTED), data)


def names(hdir: str) -> dict[str, str]:
    return {str(k): str(v) for k, v in _read_json(os.path.join(hdir, NAMES)).items()}


def name(hdir: str, workload: str, given: str) -> None:
    data = {k: v for k, v in names(hdir).items() if v != workload}  # one name per workload: the newest
    data[given] = workload
    _write_json(os.path.join(hdir, NAMES), data)
