"""The numbers of a run, from its raw series: pure functions, no I/O.

Everything here reads `Series` (raw samples at their own timestamps), never
step-sampled query results, so the figures are the same whether the series
came from Prometheus or were rebuilt from the run directory.

What every run has is composed here; each tool's and each engine's part of the
summary, its tables and compare rows live in its folder (summary.py of
benchwatch.loadgens.<tool> and benchwatch.engines.<family>), built with the
toolkit of benchwatch.present.summary.

Conventions: TPS statistics are over the tool's progress lines (one value per
interval, stall zeros included); standard deviation is the population one
(Prometheus' stddev_over_time); times are Unix seconds; durations seconds.
"""

from __future__ import annotations

from benchwatch import engines, loadgens
from benchwatch.explain import report as explain_report
from benchwatch.model.samples import is_stale_marker
from benchwatch.present import stability as stability_words
from benchwatch.present.summary import (
    AROUND_S,
    CompareRow,
    Context,
    Table,
    fmt_bytes,
    fmt_ms,
    fmt_num,
    fmt_pct,
    fmt_seconds,
    fmt_time,
    host_from,
    interval_of,
    last_value,
    latency_percentiles,
    md_table,
    mean_over,
    merged,
    one,
    seconds_below,
    stalls,
    tps_stats,
    value_at,
)
from benchwatch.query.series import Series
from benchwatch.record import replay
from benchwatch.stability import LatencyTail, by_cause, latency_from_buckets, profile

# The toolkit (benchwatch.present.summary) is read through this module by the composers too.
__all__ = [
    "AROUND_S", "CompareRow", "Context", "Table", "build", "fmt_bytes", "fmt_ms", "fmt_num", "fmt_pct",
    "fmt_seconds", "fmt_time", "header_lines", "host_from", "interval_of", "last_value",
    "latency_percentiles", "md_table", "mean_over", "merged", "one", "seconds_below", "stalls", "tables",
    "to_markdown", "tps_stats", "value_at", "watched_targets",
]


# -- the summary --------------------------------------------------------------------

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
    summary["stability"] = _stability(series, run_id, tps, interval, summary["dips"], ctx)
    merged(summary, generator.summary_figures(ctx))
    merged(summary, engine.summary_figures(ctx))
    return summary


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
    if s.get("stability"):  # summaries written before issue 29 have none
        out.append(("Stability", ["", "value"],
                    [["steady part", stability_words.steady_part(s["stability"])], *stability_words.rows(s["stability"])]))
    end = s.get("run_end")
    if end:  # a run that died: why, as explain says it
        out.append(("How the run ended", ["at", "exit code", "cause", "evidence"],
                    [[f"{end['at_s']:.1f} s into the run", str(end.get("exit_code")), end["cause"], end["evidence"]]]))
    absent = (s.get("dip_signals") or {}).get("absent") or {}
    if absent:  # what the dips could not be blamed on: the server lacked what the signal reads
        out.append(("Signals the dips were not weighed on", ["signal", "why"], [[k, v] for k, v in absent.items()]))
    out += engine.settings_tables(s)
    return out


def _stability(series: list[Series], run_id: str, tps: list[tuple[int, float]], interval: float, dips: list[dict],
               ctx: Context) -> dict:
    """The run's stability profile (benchwatch.stability) from the same series as the rest of the summary, its
    dips by cause from the dips above; the latency tail from the per-transaction log's histogram, else the tool's."""
    tail: LatencyTail | None = None
    for name, source in (("benchmark_latency_seconds_bucket", "per-transaction log (histogram of its latencies)"),
                         ("benchmark_result_latency_histogram_events", "the tool's histogram")):
        buckets: dict[float, float] = {}
        for s in series:
            if s.name == name and s.labels.get("run_id") == run_id and s.samples and "le" in s.labels:
                le = float(s.labels["le"])
                buckets[le] = buckets.get(le, 0.0) + s.samples[-1][1]
        if buckets:
            tail = latency_from_buckets(buckets.items(), source, ctx.final("benchmark_result_latency_max_seconds"))
            break
    out = profile(tps, interval, latency=tail)
    if out.get("intervals"):
        out["dips_by_cause"], out["dips_by_cause_source"] = by_cause(dips, out), "explain over the snapshot's series"
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


def to_markdown(s: dict, data_notes: list[str] | None = None, pictures: list[str] | None = None) -> str:
    parts = [f"# {loadgens.by_name(s['run'].get('tool')).title} run {s['run_id']}", "", *[l + "  " for l in header_lines(s)], ""]
    for p in pictures or []:
        parts += [f"![{p}]({p})", ""]
    for title, header, rows in tables(s):
        parts += [f"## {title}", "", md_table(header, rows), ""]
    if data_notes:
        parts += ["## Data", ""] + [f"- {n}" for n in data_notes] + [""]
    return "\n".join(parts)
