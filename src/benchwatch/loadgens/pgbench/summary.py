"""pgbench's part of a run's summary: pgbench 15's failed/skipped/retried, latency stddev and the
percentiles of -l, the -r table in pgbench's order; their rows, tables and compare rows."""

from __future__ import annotations

import os

from benchwatch.loadgens.pgbench import output as po
from benchwatch.loadgens.pgbench.model import STATEMENT_LATENCY
from benchwatch.present.summary import CompareRow, Context, Table, fmt_ms, fmt_num, last_value, one


def statement_rows(ctx: Context) -> list[dict]:
    rows = []
    for s in ctx.series:
        if s.name != STATEMENT_LATENCY or s.labels.get("run_id") != ctx.run_id:
            continue
        key = {"script": s.labels.get("script", ""), "statement": s.labels.get("statement", "")}
        rows.append({**key, "latency_s": last_value(s),
                     "failures": last_value(one(ctx.series, "pgbench_statement_failures_total", run_id=ctx.run_id, **key)),
                     "retries": last_value(one(ctx.series, "pgbench_statement_retries_total", run_id=ctx.run_id, **key))})
    return rows


def statement_order(run_dir: str) -> list[str]:
    """The statements of pgbench's -r table, in its order (Prometheus keeps no order)."""
    parser = po.PgbenchOutputParser()
    out: list[str] = []
    for name in ("stdout.log", "stderr.log", "output.log"):
        try:
            with open(os.path.join(run_dir, name), "rb") as f:
                data = f.read()
        except OSError:
            continue
        for line in data.split(b"\n"):
            for event in parser.feed(line):
                if isinstance(event, po.StatementLatency):
                    out.append(event.statement)
    return out


def order_statements(rows: list[dict], order: list[str] | None) -> list[dict]:
    """pgbench's own order (as in the -r table) where known; the rest after, as they came."""
    if not order:
        return rows
    rank: dict[str, int] = {}
    for i, text in enumerate(order):
        rank.setdefault(text, i)
    return sorted(rows, key=lambda r: rank.get(r["statement"], len(rank)))


def figures(ctx: Context) -> dict:
    return {"tps": {"failed": ctx.final("pgbench_failed_transactions_total"),
                    "skipped": ctx.final("pgbench_skipped_transactions_total"),
                    "retried": ctx.final("pgbench_retried_transactions_total")},
            "latency": {"stddev_s": ctx.final("pgbench_summary_latency_stddev_seconds")},
            "statements": order_statements(statement_rows(ctx), statement_order(ctx.run_dir) if ctx.run_dir else None)}


def throughput_rows(s: dict) -> list[list[str]]:
    t = s["tps"]
    return [["failed / skipped / retried", " / ".join(fmt_num(t.get(k), 0) for k in ("failed", "skipped", "retried"))]]


def latency_rows(s: dict) -> list[list[str]]:
    lat = s["latency"]
    return [["stddev", fmt_ms(lat.get("stddev_s"))],
            ["p50 / p95 / p99", " / ".join(fmt_ms(lat.get(k)) for k in ("p50_s", "p95_s", "p99_s"))
             + ("" if lat.get("percentile_source") else " (percentiles need a run with -l)")]]


def tables(s: dict) -> list[Table]:
    if not s.get("statements"):
        return []
    return [("Per-statement latency", ["script", "statement", "latency", "failures", "retries"],
             [[r["script"], r["statement"], fmt_ms(r["latency_s"]), fmt_num(r["failures"], 0), fmt_num(r["retries"], 0)]
              for r in s["statements"]])]


COMPARE_ROWS = [
    CompareRow("totals", "failed transactions", lambda s: s["tps"].get("failed"), lambda v: fmt_num(v, 0), -1),
]
