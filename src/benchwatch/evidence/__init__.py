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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from benchwatch import engines
from benchwatch.query import longterm, prometheus
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


def _waits(result: list[dict]) -> Iterator[tuple[str, float]]:
    """(signal name, value) of each wait event in a PromQL vector by wait_event_type and wait_event (finite only)."""
    for item in result:
        labels = item.get("metric", {})
        value = float(item["value"][1])
        if math.isfinite(value):
            yield f"{WAIT_PREFIX}{labels.get('wait_event_type', '?')}:{labels.get('wait_event', '?')}", value


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
    if meta.get("run_id"):  # the stack's Prometheus, or the long-term store when that one alone has the run
        prom = longterm.base_for_run(prom, str(meta["run_id"]), start, end) or prom
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
            for name, value in _waits(result):
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


def sentence(who: str, rows: Sequence[dict[str, Any]], limit: int = 3,
             compare: tuple[str, str] = ("baseline", "variant")) -> str:
    """"PATCH at 64 clients: LWLock:ProcArray 0.41 → 0.06 sessions waiting; CPU user per transaction −18 %";
    ``compare``: the rows' keys of the two sides."""
    parts = []
    before, after = compare
    for r in rows[:limit]:
        unit = f" {r['unit']}" if r.get("unit") else ""
        if r.get("change") is None or abs(r["change"]) > 1.5 or r["signal"].startswith(WAIT_PREFIX):
            parts.append(f"{r['signal']} {r[before]:g}{unit} → {r[after]:g}{unit}")
        else:
            parts.append(f"{r['signal']} {r['change'] * 100:+.0f} %".replace("-", "−"))
    return f"{who}: " + "; ".join(parts) if parts else f"{who}: no server-side signal differs by {MIN_CHANGE:.0%} or more"


def transactions_of(figures: dict[str, Any]) -> float | None:
    t = figures.get("transactions")
    return float(t) if isinstance(t, (int, float)) and t > 0 else None


def experiment_why(prom: str, runs_dir: str, engine_name: str,
                   figures_of: Callable[[str], dict[str, Any]] | None = None,
                   path_of: Callable[[str], str] | None = None) -> Callable[..., list[dict[str, Any]]]:
    """The ``why`` of benchwatch.experiment.report.build: (baseline run ids, variant run ids, cell) -> rows.
    ``path_of``: where a run's directory is (default: ``runs_dir``/id; another host's run may be a copy
    fetched from the results database, its series read from the long-term store)."""
    signals = signals_for(engine_name)
    where = path_of or (lambda run_id: os.path.join(runs_dir, run_id))
    units = {s.name: s.unit for s in signals}
    cache: dict[str, dict[str, float]] = {}

    def of_run(run_id: str) -> dict[str, float]:
        if run_id not in cache:
            path = where(run_id)
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

        # A run none of whose evidence could be read (another host's under history --all-hosts: its meta.json is not
        # here, nor its series in this Prometheus) is unknown, not zero: left out, and a side of unknowns compares nothing.
        base = [pick(v) for v in map(of_run, base_ids) if v]
        variant = [pick(v) for v in map(of_run, variant_ids) if v]
        if not base or not variant:
            return []
        return side_by_side(base, variant, units)

    return why


# A dip shorter than this is read over this many seconds around it by a signal that counts: Prometheus's
# increase() needs two scrapes (1 s apart) inside its window.
MIN_DIP_WINDOW_S = 3.0


def dip_windows(path: str, meta: dict[str, Any]) -> list[tuple[float, float]]:
    """The (start, end) of each dip of the run recorded in ``path``, found by ``explain``'s detector in its
    per-interval TPS as the raw output gives it, and of each stalled interval, cut to the steady part its
    stability profile counts (when summary.json has one)."""
    from benchwatch.explain import dips
    from benchwatch.record import outcome, replay

    _, samples = replay.replay_run_dir_model(path, meta)
    tps = [(s.timestamp_ms, s.value) for s in samples if s.name == "benchmark_progress_tps" and math.isfinite(s.value)]
    interval = float(meta.get("progress_interval") or 0) or 1.0
    # the dips the run's stability profile counts: those within its steady part (warm-up and wind-down out)
    steady = (outcome.read(rundir.RunDir(path)) or {}).get("stability") or {}
    lo, hi = steady.get("steady_from"), steady.get("steady_to")
    # a stall (a whole interval without a transaction) is a valley too, dip or not: in a run of a few
    # seconds the detector has no steady level to find it against
    stalls = [(ts / 1000 - interval, ts / 1000) for ts, v in tps if v == 0]
    found = sorted([(d.start, d.end) for d in dips.detect(tps, interval)] + stalls)
    merged: list[tuple[float, float]] = []
    for start, end in found:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    out = []
    for start, end in merged:
        if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
            start, end = max(start, lo), min(end, hi)
        if end > start:
            out.append((start, end))
    return out


