"""A workload's change points as rows of the results database's ``history_change_points`` (docs/results.md),
for SQL and the History dashboard's SQL panel: the first run after each change, the step with its interval
and p-value, and what changed between the runs around it."""

from __future__ import annotations

import datetime as dt
from typing import Any


def _epoch(started_at: str | None) -> float | None:
    if not started_at:
        return None
    return dt.datetime.fromisoformat(started_at.replace("Z", "+00:00")).timestamp()


def changed_text(changed: dict[str, Any]) -> str:
    """"key: before → after, ..." (the History dashboard's PromQL table says the same), or "nothing recorded"."""
    return ", ".join(f"{k}: {v[0]} → {v[1]}" for k, v in changed.items()) or "nothing recorded"


def change_point_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of :data:`benchwatch.results.store.CHANGE_POINT_COLUMNS` of ``history.report.series``'s answer."""
    starts = {r["run_id"]: r["started_at"] for r in result["runs"]}
    return [{"run_id": cp["run_id"], "workload_name": result.get("name"), "started_at": _epoch(starts.get(cp["run_id"])),
             "verdict": cp["verdict"], "step_pct": cp["step_pct"], "step_ci_low": cp["step_ci"][0],
             "step_ci_high": cp["step_ci"][1], "confidence": cp["confidence"], "p_value": cp["p_value"],
             "mean_before": cp["before"], "mean_after": cp["after"], "accepted": bool(cp["accepted"]),
             "changed": cp["changed"], "changed_text": changed_text(cp["changed"])}
            for cp in result["change_points"]]
