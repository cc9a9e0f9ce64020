"""The three Grafana dashboards as code; dashboards/generate.py writes them to dashboards/*.json.

Every panel has a title, a description and a unit, takes its datasource from the
`datasource` variable (default: the provisioned uid), and rates over
$__rate_interval.
"""

from __future__ import annotations

import json

from benchwatch.explain import annotation as dip
from benchwatch.grafana.panels import DATASOURCE_UID, DS, Layout, stat, table, targets, timeseries

RUN = 'run_id="$run_id"'

UIDS = {"run": "benchwatch-pgbench-run", "host": "benchwatch-host-io", "checkpoints": "benchwatch-checkpoints-wal"}

# One colour per checkpoint reason, so a dip's cause reads at a glance.
CHECKPOINT_REASONS = [
    ("time", 'reason=~"time.*"', "#5794F2"),
    ("wal", 'reason=~"(wal|xlog).*"', "#FF9830"),
    ("requested", 'reason=~"(immediate|force|wait).*"', "#F2495C"),
    ("other", 'reason!~"(time|wal|xlog|immediate|force|wait).*"', "#B877D9"),  # shutdown, end-of-recovery
]


def checkpoint_annotations() -> list[dict]:
    """One region per checkpoint, edges at the server log's timestamps, coloured by reason.

    Completed checkpoints come from pg_checkpoint_info (its labels carry the figures
    for the text); the one under way from pg_checkpoint_in_progress. max_over_time
    over the 1 s step keeps checkpoints shorter than a step (a manual CHECKPOINT
    takes milliseconds).
    """
    out = []
    for name, selector, colour in CHECKPOINT_REASONS:
        out.append({
            "name": f"Checkpoints: {name}", "datasource": DS, "enable": True, "iconColor": colour,
            "expr": f"max_over_time(pg_checkpoint_info{{{selector}}}[1s])", "step": "1s",
            "titleFormat": "{{kind}} ({{reason}})",
            "textFormat": "{{total_seconds}} s (write {{write_seconds}} s, sync {{sync_seconds}} s), {{buffers}} buffers written",
            "tagKeys": "reason", "useValueForTime": False,
        })
    out.append({
        "name": "Checkpoint in progress", "datasource": DS, "enable": True, "iconColor": "#8F8F8F",
        "expr": "max_over_time(pg_checkpoint_in_progress[1s]) == 1", "step": "1s",
        "titleFormat": "{{kind}} in progress ({{reason}})", "textFormat": "", "tagKeys": "reason",
        "useValueForTime": False,
    })
    return out


def run_annotation() -> dict:
    return {
        "name": "pgbench run", "datasource": DS, "enable": True, "iconColor": "#73BF69",
        "expr": f'pgbench_run_info{{{RUN}}} and on(run_id) (pgbench_running{{{RUN}}} == 1)', "step": "1s",
        "titleFormat": "pgbench run {{run_id}}", "textFormat": "pgbench {{args}}", "tagKeys": "script,clients",
        "useValueForTime": False,
    }


def dip_annotation() -> dict:
    """Each finished TPS dip of the run, its cause in the title (benchwatch.explain.annotation)."""
    return {"name": dip.NAME, "datasource": DS, "enable": True, "iconColor": dip.COLOUR, "expr": dip.EXPR,
            "step": "1s", "titleFormat": dip.TITLE, "textFormat": dip.TEXT, "tagKeys": dip.TAG_KEYS,
            "useValueForTime": False}


def datasource_variable() -> dict:
    return {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
            "current": {"selected": True, "text": DATASOURCE_UID, "value": DATASOURCE_UID}, "hide": 0,
            "refresh": 1, "regex": "", "options": []}


# Newest first, labelled "run_id — script, N clients, scale S".
RUN_PICKER_EXPR = (
    'sort_desc(label_replace(label_join('
    'last_over_time(pgbench_run_start_timestamp_seconds[$__range]) * on(run_id) group_left(script, clients, scale) '
    'last_over_time(pgbench_run_info[$__range]), '
    '"display", "|", "run_id", "script", "clients", "scale"), '
    '"display", "$1 — $2, $3 clients, scale $4", "display", "([^|]*)\\\\|([^|]*)\\\\|([^|]*)\\\\|(.*)"))'
)


def run_variable() -> dict:
    return {"name": "run_id", "label": "Run", "type": "query", "datasource": DS,
            "definition": f"query_result({RUN_PICKER_EXPR})",
            "query": {"query": f"query_result({RUN_PICKER_EXPR})", "refId": "run_id"},
            "regex": '/display="(?<text>[^"]*)".*run_id="(?<value>[^"]*)"/',
            "refresh": 2, "sort": 0, "hide": 0, "multi": False, "includeAll": False, "options": [], "current": {}}


