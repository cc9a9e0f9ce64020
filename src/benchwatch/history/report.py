"""``benchwatch history``'s answers: the workloads, one workload's series with its change points, and
whether CI should fail (``--fail-on-regression``)."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from benchwatch.evidence import sentence
from benchwatch.history import changed, changepoints, events, workload
from benchwatch.history.index import Entry, Index, by_workload
from benchwatch.record import outcome, rundir
from benchwatch.stability import runs as stability_runs

RECENT = 3             # --recent: the latest runs compared with those before them
RECENT_ALPHA = 0.05    # how sure that comparison must be before it fails CI


def when(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class History:
    """The runs of one state directory, as history sees them."""

    runs_dir: str
    hdir: str
    # A run's meta.json by its id when the runs are not all in runs_dir (history --all-hosts: the results database's).
    meta_of: Callable[[str], dict[str, Any]] | None = None
    # What people told history on every host (history --all-hosts: events.Shared from the results database);
    # None: this state directory's own files.
    shared: events.Shared | None = None

    # A run's stability profile by its id when the runs are not all in runs_dir (as meta_of).
    stability_of: Callable[[str], dict[str, Any] | None] | None = None

    def stability(self, run_id: str) -> dict[str, Any] | None:
        path = os.path.join(self.runs_dir, run_id)
        if os.path.isdir(path):
            return stability_runs.stability_of(rundir.RunDir(path))
        return self.stability_of(run_id) if self.stability_of is not None else None

    def names(self) -> dict[str, str]:
        return self.shared.names if self.shared is not None else events.names(self.hdir)

    def accepted(self) -> dict[str, list[str]]:
        return self.shared.accepted if self.shared is not None else events.accepted(self.hdir)

    def annotations(self) -> list[dict[str, Any]]:
        return self.shared.annotations if self.shared is not None else events.read_annotations(self.hdir)

    def meta(self, run_id: str) -> dict[str, Any]:
        if self.meta_of is not None:
            return self.meta_of(run_id)
        return _meta(self.runs_dir, run_id)

    @classmethod
    def of_state(cls, state_dir: str, runs_dir: str) -> History:
        return cls(runs_dir, events.history_dir(state_dir))

    def entries(self) -> list[Entry]:
        return Index(self.runs_dir, self.hdir).entries()

    def workloads(self, entries: list[Entry] | None = None) -> list[dict[str, Any]]:
        """``history --json``'s list: each workload with its number of runs and date range."""
        named = {w: n for n, w in self.names().items()}
        out = []
        for wid, runs in by_workload(self.entries() if entries is None else entries).items():
            starts = [e.started_at for e in runs if e.started_at is not None]
            out.append({"workload": wid, "runs": len(runs), "first": when(min(starts) if starts else None),
                        "last": when(max(starts) if starts else None), "name": named.get(wid),
                        "description": workload.describe(runs[0].key), "key": runs[0].key,
                        "latest_run": runs[-1].run_id,
                        **({"hosts": sorted({e.host for e in runs if e.host})} if any(e.host for e in runs) else {})})
        return sorted(out, key=lambda w: (w["last"] or "", w["workload"]), reverse=True)

    def resolve(self, given: str, entries: list[Entry]) -> str | None:
        """A workload from its name, its id or the id of any of its runs."""
        named = self.names()
        if given in named:
            return named[given]
        ids = {e.workload for e in entries}
        if given in ids:
            return given
        return next((e.workload for e in entries if e.run_id == given), None)


def _meta(runs_dir: str, run_id: str) -> dict[str, Any]:
    try:
        return rundir.RunDir(os.path.join(runs_dir, run_id)).read_meta()
    except rundir.CorruptMeta:
        return {}


# Runs each side of a change point whose server-side evidence is compared (benchwatch.evidence).
EVIDENCE_RUNS = 3
# (run ids before, run ids after, engine) -> evidence rows {"signal", "baseline", "variant", "change", "unit"}.
Why = Callable[[list[str], list[str], str | None], list[dict[str, Any]]]


