"""go-ycsb's part of a run's summary: a table per operation type (rate, latency percentiles, errors) from its
summary lines; its compare rows."""

from __future__ import annotations

from benchwatch.present.summary import CompareRow, Context, fmt_ms, fmt_num

ORDER = ("READ", "UPDATE", "INSERT", "SCAN", "READ_MODIFY_WRITE", "DELETE", "TOTAL")


def _ops(ctx: Context) -> list[str]:
    seen = {s.labels.get("op") for s in ctx.series
            if s.name in ("goycsb_result_operations", "goycsb_operations_total", "goycsb_result_errors")
            and s.labels.get("run_id") == ctx.run_id}
    known = [o for o in ORDER if o in seen]
    return known + sorted(o for o in seen if o and o not in ORDER)


def figures(ctx: Context) -> dict:
    """What only a go-ycsb run has: per operation type, its figures of the whole run."""
    per_op = {}
    for op in _ops(ctx):
        per_op[op] = {
            "operations": ctx.final("goycsb_result_operations", op=op) or ctx.final("goycsb_operations_total", op=op),
            "ops": ctx.final("goycsb_result_ops", op=op),
            "errors": ctx.final("goycsb_result_errors", op=op) or ctx.final("goycsb_errors_total", op=op),
            "latency_avg_s": ctx.final("goycsb_result_latency_average_seconds", op=op),
            "latency_p50_s": ctx.final("goycsb_result_latency_seconds", op=op, quantile="0.5"),
            "latency_p95_s": ctx.final("goycsb_result_latency_seconds", op=op, quantile="0.95"),
            "latency_p99_s": ctx.final("goycsb_result_latency_seconds", op=op, quantile="0.99"),
            "latency_max_s": ctx.final("goycsb_result_latency_seconds", op=op, quantile="1"),
        }
    return {"goycsb": {"types": per_op, "duration_s": ctx.final("goycsb_result_duration_seconds")}}


def _g(s: dict, key: str):
    return (s.get("goycsb") or {}).get(key)


def _op(s: dict, op: str, key: str):
    return ((_g(s, "types") or {}).get(op) or {}).get(key)


def throughput_rows(s: dict) -> list[list[str]]:
    return [["operations per second (go-ycsb summary, TOTAL)", fmt_num(_op(s, "TOTAL", "ops"))]]


def latency_rows(s: dict) -> list[list[str]]:
    return [["p99, all operations (go-ycsb summary)", fmt_ms(_op(s, "TOTAL", "latency_p99_s"))]]


def tables(s: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    types = _g(s, "types") or {}
    if not types:
        return []
    rows = [[op, fmt_num(f["operations"], 0), fmt_num(f["ops"]), fmt_num(f["errors"], 0), fmt_ms(f["latency_avg_s"]),
             fmt_ms(f["latency_p50_s"]), fmt_ms(f["latency_p95_s"]), fmt_ms(f["latency_p99_s"]), fmt_ms(f["latency_max_s"])]
            for op, f in types.items()]
    return [("YCSB operations (go-ycsb)", ["operation", "done", "per second", "failed", "avg", "p50", "p95", "p99", "max"],
             rows)]


COMPARE_ROWS = [
    CompareRow("throughput", "operations per second (go-ycsb summary)", lambda s: _op(s, "TOTAL", "ops"), fmt_num, +1),
    CompareRow("latency", "READ p99 (go-ycsb summary)", lambda s: _op(s, "READ", "latency_p99_s"), fmt_ms, -1),
    CompareRow("latency", "UPDATE p99 (go-ycsb summary)", lambda s: _op(s, "UPDATE", "latency_p99_s"), fmt_ms, -1),
]
