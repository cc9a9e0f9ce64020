"""go-ycsb's panels of a run dashboard: operations per second and latency by YCSB operation, failed operations."""

from __future__ import annotations

from benchwatch.grafana.panels import Layout, PanelBuilder, of_run, timeseries

# TOTAL is the TPS above; READ_MODIFY_WRITE's READ and UPDATE are counted under their own names too.
_PARTS = 'op!~"TOTAL|READ_MODIFY_WRITE"'


def panels(L: Layout) -> list[PanelBuilder]:
    return [
        timeseries(L, "Operations per second by type", "Operations of each type completed per second in each report "
                   "interval (the difference of go-ycsb's cumulative counts), stacked to the TPS above.", "ops",
                   [(of_run("goycsb_progress_ops", _PARTS), "{{op}}")], w=8, stack=True),
        timeseries(L, "Mean latency by type", "Mean latency of each type's operations in each report interval "
                   "(from the differences of go-ycsb's Avg x Count).", "s",
                   [(of_run("goycsb_progress_latency_average_seconds"), "{{op}}")], w=8),
        timeseries(L, "p99 latency by type (run so far)", "The 99th percentile go-ycsb printed for each type: "
                   "cumulative since the type's first operation, so it moves slowly and keeps a spike.", "s",
                   [(of_run("goycsb_latency_seconds", 'quantile="0.99"'), "{{op}} p99")], w=8),
        timeseries(L, "Failed operations per second", "Operations of each type that returned an error in each report "
                   "interval (go-ycsb's <OP>_ERROR lines).", "ops",
                   [(of_run("goycsb_progress_error_ops"), "{{op}}")], w=8),
    ]
