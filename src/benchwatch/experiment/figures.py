"""One run's figures for an experiment, from its saved record: the run's summary.json (benchwatch.record.outcome,
computed from the raw output for a run without one) and, for what it does not keep (aborted clients), the one
replay of a run."""

from __future__ import annotations

import math
from typing import Any

from benchwatch.record import outcome, replay, rundir


def run_figures(path: str) -> dict[str, Any]:
    """TPS, latency (average; the 95th percentile where the tool printed it or a latency log gives it),
    transactions, aborted clients and exit code of the run recorded in ``path``."""
    run = rundir.RunDir(path)
    meta = run.read_meta()
    model, _ = replay.replay_run_dir_model(path, meta)
    summary = outcome.read(run) or outcome.compute(run, meta)
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
            "ended_at": meta.get("ended_at")}
