"""Server-side evidence of runs, side by side: why one set of runs differs from another.

Shared by the experiment report (benchwatch.experiment: each cell where variants differ) and the run
history's "what changed": give it the runs of each side, it reads each run's window from its meta.json,
asks Prometheus for each signal over that window (per transaction where it is a count), takes the median
over each side's runs, and ranks the signals by how much they differ.

Signals: the host's (CPU user/system/iowait per transaction, disk %util, write await, bytes written per
transaction, from node_exporter) and the engine's (``Engine.evidence_signals``: WAL syncs, bytes and
full-page images per transaction, checkpoint buffers, wait events on PostgreSQL; redo fsyncs, pages
flushed, flushing pressure on MariaDB).
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benchwatch import engines
from benchwatch.query import prometheus
from benchwatch.record import rundir
from benchwatch.record.host import DISKS


@dataclass(frozen=True)
class Signal:
    """One piece of evidence: its name, PromQL with ``{w}`` for the run's window (e.g. ``[37s]``) and, after
    each selector of a server's series, ``{target}`` for the target that served the run, giving one number
    (or, for ``kind="waits"``, one per wait event), and how it is read: ``per_tx`` divided by the run's
    transactions, ``per_s`` divided by the run's seconds, ``value`` as it is."""

    name: str
    promql: str
    kind: str = "per_tx"
    unit: str = ""
    scale: float = 1.0   # shown multiplied by this (seconds per transaction as microseconds)


HOST_SIGNALS = (
    Signal("CPU user per transaction", 'sum(increase(node_cpu_seconds_total{mode="user"}[{w}]))', unit="µs", scale=1e6),
    Signal("CPU system per transaction", 'sum(increase(node_cpu_seconds_total{mode="system"}[{w}]))', unit="µs", scale=1e6),
    Signal("CPU iowait per transaction", 'sum(increase(node_cpu_seconds_total{mode="iowait"}[{w}]))', unit="µs", scale=1e6),
    Signal("disk %util (summed over disks)", "sum(increase(node_disk_io_time_seconds_total{" + DISKS + "}[{w}]))",
           kind="per_s", unit="%", scale=100),
    Signal("disk write await", "sum(increase(node_disk_write_time_seconds_total{" + DISKS + "}[{w}])) / "
           "sum(increase(node_disk_writes_completed_total{" + DISKS + "}[{w}]))", kind="value", unit="ms", scale=1000),
    Signal("disk bytes written per transaction", "sum(increase(node_disk_written_bytes_total{" + DISKS + "}[{w}]))",
           unit="B"),
)

# Signals that differ by less than this (relative) are not evidence.
MIN_CHANGE = 0.10
# A wait event is evidence only where, on one side at least, this many sessions wait on it on average: a
# 1 s scrape of a short run sees a rare event once or twice, and that is noise.
MIN_WAITING = 0.5
WAIT_PREFIX = "wait "
TOP = 8


def run_window(meta: dict[str, Any]) -> tuple[float, float] | None:
    start = meta.get("clock_start_epoch") or meta.get("started_at")
    end = meta.get("ended_at")
    if not isinstance(start, (int, float)) or not isinstance(end, (int, float)) or end <= start:
        return None
    return float(start), float(end)


def run_target(meta: dict[str, Any]) -> str | None:
    """The target that served the run, where its meta.json says (a sweep's runs, a run on one of several
    instances): its server's series are read from that target alone. None (runs recorded before): every
    target's, summed."""
    target = (meta.get("info") or {}).get("target")
    return str(target) if target else None


def with_target(promql: str, target: str | None) -> str:
    """``{target}`` of a signal's PromQL as the matcher of ``target``, or nothing."""
    if not target:
        return promql.replace("{target}", "")
    value = target.replace("\\", "\\\\").replace('"', '\\"')
    return promql.replace("{target}", '{target="' + value + '"}')


def _number(result: list) -> float | None:
    if not result:
        return None
    value = float(result[0]["value"][1])
    return value if math.isfinite(value) else None


def run_evidence(prom: str, meta: dict[str, Any], transactions: float | None, signals: Sequence[Signal],
                 query: Callable[..., list] = prometheus.query) -> dict[str, float]:
    """Every signal of one run: name -> value in its shown unit (a signal without data is left out)."""
    window = run_window(meta)
    if window is None:
        return {}
    start, end = window
    seconds = max(1, math.ceil(end - start))
    w = f"{seconds}s"
    target = run_target(meta)
    out: dict[str, float] = {}
    for s in signals:
        try:
            result = query(prom, with_target(s.promql, target).replace("{w}", w), end)
        except prometheus.PrometheusError:
            continue
        if s.kind == "waits":
            for item in result:
                labels = item.get("metric", {})
                value = float(item["value"][1])
                if math.isfinite(value):
                    name = f"{WAIT_PREFIX}{labels.get('wait_event_type', '?')}:{labels.get('wait_event', '?')}"
                    out[name] = value / seconds * s.scale
            continue
        number = _number(result)
        if number is None:
            continue
        value = number
        if s.kind == "per_tx":
            if not transactions:
                continue
            value /= transactions
        elif s.kind == "per_s":
            value /= seconds
        out[s.name] = value * s.scale
    return out


