"""sysbench's panels of a run dashboard: queries per second by type, the latency percentile it prints per
interval, errors and reconnects."""

from __future__ import annotations

from benchwatch.grafana.panels import Layout, PanelBuilder, of_run, timeseries


def panels(L: Layout) -> list[PanelBuilder]:
    return [
        timeseries(L, "QPS by type (read / write / other)", "Queries per second as sysbench printed them, split "
                   "read/write/other (r/w/o), stacked to the total qps.", "reqps",
                   [(of_run("benchmark_progress_qps"), "{{type}}")], w=8, stack=True),
        timeseries(L, "Latency percentile", "The latency percentile sysbench printed for each interval "
                   "(lat (ms,95%) by default, --percentile=N otherwise).", "s",
                   [(of_run("benchmark_progress_latency_quantile_seconds"), "p{{quantile}}")], w=8),
        timeseries(L, "Errors and reconnects per second", "Query errors sysbench ignored (--mysql-ignore-errors) and "
                   "reconnects, per second (err/s, reconn/s).", "reqps",
                   [(f"rate({of_run('benchmark_errors_total')}[$__rate_interval])", "errors/s"),
                    (f"rate({of_run('benchmark_reconnects_total')}[$__rate_interval])", "reconnects/s")], w=8),
    ]
