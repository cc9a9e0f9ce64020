"""What a run achieved, kept in its run directory when it ends: ``summary.json``.

One home for a run's result figures: ``run``, ``attach`` and ``import`` write it
(:func:`save`), and whatever compares runs (``history``, sweeps) reads it back
with :func:`outcome` — per-run TPS is ``outcome(run)["tps"]``. The figures come
from the run's raw output through the same run model the exporter uses
(benchwatch.record.replay), so they are the figures Prometheus got; a run
directory from before summary.json existed gets them the same way when asked.

Layout (``version`` 2; version 1 lacked ``"stability"``)::

    {"version": 2, "tps": 1234.5, "tps_source": "summary",
     "latency_avg_s": 0.0081, "latency_p50_s": null, "latency_p95_s": 0.012, "latency_p99_s": null,
     "percentile_source": "sysbench summary (95th percentile)",
     "progress_lines": 60, "tool_summary": {...the tool's own summary figures...},
     "stability": {...the run's stability profile, benchwatch.stability...}}

The stability profile needs explain's dip detector, on a floor above this one: the caller gives it as a
:data:`Profiler` (``benchwatch.stability.runs.profiler``). A summary written without one is version 1, and
``benchwatch.stability.runs.outcome`` computes the profile when asked, as for a run from before version 2.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Callable, Mapping
from typing import Any

from benchwatch import loadgens
from benchwatch.model.histogram import histogram_quantile
from benchwatch.model.run import RunModel
from benchwatch.model.samples import Sample
from benchwatch.record import replay, rundir

SUMMARY = "summary.json"
UNREAD_KEPT = 100  # lines not read, kept by number and reason (all are counted)
VERSION = 2      # with "stability"
VERSION_PLAIN = 1  # written when no profiler was given: the figures without "stability"

# The figures a history can follow: name -> (summary.json key, +1 higher is better / -1 lower is better).
METRICS: dict[str, tuple[str, int]] = {
    "tps": ("tps", +1),
    "latency_avg": ("latency_avg_s", -1),
    "latency_p50": ("latency_p50_s", -1),
    "latency_p95": ("latency_p95_s", -1),
    "latency_p99": ("latency_p99_s", -1),
}

# The stability profile's measures (summary.json's "stability" object, benchwatch.stability):
# name -> (key in that object, +1 higher is steadier / -1 lower is steadier).
STABILITY_MEASURES: dict[str, tuple[str, int]] = {
    "tps_cov": ("tps_cov", -1),
    "tps_p1_ratio": ("tps_p1_ratio", +1),
    "tps_p5_ratio": ("tps_p5_ratio", +1),
    "tps_min_ratio": ("tps_min_ratio", +1),
    "dips": ("dips", -1),
    "dip_seconds": ("dip_seconds", -1),
    "stall_seconds": ("stall_seconds", -1),
    "lost_share": ("lost_share", -1),
    "latency_p99": ("latency_p99_s", -1),
    "latency_p999": ("latency_p999_s", -1),
    "latency_max": ("latency_max_s", -1),
}

# What the stability profile is computed from: the run's progress TPS samples (ms, tps), the interval they were
# reported at, and its latency tail's sources (:func:`latency_tail_sources`).
Profiler = Callable[[list[tuple[int, float]], float, Mapping[str, Any]], dict[str, Any]]

TPS = "benchmark_progress_tps"
TOOL_HISTOGRAM = "benchmark_result_latency_histogram_events"

# Each stability measure is a metric of its own (history's --metric, change points, --fail-on-regression),
# under its own name; the latency tail's p99 is "latency_p99" already (the summary's, from the same sources).
METRICS.update({name: (f"stability.{key}", direction) for name, (key, direction) in STABILITY_MEASURES.items()
                if name not in METRICS})

_PERCENTILES = (("latency_p50_s", 0.5), ("latency_p95_s", 0.95), ("latency_p99_s", 0.99))


def _figure(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _progress_tps(samples: list[Sample]) -> list[float]:
    return [s.value for s in samples if s.name == "benchmark_progress_tps" and math.isfinite(s.value)]


def _latency_log_buckets(run: rundir.RunDir, meta: Mapping[str, Any]) -> list[tuple[float, float]]:
    """The cumulative ``(le, count)`` buckets of the tool's per-transaction log (pgbench -l, ``run --latency-log``),
    through the reader the exporter follows it with; [] when the run has none."""
    prefix = meta.get("txlog_prefix")
    generator = loadgens.by_name(meta.get("tool"))
    reader = generator.latency_log_reader(run.run_id)
    if not isinstance(prefix, str) or reader is None:
        return []
    base = os.path.basename(prefix)
    files = sorted(os.path.join(run.path, n) for n in os.listdir(run.path) if generator.latency_log_file(base, n))
    if not files:
        return []
    for path in files:
        reader.expect(path)
    for path in files:
        with open(path, "rb") as f:
            reader.feed(path, f.read())
    buckets: dict[float, float] = {}
    for s in reader.samples(final=True):
        if s.name == "benchmark_latency_seconds_bucket":
            buckets[float(dict(s.labels)["le"])] = s.value  # cumulative: a bucket's last sample is its total
    return sorted(buckets.items())


def _highest_bound(pairs: list[tuple[float, float]]) -> float | None:
    """The upper bound of the highest bucket holding a transaction (None when it is +Inf or all are empty)."""
    prev = 0.0
    top = None
    for le, count in pairs:
        if count > prev:
            top = le
        prev = count
    return top if top is not None and math.isfinite(top) else None


def latency_tail_sources(model: RunModel, samples: list[Sample],
                         log_buckets: list[tuple[float, float]] | None = None) -> dict[str, Any]:
    """Where a run's latency tail can be read, best first: the per-transaction log's histogram, the tool's own
    histogram (sysbench --histogram), the tool's summary percentiles (p99, p99.9). The maximum is the
    summary's exact one where the tool prints it, else the upper bound of the highest bucket used.
    {"buckets": cumulative (le, count) or None, "p99_s", "p999_s", "max_s", "source": words or None}."""
    tool = model.summary
    out: dict[str, Any] = {"buckets": None, "p99_s": None, "p999_s": None, "max_s": _figure(tool.get("latency_max_s")),
                           "source": None}
    exact_max = out["max_s"] is not None
    histogram: dict[float, float] = {}
    for s in samples:
        if s.name == TOOL_HISTOGRAM:
            le = dict(s.labels).get("le")
            if le is not None:
                histogram[float(le)] = s.value
    if log_buckets:
        out["buckets"], out["source"] = list(log_buckets), "per-transaction log (histogram of its latencies)"
    elif histogram:
        out["buckets"], out["source"] = sorted(histogram.items()), f"{model.tool} histogram"
    else:
        out["p99_s"], out["p999_s"] = _figure(tool.get("latency_p99_s")), _figure(tool.get("latency_p999_s"))
        if out["p99_s"] is not None or out["p999_s"] is not None:
            out["source"] = f"{model.tool} summary"
    if out["buckets"] and not exact_max:
        out["max_s"] = _highest_bound(out["buckets"])
        if out["max_s"] is not None:
            out["source"] += "; max: the upper bound of the highest bucket used"
    if out["source"] is None and out["max_s"] is not None:
        out["source"] = f"{model.tool} summary (max only)"
    return out


def _tps_samples(samples: list[Sample]) -> list[tuple[int, float]]:
    return [(s.timestamp_ms, s.value) for s in samples if s.name == TPS and math.isfinite(s.value)]


def summarize(model: RunModel, samples: list[Sample], extra: Mapping[str, float | None] | None = None,
              percentile_source: str | None = None, *, profile: Profiler | None = None,
              log_buckets: list[tuple[float, float]] | None = None) -> dict[str, Any]:
    """summary.json's object for a run read by ``model`` (its samples: the progress TPS when the tool printed
    no summary, a run cut short); with its stability profile (version 2) when given a ``profile``r.
    ``log_buckets``: the per-transaction log's latency histogram, for the profile's tail."""
    tool = {k: v for k, v in model.summary.items() if not k.startswith("_")}
    tps = _figure(tool.get("tps"))
    tps_source = "summary" if tps is not None else None
    if tps is None:
        progress = _progress_tps(samples)
        if progress:
            tps, tps_source = statistics.fmean(progress), "mean of the progress lines (no summary)"
    out: dict[str, Any] = {"version": VERSION if profile else VERSION_PLAIN, "tool": model.tool, "tps": tps, "tps_source": tps_source,
                           "latency_avg_s": _figure(tool.get("latency_avg_s"))}
    out.update({key: None for key, _ in _PERCENTILES})
    source = None
    # sysbench prints one percentile of its choosing (--percentile, 95 by default)
    pct, value = _figure(tool.get("percentile")), _figure(tool.get("latency_percentile_s"))
    if pct is not None and value is not None:
        key = {50.0: "latency_p50_s", 95.0: "latency_p95_s", 99.0: "latency_p99_s"}.get(pct)
        if key:
            out[key], source = value, f"{model.tool} summary ({pct:g}th percentile)"
    for key in ("latency_p50_s", "latency_p95_s", "latency_p99_s"):  # go-tpc's summary, all types together
        if out[key] is None and _figure(tool.get(key)) is not None:
            out[key], source = _figure(tool.get(key)), f"{model.tool} summary"
    for key, value in (extra or {}).items():
        if out.get(key) is None and value is not None:
            out[key], source = value, percentile_source
    out["percentile_source"] = source
    out["progress_lines"] = model.progress_lines
    # The lines the run model could not use (each cost its own samples only), by file and line number.
    out["unread_lines"] = model.unparsed_lines
    out["unread"] = [dict(zip(("file", "line"), model.where(number), strict=True), reason=reason)
                     for number, reason in model.bad_lines[:UNREAD_KEPT]]
    out["tool_summary"] = {k: v for k, v in tool.items() if isinstance(v, (str, int, float, bool)) or v is None}
    if profile is not None:
        try:
            out["stability"] = profile(_tps_samples(samples), float(model.interval_s or 1.0),
                                       latency_tail_sources(model, samples, log_buckets))
        except Exception as e:  # any: the run's other figures are kept whatever the profile does
            out["stability"], out["stability_error"] = None, f"{type(e).__name__}: {e}"
    return out


def write(run: rundir.RunDir, summary: Mapping[str, Any]) -> None:
    """summary.json, replaced atomically (a reader never sees half of it)."""
    tmp = run.file(SUMMARY + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, sort_keys=True, allow_nan=False, default=str)
        f.write("\n")
    os.replace(tmp, run.file(SUMMARY))


def compute(run: rundir.RunDir, meta: Mapping[str, Any] | None = None, profile: Profiler | None = None) -> dict[str, Any]:
    """A finished run's summary from its raw output (no file written); with its stability profile when given
    a ``profile``r."""
    meta = run.read_meta() if meta is None else meta
    model, samples = replay.replay_run_dir_model(run.path, meta)
    try:
        buckets = _latency_log_buckets(run, meta)
    except (OSError, ValueError):
        buckets = []
    extra = {key: histogram_quantile(q, buckets) for key, q in _PERCENTILES} if buckets else {}
    return summarize(model, samples, extra, "pgbench -l per-transaction log (histogram)" if extra else None,
                     profile=profile, log_buckets=buckets)


def save(run: rundir.RunDir, meta: Mapping[str, Any] | None = None,
         notice: Callable[[str], None] | None = None, profile: Profiler | None = None) -> dict[str, Any] | None:
    """Compute and keep the summary of a run that just ended; None (and nothing written) when it cannot be
    read, said through ``notice``. ``profile``: see :func:`compute`.

    Best effort by design, whatever goes wrong: the run is over and its exit code must not change for this;
    its raw output is the record, and :func:`outcome` computes the summary again from it when summary.json
    is missing."""
    try:
        summary = compute(run, meta, profile)
        write(run, summary)
    except Exception as e:  # any: see above, never the run's end
        if notice:
            notice(f"{run.file(SUMMARY)} not written ({type(e).__name__}: {e}); history reads the raw output instead")
        return None
    return summary


def unread_notes(summary: Mapping[str, Any] | None, limit: int = 5) -> list[str]:
    """The lines of a run's output that were not read, in short for stderr at the end of ``run`` and ``attach``."""
    if not summary or not summary.get("unread_lines"):
        return []
    total = int(summary["unread_lines"])
    notes = [f"{u.get('file') or 'output'} line {u.get('line')}: {u.get('reason')}; not read (kept in the raw output)"
             for u in (summary.get("unread") or [])[:limit]]
    if total > len(notes):
        notes.append(f"... and {total - len(notes)} more line{'s' if total - len(notes) > 1 else ''} not read "
                     f"({SUMMARY} lists up to {UNREAD_KEPT})")
    return [f"{total} line{'s' if total > 1 else ''} of the output not read, each costing only its own samples:",
            *notes]


