"""``benchwatch history WORKLOAD --fail-on-regression PCT --comment FILE``: the candidate's runs (the newest
``--recent``) against the workload's history, as a gate. The exit code is history's own verdict
(benchwatch.history.report.regression); this adds what the comment shows: the comparison with its interval,
what changed between the runs, the server measures and the dips by cause.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchwatch.experiment import steadiness
from benchwatch.gate import FAILED, PASSED
from benchwatch.gate.markdown import code, table
from benchwatch.history import changed, changepoints
from benchwatch.history import report as history

HISTORY_DASHBOARD = "benchwatch-history"
EVIDENCE_RUNS = history.EVIDENCE_RUNS
CAUSE_RUNS = 10      # runs each side whose dips by cause are averaged
WHY_ROWS = 5
# (run ids before, run ids after, engine) -> evidence rows, as history's (benchwatch.history.report.Why)
Why = Callable[[list[str], list[str], "str | None"], list[dict[str, Any]]]


@dataclass(frozen=True)
class Runs:
    """How the gate reads a run it compares: its meta.json ({} when unknown) and its stability profile (None)."""

    meta: Callable[[str], dict[str, Any]]
    stability: Callable[[str], dict[str, Any] | None]


def assess(result: Mapping[str, Any], pct: float, recent: int, runs: Runs, annotations: Sequence[dict[str, Any]],
           why: Why | None = None) -> dict[str, Any]:
    """The gate's answer: ``failed`` (history's own verdict), ``reason``, and the ``comparison`` the comment
    shows — the failing change point, else the latest runs against those before them — with what changed
    between the two sides, the server measures and the dips by cause. ``comparison`` None: too few runs.
    ``runs`` reads a run's meta.json and stability profile (from any host's, under --all-hosts);
    ``annotations``: what history was told (benchwatch.history.events)."""
    reason = history.regression(dict(result), pct, recent)
    ids = [r["run_id"] for r in result["runs"]]
    cp = history.failing_change_point(dict(result), pct)
    comparison: dict[str, Any] | None = None
    if cp is not None:
        prev = [c["index"] for c in result["change_points"] if c["index"] < cp["index"]]
        start = prev[-1] if prev else 0
        comparison = {"kind": "change point", "step_pct": cp["step_pct"], "step_ci": cp["step_ci"],
                      "p_value": cp["p_value"], "start": start, "end": cp["index"], "before_mean": cp["before"],
                      "after_mean": cp["after"],
                      "test": "permutation test of the split (benchwatch.history.changepoints)",
                      "interval": f"{round(changepoints.CONFIDENCE * 100)} % bootstrap interval"}
    else:
        found = history.recent_comparison(dict(result), recent)
        if found is not None:
            comparison = {"kind": "latest runs", **found}
    out: dict[str, Any] = {"failed": reason is not None, "reason": reason, "pct": pct, "recent": recent,
                           "comparison": comparison, "candidate": ids[-recent:] if recent else []}
    if comparison is None:
        return out
    before, after = ids[comparison["start"]:comparison["end"]], ids[comparison["end"]:]
    comparison["before_ids"], comparison["after_ids"] = before, after
    last, first = runs.meta(before[-1]), runs.meta(after[0])
    what = changed.diff(last, first) if last and first else {}
    said = changed.between(list(annotations),
                           {**last, "started_at": last.get("started_at")},
                           {**first, "run_id": after[0], "started_at": first.get("started_at")})
    if said:
        what["annotations"] = [None, said]
    out["changed"] = {"from_run": before[-1], "to_run": after[0], "what": what}
    rows: list[dict[str, Any]] = []
    if cp is not None and cp.get("evidence"):
        rows = [{"signal": r["signal"], "baseline": r["before"], "variant": r["after"], "change": r["change"],
                 "unit": r.get("unit", "")} for r in cp["evidence"]]
    elif why is not None:
        rows = why(before[-EVIDENCE_RUNS:], after[:EVIDENCE_RUNS], first.get("engine"))
    out["evidence"] = rows
    out["dips_by_cause"] = steadiness.causes_why(_causes(runs, before[-CAUSE_RUNS:]), _causes(runs, after[:CAUSE_RUNS]))
    return out


def _causes(runs: Runs, run_ids: Sequence[str]) -> dict[str, dict[str, float]] | None:
    return steadiness.by_cause([runs.stability(run_id) for run_id in run_ids])


def exit_code(assessed: Mapping[str, Any]) -> int:
    return FAILED if assessed["failed"] else PASSED


def _value(v: Any) -> str:
    if isinstance(v, list):
        return "; ".join(str(x) for x in v)
    return "(none)" if v is None else str(v)


def markdown(result: Mapping[str, Any], assessed: Mapping[str, Any], links: Mapping[str, str] | None = None) -> str:
    metric, pct = result["metric"], assessed["pct"]
    name = f" ({result['name']})" if result.get("name") else ""
    lines = [f"## benchwatch: workload {code(result['workload'])}{name} — "
             + ("**failed**" if assessed["failed"] else "**passed**"), ""]
    gate = f"{code(f'--fail-on-regression {pct:g}')}, {metric}, the latest {assessed['recent']} runs as the candidate"
    if assessed["failed"]:
        lines.append(f"The gate ({gate}) fails: {assessed['reason']}.")
    else:
        lines.append(f"The gate ({gate}) passes: no regression of more than {pct:g} %.")
    if result.get("description"):
        lines += ["", f"{result['description']}; {len(result['runs'])} runs, {len(result['change_points'])} change points"
                  + (f", baseline accepted at run {code(result['baseline'])}" if result.get("baseline") else "") + "."]
    c = assessed.get("comparison")
    lines += ["", "### Verdict", ""]
    if c is None:
        lines.append(f"Too few runs to compare: {changepoints.MIN_RUNS} runs before the candidate's are needed "
                     "(since the latest change point or accepted run).")
    else:
        side = "the change point at" if c["kind"] == "change point" else "the candidate's runs from"
        lines += table(["", "runs", f"{metric} (mean)"],
                       [["before", f"{len(c['before_ids'])} (from {c['before_ids'][0]})", f"{c['before_mean']:.6g}"],
                        ["after", f"{len(c['after_ids'])} ({side} {c['after_ids'][0]})", f"{c['after_mean']:.6g}"]])
        lo, hi = c["step_ci"]
        step = f"**{c['step_pct']:+.1f} %** ({c['interval']} {lo:+.1f} … {hi:+.1f} %)".replace("-", "−")
        lines += ["", f"Change: {step}, p = {c['p_value']:.2g} ({c['test']})."]
    ch = assessed.get("changed")
    if ch is not None:
        lines += ["", f"### What changed between run {code(ch['from_run'])} and run {code(ch['to_run'])}", ""]
        if ch["what"]:
            lines += table(["what", "before", "after"], [[k, _value(v[0]), _value(v[1])] for k, v in ch["what"].items()])
        else:
            lines.append("Nothing recorded differs between the runs (settings, versions, argv, host, filesystem).")
    why: list[str] = []
    if assessed.get("evidence"):
        why += ["", "Server measures (the runs each side):", ""]
        why += table(["measure", "before", "after", "change", "unit"],
                     [[r["signal"], f"{r['baseline']:g}", f"{r['variant']:g}",
                       "-" if r.get("change") is None else f"{r['change'] * 100:+.0f} %".replace("-", "−"),
                       r.get("unit") or ""] for r in assessed["evidence"][:WHY_ROWS]])
    if assessed.get("dips_by_cause"):
        why += ["", "Dips by cause (per run):", ""]
        why += table(["cause", "dips before", "dips after", "tx lost before", "tx lost after"],
                     [[r["cause"], f"{r['baseline']['dips']:g}", f"{r['variant']['dips']:g}",
                       f"{r['baseline']['lost_transactions']:,.0f}", f"{r['variant']['lost_transactions']:,.0f}"]
                      for r in assessed["dips_by_cause"]])
    if why:
        lines += ["", "### Why"] + why
    lines += ["", "### Links", ""]
    if (links or {}).get("grafana"):
        lines.append(f"- Grafana, the History dashboard: {links['grafana'].rstrip('/')}/d/{HISTORY_DASHBOARD}"  # type: ignore[index]
                     f"?var-workload={result['workload']}&var-metric={metric}")
    lines.append("- The candidate's runs: " + ", ".join(code(r) for r in assessed["candidate"]))
    return "\n".join(lines) + "\n"
