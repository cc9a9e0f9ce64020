"""go-tpc's panels of a run dashboard: tpmC, transactions per second and latency by TPC-C transaction type,
failed transactions."""

from __future__ import annotations

from benchwatch.grafana.panels import Layout, PanelBuilder, of_run, timeseries


def panels(L: Layout) -> list[PanelBuilder]:
    return [
        timeseries(L, "tpmC", "NEW_ORDER transactions committed per minute in each report interval (TPC-C's tpmC); "
                   "the whole run's from go-tpc's summary as a dashed line.", "short",
                   [(of_run("gotpc_progress_tpmc"), "tpmC"), (of_run("gotpc_result_tpmc"), "tpmC (summary)")], w=8),
        timeseries(L, "Transactions per second by type", "Committed transactions per second of each TPC-C "
                   "transaction type in each report interval (go-tpc's Count / interval), stacked to the TPS above.",
                   "reqps", [(of_run("gotpc_progress_tps"), "{{txn}}")], w=8, stack=True),
        timeseries(L, "p99 latency by type", "The 99th percentile latency go-tpc printed for each transaction type "
                   "and report interval.", "s",
                   [(of_run("gotpc_progress_latency_seconds", 'quantile="0.99"'), "{{txn}} p99")], w=8),
        timeseries(L, "Failed transactions per second", "Transactions of each type that returned an error "
                   "(go-tpc's *_ERR lines: lock wait timeouts, deadlocks, lost connections).", "reqps",
                   [(of_run("gotpc_progress_error_tps"), "{{txn}}")], w=8),
    ]
