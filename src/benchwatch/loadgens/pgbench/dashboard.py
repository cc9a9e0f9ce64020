"""pgbench's panels of a run dashboard: statements per second, latency (average, stddev, and p50/p95/p99
from -l), pgbench 15's failed/skipped/retried, aborted clients, schedule lag, the -r table."""

from __future__ import annotations

from benchwatch.grafana.panels import Layout, PanelBuilder, of_run, table, timeseries


def panels(L: Layout) -> list[PanelBuilder]:
    tps = of_run("benchmark_progress_tps")

    def p(q: float) -> tuple[str, str]:
        buckets = of_run("benchmark_latency_seconds_bucket")
        return (f"histogram_quantile({q}, sum by (le) (rate({buckets}[$__rate_interval])))", f"p{round(q * 100)}")

    items: list[PanelBuilder] = [
        timeseries(L, "Statements per second (QPS)", "TPS times the SQL statements per transaction of the run's scripts "
                   "(BEGIN and END count; backslash meta-commands do not).", "reqps",
                   [(f"{tps} * on(run_id) {of_run('pgbench_script_sql_statements')}", "statements/s")]),
        timeseries(L, "Latency", "Average and stddev per progress interval as pgbench printed them; p50/p95/p99 from the "
                   "per-transaction log histogram when the run uses -l.", "s", [
                       (of_run("benchmark_progress_latency_seconds"), "average"),
                       (of_run("pgbench_progress_latency_stddev_seconds"), "stddev"), p(0.5), p(0.95), p(0.99)]),
    ]
    L.new_row()
    items += [
        timeseries(L, "Failed, skipped and retried transactions", "Per second: failed (pgbench 15+ serialization/deadlock "
                   "failures), skipped for being late (-R with -L), retried (--max-tries).", "reqps", [
                       (f"rate({of_run('pgbench_failed_transactions_total')}[$__rate_interval])", "failed/s"),
                       (f"rate({of_run('pgbench_skipped_transactions_total')}[$__rate_interval])", "skipped/s"),
                       (f"rate({of_run('pgbench_retried_transactions_total')}[$__rate_interval])", "retried/s")], w=8),
        timeseries(L, "Aborted clients", "Clients that aborted so far; pgbench goes on with the others, so TPS drops without an error.",
                   "short", [(of_run("benchmark_aborted_clients_total"), "aborted clients")], w=8),
        timeseries(L, "Schedule lag", "With -R: how late transactions started compared with their schedule; growing lag "
                   "means the server cannot keep up with the target rate.", "s",
                   [(of_run("pgbench_progress_lag_seconds"), "lag")], w=8),
    ]
    L.new_row()
    items.append(table(L, "Per-statement latency", "Average latency of each script statement from pgbench -r, reported at the "
                       "end of the run, with failures and retries on pgbench 15+.", "s",
                       of_run("pgbench_statement_latency_seconds"),
                       {"script": "script", "statement": "statement", "Value": "latency"}, w=12))
    return items
