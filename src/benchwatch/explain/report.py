"""Every dip of a run with its ranked causes: for ``benchwatch explain``, the snapshot and the exporter."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from benchwatch import engines, loadgens
from benchwatch.explain import causes, dips, ending
from benchwatch.explain.ending import NO_CAUSE
from benchwatch.model.samples import is_stale_marker
from benchwatch.query.frames import prefer_pushed
from benchwatch.query.series import Series
from benchwatch.record import replay


def context(meta: Mapping[str, Any], series: list[Series], run_id: str, now: float | None = None) -> causes.Context:
    interval = float(meta.get("progress_interval") or 0) or _last(series, "benchmark_progress_interval_seconds", run_id) or 1.0
    start = meta.get("clock_start_epoch") or meta.get("started_at") or _first_tps(series, run_id) or 0.0
    end = meta.get("ended_at") or now or time.time()
    info = [s for s in series if s.name == "benchmark_run_info" and s.labels.get("run_id") == run_id]
    clients = (info[0].labels.get("clients") if info else None) or (meta.get("info") or {}).get("clients")
    tool = loadgens.by_name(meta.get("tool"))
    version = str(meta.get(tool.version_key) or (info[0].labels.get(tool.version_key, "") if info else ""))
    engine, weighed, _absent = signals_of(meta)
    return causes.Context(run_id, interval, float(start), float(end),
                          clients=int(clients) if clients and str(clients).isdigit() else None,
                          progress_held_back=tool.progress_held_back(version),
                          weighed=frozenset(weighed), up_metrics=_up_metrics(engine),
                          engine_series=frozenset(engine.explain_selectors) if engine else None,
                          tool=tool.title)


def _up_metrics(engine: engines.Engine | None) -> tuple[str, ...]:
    """The series target_down reads: the run's engine's, every engine's for an engine not known."""
    found = [engine] if engine else engines.load_engines().values()
    return tuple(dict.fromkeys(e.up_metric for e in found if e.up_metric))


def run_engine(meta: Mapping[str, Any]) -> engines.Engine | None:
    """The engine a run drove (meta.json's "engine"; runs recorded before it, their tool's); None if unknown."""
    try:
        return engines.get(replay.run_engine(meta))
    except engines.UnknownEngine:
        return None


def signals_of(meta: Mapping[str, Any]) -> tuple[engines.Engine | None, list[str], dict[str, str]]:
    """(engine, the signals weighed for a run, {signal: why absent}): the neutral ones and its engine's,
    less those its server cannot give (meta.json's capabilities, else its version). A run of an engine
    this benchwatch does not know gets every engine's signals, as before engines had their own."""
    engine = run_engine(meta)
    if engine is None:
        known = [s for e in engines.load_engines().values() for s in e.explain_signals]
        return None, [*causes.NEUTRAL, *dict.fromkeys(known), *causes.HOST], {}
    absent = engine.absent_signals(meta)
    return engine, [*causes.NEUTRAL, *(s for s in engine.explain_signals if s not in absent), *causes.HOST], absent


def _last(series: list[Series], name: str, run_id: str) -> float | None:
    for s in series:
        if s.name == name and s.labels.get("run_id") == run_id and s.samples:
            return s.samples[-1][1]
    return None


def tps_samples(series: list[Series], run_id: str) -> list[tuple[int, float]]:
    for s in prefer_pushed(series):
        if s.name == "benchmark_progress_tps" and s.labels.get("run_id") == run_id:
            return [(ts, v) for ts, v in s.samples if not is_stale_marker(v)]
    return []


def _first_tps(series: list[Series], run_id: str) -> float | None:
    tps = tps_samples(series, run_id)
    return tps[0][0] / 1000 if tps else None