def links() -> list[dict]:
    return [{"title": "benchwatch dashboards", "type": "dashboards", "tags": ["benchwatch"], "asDropdown": False,
             "includeVars": True, "keepTime": True, "targetBlank": False, "icon": "external link"}]


def dashboard(uid: str, title: str, description: str, panels: list[dict], variables: list[dict],
              annotations: list[dict]) -> dict:
    builtin = {"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True, "hide": True,
               "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts", "type": "dashboard"}
    return {
        "uid": uid, "title": title, "description": description, "tags": ["benchwatch"], "editable": True,
        "schemaVersion": 39, "version": 1, "refresh": "5s", "timezone": "", "graphTooltip": 1,
        "time": {"from": "now-15m", "to": "now"}, "timepicker": {"refresh_intervals": ["1s", "5s", "10s", "30s", "1m"]},
        "templating": {"list": variables}, "annotations": {"list": [builtin] + annotations},
        "links": links(), "panels": panels,
    }


def pgbench_run() -> dict:
    L = Layout()
    tps = f"pgbench_progress_tps{{{RUN}}}"
    server_tps = ('sum(rate(pg_stat_database_xact_commit{datname!~"template.*"}[$__rate_interval]) '
                  '+ rate(pg_stat_database_xact_rollback{datname!~"template.*"}[$__rate_interval]))')
    median = f"quantile_over_time(0.5, {tps}[$__range] @ end())"
    panels = [
        timeseries(L, "TPS", "pgbench's own TPS, one point per progress line at pgbench's time (0 while the run is stalled), "
                   "and commits+rollbacks per second counted by the server (pg_stat_database). Shaded regions are checkpoints, "
                   "coloured by reason; the green region is the run, with its pgbench arguments.",
                   "reqps", targets((tps, "pgbench TPS"), (server_tps, "server commits+rollbacks/s")), w=24, h=10),
    ]
    L.new_row()
    panels += [
        stat(L, "TPS mean", "Mean of pgbench's TPS over the selected time range.", "reqps", f"avg_over_time({tps}[$__range])"),
        stat(L, "TPS min", "Lowest TPS over the selected range.", "reqps", f"min_over_time({tps}[$__range])"),
        stat(L, "TPS max", "Highest TPS over the selected range.", "reqps", f"max_over_time({tps}[$__range])"),
        stat(L, "TPS stddev", "Standard deviation of TPS over the selected range.", "reqps", f"stddev_over_time({tps}[$__range])"),
        stat(L, "TPS coefficient of variation", "Stddev / mean of TPS over the selected range: 0 is perfectly steady.",
             "percentunit", f"stddev_over_time({tps}[$__range]) / avg_over_time({tps}[$__range])", decimals=2),
        stat(L, "Seconds below 50% of median", "How many seconds of the selected range TPS stayed under half its median: "
             "the stalls and deep dips.", "s",
             f"sum_over_time(({tps} < bool 0.5 * scalar({median}))[$__range:1s])", decimals=0),
    ]
    L.new_row()
    panels += [
        timeseries(L, "Statements per second (QPS)", "TPS times the SQL statements per transaction of the run's scripts "
                   "(BEGIN and END count; backslash meta-commands do not).", "reqps",
                   targets((f"{tps} * on(run_id) pgbench_script_sql_statements{{{RUN}}}", "statements/s"))),
        timeseries(L, "Latency", "Average and stddev per progress interval as pgbench printed them; p50/p95/p99 from the "
                   "per-transaction log histogram when the run uses -l.", "s", targets(
                       (f"pgbench_progress_latency_seconds{{{RUN}}}", "average"),
                       (f"pgbench_progress_latency_stddev_seconds{{{RUN}}}", "stddev"),
                       (f'histogram_quantile(0.5, sum by (le) (rate(pgbench_latency_seconds_bucket{{{RUN}}}[$__rate_interval])))', "p50"),
                       (f'histogram_quantile(0.95, sum by (le) (rate(pgbench_latency_seconds_bucket{{{RUN}}}[$__rate_interval])))', "p95"),
                       (f'histogram_quantile(0.99, sum by (le) (rate(pgbench_latency_seconds_bucket{{{RUN}}}[$__rate_interval])))', "p99"))),
    ]
    L.new_row()
    panels += [
        timeseries(L, "Failed, skipped and retried transactions", "Per second: failed (pgbench 15+ serialization/deadlock "
                   "failures), skipped for being late (-R with -L), retried (--max-tries).", "reqps", targets(
                       (f"rate(pgbench_failed_transactions_total{{{RUN}}}[$__rate_interval])", "failed/s"),
                       (f"rate(pgbench_skipped_transactions_total{{{RUN}}}[$__rate_interval])", "skipped/s"),
                       (f"rate(pgbench_retried_transactions_total{{{RUN}}}[$__rate_interval])", "retried/s")), w=8),
        timeseries(L, "Aborted clients", "Clients that aborted so far; pgbench goes on with the others, so TPS drops without an error.",
                   "short", targets((f"pgbench_aborted_clients_total{{{RUN}}}", "aborted clients")), w=8),
        timeseries(L, "Schedule lag", "With -R: how late transactions started compared with their schedule; growing lag "
                   "means the server cannot keep up with the target rate.", "s",
                   targets((f"pgbench_progress_lag_seconds{{{RUN}}}", "lag")), w=8),
    ]
    L.new_row()
    panels.append(table(L, "Per-statement latency", "Average latency of each script statement from pgbench -r, reported at the "
                        "end of the run, with failures and retries on pgbench 15+.", "s",
                        f"pgbench_statement_latency_seconds{{{RUN}}}",
                        {"script": "script", "statement": "statement", "Value": "latency"}))
    return dashboard(UIDS["run"], "pgbench run", "One pgbench run: TPS curve with checkpoint regions, latency, failures.",
                     panels, [datasource_variable(), run_variable()],
                     checkpoint_annotations() + [run_annotation(), dip_annotation()])


