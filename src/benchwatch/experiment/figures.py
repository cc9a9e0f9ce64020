"""One run's figures for an experiment, from its saved record, read by the one replay of a run."""

from __future__ import annotations

import math
from typing import Any

from benchwatch.model import replay
from benchwatch.record import rundir


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
    return {"run_id": run.run_id, "tps": number("tps"), "latency_avg_s": number("latency_avg_s"),
            "latency_p95_s": number("latency_percentile_s") if percentile == 95 else None,
            "transactions": number("transactions_processed") or number("transactions"),
            "aborted_clients": len(model.errors), "exit_code": meta.get("exit_code"),
            "server_version": meta.get("server_version"), "started_at": meta.get("started_at"),
            "ended_at": meta.get("ended_at")}