def series(history: History, wid: str, metric: str, entries: list[Entry], why: Why | None = None) -> dict[str, Any]:
    """``history WORKLOAD --json``: the runs in time order with the metric, the change points found, and
    what changed at each. Runs without the metric (cut short, still running) are left out. ``why``: the
    run-level evidence of the runs each side of a change (checkpoints, WAL and CPU per transaction, wait
    events), from Prometheus while it still holds their series."""
    runs = [e for e in entries if e.workload == wid and e.state != rundir.RUNNING and e.value(metric) is not None]
    values = [float(e.value(metric)) for e in runs]  # type: ignore[arg-type]
    direction = outcome.METRICS[metric][1]
    baseline = _baseline(history, wid, runs)
    notes = history.annotations()
    cps = []
    for cp in changepoints.detect(values):
        before, after = history.meta(runs[cp.index - 1].run_id), history.meta(runs[cp.index].run_id)
        what = changed.diff(before, after)
        said = changed.between(notes, {**before, "started_at": runs[cp.index - 1].started_at},
                               {**after, "run_id": runs[cp.index].run_id, "started_at": runs[cp.index].started_at})
        if said:
            what["annotations"] = [None, said]
        evidence = []
        if why is not None:
            rows = why([r.run_id for r in runs[max(0, cp.index - EVIDENCE_RUNS):cp.index]],
                       [r.run_id for r in runs[cp.index:cp.index + EVIDENCE_RUNS]], after.get("engine"))
            evidence = [{"signal": r["signal"], "before": r["baseline"], "after": r["variant"], "change": r["change"],
                         "unit": r.get("unit", "")} for r in rows]
        cps.append({"run_id": runs[cp.index].run_id, "index": cp.index, "step_pct": round(cp.step_pct, 3),
                    "step_ci": [round(cp.step_ci[0], 3), round(cp.step_ci[1], 3)], "p_value": cp.p_value,
                    "verdict": "regression" if cp.step_pct * direction < 0 else "improvement", "changed": what,
                    "evidence": evidence,
                    "before": cp.mean_before, "after": cp.mean_after,
                    "confidence": changepoints.CONFIDENCE, "accepted": baseline is not None and cp.index <= baseline})
    return {"workload": wid, "metric": metric,
            "runs": [{"run_id": e.run_id, "started_at": when(e.started_at), "value": v, **({"host": e.host} if e.host else {})}
                     for e, v in zip(runs, values, strict=True)],
            "change_points": cps, "name": next((n for n, w in history.names().items() if w == wid), None),
            "description": workload.describe(runs[0].key) if runs else None,
            "baseline": runs[baseline].run_id if baseline is not None else None,
            "method": {"change_points": "ruptures Binseg (l2 on ranks) + scipy permutation test", "alpha": changepoints.ALPHA,
                       "min_runs": changepoints.MIN_RUNS, "window": changepoints.WINDOW}}


def _baseline(history: History, wid: str, runs: list[Entry]) -> int | None:
    """Index of the newest accepted run of the workload."""
    ok = set(history.accepted().get(wid, []))
    found = [i for i, e in enumerate(runs) if e.run_id in ok]
    return found[-1] if found else None


def describe_change(metric: str, cp: dict[str, Any]) -> str:
    """"tps -12.0 % (95 % CI -13.1 … -10.9 %, p = 0.0005) from run X; between the runs: server_version 17.2 → 17.3"."""
    lo, hi = cp["step_ci"]
    text = (f"{metric} {cp['step_pct']:+.1f} % ({round(cp['confidence'] * 100)} % CI {lo:+.1f} … {hi:+.1f} %, "
            f"p = {cp['p_value']:.2g}) from run {cp['run_id']}, a {cp['verdict']}")
    if cp["changed"]:
        text += "; between the runs: " + ", ".join(
            f"{k} {_short(v[0])} → {_short(v[1])}" for k, v in cp["changed"].items())
    else:
        text += "; nothing recorded differs between the runs"
    rows = [{**r, "baseline": r["before"], "variant": r["after"]} for r in cp.get("evidence") or []]
    if rows:
        text += "; " + sentence("run-level evidence", rows)
    return text