def device_variable() -> dict:
    return {"name": "device", "label": "Device", "type": "query", "datasource": DS,
            "definition": "label_values(instance_device:node_disk_io_time_seconds:rate1s, device)",
            "query": {"query": "label_values(instance_device:node_disk_io_time_seconds:rate1s, device)", "refId": "device"},
            "regex": "", "refresh": 2, "sort": 1, "hide": 0, "multi": True, "includeAll": True, "allValue": ".*",
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]}, "options": []}


def host_io() -> dict:
    """iostat -x 1 as time series, with the run's checkpoint regions."""
    L = Layout()
    dev = 'device=~"$device"'

    def per_device(rule: str, legend: str) -> tuple:
        return (f"instance_device:{rule}{{{dev}}}", f"{{{{device}}}} {legend}")

    panels = [
        timeseries(L, "Requests per second (r/s, w/s)", "Read and write requests completed per second per device, "
                   "as iostat -x prints r/s and w/s.", "iops",
                   targets(per_device("node_disk_reads_completed:rate1s", "r/s"),
                           per_device("node_disk_writes_completed:rate1s", "w/s"))),
        timeseries(L, "Throughput (rkB/s, wkB/s)", "Bytes read and written per second per device (iostat rkB/s and "
                   "wkB/s, in bytes).", "Bps",
                   targets(per_device("node_disk_read_bytes:rate1s", "read"),
                           per_device("node_disk_written_bytes:rate1s", "written"))),
        timeseries(L, "Wait per request (r_await, w_await)", "Average time a read or write request took, queueing "
                   "included (iostat r_await/w_await). Climbing await while TPS dips points at the disk.", "s",
                   targets(per_device("node_disk_read_await_seconds:mean1s", "r_await"),
                           per_device("node_disk_write_await_seconds:mean1s", "w_await"))),
        timeseries(L, "Utilisation (%util)", "Share of time the device had requests in flight (iostat %util); near 100% "
                   "on a single disk means saturated, less meaningful for SSD/NVMe with parallel queues.", "percentunit",
                   targets(per_device("node_disk_io_time_seconds:rate1s", "%util"))),
        timeseries(L, "Average request size (rareq-sz, wareq-sz)", "Average size of read and write requests "
                   "(iostat rareq-sz/wareq-sz, in bytes): checkpoints write large sorted requests, backends small ones.",
                   "bytes", targets(per_device("node_disk_read_request_size_bytes:mean1s", "read"),
                                    per_device("node_disk_write_request_size_bytes:mean1s", "write"))),
        timeseries(L, "Queue size (aqu-sz)", "Average number of requests queued or in service (iostat aqu-sz).", "short",
                   targets(per_device("node_disk_io_time_weighted_seconds:rate1s", "aqu-sz"))),
    ]
    L.new_row()
    panels.append(timeseries(L, "CPU (avg-cpu)", "Machine-wide CPU as iostat's avg-cpu line: %user, %system (irq and "
                             "softirq included), %iowait, %idle.", "percentunit", targets(
                                 ("instance:node_cpu_user:ratio1s", "%user"), ("instance:node_cpu_system:ratio1s", "%system"),
                                 ("instance:node_cpu_iowait:ratio1s", "%iowait"), ("instance:node_cpu_idle:ratio1s", "%idle")),
                             w=24, stack=True))
    return dashboard(UIDS["host"], "Host I/O", "The iostat -x view per device and CPU, with the same checkpoint regions.",
                     panels, [datasource_variable(), run_variable(), device_variable()],
                     checkpoint_annotations() + [run_annotation()])


