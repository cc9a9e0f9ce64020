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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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


def state(hdir: str) -> list[tuple[str, Any]]:
    """(kind, content) of each state file that has something: what a results database keeps of a host's history
    (its ``history_state`` rows), written by the exporter with every run and by the commands that change it."""
    found = (("accepted", accepted(hdir)), ("names", names(hdir)), ("annotations", read_annotations(hdir)))
    return [(kind, content) for kind, content in found if content]


@dataclass(frozen=True)
class Shared:
    """What people told history on every host, pooled (``history --all-hosts``): names and accepted changes
    under pooled workload ids, every annotation once, oldest first."""

    names: dict[str, str]
    accepted: dict[str, list[str]]
    annotations: list[dict[str, Any]]


def pool(states: Iterable[tuple[str, str, Any]], own: str, pooled_of: Mapping[str, str]) -> Shared:
    """Every host's state (``(host, kind, content)``: the results database's ``history_state`` rows) and this
    host's own files in ``own`` (read first: they are newer than its rows when its writes wait), each host's
    workload ids mapped to pooled ones by ``pooled_of`` (an id it lacks is kept: one already pooled, a name
    given under --all-hosts). A name given to two workloads: this host's wins, else the first host's by name."""
    rows: dict[str, list[Any]] = {"names": [names(own)], "accepted": [accepted(own)], "annotations": [read_annotations(own)]}
    for _host, kind, content in states:
        if kind in rows:
            rows[kind].append(content)
    pooled_names: dict[str, str] = {}
    for content in rows["names"]:
        for name, wid in (content.items() if isinstance(content, dict) else ()):
            pooled_names.setdefault(str(name), pooled_of.get(str(wid), str(wid)))
    pooled_accepted: dict[str, list[str]] = {}
    for content in rows["accepted"]:
        for wid, run_ids in (content.items() if isinstance(content, dict) else ()):
            if isinstance(run_ids, list):
                runs = pooled_accepted.setdefault(pooled_of.get(str(wid), str(wid)), [])
                runs.extend(str(r) for r in run_ids if str(r) not in runs)
    seen: set[str] = set()
    notes = []
    for content in rows["annotations"]:
        for event in content if isinstance(content, list) else ():
            if isinstance(event, dict) and isinstance(event.get("at"), (int, float)) and "text" in event:
                key = json.dumps(event, sort_keys=True)
                if key not in seen:
                    seen.add(key)
                    notes.append(event)
    return Shared(pooled_names, pooled_accepted, sorted(notes, key=lambda e: e["at"]))