def explain(series: list[Series], meta: Mapping[str, Any], run_id: str, *, ongoing: bool = False,
            now: float | None = None, output: str = "", level_before: float | None = None) -> dict:
    """{"run_id", "engine", "signals": {"weighed", "absent"}, "dips": [dip + "cause", "evidence", "candidates"],
    "end": how the run ended when early or badly (else None), ...}; JSON-ready. ``output``: the tool's saved
    output, where the end's cause may be written. ``level_before``: dips.detect's (a live pass that no longer
    reads the level a lasting dip fell from)."""
    ctx = context(meta, series, run_id, now)
    engine, weighed, absent = signals_of(meta)
    tps = tps_samples(series, run_id)
    found = dips.detect(tps, ctx.interval_s, ongoing=ongoing, level_before=level_before)
    finished = not ongoing and bool(meta.get("ended_at"))
    signals = causes.Signals(series, ctx) if found or finished else None
    out = []
    for n, d in enumerate(found, 1):
        ranked = signals.candidates(d.start, d.end) if signals else []
        lead = ranked[0] if ranked and ranked[0].score >= causes.MIN_SCORE else None
        out.append({"dip": n, **d.to_json(), "cause": lead.cause if lead else NO_CAUSE,
                    "evidence": lead.evidence if lead else "",
                    "candidates": [c.to_json() for c in ranked]})
    end = None
    if finished:
        info = next((s.labels for s in series if s.name == "benchmark_run_info" and s.labels.get("run_id") == run_id), {})
        lines = [ts / 1000 for ts, _ in tps if ts / 1000 not in _stall_times(series, run_id)]
        end = ending.run_end(meta, signals, ctx, lines[-1] if lines else None, _aborted(series, run_id), info, output)
    return {"run_id": run_id, "interval_s": ctx.interval_s, "run_start": ctx.run_start, "dips": out,
            "lost_transactions": round(sum(d["lost_transactions"] for d in out), 1),
            "method": "docs/explain.md", "engine": engine.name if engine else None,
            "signals": {"weighed": weighed, "absent": absent}, "end": end}


def _stall_times(series: list[Series], run_id: str) -> set[float]:
    """The exporter's stall zeros (not progress lines), by time."""
    return {ts / 1000 for s in series if s.name == "benchmark_progress_stalled" and s.labels.get("run_id") == run_id
            for ts, v in s.samples if v == 1}


def _aborted(series: list[Series], run_id: str) -> float:
    values = [v for s in prefer_pushed(series) if s.name == "benchmark_aborted_clients_total"
              and s.labels.get("run_id") == run_id for _, v in s.samples if not is_stale_marker(v)]
    return max(values, default=0.0)


# -- presentation -----------------------------------------------------------------------------------

def _clock(epoch: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(epoch)) + f".{int(epoch * 1000) % 1000:03d}"


def rows(report: dict) -> list[list[str]]:
    """One row per dip: dip, when, depth, lost transactions, cause with evidence, other candidates."""
    out = []
    t0 = report.get("run_start") or 0.0
    for d in report["dips"]:
        when = f"{_clock(d['start'])} UTC (+{d['start'] - t0:.1f} s), {d['seconds']:.1f} s"
        depth = (f"{d['depth'] * 100:.0f}% ({d['level']}{', stall' if d['stall'] else ''}"
                 f"{', lasting' if d.get('lasting') else ''})")
        cause = d["cause"] + (f": {d['evidence']}" if d["evidence"] else "")
        others = [c for c in d["candidates"] if c["cause"] != d["cause"] or c["evidence"] != d["evidence"]]
        other = "; ".join(f"{c['cause']} {c['score']:.2f}" for c in others[:3]) or "—"
        if d["cause"] != NO_CAUSE:
            cause += f" [score {d['candidates'][0]['score']:.2f}]"
        out.append([str(d["dip"]), when, depth, f"{d['lost_transactions']:,.0f}", cause, other])
    return out


HEADER = ["dip", "when", "depth", "lost tx", "most likely cause (evidence)", "other candidates"]


def signals_line(report: dict) -> str:
    """One line: which signals were weighed, and which were absent and why ("" for a report without them)."""
    sig = report.get("signals")
    if not sig:
        return ""
    line = "signals weighed" + (f" ({report['engine']})" if report.get("engine") else "") + ": "
    line += ", ".join(sig.get("weighed") or []) or "none"
    absent = sig.get("absent") or {}
    if absent:
        line += "; absent: " + "; ".join(f"{s} ({why})" for s, why in absent.items())
    return line + "\n"


def end_line(report: dict) -> str:
    """One line on a run that ended early or badly ("" for one that ended as planned)."""
    end = report.get("end")
    if not end:
        return ""
    code = f", exit code {end['exit_code']}" if end.get("exit_code") is not None else ""
    line = f"run ended early, {end['at_s']:.1f} s in ({_clock(end['at'])} UTC{code}): {end['cause']}"
    return line + (f": {end['evidence']}" if end.get("evidence") else "") + "\n"


def text_table(report: dict) -> str:
    if not report["dips"]:
        return (f"run {report['run_id']}: no TPS dip (nothing below {dips.MILD * 100:.0f}% of the steady level)\n"
                + end_line(report) + signals_line(report))
    table = [HEADER] + rows(report)
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADER))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table]
    lost = report["lost_transactions"]
    lines.append(f"{len(report['dips'])} dip(s), {lost:,.0f} transactions lost against the steady level "
                 f"(method: docs/explain.md)")
    return "\n".join(lines) + "\n" + end_line(report) + signals_line(report)
