"""One run's figures for an experiment, from its saved record, read by the one replay of a run."""

from __future__ import annotations

import math
import os
from typing import Any

from benchwatch import loadgens
from benchwatch.model import replay
from benchwatch.record import rundir
from benchwatch.share.summary import histogram_quantile


def run_figures(path: str) -> dict[str, Any]:
    """TPS, latency (average; the tool's percentile where it prints one), aborted clients and exit code of
    the run recorded in ``path``, as its summary says (the replay's model of its saved output)."""
    run = rundir.RunDir(path)
    meta = run.read_meta()
    model, _ = replay.replay_recorded(path, meta)
    summary = model.summary

    def number(key: str) -> float | None:
        value = summary.get(key)
        return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None

    percentile = number("percentile")
    p95 = number("latency_percentile_s") if percentile == 95 else _txlog_p95(path, run.run_id, meta)
    return {"run_id": run.run_id, "tps": number("tps"), "latency_avg_s": number("latency_avg_s"),
            "latency_p95_s": p95,
            "transactions": number("transactions_processed") or number("transactions"),
            "aborted_clients": len(model.errors), "exit_code": meta.get("exit_code"),
            "server_version": meta.get("server_version"), "started_at": meta.get("started_at"),
            "ended_at": meta.get("ended_at")}


def _txlog_p95(path: str, run_id: str, meta: dict[str, Any]) -> float | None:
    """The 95th percentile of a run's per-transaction latency log (pgbench -l, benchwatch run --latency-log),
    read as the exporter reads it, from its histogram's final counts; None without a log."""
    prefix = meta.get("txlog_prefix")
    if not isinstance(prefix, str) or not prefix:
        return None
    generator = loadgens.by_name(meta.get("tool"))
    reader = generator.latency_log_reader(run_id)
    if reader is None:
        return None
    base = os.path.basename(prefix)
    names = sorted(n for n in os.listdir(path) if generator.latency_log_file(base, n))
    if not names:
        return None
    for name in names:
        with open(os.path.join(path, name), "rb") as f:
            reader.feed(os.path.join(path, name), f.read())
    final: dict[float, float] = {}
    for s in reader.samples(final=True):
        if s.name == "benchmark_latency_seconds_bucket":
            le = dict(s.labels).get("le")
            if le is not None:
                final[float(le)] = s.value  # cumulative: the last sample of each bucket is the run's count
    return histogram_quantile(0.95, sorted(final.items()))
