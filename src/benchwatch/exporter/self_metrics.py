"""The exporter's metrics about itself: one catalogue for /metrics and for docs/metrics.md."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from benchwatch.model import catalogue

COLLECTOR_SUCCESS = "benchwatch_exporter_collector_success"
COLLECTOR_DURATION = "benchwatch_exporter_collector_duration_seconds"
COLLECTOR_ERRORS = "benchwatch_exporter_collector_errors_total"
COLLECTOR_CPU = "benchwatch_exporter_collector_cpu_seconds_total"
RW_CPU = "benchwatch_exporter_remote_write_cpu_seconds_total"
RW_SENT = "benchwatch_exporter_remote_write_samples_total"
RW_FAILED_REQUESTS = "benchwatch_exporter_remote_write_failed_requests_total"
RW_REJECTED = "benchwatch_exporter_remote_write_rejected_samples_total"
RW_DROPPED = "benchwatch_exporter_remote_write_dropped_samples_total"
RW_PENDING = "benchwatch_exporter_remote_write_pending_samples"
RUNS_SAVED = "benchwatch_exporter_run_series_saved_total"
RUNS_SAVE_FAILURES = "benchwatch_exporter_run_series_save_failures_total"
RUNS_FINISHING = "benchwatch_exporter_runs_finishing"
ALERT_NOTIFICATIONS = "benchwatch_exporter_alert_notifications_total"
RUNS_UNREADABLE = "benchwatch_exporter_unreadable_runs"
RESULTS_WRITTEN = "benchwatch_exporter_results_runs_written_total"
RESULTS_WRITE_FAILURES = "benchwatch_exporter_results_write_failures_total"
RESULTS_PENDING = "benchwatch_exporter_results_pending_runs"

# name -> (type, help).
SELF_METRICS = {
    COLLECTOR_SUCCESS: ("gauge", "1 if the collector's last poll succeeded, 0 if it raised."),
    COLLECTOR_DURATION: ("gauge", "Time the collector's last poll took."),
    COLLECTOR_ERRORS: ("counter", "Polls of the collector that raised (logged; the other collectors go on)."),
    COLLECTOR_CPU: ("counter", "CPU time the collector used, in the poll loop and in threads of its own: where the "
                               "exporter's CPU goes (bench/bench_watch_cost.py --breakdown)."),
    RW_CPU: ("counter", "CPU time spent encoding and sending remote-write requests in the poll loop."),
    RW_SENT: ("counter", "Samples delivered to Prometheus by remote write."),
    RW_FAILED_REQUESTS: ("counter", "Remote-write requests that failed (kept for a retry, or rejected)."),
    RW_REJECTED: ("counter", "Samples Prometheus refused for good (4xx, out of bounds, too old) or that could not be "
                             "encoded: dropped, not retried."),
    RW_DROPPED: ("counter", "Samples dropped because the pending buffer was full."),
    RW_PENDING: ("gauge", "Samples waiting to be delivered (queued or being sent)."),
    RUNS_SAVED: ("counter", "Finished runs whose series were saved to their run directory."),
    RUNS_SAVE_FAILURES: ("counter", "Finished runs whose series could not be saved."),
    RUNS_FINISHING: ("gauge", "Finished runs whose end is still being written: series archived, results-database record, "
                              "long-term store completion (benchwatch flush waits for 0)."),
    ALERT_NOTIFICATIONS: ("counter", "Alerts received from Alertmanager's webhook, by status."),
    RUNS_UNREADABLE: ("gauge", "Run directories set aside (damaged meta.json, a run that could not be read): logged, "
                               "not followed; their raw output stays for import."),
    RESULTS_WRITTEN: ("counter", "Finished runs whose record was written to the results database (docs/results.md)."),
    RESULTS_WRITE_FAILURES: ("counter", "Attempts to write a run's record that failed (the database down or refusing): "
                                        "the run stays pending and is tried again."),
    RESULTS_PENDING: ("gauge", "Finished runs not yet in the results database (pending markers in the runs directory)."),
}


def family(name: str, labels: Sequence[str] = ()) -> CounterMetricFamily | GaugeMetricFamily:
    return catalogue.family(SELF_METRICS, name, labels)
