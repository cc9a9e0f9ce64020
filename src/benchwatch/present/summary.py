"""The toolkit of every run summary: the context each tool's and each engine's part reads (the run's
series, its TPS curve, its window), plain statistics over raw series (no I/O), compare rows, tables and
number formats. The snapshot builder and compare (benchwatch.share) compose the parts; the plug-in folders'
summary.py use this toolkit and nothing of the composers.

Conventions: TPS statistics are over the tool's progress lines (one value per interval, stall zeros
included); standard deviation is the population one (Prometheus' stddev_over_time); times are Unix
seconds; durations seconds.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from benchwatch.model.histogram import histogram_quantile
from benchwatch.query.frames import boolean_regions, prefer_pushed
from benchwatch.query.series import Series
from benchwatch.record.host import NOT_DISKS

AROUND_S = 10.0  # how far before and after a checkpoint "TPS around" looks

Table = tuple[str, list[str], list[list[str]]]


class CompareRow(NamedTuple):
    """A row of a comparison: where it goes (throughput, latency, events, totals), its label, how to read
    it from a summary (None: not for this run), how to show it, and which way is better (+1 higher,
    -1 lower, 0 neither)."""

    section: str
    label: str
    get: Callable[[dict], float | None]
    fmt: Callable[[float | None], str]
    better: int


# -- plain statistics -----------------------------------------------------------

def tps_stats(values: list[float]) -> dict:
    if not values:
        return {"samples": 0, "mean": None, "min": None, "max": None, "stddev": None, "cov": None, "median": None}
    mean = statistics.fmean(values)
    stddev = statistics.pstdev(values) if len(values) > 1 else 0.0
    return {"samples": len(values), "mean": mean, "min": min(values), "max": max(values), "stddev": stddev,
            "cov": (stddev / mean) if mean else None, "median": statistics.median(values)}


def seconds_below(values: list[float], threshold: float, interval_s: float) -> float:
    """Seconds spent under the threshold: progress intervals below it times their length."""
    return sum(1 for v in values if v < threshold) * interval_s


def stalls(samples: list[tuple[int, float]], interval_s: float) -> list[dict]:
    """Stretches of progress lines with TPS 0: start (the start of the first zero interval), end, seconds."""
    out = []
    run_start: int | None = None
    last: int | None = None  # set whenever run_start is
    for ts, v in samples:
        if v == 0:
            if run_start is None:
                run_start = ts
            last = ts
        elif run_start is not None and last is not None:
            out.append(_stall(run_start, last, interval_s))
            run_start = None
    if run_start is not None and last is not None:
        out.append(_stall(run_start, last, interval_s))
    return out


def _stall(first_ms: int, last_ms: int, interval_s: float) -> dict:
    start = first_ms / 1000 - interval_s
    end = last_ms / 1000
    return {"start": start, "end": end, "seconds": round(end - start, 3)}


def mean_over(samples: list[tuple[int, float]], start_s: float, end_s: float, interval_s: float) -> float | None:
    """Mean TPS of the progress intervals (ts - interval, ts] that overlap [start, end]."""
    vals = [v for ts, v in samples if ts / 1000 > start_s and ts / 1000 - interval_s < end_s]
    return statistics.fmean(vals) if vals else None


# -- series helpers ---------------------------------------------------------------

def one(series: list[Series], name: str, **labels: str) -> Series | None:
    found = [s for s in prefer_pushed(series) if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    return found[0] if found else None


def last_value(s: Series | None, at_ms: int | None = None) -> float | None:
    if s is None or not s.samples:
        return None
    if at_ms is None:
        return s.samples[-1][1]
    best = None
    for ts, v in s.samples:
        if ts <= at_ms:
            best = v
        else:
            break
    return best


def value_at(s: Series | None, ts_ms: int, tolerance_ms: int = 1000) -> float | None:
    """The sample written at (or just after) a moment: a checkpoint's last_* values land at its end."""
    if s is None:
        return None
    for ts, v in s.samples:
        if ts_ms <= ts <= ts_ms + tolerance_ms:
            return v
    return None



def interval_of(meta: dict, series: list[Series], run_id: str) -> float:
    if meta.get("progress_interval"):
        return float(meta["progress_interval"])
    v = last_value(one(series, "benchmark_progress_interval_seconds", run_id=run_id))
    return float(v) if v else 1.0


def latency_percentiles(series: list[Series], run_id: str) -> dict:
    buckets: dict[float, float] = {}
    for s in series:
        if s.name == "benchmark_latency_seconds_bucket" and s.labels.get("run_id") == run_id and s.samples:
            le = float(s.labels.get("le", "nan"))
            if not math.isnan(le):
                buckets[le] = buckets.get(le, 0.0) + s.samples[-1][1]
    pairs = sorted(buckets.items())
    return {q: histogram_quantile(p, pairs) for q, p in (("p50_s", 0.5), ("p95_s", 0.95), ("p99_s", 0.99))} | {
        "percentile_source": "pgbench -l per-transaction log (histogram)" if pairs else None}