def _short(value: Any) -> str:
    if isinstance(value, list):
        return "; ".join(str(v) for v in value)
    return "(none)" if value is None else str(value)


def recent_split(report: dict[str, Any], recent: int = RECENT) -> tuple[int, int] | None:
    """(start, end): the latest ``recent`` runs are runs[end:], the runs they are compared with runs[start:end]
    (since the latest change point before them or the accepted run); None when either side is too short."""
    n = len(report["runs"])
    if recent < 1 or n - recent < changepoints.MIN_RUNS:
        return None
    start = 0
    for cp in report["change_points"]:
        if cp["index"] <= n - recent:
            start = cp["index"]
    if report.get("baseline"):
        start = max(start, next(i for i, r in enumerate(report["runs"]) if r["run_id"] == report["baseline"]))
    if n - recent - start < changepoints.MIN_RUNS:
        return None
    return start, n - recent


def failing_change_point(report: dict[str, Any], pct: float) -> dict[str, Any] | None:
    """The latest change point when it is a regression of more than ``pct`` percent not accepted, else None."""
    cps = report["change_points"]
    latest = cps[-1] if cps else None
    if latest and latest["verdict"] == "regression" and not latest["accepted"] and abs(latest["step_pct"]) > pct:
        return latest
    return None


def regression(report: dict[str, Any], pct: float, recent: int = RECENT) -> str | None:
    """Why CI should fail, or None: the latest change point is a regression of more than ``pct`` percent
    (not accepted), or the latest ``recent`` runs are worse than the runs before them (since the latest
    change point or accepted run) by more than ``pct`` percent, with p < RECENT_ALPHA."""
    metric = report["metric"]
    latest = failing_change_point(report, pct)
    if latest is not None:
        return f"regression of more than {pct:g} %: " + describe_change(metric, latest)
    c = recent_comparison(report, recent)
    if c is None or c["step_pct"] * outcome.METRICS[metric][1] >= 0 or abs(c["step_pct"]) <= pct:
        return None
    if c["p_value"] >= RECENT_ALPHA:
        return None
    return (f"regression of more than {pct:g} %: the latest {recent} runs' {metric} is {c['step_pct']:+.1f} % against the "
            f"{c['before_runs']} runs before them (from run {c['from_run']}; permutation test "
            f"p = {c['p_value']:.2g})")


def recent_comparison(report: dict[str, Any], recent: int = RECENT) -> dict[str, Any] | None:
    """The latest ``recent`` runs against the runs before them (:func:`recent_split`): the step in percent of
    the mean with its 95 % bootstrap interval, and a one-sided permutation test's p-value that they are
    worse; None when either side is too short."""
    split = recent_split(report, recent)
    if split is None:
        return None
    start, end = split
    values = [r["value"] for r in report["runs"]]
    before, after = np.asarray(values[start:end]), np.asarray(values[end:])
    step, ci = changepoints.step_interval(before, after)
    direction = outcome.METRICS[report["metric"]][1]
    res = stats.permutation_test((before, after), lambda a, b, axis=-1: np.mean(b, axis=axis) - np.mean(a, axis=axis),
                                 vectorized=True, n_resamples=9999, alternative="less" if direction > 0 else "greater",
                                 rng=np.random.default_rng(changepoints.SEED))
    return {"step_pct": step, "step_ci": [ci[0], ci[1]], "p_value": float(res.pvalue), "start": start, "end": end,
            "before_runs": end - start, "after_runs": len(values) - end, "from_run": report["runs"][start]["run_id"],
            "before_mean": float(before.mean()), "after_mean": float(after.mean()),
            "test": "one-sided permutation test of the means (scipy.stats.permutation_test, 9999 resamples)",
            "interval": f"{round(changepoints.CONFIDENCE * 100)} % bootstrap interval (percentile, "
                        f"{changepoints.BOOTSTRAP} resamples)"}
