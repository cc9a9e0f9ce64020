"""The report of an experiment as rows of the results database's ``sweep_verdicts`` (docs/results.md), for
SQL and the Experiment dashboard's SQL panels: one row per variant, cell and measure against the baseline,
with its ratio, interval and p-values, as ``benchwatch report NAME`` decided them."""

from __future__ import annotations

from typing import Any

# The report's measures: the key of a difference's comparison -> the row's metric.
LATENCIES = {"avg": "latency_avg", "p95": "latency_p95"}
STEADINESS = "steadiness"  # the variant's stability verdict (its measures each get a row of their own too)


def _ci(pair: list[float] | None, end: int) -> float | None:
    return pair[end] if pair else None


def verdict_rows(model: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of :data:`benchwatch.results.store.VERDICT_COLUMNS` of a report (``experiment.report.build``)."""
    out: list[dict[str, Any]] = []
    for d in model["differences"]:
        common = {"variant": d["variant"], "cell": d["cell"], "clients": d["clients"], "scale": d["scale"],
                  "min_effect_pct": model["min_effect_pct"], "n_baseline": d["n_baseline"], "n_variant": d["n_variant"]}
        out.append({**common, "metric": "tps", "verdict": d["verdict"], "ratio": d["ratio"],
                    "ratio_ci_low": _ci(d["ratio_ci"], 0), "ratio_ci_high": _ci(d["ratio_ci"], 1),
                    "p_value": d["p_value"], "p_adjusted": d["p_adjusted"], "test": d["test"],
                    "why": d.get("why_text") or d["note"]})
        for key, metric in LATENCIES.items():
            lat = (d.get("latency") or {}).get(key)
            if lat and lat.get("ratio") is not None:
                out.append({**common, "metric": metric, "verdict": lat["verdict"], "ratio": lat["ratio"],
                            "ratio_ci_low": _ci(lat["ratio_ci"], 0), "ratio_ci_high": _ci(lat["ratio_ci"], 1),
                            "p_adjusted": lat["p_adjusted"], "test": d["test"]})
        steady = d.get("stability")
        if not steady:
            continue
        out.append({**common, "metric": STEADINESS, "verdict": steady["verdict"], "test": steady["test"],
                    "why": (steady.get("why") or {}).get("text") or steady.get("note")})
        for measure, m in (steady.get("measures") or {}).items():
            if not m["n_baseline"] and not m["n_variant"]:
                continue  # no run has the measure (runs without a stability profile): nothing to say
            out.append({**common, "metric": measure, "verdict": m["verdict"], "ratio": m["ratio"],
                        "ratio_ci_low": _ci(m["ratio_ci"], 0), "ratio_ci_high": _ci(m["ratio_ci"], 1),
                        "p_value": m["p_value"], "p_adjusted": m["p_adjusted"], "test": steady["test"],
                        "n_baseline": m["n_baseline"], "n_variant": m["n_variant"], "why": m.get("note")})
    return out
