"""The report of an experiment as one JSON-able object (``benchwatch report NAME --json``; the share
bundle draws the same): per variant and cell the median TPS with its interval and n, per variant against
the baseline the ratio with its interval and a verdict, the same for latency, and the why of each
difference (benchwatch.evidence, given as ``why``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from benchwatch import evidence, loadgens
from benchwatch.experiment import stats, steadiness
from benchwatch.experiment.figures import run_figures
from benchwatch.experiment.plan import Plan, progress
from benchwatch.experiment.scope import Scope, why_scope
from benchwatch.experiment.spec import Cell
from benchwatch.util import secrets

# (baseline run ids, variant run ids, cell, host signals only) -> why the variant differs:
# [{"signal", "baseline", "variant", "change"}]
Why = Callable[[list[str], list[str], Cell, bool], list[dict[str, Any]]]
# (run ids of the less steady side, host signals only) -> the server and host measures that moved during those
# runs' dips: [{"signal", "outside_dips", "during_dips", "change", "unit"}]
DipsWhy = Callable[[list[str], bool], list[dict[str, Any]]]


def collect(plan: Plan, events: list[dict[str, Any]], runs_dir: str,
            fetch: Callable[[str], str | None] | None = None) -> dict[int, dict[str, Any]]:
    """Planned index -> the figures of its run that counts, read from the run's saved record; when the run
    directory is gone, from ``fetch(run_id)``'s copy (the results database's, materialized: a path) if it has
    one, else the state file's copy of the figures."""
    state = progress(events)
    recorded = {e.get("run_id"): e.get("figures") for e in events if e.get("event") == "finished" and e.get("ok")}
    out: dict[int, dict[str, Any]] = {}
    for index, run_id in state.done.items():
        local = os.path.join(runs_dir, run_id)
        path = local if os.path.exists(os.path.join(local, "meta.json")) else fetch(run_id) if fetch is not None else None
        figures = run_figures(path) if path is not None else recorded.get(run_id)
        if figures:
            out[index] = figures
    return out


def _round(x: float | None, digits: int = 4) -> float | None:
    return round(x, digits) if x is not None else None


def _pair(p: tuple[float, float] | None, digits: int = 4) -> list[float] | None:
    return [round(p[0], digits), round(p[1], digits)] if p is not None else None