def in_windows(prom: str, windows: Sequence[tuple[float, float]], signals: Sequence[Signal],
               query: Callable[..., list] = prometheus.query) -> dict[str, tuple[float, float]]:
    """Each signal summed over the windows: name -> (amount, seconds) for counts (per transaction and per
    second signals alike: in a dip the transactions fall, so a count is read per second there), the
    seconds-weighted mean for the others (``value``, wait events as sessions waiting)."""
    amounts: dict[str, float] = {}
    spans: dict[str, float] = {}   # seconds read, per signal: a wait event absent from a window waited 0 there
    owner: dict[str, str] = {}
    for dip_start, dip_end in windows:
        for s in signals:
            start, end = dip_start, dip_end
            if "increase(" in s.promql and end - start < MIN_DIP_WINDOW_S:
                # a gauge's *_over_time has a sample in any second; a counter's increase needs two
                pad = (MIN_DIP_WINDOW_S - (end - start)) / 2
                start, end = start - pad, end + pad
            seconds = max(1, math.ceil(end - start))
            w = f"{seconds}s"
            try:
                result = query(prom, s.promql.replace("{w}", w), end)
            except prometheus.PrometheusError:
                continue
            items: list[tuple[str, float]] = []
            if s.kind == "waits":
                for name, value in _waits(result):
                    items.append((name, value * s.scale))  # session-seconds: scraped every second
            else:
                number = _number(result)
                if number is None:
                    continue
                # a level (await, flushing pressure) weighted by seconds; a count as the amount itself
                items.append((s.name, number * s.scale * (1 if _is_count(s) else seconds)))
            spans[s.name] = spans.get(s.name, 0.0) + seconds
            for name, amount in items:
                amounts[name] = amounts.get(name, 0.0) + amount
                owner[name] = s.name
    return {k: (v, spans[owner[k]]) for k, v in amounts.items()}


def _is_count(s: Signal) -> bool:
    """A signal that counts (read per second in and out of dips) rather than a level (read as its mean): per
    transaction and per second ones, and a ``value`` that is an increase without a division (checkpoints)."""
    return s.kind in ("per_tx", "per_s") or (s.kind == "value" and "increase(" in s.promql and " / " not in s.promql)


def _per_second_name(s: Signal) -> str:
    if s.kind == "per_tx":
        return s.name.replace(" per transaction", " per second")
    return f"{s.name} per second" if s.kind == "value" and _is_count(s) else s.name


def dips_why(prom: str, runs_dir: str, engine_name: str,
             path_of: Callable[[str], str] | None = None) -> Callable[[list[str], bool], list[dict[str, Any]]]:
    """The ``dips_why`` of benchwatch.experiment.report.build: (run ids, host signals only) -> the signals
    that moved during those runs' dips against the rest of each run, [{"signal", "outside_dips",
    "during_dips", "change", "unit"}] ranked by the relative change of their medians over the runs (a
    count per second, a level as it is), changes below :data:`MIN_CHANGE` left out."""
    signals = signals_for(engine_name)
    host = {s.name for s in HOST_SIGNALS}
    where = path_of or (lambda run_id: os.path.join(runs_dir, run_id))  # as experiment_why's

    def of_run(run_id: str, host_only: bool) -> tuple[dict[str, float], dict[str, float]]:
        path = where(run_id)
        try:
            meta = rundir.RunDir(path).read_meta()
            windows = dip_windows(path, meta)
        except (OSError, ValueError):
            return {}, {}
        run = run_window(meta)
        if not windows or run is None:
            return {}, {}
        chosen = [s for s in signals if s.name in host] if host_only else list(signals)
        base = longterm.base_for_run(prom, run_id, *run) or prom
        during = in_windows(base, windows, chosen)
        whole = in_windows(base, [run], chosen)
        a, b = {}, {}
        for s in chosen:
            names = [n for n in whole if n == s.name or (s.kind == "waits" and n.startswith(WAIT_PREFIX))]
            for n in names:
                amount, seconds = whole[n]
                d_amount, d_seconds = during.get(n, (0.0, 0.0))
                rest = seconds - d_seconds
                if rest <= 0 or d_seconds <= 0:
                    continue
                if not _is_count(s) and s.kind != "waits":  # a level: the whole run's stands for the rest
                    a[_per_second_name(s)], b[_per_second_name(s)] = amount / seconds, d_amount / d_seconds
                else:
                    key = n if s.kind == "waits" else _per_second_name(s)
                    a[key], b[key] = max(0.0, amount - d_amount) / rest, d_amount / d_seconds
        return a, b

    units = {_per_second_name(s): (s.unit + "/s" if s.kind == "per_tx" or (s.kind == "value" and _is_count(s))
                                   else s.unit) for s in signals}

    def why(run_ids: list[str], host_only: bool = False) -> list[dict[str, Any]]:
        pairs = [of_run(r, host_only) for r in run_ids]
        rows = side_by_side([p[0] for p in pairs if p[0]], [p[1] for p in pairs if p[1]],
                            {**units, **{n: "sessions" for p in pairs for n in p[0] if n.startswith(WAIT_PREFIX)}})
        return [{"signal": r["signal"], "outside_dips": r["baseline"], "during_dips": r["variant"],
                 "change": r["change"], "unit": r["unit"]} for r in rows]

    return why