def checkpoints_wal() -> dict:
    L = Layout()
    panels = [
        timeseries(L, "Checkpoints per minute: timed vs requested", "Timed checkpoints come from checkpoint_timeout; "
                   "requested ones from max_wal_size running out (or CHECKPOINT). Mostly requested means max_wal_size is "
                   "too small for the write rate.", "short", targets(
                       ("instance:pg_checkpoints_timed:rate1m * 60", "timed/min"),
                       ("instance:pg_checkpoints_requested:rate1m * 60", "requested/min"))),
        timeseries(L, "Checkpoint write and sync time", "Write and sync phase of each checkpoint from the server log "
                   "(log_checkpoints), at its end. A long sync stalls the disk for everyone.", "s", targets(
                       ('pg_checkpoint_last_duration_seconds{phase="write"}', "write"),
                       ('pg_checkpoint_last_duration_seconds{phase="sync"}', "sync"),
                       ('pg_checkpoint_last_duration_seconds{phase="total"}', "total"))),
    ]
    L.new_row()
    panels += [
        timeseries(L, "Buffers written per second", "Who writes dirty shared buffers: the checkpointer, the background "
                   "writer, or the backends themselves (the last one hurts latency).", "short", targets(
                       ("instance:pg_checkpoint_buffers_written:rate1s", "checkpointer"),
                       ("instance:pg_bgwriter_buffers_clean:rate1s", "bgwriter"),
                       ("instance:pg_backend_buffers_written:rate1s", "backends")), stack=True),
        timeseries(L, "WAL bytes per second", "WAL generated per second (pg_stat_wal). Right after a checkpoint it jumps: "
                   "first changes to each page write a full-page image.", "Bps",
                   targets(("instance:pg_wal_bytes:rate1s", "WAL"))),
    ]
    L.new_row()
    panels += [
        timeseries(L, "Full-page image ratio", "Full-page images per WAL record: high just after each checkpoint "
                   "(full_page_writes), the WAL cost of checkpointing often.", "percentunit",
                   targets(("instance:pg_wal_fpi_per_record:ratio1s", "FPI per record"))),
        timeseries(L, "Checkpoint distance against max_wal_size", "WAL written since the last checkpoint's redo point, "
                   "and the distance of each completed checkpoint, against max_wal_size; a requested checkpoint starts "
                   "near max_wal_size / (1 + checkpoint_completion_target).", "bytes", targets(
                       ("pg_control_checkpoint_wal_since_redo_bytes", "WAL since redo"),
                       ("pg_checkpoint_last_distance_bytes", "last checkpoint distance"),
                       ("pg_control_checkpoint_max_wal_size_bytes", "max_wal_size"))),
    ]
    L.new_row()
    panels += [
        timeseries(L, '"Checkpoints are occurring too frequently"', "Warnings the server logged (checkpoint_warning): "
                   "checkpoints forced by WAL volume closer together than checkpoint_warning seconds.", "short",
                   targets(("pg_checkpoints_too_frequent_total", "warnings so far")), w=12),
        stat(L, "Checkpoints in range", "Checkpoints completed during the selected range, by reason, from the server log "
             "(counted exactly: the counter's rise over the range, no extrapolation).", "short",
             "sum by (reason) (max_over_time(pg_checkpoints_completed_total[$__range]) "
             "- min_over_time(pg_checkpoints_completed_total[$__range]))", w=12, h=8, decimals=0, legend="{{reason}}"),
    ]
    return dashboard(UIDS["checkpoints"], "Checkpoints & WAL", "Timed vs requested checkpoints, their cost, who writes "
                     "buffers, WAL volume and full-page images.", panels, [datasource_variable(), run_variable()],
                     checkpoint_annotations() + [run_annotation()])


GENERATORS = {"pgbench-run.json": pgbench_run, "host-io.json": host_io, "checkpoints-wal.json": checkpoints_wal}


def render_all() -> dict[str, str]:
    return {name: json.dumps(fn(), indent=2, sort_keys=True) + "\n" for name, fn in GENERATORS.items()}
