"""The watched databases as the central Prometheus sees them: ``benchwatch targets``.

A target is what the ``target`` label names (one database instance, on the
host its ``host`` label names): the stack's own (``target="local"``) and every
agent's. Its health comes from the ``up`` series of its scrapes, which agents
remote-write like everything else: healthy when every one of them says 1 and
the newest is at most :data:`HEALTHY_AGE_S` old.
"""

from __future__ import annotations

import time
from typing import Any

from benchwatch.query.prometheus import query

# Agents send every few seconds (remote write batches up to 5 s); beyond this a target is silent.
HEALTHY_AGE_S = 30.0
# The series budget (docs/targets.md): one Prometheus holds 1,000 runs and dozens of targets.
RUN_SERIES_BUDGET = 200
TARGET_SERIES_BUDGET = 1000
_UP = 'up{target!=""}'


def engine_of(job: str) -> str | None:
    """The database engine a scrape job watches; None for host-level jobs (node, the followers)."""
    if "postgres" in job:
        return "postgresql"
    if "mysql" in job:
        return "mysql"
    return None


def _by_series(result: list) -> dict[frozenset, tuple[dict, float]]:
    # Keyed without __name__: functions (timestamp, max_over_time) drop it, the plain selector keeps it.
    return {frozenset((k, v) for k, v in r["metric"].items() if k != "__name__"): (r["metric"], float(r["value"][1]))
            for r in result}


def list_targets(base: str, now: float | None = None, history: str = "24h") -> list[dict[str, Any]]:
    """One dict per target seen within ``history``: target, host, instance, engine, last sample age, healthy, jobs."""
    now = time.time() if now is None else now
    # The newest sample of each up series: exact within the 5 min lookback, to the minute before that.
    older = _by_series(query(base, f"max_over_time(timestamp({_UP})[{history}:1m])", now))
    fresh = _by_series(query(base, f"timestamp({_UP})", now))
    values = _by_series(query(base, _UP, now))
    targets: dict[str, dict[str, Any]] = {}
    for key in set(older) | set(fresh):
        labels = (fresh.get(key) or older[key])[0]
        last = max(v for v in (fresh.get(key, (None, 0.0))[1], older.get(key, (None, 0.0))[1]))
        t = targets.setdefault(labels["target"], {"target": labels["target"], "host": labels.get("host"),
                                                  "instance": None, "engine": None, "last_sample_age_s": None,
                                                  "healthy": True, "jobs": {}})
        job = labels.get("job", "")
        engine = engine_of(job)
        if engine:
            t["engine"] = engine
            t["instance"] = labels.get("postgres_server") or labels.get("instance")
        age = max(0.0, now - last)
        t["last_sample_age_s"] = age if t["last_sample_age_s"] is None else min(t["last_sample_age_s"], age)
        up = values.get(key, (None, 0.0))[1] == 1.0 and age <= HEALTHY_AGE_S
        t["jobs"][job] = t["jobs"].get(job, True) and up
        t["healthy"] = t["healthy"] and up
    return sorted(targets.values(), key=lambda t: t["target"])


def watched(base: str, since: float | None = None, now: float | None = None) -> list[dict[str, Any]]:
    """What a run's meta.json records under "targets": the targets with samples since ``since``
    (default: healthy now), without their changing health."""
    out = []
    for t in list_targets(base, now, history="1h" if since is None else f"{max(60, int((now or time.time()) - since) + 60)}s"):
        recent = t["healthy"] if since is None else (now or time.time()) - t["last_sample_age_s"] >= since - HEALTHY_AGE_S
        if recent:
            out.append({k: t[k] for k in ("target", "host", "instance", "engine")})
    return out


def merge_watched(*lists: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Union by target name, the later list's facts winning."""
    merged: dict[str, dict[str, Any]] = {}
    for items in lists:
        for item in items or ():
            merged[item["target"]] = item
    return [merged[k] for k in sorted(merged)]


def series_counts(base: str, window: str = "1h", now: float | None = None) -> dict[str, Any]:
    """Series per target and per run present within ``window`` (the series budget)."""
    def counts(label: str) -> dict[str, int]:
        result = query(base, f'count by ({label}) (last_over_time({{{label}!=""}}[{window}]))', now)
        return {r["metric"].get(label, ""): int(float(r["value"][1])) for r in result}
    targets = counts("target")
    runs = counts("run_id")
    return {"window": window,
            "budget": {"run": RUN_SERIES_BUDGET, "target": TARGET_SERIES_BUDGET},
            "targets": {k: {"series": n, "within_budget": n <= TARGET_SERIES_BUDGET} for k, n in sorted(targets.items())},
            "runs": {k: {"series": n, "within_budget": n <= RUN_SERIES_BUDGET} for k, n in sorted(runs.items())}}
