"""The report of an experiment as series in Prometheus, for the "Experiment" Grafana dashboard: each
``benchwatch report NAME`` writes them again, at the time of the report (the newest report wins)."""

from __future__ import annotations

from typing import Any

from benchwatch.model.samples import Sample, sample

# name -> help; gauges, labels experiment (the sweep's name), variant, cell, clients, scale.
METRICS = {
    "benchwatch_experiment_tps_median": "Median TPS of a variant's runs in a cell of an experiment (benchwatch sweep).",
    "benchwatch_experiment_tps_ci_low": "Low end of the 95 % interval of a variant's TPS in a cell.",
    "benchwatch_experiment_tps_ci_high": "High end of the 95 % interval of a variant's TPS in a cell.",
    "benchwatch_experiment_runs": "Runs of a variant in a cell that count (n).",
    "benchwatch_experiment_latency_avg_seconds_median": "Median of the runs' average latency, in seconds.",
    "benchwatch_experiment_tps_ratio": "A variant's TPS over the baseline's in a cell (geometric means).",
    "benchwatch_experiment_tps_ratio_ci_low": "Low end of the 95 % interval of the TPS ratio.",
    "benchwatch_experiment_tps_ratio_ci_high": "High end of the 95 % interval of the TPS ratio.",
    "benchwatch_experiment_verdict": "1 faster, -1 slower, 0 no difference shown (Welch's t, Holm, --min-effect).",
    # label measure: a key of the run's stability profile (tps_cov, dip_seconds, lost_share, ...)
    "benchwatch_experiment_stability_median": "Median of a stability measure over a variant's runs in a cell.",
    "benchwatch_experiment_stability_ci_low": "Low end of the 95 % interval of a stability measure in a cell.",
    "benchwatch_experiment_stability_ci_high": "High end of the 95 % interval of a stability measure in a cell.",
    "benchwatch_experiment_stability_verdict": "1 steadier, -1 less steady, 0 no difference shown, against the baseline.",
    # label le: the upper edge of a bin (TPS), the bins shared by the variants of a cell
    "benchwatch_experiment_interval_tps_intervals": "Intervals (progress lines) of a variant's runs in a cell whose "
                                                    "TPS falls in a bin: the distribution of per-interval TPS.",
}
VERDICTS = {"faster": 1, "slower": -1, "no difference shown": 0}
STABILITY_VERDICTS = {"steadier": 1, "less steady": -1, "no difference shown": 0}


def _labels(model: dict[str, Any], row: dict[str, Any]) -> dict[str, object]:
    return {"experiment": model["sweep"], "variant": row["variant"], "cell": row["cell"],
            "clients": row["clients"] if row["clients"] is not None else "",
            "scale": row["scale"] if row["scale"] is not None else ""}


def report_samples(model: dict[str, Any], now_ms: int) -> list[Sample]:
    out: list[Sample] = []

    def put(name: str, labels: dict[str, object], value: float | None) -> None:
        if value is not None:
            out.append(sample(name, labels, float(value), now_ms))

    for c in model["cells"]:
        labels = _labels(model, c)
        put("benchwatch_experiment_tps_median", labels, c["tps_median"])
        put("benchwatch_experiment_tps_ci_low", labels, c["tps_ci"][0] if c["tps_ci"] else None)
        put("benchwatch_experiment_tps_ci_high", labels, c["tps_ci"][1] if c["tps_ci"] else None)
        put("benchwatch_experiment_runs", labels, c["n"])
        lat = c.get("latency_avg_ms_median")
        put("benchwatch_experiment_latency_avg_seconds_median", labels, lat / 1000 if lat is not None else None)
        for measure, m in (c.get("stability") or {}).items():
            if not isinstance(m, dict) or "median" not in m:
                continue  # dips_by_cause, note
            put("benchwatch_experiment_stability_median", {**labels, "measure": measure}, m["median"])
            put("benchwatch_experiment_stability_ci_low", {**labels, "measure": measure}, m["ci"][0] if m["ci"] else None)
            put("benchwatch_experiment_stability_ci_high", {**labels, "measure": measure}, m["ci"][1] if m["ci"] else None)
        hist = (c.get("interval_tps") or {}).get("histogram")
        if hist:
            for le, count in zip(hist["le"], hist["count"]):
                put("benchwatch_experiment_interval_tps_intervals", {**labels, "le": f"{le:g}"}, count)
    for d in model["differences"]:
        labels = dict(_labels(model, d), baseline=model["baseline"])
        put("benchwatch_experiment_tps_ratio", labels, d["ratio"])
        put("benchwatch_experiment_tps_ratio_ci_low", labels, d["ratio_ci"][0] if d["ratio_ci"] else None)
        put("benchwatch_experiment_tps_ratio_ci_high", labels, d["ratio_ci"][1] if d["ratio_ci"] else None)
        put("benchwatch_experiment_verdict", labels, VERDICTS.get(d["verdict"], 0))
        if d.get("stability"):
            put("benchwatch_experiment_stability_verdict", labels, STABILITY_VERDICTS.get(d["stability"]["verdict"], 0))
    return out