def host_from(series: list[Series], extra: dict | None = None) -> dict:
    host: dict = {}
    uname = one(series, "node_uname_info")
    if uname:
        host.update({k: uname.labels[k] for k in ("nodename", "sysname", "release", "machine") if k in uname.labels})
    mem = last_value(one(series, "node_memory_MemTotal_bytes"))
    if mem:
        host["memory_bytes"] = mem
    cpus = {s.labels.get("cpu") for s in series if s.name == "node_cpu_seconds_total"}
    if cpus:
        host["cpus"] = len(cpus)
    disks = sorted(d for d in {s.labels.get("device", "") for s in series if s.name == "node_disk_info"}
                   if d and not NOT_DISKS.match(d))
    if disks:
        host["disks"] = [{"device": d} for d in disks]
    for k, v in (extra or {}).items():
        if k == "disks" and "disks" in host:
            known = {d["device"]: d for d in host["disks"]}
            for d in v:
                known.setdefault(d.get("device"), {}).update(d)
            host["disks"] = [known[k2] for k2 in sorted(known)]
        else:
            host.setdefault(k, v)
    return host


@dataclass
class Context:
    """What the tool's and the engine's parts of a summary read: the run's series (staleness markers
    removed), its TPS curve, the progress interval and the run's window."""

    series: list[Series]
    meta: dict
    run_id: str
    tps: list[tuple[int, float]]      # (ms, TPS) per progress line
    interval_s: float
    start_s: float
    end_s: float
    run_dir: str = ""                 # the run directory, when the summary is built from one

    def final(self, name: str, **labels: str) -> float | None:
        """The last value of one of the run's series."""
        return last_value(one(self.series, name, run_id=self.run_id, **labels))

    def regions_with_tps(self, series_name: str, around_s: float = AROUND_S) -> list[dict]:
        """The 1-regions of a 0/1 series during the run (checkpoints, flushing pressure), each with the
        mean TPS during it and around it (the around_s seconds before and after) and the change."""
        rows = []
        for s in prefer_pushed([s for s in self.series if s.name == series_name]):
            for a, b in boolean_regions(s):
                if b / 1000 < self.start_s or a / 1000 > self.end_s:
                    continue
                during = mean_over(self.tps, a / 1000, b / 1000, self.interval_s)
                around_vals = [v for ts, v in self.tps
                               if (a / 1000 - around_s <= ts / 1000 <= a / 1000)
                               or (b / 1000 + self.interval_s < ts / 1000 <= b / 1000 + self.interval_s + around_s)]
                around = statistics.fmean(around_vals) if around_vals else None
                rows.append({"series": s, "start": a / 1000, "end": b / 1000, "tps_during": during, "tps_around": around,
                             "change_pct": ((during / around - 1) * 100) if (during is not None and around) else None})
        return rows


def merged(base: dict, part: dict) -> dict:
    """``part`` added to ``base``, dicts (tps, latency) merged one level deep."""
    for key, value in part.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key].update(value)
        else:
            base[key] = value
    return base



# -- presentation -------------------------------------------------------------------

def fmt_num(v: float | None, digits: int = 1) -> str:
    if v is None:
        return "—"
    if abs(v) >= 1e6:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def fmt_ms(v: float | None) -> str:
    return "—" if v is None else f"{v * 1000:.3f} ms"


def fmt_pct(v: float | None, digits: int = 1) -> str:
    return "—" if v is None else f"{v * 100:.{digits}f}%"


def fmt_bytes(v: float | None) -> str:
    if v is None:
        return "—"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("kiB", 1 << 10)):
        if abs(v) >= size:
            x = v / size
            return f"{x:.0f} {unit}" if x == int(x) else f"{x:.1f} {unit}"
    return f"{v:.0f} B"


def fmt_seconds(v: float | None) -> str:
    if v is None:
        return "—"
    if v >= 60 and v % 60 == 0:
        return f"{v / 60:.0f} min"
    return f"{v:g} s"


def fmt_time(epoch: float | None, with_date: bool = False) -> str:
    import datetime as dt
    if epoch is None:
        return "—"
    t = dt.datetime.fromtimestamp(epoch, dt.UTC)
    return t.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC" if with_date else t.strftime("%H:%M:%S.%f")[:-3]



def md_table(header: list[str], rows: Iterable[list[str]]) -> str:
    def cell(x: str) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


