"""A history as Prometheus series, for the History dashboard (benchwatch.dashboards.history).

- ``benchmark_history_value{workload, metric}``: one sample per run, at the run's start, its figure (TPS in
  transactions per second; latency_* in seconds). A run's figure never changes, so sending again is harmless.
- ``benchmark_history_change_point_info{workload, metric, run_id, verdict, step, confidence, changed}``: 1 at
  the start of the first run after a change point; the labels carry the annotation's text. As runs come, an
  estimate can change: the new one is a new series beside the old (Prometheus keeps what it was sent).
- ``benchmark_history_annotation_info{text, run_id}``: 1 at the time of each ``benchwatch annotate``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from benchwatch.history.rows import changed_text
from benchwatch.model.samples import Sample, sample
from benchwatch.sink.remote_write import RemoteWriteError, RemoteWriter

VALUE = "benchmark_history_value"
CHANGE_POINT = "benchmark_history_change_point_info"
ANNOTATION = "benchmark_history_annotation_info"

METRICS = {
    VALUE: ("gauge", "A run's figure (history --metric: tps in transactions per second, latency_* in seconds), at the run's start; one sample per run."),
    CHANGE_POINT: ("gauge", "1 at the start of the first run after a change point of a workload's history; labels: the step, its confidence interval and p-value, what changed."),
    ANNOTATION: ("gauge", "1 at the time of an event recorded with benchwatch annotate; labels: its text and the run it concerns."),
}

_MAX_LABEL = 1000  # a label value Grafana still shows whole; longer "what changed" lists are cut


def _ms(started_at: str) -> int:
    return int(dt.datetime.fromisoformat(started_at.replace("Z", "+00:00")).timestamp() * 1000)


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_LABEL else text[:_MAX_LABEL - 1] + "…"


def history_samples(report: dict[str, Any]) -> list[Sample]:
    """The series of one workload's history (``history.report.series``'s answer)."""
    base = {"workload": report["workload"], "metric": report["metric"]}
    if report.get("name"):
        base["workload_name"] = report["name"]
    out = [sample(VALUE, base, r["value"], _ms(r["started_at"])) for r in report["runs"] if r["started_at"]]
    runs = {r["run_id"]: r for r in report["runs"]}
    for cp in report["change_points"]:
        lo, hi = cp["step_ci"]
        labels = {**base, "run_id": cp["run_id"], "verdict": cp["verdict"],
                  "step": f"{cp['step_pct']:+.1f} % ({round(cp['confidence'] * 100)} % CI {lo:+.1f} … {hi:+.1f} %, "
                          f"p = {cp['p_value']:.2g})",
                  "changed": _cut(changed_text(cp["changed"]))}
        out.append(sample(CHANGE_POINT, labels, 1.0, _ms(runs[cp["run_id"]]["started_at"])))
    return out


def annotation_samples(events: Iterable[dict[str, Any]]) -> list[Sample]:
    return [sample(ANNOTATION, {"text": _cut(str(e["text"])), "run_id": e.get("run_id") or ""}, 1.0, int(e["at"] * 1000))
            for e in events]


def send(url: str, samples: list[Sample]) -> str | None:
    """Write the samples; the reason when they could not be written, else None."""
    if not samples:
        return None
    try:
        RemoteWriter(url, timeout_s=5.0).send(samples)
    except (RemoteWriteError, OSError, ValueError) as e:
        return f"could not write to Prometheus at {url}: {e}"
    return None


def send_annotation(url: str, event: dict[str, Any]) -> str | None:
    return send(url, annotation_samples([event]))
