"""sysbench's part of a run's summary: queries per second and by type, its latency percentile, errors
and reconnects; their rows and compare rows."""

from __future__ import annotations

from benchwatch.present.summary import CompareRow, Context, fmt_ms, fmt_num, last_value, one


def figures(ctx: Context) -> dict:
    """What only a sysbench run has: qps, its latency percentile, errors and reconnects."""
    quantile = one(ctx.series, "benchmark_result_latency_quantile_seconds", run_id=ctx.run_id)
    progress_q = one(ctx.series, "benchmark_progress_latency_quantile_seconds", run_id=ctx.run_id)
    either = quantile or progress_q
    qps = {t: ctx.final("benchmark_queries_total", type=t) for t in ("read", "write", "other")}
    return {"sysbench": {
        "qps": ctx.final("benchmark_result_qps"), "queries": qps,
        "latency_quantile": either.labels.get("quantile") if either else None,
        "latency_quantile_s": last_value(quantile) if quantile else None,
        "latency_quantile_max_interval_s": max((v for _, v in progress_q.samples), default=None) if progress_q else None,
        "errors": ctx.final("benchmark_errors_total"), "reconnects": ctx.final("benchmark_reconnects_total")}}


def _sb(s: dict, key: str):
    return (s.get("sysbench") or {}).get(key)


def _percentile(s: dict) -> str:
    q = _sb(s, "latency_quantile")
    return f"p{float(q) * 100:g}" if q else "percentile"


def throughput_rows(s: dict) -> list[list[str]]:
    queries = _sb(s, "queries") or {}
    return [["QPS (sysbench summary)", fmt_num(_sb(s, "qps"))],
            ["queries read / write / other", " / ".join(fmt_num(queries.get(k), 0) for k in ("read", "write", "other"))],
            ["errors / reconnects", f"{fmt_num(_sb(s, 'errors'), 0)} / {fmt_num(_sb(s, 'reconnects'), 0)}"]]


def latency_rows(s: dict) -> list[list[str]]:
    pct = _percentile(s)
    return [[f"{pct} of the run (sysbench summary)", fmt_ms(_sb(s, "latency_quantile_s"))],
            [f"worst interval's {pct}", fmt_ms(_sb(s, "latency_quantile_max_interval_s"))]]


def _sum(*values: float | None) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


COMPARE_ROWS = [
    CompareRow("throughput", "QPS (sysbench summary)", lambda s: _sb(s, "qps"), fmt_num, +1),
    CompareRow("latency", "latency percentile (sysbench summary)", lambda s: _sb(s, "latency_quantile_s"), fmt_ms, -1),
    CompareRow("latency", "errors / reconnects (sysbench)", lambda s: _sum(_sb(s, "errors"), _sb(s, "reconnects")),
               lambda v: fmt_num(v, 0), -1),
]
