"""What differs between two runs' metadata: the one place "what changed" is worked out.

Compared: the server's version and every setting someone chose (``server_settings``; runs recorded before
it existed have the fixed list ``settings``) but those that say where the server listens (its engine's
``address_settings``: the runs of a workload pooled over hosts come from servers on other ports and sockets,
which is no change in how they run), the tool's version, the argv, the host's facts (CPU model,
cores, memory, kernel, disks) and the data directory's filesystem and mount options. A fact one run does
not have (an imported run has no argv, no server facts: its meta.json "lacks" them) is not a change: it is
unknown. A setting set in one run and at its default in the other is a change, to or from ``(default)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchwatch import engines, loadgens
from benchwatch.record import replay

DEFAULT = "(default)"  # a setting at its default: pg_settings' source 'default', absent from server_settings


def _disks(host: Mapping[str, Any]) -> str | None:
    disks = host.get("disks")
    if not isinstance(disks, list):
        return None
    return ", ".join(f"{d.get('name')} {d.get('model') or ''} {'rotational' if d.get('rotational') else 'ssd'} "
                     f"{d.get('scheduler') or ''}".replace("  ", " ").strip() for d in disks if isinstance(d, dict))


def facts(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The comparable facts of one run, flat: name -> value (absent when the run does not know it)."""
    out: dict[str, Any] = {}
    generator = loadgens.by_name(meta.get("tool"))
    for key in ("server_version", generator.version_key):
        if meta.get(key) is not None:
            out[key] = str(meta[key])
    if meta.get("argv"):
        out["argv"] = " ".join(str(a) for a in meta["argv"])
    host = meta.get("host") or {}
    if isinstance(host, Mapping):
        for key in ("cpu_model", "cpus", "memory_bytes", "kernel"):
            if host.get(key) is not None:
                out[key] = host[key]
        disks = _disks(host)
        if disks is not None:
            out["disks"] = disks
    fs = meta.get("data_filesystem")
    if isinstance(fs, Mapping):
        out["filesystem"] = f"{fs.get('type')} on {fs.get('device')} at {fs.get('mount_point')}"
        out["mount_options"] = fs.get("mount_options")
        out["super_options"] = fs.get("super_options")
    return out


def _settings(meta: Mapping[str, Any]) -> tuple[dict[str, str], bool] | None:
    """(settings, complete): every chosen setting when recorded, else the fixed list of older runs."""
    chosen = meta.get("server_settings")
    if isinstance(chosen, Mapping):
        return {str(k): str(v) for k, v in chosen.items()}, True
    fixed = meta.get("settings")
    if isinstance(fixed, Mapping):
        return {str(k): str(v) for k, v in fixed.items()}, False
    return None


def _address_settings(meta: Mapping[str, Any]) -> frozenset[str]:
    """The settings of the run's engine that say where its server listens (none for an engine not known here)."""
    try:
        return frozenset(engines.get(replay.run_engine(meta)).address_settings)
    except engines.UnknownEngine:
        return frozenset()


def diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, list[Any]]:
    """name -> [before, after] for everything that differs between two runs' meta.json."""
    out: dict[str, list[Any]] = {}
    a, b = facts(before), facts(after)
    for key in sorted(a.keys() & b.keys()):
        if a[key] != b[key]:
            out[key] = [a[key], b[key]]
    sa, sb = _settings(before), _settings(after)
    if sa is not None and sb is not None:
        (x, x_all), (y, y_all) = sa, sb
        # A setting missing from a complete list is at its default; from the fixed list, unknown.
        names = (x.keys() | y.keys()) if x_all and y_all else (x.keys() & y.keys())
        for key in sorted(names - _address_settings(after)):
            if x.get(key) != y.get(key):
                out[key] = [x.get(key, DEFAULT), y.get(key, DEFAULT)]
    return out


def between(events: list[dict[str, Any]], before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The annotations made after one run started and up to the next one's start, or about the next run."""
    start, end = before.get("started_at"), after.get("started_at")
    out = []
    for e in events:
        about = e.get("run_id")
        if about is not None:
            if about == after.get("run_id"):
                out.append(str(e["text"]))
        elif isinstance(start, (int, float)) and isinstance(end, (int, float)) and start < e["at"] <= end:
            out.append(str(e["text"]))
    return out