def signals_for(engine_name: str | None) -> tuple[Signal, ...]:
    extra: tuple[Signal, ...] = ()
    if engine_name:
        try:
            extra = tuple(Signal(*fields) for fields in engines.get(engine_name).evidence_signals)
        except engines.UnknownEngine:
            extra = ()
    return extra + HOST_SIGNALS


def side_by_side(a: Sequence[dict[str, float]], b: Sequence[dict[str, float]], units: dict[str, str] | None = None,
                 top: int = TOP) -> list[dict[str, Any]]:
    """Each side's runs (signal -> value), as [{"signal", "baseline", "variant", "change", "unit"}] ranked by how
    much the medians differ (the relative change, a signal present on one side only first); changes below
    :data:`MIN_CHANGE` are left out."""
    names = sorted({n for run in [*a, *b] for n in run})
    rows = []
    for n in names:
        va = [r[n] for r in a if n in r]
        vb = [r[n] for r in b if n in r]
        ma = statistics.median(va) if va else 0.0
        mb = statistics.median(vb) if vb else 0.0
        top_value = max(abs(ma), abs(mb))
        if top_value == 0 or (n.startswith(WAIT_PREFIX) and top_value < MIN_WAITING):
            continue
        score = abs(mb - ma) / top_value
        if score < MIN_CHANGE:
            continue
        change = (mb - ma) / ma if ma else None
        rows.append((score, {"signal": n, "baseline": _sig(ma), "variant": _sig(mb),
                             "change": round(change, 4) if change is not None else None,
                             "unit": (units or {}).get(n, "")}))
    rows.sort(key=lambda r: -r[0])
    return [r for _, r in rows[:top]]


def _sig(x: float) -> float:
    return float(f"{x:.4g}")


def sentence(who: str, rows: Sequence[dict[str, Any]], limit: int = 3) -> str:
    """"PATCH at 64 clients: LWLock:ProcArray 0.41 → 0.06 sessions waiting; CPU user per transaction −18 %"."""
    parts = []
    for r in rows[:limit]:
        unit = f" {r['unit']}" if r.get("unit") else ""
        if r.get("change") is None or abs(r["change"]) > 1.5 or r["signal"].startswith(WAIT_PREFIX):
            parts.append(f"{r['signal']} {r['baseline']:g}{unit} → {r['variant']:g}{unit}")
        else:
            parts.append(f"{r['signal']} {r['change'] * 100:+.0f} %".replace("-", "−"))
    return f"{who}: " + "; ".join(parts) if parts else f"{who}: no server-side signal differs by {MIN_CHANGE:.0%} or more"


def transactions_of(figures: dict[str, Any]) -> float | None:
    t = figures.get("transactions")
    return float(t) if isinstance(t, (int, float)) and t > 0 else None


def experiment_why(prom: str, runs_dir: str, engine_name: str,
                   figures_of: Callable[[str], dict[str, Any]] | None = None) -> Callable[..., list[dict[str, Any]]]:
    """The ``why`` of benchwatch.experiment.report.build: (baseline run ids, variant run ids, cell) -> rows."""
    signals = signals_for(engine_name)
    units = {s.name: s.unit for s in signals}
    cache: dict[str, dict[str, float]] = {}

    def of_run(run_id: str) -> dict[str, float]:
        if run_id not in cache:
            path = os.path.join(runs_dir, run_id)
            try:
                meta = rundir.RunDir(path).read_meta()
            except (OSError, ValueError):
                cache[run_id] = {}
                return cache[run_id]
            figures = figures_of(path) if figures_of else {"transactions": meta.get("transactions")}
            values = run_evidence(prom, meta, transactions_of(figures), signals)
            for name in values:
                if name not in units:
                    units[name] = next((s.unit for s in signals if name.startswith(s.name)), "")
            cache[run_id] = values
        return cache[run_id]

    host = {s.name for s in HOST_SIGNALS}

    def why(base_ids: list[str], variant_ids: list[str], cell: Any = None, host_only: bool = False) -> list[dict[str, Any]]:
        def pick(values: dict[str, float]) -> dict[str, float]:
            return {k: v for k, v in values.items() if k in host} if host_only else values

        return side_by_side([pick(of_run(r)) for r in base_ids], [pick(of_run(r)) for r in variant_ids], units)

    return why