def keep(run: rundir.RunDir, summary: Mapping[str, Any], notice: Callable[[str], None] | None = None) -> bool:
    """:func:`write`, a failure said through ``notice`` instead of raised (an import goes on with its next run)."""
    try:
        write(run, summary)
    except (OSError, ValueError) as e:
        if notice:
            notice(f"{run.file(SUMMARY)} not written: {e}")
        return False
    return True


def read(run: rundir.RunDir) -> dict[str, Any] | None:
    """summary.json as saved; None when there is none (or it is damaged)."""
    try:
        with open(run.file(SUMMARY), "rb") as f:
            data = json.loads(f.read())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def outcome(run: rundir.RunDir, profile: Profiler | None = None) -> dict[str, Any]:
    """The run's result figures: summary.json, or for a run recorded before it existed, computed from its raw
    output ({} when neither can be read). With a ``profile``r, a summary without its stability profile (version
    1, or written without one) gets it, computed from the raw output; the figures it has stay as they were."""
    saved = read(run)
    if saved is not None and (profile is None or isinstance(saved.get("stability"), dict)):
        return saved
    try:
        computed = compute(run, profile=profile)
    except (OSError, ValueError, rundir.CorruptMeta):
        return saved or {}
    if saved is None:
        return computed
    return {**saved, "version": VERSION, "stability": computed.get("stability")}


def value(summary: Mapping[str, Any], metric: str) -> float | None:
    """One metric (a :data:`METRICS` name) of a run's summary (a key ``a.b``: ``b`` of the object ``a``)."""
    key, _ = METRICS[metric]
    found: Any = summary
    for part in key.split("."):
        found = found.get(part) if isinstance(found, Mapping) else None
    return _figure(found)
