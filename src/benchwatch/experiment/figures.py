"""One run's figures for an experiment, from its saved record: the run's summary.json (benchwatch.record.outcome,
computed from the raw output for a run without one) and, for what it does not keep (aborted clients), the one
replay of a run."""

from __future__ import annotations

import math
from typing import Any

from benchwatch import stability
from benchwatch.model.samples import Sample
from benchwatch.record import replay, rundir
from benchwatch.stability import runs as stability_runs


def run_figures(path: str) -> dict[str, Any]:
    """TPS, latency (average; the 95th percentile where the tool printed it or a latency log gives it),
    transactions, aborted clients and exit code of the run recorded in ``path``; its stability profile and
    its per-interval TPS (one figure per progress line)."""
    run = rundir.RunDir(path)
    meta = run.read_meta()
    model, samples = replay.replay_run_dir_model(path, meta)
    # version 2: the stability profile kept, or computed from the raw output for an older run, with its dips
    # by cause where the run's series are archived
    summary = stability_runs.outcome(run)
    tool = summary.get("tool_summary") or {}

    def number(value: object) -> float | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return float(value) if math.isfinite(value) else None

    return {"run_id": run.run_id, "tps": number(summary.get("tps")) if summary.get("tps_source") == "summary" else None,
            "latency_avg_s": number(summary.get("latency_avg_s")), "latency_p95_s": number(summary.get("latency_p95_s")),
            "transactions": number(tool.get("transactions_processed")) or number(tool.get("transactions")),
            "aborted_clients": len(model.errors), "exit_code": meta.get("exit_code"),
            "server_version": meta.get("server_version"), "started_at": meta.get("started_at"),
            "ended_at": meta.get("ended_at"), "stability": stability_of(summary, samples, meta),
            "interval_tps": [round(s.value, 2) for s in samples
                             if s.name == "benchmark_progress_tps" and math.isfinite(s.value)]}


def stability_of(summary: dict[str, Any], samples: list[Sample], meta: dict[str, Any]) -> dict[str, Any] | None:
    """The run's stability profile as summary.json keeps it; for a run recorded before it was kept, computed
    from the run's raw output (its progress lines, as replayed), without the dips' causes."""
    profile = summary.get("stability")
    if isinstance(profile, dict):
        return profile
    tps = [(s.timestamp_ms, s.value) for s in samples if s.name == "benchmark_progress_tps" and math.isfinite(s.value)]
    if not tps:
        return None
    return stability.profile(tps, float(meta.get("progress_interval") or 0) or 1.0)