def build(plan: Plan, events: list[dict[str, Any]], figures: dict[int, dict[str, Any]], why: Why | None = None,
          dips_why: DipsWhy | None = None) -> dict:
    by_key: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for run in plan.runs:
        f = figures.get(run.index)
        if f is not None:
            by_key.setdefault((run.variant, run.cell), []).append(f)
    cells_out: list[dict[str, Any]] = []
    pooled: dict[tuple[str, int], list[float]] = {}
    for v in plan.variants:
        for ci, cell in enumerate(plan.cells):
            fs = by_key.get((v.name, ci), [])
            tps = [f["tps"] for f in fs if f.get("tps") is not None]
            med, ci95 = stats.median_ci(tps)
            lat = [f["latency_avg_s"] for f in fs if f.get("latency_avg_s") is not None]
            lat_med, lat_ci = stats.median_ci(lat)
            p95 = [f["latency_p95_s"] for f in fs if f.get("latency_p95_s") is not None]
            p95_med, p95_ci = stats.median_ci(p95)
            cells_out.append({
                "variant": v.name, "clients": cell.clients, "scale": cell.scale, "cell": cell.name,
                "args": {o: val for o, val in cell.args}, "n": len(tps), "tps_median": _round(med, 2),
                "tps_ci": _pair(ci95, 2), "tps": [round(x, 2) for x in tps],
                "latency_avg_ms_median": _round(lat_med * 1000 if lat_med is not None else None),
                "latency_avg_ms_ci": _pair((lat_ci[0] * 1000, lat_ci[1] * 1000) if lat_ci else None),
                "latency_p95_ms_median": _round(p95_med * 1000 if p95_med is not None else None),
                "latency_p95_ms_ci": _pair((p95_ci[0] * 1000, p95_ci[1] * 1000) if p95_ci else None),
                "run_ids": [f["run_id"] for f in fs],
                "server_versions": sorted({str(f["server_version"]) for f in fs if f.get("server_version")}),
                "stability": steadiness.cell([f.get("stability") for f in fs if f.get("tps") is not None]),
                "interval_tps": interval_distribution(pooled.setdefault((v.name, ci), [
                    x for f in fs if f.get("tps") is not None for x in f.get("interval_tps") or []])),
            })
    _histograms(cells_out, pooled, plan)
    base = plan.baseline
    tps_cmp: list[tuple[stats.Comparison, Sequence[float], Sequence[float]]] = []
    lat_cmp: list[tuple[stats.Comparison, Sequence[float], Sequence[float]]] = []
    p95_cmp: list[tuple[stats.Comparison, Sequence[float], Sequence[float]]] = []
    pairs = []
    for v in plan.variants[1:]:
        for ci, cell in enumerate(plan.cells):
            a, b = by_key.get((base, ci), []), by_key.get((v.name, ci), [])

            def values(fs: list[dict[str, Any]], key: str) -> list[float]:
                return [float(f[key]) for f in fs if f.get(key) is not None]

            tps_cmp.append((stats.compare(values(a, "tps"), values(b, "tps")), values(a, "tps"), values(b, "tps")))
            lat_cmp.append((stats.compare(values(a, "latency_avg_s"), values(b, "latency_avg_s")),
                            values(a, "latency_avg_s"), values(b, "latency_avg_s")))
            p95_cmp.append((stats.compare(values(a, "latency_p95_s"), values(b, "latency_p95_s")),
                            values(a, "latency_p95_s"), values(b, "latency_p95_s")))
            pairs.append((v, ci, cell, a, b))
    stats.decide(tps_cmp, plan.min_effect_pct, +1, ("faster", "slower"))
    stats.decide(lat_cmp, plan.min_effect_pct, -1, ("lower", "higher"))
    stats.decide([c for c in p95_cmp if c[0].ratio is not None], plan.min_effect_pct, -1, ("lower", "higher"))
    steady = [steadiness.compare([f.get("stability") for f in a if f.get("tps") is not None],
                                 [f.get("stability") for f in b if f.get("tps") is not None]) for *_, a, b in pairs]
    steadiness.decide(steady, plan.min_effect_pct)
    diffs = []
    for (v, _ci, cell, a, b), (t, ta, tb), (lt, _, _), (pt, _, _), sd in zip(pairs, tps_cmp, lat_cmp, p95_cmp, steady):
        entry: dict[str, Any] = {
            "variant": v.name, "clients": cell.clients, "scale": cell.scale, "cell": cell.name,
            "ratio": _round(t.ratio), "ratio_ci": _pair(t.ratio_ci), "verdict": t.verdict,
            "test": stats.TEST_NAME, "p_value": _round(t.p, 6), "p_adjusted": _round(t.p_adjusted, 6),
            "n_baseline": len(ta), "n_variant": len(tb), "repeats_needed": t.repeats_needed,
            "note": t.note or None,
            "latency": {"avg": _latency(lt), **({"p95": _latency(pt)} if pt.ratio is not None else {})},
            "why": [],
        }
        if why is not None and t.verdict != "no difference shown":
            # A variant's own server (bindir=, dsn=) compares as watched during the sweep (experiment.scope).
            scope = why_scope(events, plan.variant(base), v)
            entry["why"] = why([f["run_id"] for f in a], [f["run_id"] for f in b], cell, scope.host_only)
            entry["why_scope"] = scope.text
            where = f"{v.name} at {cell.words}" if cell.words else v.name
            entry["why_text"] = evidence.sentence(where, entry["why"])
        entry["stability"] = _stability(sd, v.name, base, cell, a, b, dips_why, why_scope(events, plan.variant(base), v))
        diffs.append(entry)
    state = progress(events)
    return {
        "sweep": plan.name, "baseline": base, "tool": os.path.basename(plan.argv[0]), "argv": shown_argv(plan.argv),
        "engine": plan.engine, "order": plan.order, "seed": plan.seed, "repeat": plan.repeat,
        "min_effect_pct": plan.min_effect_pct, "test": stats.TEST_NAME, "tps_interval": stats.INTERVAL_NAME,
        "ratio_interval": stats.RATIO_INTERVAL_NAME, "stability_test": steadiness.TEST_NAME,
        "stability_interval": steadiness.INTERVAL_NAME,
        "variants": [{"name": v.name, "what": v.describe,
                      "server_versions": sorted({sv for c in cells_out if c["variant"] == v.name
                                                 for sv in c["server_versions"]})} for v in plan.variants],
        "runs": {"planned": len(plan.runs), "done": len(state.done),
                 "missing": [r.index for r in state.missing(plan)],
                 "failed_attempts": sum(len(x) for x in state.failed.values())},
        "between_runs": _between(events),
        "cells": cells_out, "differences": diffs,
    }


