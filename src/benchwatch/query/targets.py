"""The watched databases as the central Prometheus sees them: ``benchwatch targets``.

A target is what the ``target`` label names (one database instance, on the
host its ``host`` label names): the stack's own (``target="local"``) and every
agent's. Its identity is that name and host, not the address of its exporter
or server: a target restarted on other ports (the sharded demo run again, an
agent's instance moved) is the same target, and the series of its earlier
incarnation are history, not a fault.

Its health comes from the ``up`` series of its scrapes, which agents
remote-write like everything else, judged on what is watched now: the series
with a sample within :data:`HEALTHY_AGE_S` of the target's newest one and within
:data:`SAME_JOB_GAP_S` of its job's newest, not ended by a staleness marker. Those that stopped earlier (an exporter on an old
port, the MariaDB job of an earlier stack) went away and are left out. A target is healthy when its newest sample
is at most :data:`HEALTHY_AGE_S` old and every series watched now says 1.
"""

from __future__ import annotations

import time
from typing import Any

from benchwatch import engines
from benchwatch.query.prometheus import query

# Agents send every few seconds (remote write batches up to 5 s); beyond this a target is silent.
# Also the widest scrape interval of a job with a target label (15 s) twice over.
HEALTHY_AGE_S = 30.0
# Two series of one job of a target both scraped now are at most one scrape interval apart (15 s at
# most in prometheus.yml and the agent's); one further behind its job's newest was replaced.
SAME_JOB_GAP_S = 16.0
# The series budget (docs/targets.md): one Prometheus holds 1,000 runs and dozens of targets.
RUN_SERIES_BUDGET = 200
TARGET_SERIES_BUDGET = 1000
# A sweep's variant servers (benchwatch sweep, bindir= and dsn=) are targets while the sweep runs, their
# scrapes labelled with the sweep's name: silent afterwards, they are not listed as failing.
SWEEP_LABEL = "sweep"
# The targets that report: every scrape of a database-side exporter carries the target's name.
TARGET_VALUES_SELECTOR = 'up{target!=""}'


def engine_of(job: str) -> str | None:
    """The engine family whose exporter a scrape job scrapes (its ``Engine.scrape_job``); None for
    host-level jobs (node, the checkpoint followers)."""
    return {e.scrape_job: e.name for e in engines.load_engines().values()}.get(job)


def server_labels() -> tuple[str, ...]:
    """The labels naming the database server a series' exporter watches, where it differs from the
    exporter's own address (``instance``): each engine's ``server_label``."""
    return tuple(e.server_label for e in engines.load_engines().values() if e.server_label)


def _by_series(result: list) -> dict[frozenset, tuple[dict, float]]:
    # Keyed without __name__: functions (timestamp, max_over_time) drop it, the plain selector keeps it.
    return {frozenset((k, v) for k, v in r["metric"].items() if k != "__name__"): (r["metric"], float(r["value"][1]))
            for r in result}


def summarize(newest: dict[frozenset, tuple[dict, float]], values: dict[frozenset, tuple[dict, float]],
              now: float) -> list[dict[str, Any]]:
    """The targets from each ``up`` series' labels and newest sample time (``newest``) and current value
    (``values``, absent for a series with no sample in the lookback): pure, see the module's docstring."""
    groups: dict[tuple[str, str | None], list[tuple[dict, float, float | None]]] = {}
    for key, (labels, last) in newest.items():
        value = values[key][1] if key in values else None
        groups.setdefault((labels["target"], labels.get("host")), []).append((labels, last, value))
    out = []
    for (name, host), series in groups.items():
        last = max(s[1] for s in series)
        age = max(0.0, now - last)
        if age > HEALTHY_AGE_S and all(s[0].get(SWEEP_LABEL) for s in series):
            continue  # a sweep's variant server, watched while its sweep ran: over, not failing
        # Watched now: a sample close to the target's newest and to the newest of its job (an exporter
        # restarted on another port leaves its old series, often with the up=0 of its last scrape, one
        # restart behind the new one), and not ended by a staleness marker (a scrape target Prometheus
        # dropped has no value at ``now`` although its last sample is recent).
        job_last: dict[str, float] = {}
        for labels, seen, _value in series:
            job_last[labels.get("job", "")] = max(seen, job_last.get(labels.get("job", ""), seen))
        current = [s for s in series if s[1] >= last - HEALTHY_AGE_S
                   and s[1] >= job_last[s[0].get("job", "")] - SAME_JOB_GAP_S
                   and (s[2] is not None or age > HEALTHY_AGE_S)]
        t: dict[str, Any] = {"target": name, "host": host, "instance": None, "engine": None,
                             "last_sample_age_s": age, "healthy": age <= HEALTHY_AGE_S, "jobs": {}, "problems": []}
        if age > HEALTHY_AGE_S:
            t["problems"].append(f"no sample for {age:.0f} s")
        newest_engine = None
        for labels, seen, value in sorted(current, key=lambda s: s[1]):
            job = labels.get("job", "")
            up = value == 1.0 and age <= HEALTHY_AGE_S
            t["jobs"][job] = t["jobs"].get(job, True) and up
            if not up and age <= HEALTHY_AGE_S:
                t["healthy"] = False
                t["problems"].append(f"{job} at {labels.get('instance', '?')} is down (up={value:g})")
            engine = engine_of(job)
            if engine and (newest_engine is None or seen >= newest_engine):
                newest_engine = seen
                t["engine"] = engine
                t["instance"] = next((labels[k] for k in server_labels() if labels.get(k)), labels.get("instance"))
        out.append(t)
    return sorted(out, key=lambda t: (t["target"], t["host"] or ""))


def list_targets(base: str, now: float | None = None, history: str = "24h") -> list[dict[str, Any]]:
    """One dict per target seen within ``history``: target, host, instance, engine, last sample age, healthy,
    jobs (watched now: up or not), problems (why it is not healthy)."""
    now = time.time() if now is None else now
    # The newest sample of each up series: exact within the 5 min lookback, to the minute before that.
    older = _by_series(query(base, f"max_over_time(timestamp({TARGET_VALUES_SELECTOR})[{history}:1m])", now))
    fresh = _by_series(query(base, f"timestamp({TARGET_VALUES_SELECTOR})", now))
    values = _by_series(query(base, TARGET_VALUES_SELECTOR, now))
    newest = {key: (fresh.get(key) or older[key])[0] for key in set(older) | set(fresh)}
    last = {key: max(fresh.get(key, ({}, 0.0))[1], older.get(key, ({}, 0.0))[1]) for key in newest}
    return summarize({k: (newest[k], last[k]) for k in newest}, values, now)


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
