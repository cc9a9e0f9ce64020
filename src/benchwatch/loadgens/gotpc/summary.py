"""go-tpc's part of a run's summary: tpmC and efficiency, and a table per transaction type (rate,
latency percentiles, errors); its compare rows."""

from __future__ import annotations

from benchwatch.present.summary import CompareRow, Context, fmt_ms, fmt_num, one

TYPES = ("NEW_ORDER", "PAYMENT", "ORDER_STATUS", "DELIVERY", "STOCK_LEVEL")


def _txns(ctx: Context) -> list[str]:
    seen = {s.labels.get("txn") for s in ctx.series
            if s.name in ("gotpc_result_transactions", "gotpc_transactions_total") and s.labels.get("run_id") == ctx.run_id}
    known = [t for t in TYPES if t in seen]
    return known + sorted(t for t in seen if t and t not in TYPES)


def figures(ctx: Context) -> dict:
    """What only a go-tpc run has: tpmC, efficiency, and per transaction type its figures."""
    per_type = {}
    for txn in _txns(ctx):
        per_type[txn] = {
            "transactions": ctx.final("gotpc_result_transactions", txn=txn) or ctx.final("gotpc_transactions_total", txn=txn),
            "tps": ctx.final("gotpc_result_tps", txn=txn),
            "errors": ctx.final("gotpc_errors_total", txn=txn),
            "latency_avg_s": ctx.final("gotpc_result_latency_average_seconds", txn=txn),
            "latency_p95_s": ctx.final("gotpc_result_latency_seconds", txn=txn, quantile="0.95"),
            "latency_p99_s": ctx.final("gotpc_result_latency_seconds", txn=txn, quantile="0.99"),
            "latency_max_s": ctx.final("gotpc_result_latency_seconds", txn=txn, quantile="1"),
        }
    tpmc_curve = one(ctx.series, "gotpc_progress_tpmc", run_id=ctx.run_id)
    values = [v for _, v in tpmc_curve.samples] if tpmc_curve else []
    return {"gotpc": {"tpmc": ctx.final("gotpc_result_tpmc"), "efficiency_ratio": ctx.final("gotpc_result_efficiency_ratio"),
                      "tpmc_min_interval": min(values) if values else None, "types": per_type}}


def _g(s: dict, key: str):
    return (s.get("gotpc") or {}).get(key)


def throughput_rows(s: dict) -> list[list[str]]:
    eff = _g(s, "efficiency_ratio")
    return [["tpmC (go-tpc summary)", fmt_num(_g(s, "tpmc"))],
            ["efficiency (tpmC / 12.86 per warehouse)", f"{eff * 100:.1f} %" if eff is not None else "n/a"],
            ["lowest interval's tpmC", fmt_num(_g(s, "tpmc_min_interval"))]]


def tables(s: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    types = _g(s, "types") or {}
    if not types:
        return []
    rows = [[txn, fmt_num(f["transactions"], 0), fmt_num(f["tps"]), fmt_num(f["errors"], 0), fmt_ms(f["latency_avg_s"]),
             fmt_ms(f["latency_p95_s"]), fmt_ms(f["latency_p99_s"]), fmt_ms(f["latency_max_s"])]
            for txn, f in types.items()]
    return [("TPC-C transaction types (go-tpc)",
             ["type", "committed", "per second", "failed", "avg", "p95", "p99", "max"], rows)]


def _type(s: dict, txn: str, key: str):
    return ((_g(s, "types") or {}).get(txn) or {}).get(key)


COMPARE_ROWS = [
    CompareRow("throughput", "tpmC (go-tpc summary)", lambda s: _g(s, "tpmc"), fmt_num, +1),
    CompareRow("latency", "NEW_ORDER p99 (go-tpc summary)", lambda s: _type(s, "NEW_ORDER", "latency_p99_s"), fmt_ms, -1),
    CompareRow("latency", "PAYMENT p99 (go-tpc summary)", lambda s: _type(s, "PAYMENT", "latency_p99_s"), fmt_ms, -1),
]