def _stability(sd: steadiness.Difference, variant: str, base: str, cell: Cell, a: list[dict[str, Any]],
               b: list[dict[str, Any]], dips_why: DipsWhy | None, scope: Scope) -> dict[str, Any]:
    """A difference's ``stability``: the verdict, each measure's comparison and, unless no difference is shown,
    its why: the dips and transactions lost per leading cause on each side, and the measures that moved during
    the less steady side's dips."""
    out = steadiness.to_json(sd)
    if sd.verdict == steadiness.NONE:
        return out
    counted_a = [f for f in a if f.get("tps") is not None]
    counted_b = [f for f in b if f.get("tps") is not None]
    causes = steadiness.causes_why(steadiness.by_cause([f.get("stability") for f in counted_a]),
                                   steadiness.by_cause([f.get("stability") for f in counted_b]))
    shaky = counted_b if sd.verdict == steadiness.LESS_STEADY else counted_a
    during = dips_why([f["run_id"] for f in shaky], scope.host_only) if dips_why is not None else []
    where = f"{variant} at {cell.words}" if cell.words else variant
    words = [f"{where} is {sd.verdict} than {base}"]
    if causes:
        words.append(steadiness.causes_sentence(causes))
    elif not any(f.get("stability") and f["stability"].get("dips_by_cause") is not None for f in [*counted_a, *counted_b]):
        words.append("the dips' causes are not known (the runs' archived series are not read yet)")
    if during:
        words.append(evidence.sentence(f"during the dips of {variant if shaky is counted_b else base}", during,
                                       compare=("outside_dips", "during_dips")))
    out["why"] = {"causes": causes, "during_dips": during,
                  "during_dips_of": variant if shaky is counted_b else base,
                  "scope": scope.text if dips_why is not None else None,
                  "text": "; ".join(words)}
    return out


def interval_distribution(tps: list[float]) -> dict[str, Any] | None:
    """The per-interval TPS of a cell's runs pooled: how many intervals and their quantiles (the PNG's box)."""
    if not tps:
        return None
    xs = sorted(tps)

    def q(p: float) -> float:
        i = p * (len(xs) - 1)
        lo = int(i)
        hi = min(lo + 1, len(xs) - 1)
        return round(xs[lo] + (xs[hi] - xs[lo]) * (i - lo), 2)

    return {"n": len(xs), "min": xs[0], "p1": q(0.01), "p5": q(0.05), "p25": q(0.25), "median": q(0.5),
            "p75": q(0.75), "p95": q(0.95), "p99": q(0.99), "max": xs[-1]}


HISTOGRAM_BINS = 20


def _histograms(cells_out: list[dict[str, Any]], pooled: dict[tuple[str, int], list[float]], plan: Plan) -> None:
    """Each cell's per-interval TPS counted in bins shared by every variant of that cell (0 to the highest
    interval of any of them, :data:`HISTOGRAM_BINS` bins): ``interval_tps.histogram``, {"le": upper edges,
    "count": intervals in each bin}, for the Experiment dashboard."""
    for ci, _ in enumerate(plan.cells):
        top = max((max(xs) for (_, i), xs in pooled.items() if i == ci and xs), default=0.0)
        if top <= 0:
            continue
        width = top / HISTOGRAM_BINS
        edges = [round(width * (k + 1), 2) for k in range(HISTOGRAM_BINS)]
        for c, v in zip(cells_out, [(v.name, i) for v in plan.variants for i, _ in enumerate(plan.cells)]):
            xs = pooled.get(v) or []
            if v[1] != ci or not xs or c["interval_tps"] is None:
                continue
            counts = [0] * HISTOGRAM_BINS
            for x in xs:
                counts[min(HISTOGRAM_BINS - 1, int(x / width))] += 1
            c["interval_tps"]["histogram"] = {"le": edges, "count": counts}


def shown_argv(argv: list[str]) -> list[str]:
    """The tool's argv as it may be shown and shared: a password given as an option replaced."""
    generator = loadgens.for_program(argv[0])
    return secrets.redact_argv([os.path.basename(argv[0]), *generator.redact_argv(list(argv[1:]))])


def _latency(c: stats.Comparison) -> dict[str, Any]:
    return {"ratio": _round(c.ratio), "ratio_ci": _pair(c.ratio_ci), "verdict": c.verdict,
            "p_adjusted": _round(c.p_adjusted, 6), "repeats_needed": c.repeats_needed}


def _between(events: list[dict[str, Any]]) -> list[str]:
    """What was done to the database between runs, each kind once (CHECKPOINT, TRUNCATE pgbench_history, ...)."""
    seen: list[str] = []
    for e in events:
        if e.get("event") == "started":
            for what in e.get("prepared") or []:
                kind = str(what)
                if kind not in seen:
                    seen.append(kind)
    return seen
