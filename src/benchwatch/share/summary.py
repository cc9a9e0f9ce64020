"""The numbers of a run, from its raw series: pure functions, no I/O.

Everything here reads `Series` (raw samples at their own timestamps), never
step-sampled query results, so the figures are the same whether the series
came from Prometheus or were rebuilt from the run directory.

What every run has is here; each tool's and each engine's part of the
summary, its tables and compare rows live in its folder (summary.py of
benchwatch.loadgens.<tool> and benchwatch.engines.<family>).

Conventions: TPS statistics are over the tool's progress lines (one value per
interval, stall zeros included); standard deviation is the population one
(Prometheus' stddev_over_time); times are Unix seconds; durations seconds.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from benchwatch import engines, loadgens
from benchwatch.explain import report as explain_report
from benchwatch.model import replay
from benchwatch.model.histogram import histogram_quantile
from benchwatch.model.samples import is_stale_marker
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


# -- the summary --------------------------------------------------------------------

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


def build(series: list[Series], meta: dict, run_id: str, window: tuple[float, float],
          host_extra: dict | None = None, run_dir: str = "") -> dict:
    """The summary of a run: what every run has, then its tool's part and its engine's part (the keys
    of summary.json, e.g. tps.pgbench_summary_tps for any tool's own TPS, are contracts)."""
    start_s, end_s = window
    # Values as Prometheus would return them: staleness markers end a series, they are not values.
    series = [Series(x.name, x.labels, [(t, v) for t, v in x.samples if not is_stale_marker(v)]) for x in series]
    interval = interval_of(meta, series, run_id)
    tps_series = one(series, "benchmark_progress_tps", run_id=run_id)
    tps = tps_series.samples if tps_series else []
    values = [v for _, v in tps]
    stats = tps_stats(values)
    median = stats["median"]
    stall_list = stalls(tps, interval)
    ctx = Context(series, meta, run_id, tps, interval, start_s, end_s, run_dir)
    generator = loadgens.by_name(meta.get("tool"))
    engine = engines.get(replay.run_engine(meta))

    latency_avg = ctx.final("benchmark_result_latency_seconds")
    lat_series = one(series, "benchmark_progress_latency_seconds", run_id=run_id)
    progress_lat = None
    if lat_series and tps_series:
        # Transaction-weighted: a second with 1000 transactions counts 1000 times more than one with 1.
        weights = dict(tps)
        pairs = [(v, weights.get(ts, 0.0)) for ts, v in lat_series.samples]
        total = sum(w for _, w in pairs)
        progress_lat = sum(v * w for v, w in pairs) / total if total else None
    info = one(series, "benchmark_run_info", run_id=run_id)
    summary = {
        "run_id": run_id,
        "run": {
            "args": " ".join(meta.get("argv") or []) or None,
            "start": meta.get("clock_start_epoch") or meta.get("started_at"),
            "end": meta.get("ended_at"),
            "duration_s": ((meta.get("ended_at") or 0) - (meta.get("clock_start_epoch") or meta.get("started_at") or 0)) or None,
            "exit_code": meta.get("exit_code"),
            "tool": generator.name,
            "engine": engine.name,
            generator.version_key: meta.get(generator.version_key),
            "server_version": meta.get("server_version"),
            "scale": meta.get("scale"),
            "hostname": meta.get("hostname"),
            "targets": watched_targets(meta),
            "labels": dict(info.labels) if info else {},
            "progress_interval_s": interval,
        },
        "tps": {**stats,
                "below_half_median_s": seconds_below(values, 0.5 * median, interval) if median is not None else None,
                "pgbench_summary_tps": ctx.final("benchmark_result_tps"),
                "transactions": ctx.final("benchmark_result_transactions") or ctx.final("benchmark_transactions_total"),
                "aborted_clients": ctx.final("benchmark_aborted_clients_total")},
        "stalls": {"count": len(stall_list), "seconds": round(sum(s["seconds"] for s in stall_list), 3),
                   "longest_s": max((s["seconds"] for s in stall_list), default=0.0), "list": stall_list},
        "latency": {"avg_s": latency_avg if latency_avg is not None else progress_lat,
                    "avg_source": f"{generator.title} summary" if latency_avg is not None
                    else ("progress lines, weighted by TPS" if progress_lat is not None else None),
                    **latency_percentiles(series, run_id)},
        **_dips(series, {**meta, "progress_interval": interval}, run_id, run_dir),
        "host": host_from(series, host_extra),
    }
    merged(summary, generator.summary_figures(ctx))
    merged(summary, engine.summary_figures(ctx))
    return summary


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


def tables(s: dict) -> list[Table]:
    """The summary as (title, header, rows) tables, for Markdown and HTML alike: throughput and latency
    with the tool's rows, the tool's and the engine's tables, the dips, the server's settings."""
    generator = loadgens.by_name(s["run"].get("tool"))
    engine = engines.get(s["run"].get("engine") or generator.engines[0])
    t, lat, st = s["tps"], s["latency"], s["stalls"]
    out: list[Table] = [("Throughput", ["", "value"], [
        [f"TPS ({generator.title} summary)", fmt_num(t["pgbench_summary_tps"])],
        ["TPS mean / min / max", f"{fmt_num(t['mean'])} / {fmt_num(t['min'])} / {fmt_num(t['max'])}"],
        ["TPS stddev / CoV", f"{fmt_num(t['stddev'])} / {fmt_pct(t['cov'])}"],
        ["TPS median", fmt_num(t["median"])],
        ["seconds below 50% of median", fmt_num(t["below_half_median_s"], 0)],
        ["stalls (TPS 0)", f"{st['count']}, {st['seconds']:g} s in all, longest {st['longest_s']:g} s"],
        ["transactions", fmt_num(t["transactions"], 0)],
        *generator.throughput_rows(s),
        ["aborted clients", fmt_num(t.get("aborted_clients"), 0)],
    ]), ("Latency", ["", "value"], [
        ["average", fmt_ms(lat["avg_s"]) + (f" ({lat['avg_source']})" if lat.get("avg_source") else "")],
        *generator.latency_rows(s),
    ])]
    out += generator.summary_tables(s)
    out += engine.summary_tables(s)
    if "dips" in s:  # summaries written before dips were explained have none
        out.append(("Dips and their causes", explain_report.HEADER,
                    explain_report.rows({"dips": s["dips"], "run_start": s["run"].get("start")})
                    or [["no TPS dip below 80% of the steady level"] + [""] * (len(explain_report.HEADER) - 1)]))
    end = s.get("run_end")
    if end:  # a run that died: why, as explain says it
        out.append(("How the run ended", ["at", "exit code", "cause", "evidence"],
                    [[f"{end['at_s']:.1f} s into the run", str(end.get("exit_code")), end["cause"], end["evidence"]]]))
    absent = (s.get("dip_signals") or {}).get("absent") or {}
    if absent:  # what the dips could not be blamed on: the server lacked what the signal reads
        out.append(("Signals the dips were not weighed on", ["signal", "why"], [[k, v] for k, v in absent.items()]))
    out += engine.settings_tables(s)
    return out


def _dips(series: list[Series], meta: dict, run_id: str, run_dir: str = "") -> dict:
    """The summary's "dips" (explain's, each with its cause), "dip_signals" (weighed and absent) and
    "run_end" (explain's "end": how a run that ended early or badly ended, else None)."""
    output = replay.saved_output(run_dir).decode("utf-8", "replace") if run_dir else ""
    result = explain_report.explain(series, meta, run_id, output=output)
    return {"dips": result["dips"], "dip_signals": result["signals"], "run_end": result["end"]}


def header_lines(s: dict) -> list[str]:
    r = s["run"]
    host = s.get("host") or {}
    hw = []
    if host.get("cpus"):
        hw.append(f"{host['cpus']} CPUs" + (f" ({host['cpu_model']})" if host.get("cpu_model") else ""))
    if host.get("memory_bytes"):
        hw.append(f"{fmt_bytes(host['memory_bytes'])} RAM")
    if host.get("disks"):
        hw.append("disks " + ", ".join(d["device"] + (f" ({d['model']})" if d.get("model") else "")
                                       + (" SSD" if d.get("rotational") is False else " HDD" if d.get("rotational") else "")
                                       for d in host["disks"]))
    generator = loadgens.by_name(r.get("tool"))
    lines = [f"`{r['args']}`" if r.get("args") else f"({generator.title} arguments unknown)"]
    facts = [f"{generator.title} {r[generator.version_key]}" if r.get(generator.version_key) else None,
             f"server {r['server_version']}" if r.get("server_version") else None,
             f"scale {r['scale']}" if r.get("scale") else None,
             f"started {fmt_time(r['start'], True)}" if r.get("start") else None,
             f"{r['duration_s']:.1f} s" if r.get("duration_s") else None,
             f"exit code {r['exit_code']}" if r.get("exit_code") is not None else None]
    lines.append(" · ".join(f for f in facts if f))
    if r.get("targets"):
        lines.append("watched: " + ", ".join(r["targets"]))
    host_line = " · ".join(x for x in [host.get("nodename") or r.get("hostname"),
                                       " ".join(x for x in (host.get("sysname"), host.get("release"), host.get("machine")) if x)] + hw if x)
    if host_line:
        lines.append("host: " + host_line)
    return lines


def watched_targets(meta: dict) -> list[str]:
    """The database instances a run watched (meta.json "targets"), as "db1 on hostA"."""
    out = []
    for t in meta.get("targets") or []:
        name, host = (t.get("target"), t.get("host")) if isinstance(t, dict) else (str(t), None)
        if name:
            out.append(f"{name} on {host}" if host else str(name))
    return out


def md_table(header: list[str], rows: Iterable[list[str]]) -> str:
    def cell(x: str) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def to_markdown(s: dict, data_notes: list[str] | None = None, pictures: list[str] | None = None) -> str:
    parts = [f"# {loadgens.by_name(s['run'].get('tool')).title} run {s['run_id']}", "", *[l + "  " for l in header_lines(s)], ""]
    for p in pictures or []:
        parts += [f"![{p}]({p})", ""]
    for title, header, rows in tables(s):
        parts += [f"## {title}", "", md_table(header, rows), ""]
    if data_notes:
        parts += ["## Data", ""] + [f"- {n}" for n in data_notes] + [""]
    return "\n".join(parts)
