"""The four Grafana dashboards as code; dashboards/generate.py writes them to dashboards/*.json.

Built with Grafana's schema-generated builders (benchwatch.grafana.panels).
Every panel has a title, a description and a unit, takes its datasource from
the `datasource` variable (default: the provisioned uid), and rates over
$__rate_interval.

Targets: every database-side series (node_exporter, postgres_exporter, the
checkpoint collector) carries `target` (one database instance) and `host`.
The `target` variable (multi-select, All) filters every database-side query
with target=~"$target"; All is `.*`, which also matches series without a
target label, so data recorded before targets existed still shows. Run series
(pgbench_*) are not filtered: a run is chosen by the run picker.
"""

from __future__ import annotations

import json

from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.cog import builder as cog_b
from grafana_foundation_sdk.models import dashboard as dash_m

from benchwatch.explain import annotation as dip
from benchwatch.grafana import panels as P
from benchwatch.grafana import rules
from benchwatch.grafana.panels import DATASOURCE_UID, DS, Layout, PrometheusAnnotation, row, stat, table, timeseries
from benchwatch.record.host import NOT_DISK_PATTERN

RUN = 'run_id="$run_id"'
TARGET = 'target=~"$target"'
DISKS = f'device!~"{NOT_DISK_PATTERN}.*"'  # block devices that are disks a database can live on


def on_targets(metric: str, extra: str = "") -> str:
    """``metric`` on the selected targets (and ``extra`` matchers)."""
    return f"{metric}{{{TARGET}{', ' + extra if extra else ''}}}"

UIDS = {"run": "benchwatch-pgbench-run", "host": "benchwatch-host-io", "checkpoints": "benchwatch-checkpoints-wal",
        "sysbench": "benchwatch-sysbench-innodb"}

# One colour per checkpoint reason, so a dip's cause reads at a glance.
CHECKPOINT_REASONS = [
    ("time", 'reason=~"time.*"', "#5794F2"),
    ("wal", 'reason=~"(wal|xlog).*"', "#FF9830"),
    ("requested", 'reason=~"(immediate|force|wait).*"', "#F2495C"),
    ("other", 'reason!~"(time|wal|xlog|immediate|force|wait).*"', "#B877D9"),  # shutdown, end-of-recovery
]


# -- annotations ------------------------------------------------------------------------

def checkpoint_annotations() -> list[PrometheusAnnotation]:
    """One region per checkpoint of every selected target, edges at its server log's
    timestamps, coloured by reason, titled with the target.

    Completed checkpoints come from pg_checkpoint_info (its labels carry the figures
    for the text); the one under way from pg_checkpoint_in_progress. max_over_time
    over the 1 s step keeps checkpoints shorter than a step (a manual CHECKPOINT
    takes milliseconds).
    """
    out = []
    for name, selector, colour in CHECKPOINT_REASONS:
        out.append(PrometheusAnnotation(f"Checkpoints: {name}", f"max_over_time({on_targets('pg_checkpoint_info', selector)}[1s])", colour)
                   .step("1s").title_format("{{target}}: {{kind}} ({{reason}})")
                   .text_format("{{total_seconds}} s (write {{write_seconds}} s, sync {{sync_seconds}} s), {{buffers}} buffers written")
                   .tag_keys("target,reason"))
    out.append(PrometheusAnnotation("Checkpoint in progress", f"max_over_time({on_targets('pg_checkpoint_in_progress')}[1s]) == 1", "#8F8F8F")
               .step("1s").title_format("{{target}}: {{kind}} in progress ({{reason}})").tag_keys("target,reason"))
    return out


def run_annotation() -> PrometheusAnnotation:
    return (PrometheusAnnotation("pgbench run", f'pgbench_run_info{{{RUN}}} and on(run_id) (pgbench_running{{{RUN}}} == 1)', "#73BF69")
            .step("1s").title_format("pgbench run {{run_id}}").text_format("pgbench {{args}}").tag_keys("script,clients"))


def innodb_annotations() -> list[PrometheusAnnotation]:
    """InnoDB flushing-pressure regions of every selected target (prometheus/rules/mysql.yml: dirty
    pages at their flush point, or checkpoint age past 7/8 of its maximum), drawn over the sysbench
    curve as checkpoint regions are over pgbench's."""
    return [PrometheusAnnotation("InnoDB flushing pressure", f"{on_targets('instance:mysql_innodb_flushing_pressure:bool')} == 1",
                                 "#FF9830").step("1s").title_format("{{target}}: InnoDB flushing pressure")
            .text_format("dirty pages at innodb_max_dirty_pages_pct (or its low-water mark), or checkpoint age past 7/8 of its maximum")
            .tag_keys("target")]


def dip_annotation() -> PrometheusAnnotation:
    """Each finished TPS dip of the run, its cause in the title (benchwatch.explain.annotation)."""
    return (PrometheusAnnotation(dip.NAME, dip.EXPR, dip.COLOUR).step("1s").title_format(dip.TITLE)
            .text_format(dip.TEXT).tag_keys(dip.TAG_KEYS))


def sysbench_run_annotation() -> PrometheusAnnotation:
    return (PrometheusAnnotation("sysbench run", f'pgbench_run_info{{{RUN}}} and on(run_id) (pgbench_running{{{RUN}}} == 1)', "#73BF69")
            .step("1s").title_format("sysbench run {{run_id}}").text_format("sysbench {{args}}").tag_keys("script,threads"))


def dashboard_annotations(which: str) -> list[dash_b.AnnotationQuery]:
    """Every annotation of dashboard ``which`` (a key of UIDS), in the order Grafana lists their toggles.

    The one place to add an annotation: append it here, for the dashboards it belongs on
    (``if which == "run": out.append(...)``)."""
    if which == "sysbench":
        return [*innodb_annotations(), sysbench_run_annotation()]
    out: list[dash_b.AnnotationQuery] = [*checkpoint_annotations(), run_annotation()]
    if which == "run":
        out.append(dip_annotation())
    return out


# -- variables ----------------------------------------------------------------------------

def datasource_variable() -> dash_b.DatasourceVariable:
    return (dash_b.DatasourceVariable("datasource").label("Data source").type("prometheus")
            .current(dash_m.VariableOption(selected=True, text=DATASOURCE_UID, value=DATASOURCE_UID))
            .hide(dash_m.VariableHide.DONT_HIDE).regex(""))


# The targets that report: every scrape of a database-side exporter carries the target's name.
TARGET_VALUES_SELECTOR = 'up{target!=""}'


def target_variable() -> dash_b.QueryVariable:
    query = f"label_values({TARGET_VALUES_SELECTOR}, target)"
    return (dash_b.QueryVariable("target").label("Target").datasource(DS)
            .description("Database instances (targets) to show; All also shows series recorded before targets had names.")
            .query({"query": query, "refId": "target"}).regex("")
            .refresh(dash_m.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dash_m.VariableSort.ALPHABETICAL_ASC)
            .hide(dash_m.VariableHide.DONT_HIDE).multi(True).include_all(True).all_value(".*")
            .current(dash_m.VariableOption(selected=True, text=["All"], value=["$__all"])).options([]))


# Newest first, labelled "run_id — script, N clients, scale S" (pgbench) or
# "run_id — sysbench test, N threads" (sysbench, whose run_info has threads, not clients).
_PGBENCH_RUNS = (
    'label_replace(label_join('
    'last_over_time(pgbench_run_start_timestamp_seconds{tool!="sysbench"}[$__range]) * on(run_id) group_left(script, clients, scale) '
    'last_over_time(pgbench_run_info{tool!="sysbench"}[$__range]), '
    '"display", "|", "run_id", "script", "clients", "scale"), '
    '"display", "$1 — $2, $3 clients, scale $4", "display", "([^|]*)\\\\|([^|]*)\\\\|([^|]*)\\\\|(.*)")'
)
_SYSBENCH_RUNS = (
    'label_replace(label_join('
    'last_over_time(pgbench_run_start_timestamp_seconds{tool="sysbench"}[$__range]) * on(run_id) group_left(script, threads) '
    'last_over_time(pgbench_run_info{tool="sysbench"}[$__range]), '
    '"display", "|", "run_id", "script", "threads"), '
    '"display", "$1 — sysbench $2, $3 threads", "display", "([^|]*)\\\\|([^|]*)\\\\|(.*)")'
)
RUN_PICKER_EXPR = f"sort_desc({_PGBENCH_RUNS} or {_SYSBENCH_RUNS})"
SYSBENCH_RUN_PICKER_EXPR = f"sort_desc({_SYSBENCH_RUNS})"


def run_variable(expr: str = RUN_PICKER_EXPR) -> dash_b.QueryVariable:
    return (dash_b.QueryVariable("run_id").label("Run").datasource(DS)
            .query({"query": f"query_result({expr})", "refId": "run_id"})
            .regex('/display="(?<text>[^"]*)".*run_id="(?<value>[^"]*)"/')
            .refresh(dash_m.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dash_m.VariableSort.DISABLED)
            .hide(dash_m.VariableHide.DONT_HIDE).multi(False).include_all(False).options([]))


def device_variable() -> dash_b.QueryVariable:
    # The counter the %util rule rates: the same devices, without the rule.
    query = f"label_values({on_targets('node_disk_io_time_seconds_total')}, device)"
    return (dash_b.QueryVariable("device").label("Device").datasource(DS).query({"query": query, "refId": "device"})
            .regex("").refresh(dash_m.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dash_m.VariableSort.ALPHABETICAL_ASC)
            .hide(dash_m.VariableHide.DONT_HIDE).multi(True).include_all(True).all_value(".*")
            .current(dash_m.VariableOption(selected=True, text=["All"], value=["$__all"])).options([]))


def links() -> list[cog_b.Builder[dash_m.DashboardLink]]:
    return [dash_b.DashboardLink("benchwatch dashboards").type(dash_m.DashboardLinkType.DASHBOARDS).tags(["benchwatch"])
            .as_dropdown(False).include_vars(True).keep_time(True).target_blank(False).icon("external link")]


def dashboard(uid: str, title: str, description: str, items: list[P.PanelBuilder], variables: list,
              annotation_list: list) -> dict:
    d = (dash_b.Dashboard(title).uid(uid).description(description).tags(["benchwatch"]).editable().version(1)
         .refresh("5s").timezone("").tooltip(dash_m.DashboardCursorSync.CROSSHAIR).time("now-15m", "now")
         .timepicker(dash_b.TimePicker().refresh_intervals(["1s", "5s", "10s", "30s", "1m"]))
         .variables(variables).annotations([P.builtin_annotation()] + annotation_list).links(links()))
    for item in items:
        if isinstance(item, dash_b.Row):
            d.with_row(item)
        else:
            d.with_panel(item)
    return P.to_json(d)


# -- per-target rows ----------------------------------------------------------------------

def target_rows(L: Layout) -> list[P.PanelBuilder]:
    """A total row over the selected targets, then one row per target (repeated by the `target` variable):
    its disks, checkpoints, WAL and server-side commits."""
    # Recording rules' expressions at query time (benchwatch.grafana.rules): 1 s resolution.
    commits = rules.expr("instance_datname:pg_xact_commit:rate1s", f'{TARGET}, datname!~"template.*"')
    wal = rules.expr("instance:pg_wal_bytes:rate1s", TARGET)
    checkpointer = rules.expr("instance:pg_checkpoint_buffers_written:rate1s", TARGET)
    # Targets sharing a host share its disks: count each (host, device) once.
    written = f"max by (host, device) {rules.expr('instance_device:node_disk_written_bytes:rate1s', f'{TARGET}, {DISKS}')}"
    items: list[P.PanelBuilder] = [row(L, "All selected targets")]
    items += [
        timeseries(L, "Server commits per second by target", "Commits per second counted by each selected target's "
                   "server (pg_stat_database, every database), and their sum: with a sharded setup, the work "
                   "each instance does against the total.", "reqps",
                   [(f"sum by (target) ({commits})", "{{target}}"), (f"sum({commits})", "total")], w=6),
        timeseries(L, "WAL bytes per second by target", "WAL each selected target generates per second "
                   "(pg_stat_wal), and the sum.", "Bps",
                   [(f"sum by (target) ({wal})", "{{target}}"), (f"sum({wal})", "total")], w=6),
        timeseries(L, "Checkpoint buffers written by target", "Shared buffers each selected target's checkpointer "
                   "writes per second, and the sum: checkpoints of several instances overlapping show here.", "short",
                   [(f"sum by (target) ({checkpointer})", "{{target}}"), (f"sum({checkpointer})", "total")], w=6),
        timeseries(L, "Disk bytes written per second by host", "Bytes written per second to the disks of the hosts "
                   "the selected targets run on (node_exporter), each host's disks counted once.", "Bps",
                   [(f"sum by (host) ({written})", "{{host}}"), (f"sum({written})", "total")], w=6),
    ]
    one = TARGET  # inside a repeated row $target is that row's single value

    def per_device(rule: str, legend: str) -> tuple:
        return (rules.expr(f"instance_device:{rule}", f"{one}, {DISKS}"), f"{{{{device}}}} {legend}")

    items.append(row(L, "Target: $target", repeat="target"))
    items += [
        timeseries(L, "$target: disk await", "Average time a read or write took on each disk of the target's host, "
                   "queueing included (iostat r_await/w_await): the disks whose await matters for this instance.", "s",
                   [per_device("node_disk_read_await_seconds:mean1s", "r_await"),
                    per_device("node_disk_write_await_seconds:mean1s", "w_await")], w=8, h=7),
        timeseries(L, "$target: disk utilisation", "Share of time each disk of the target's host had requests in "
                   "flight (iostat %util).", "percentunit",
                   [per_device("node_disk_io_time_seconds:rate1s", "%util")], w=8, h=7),
        timeseries(L, "$target: server commits per second", "Commits per second per database on this target "
                   "(pg_stat_database): each shard database on its own line.", "reqps",
                   [(f"sum by (datname) ({commits})", "{{datname}}")], w=8, h=7),
        timeseries(L, "$target: buffers written per second", "Who writes this target's dirty shared buffers: the "
                   "checkpointer, the background writer, or the backends themselves.", "short",
                   [(rules.expr("instance:pg_checkpoint_buffers_written:rate1s", one), "checkpointer"),
                    (rules.expr("instance:pg_bgwriter_buffers_clean:rate1s", one), "bgwriter"),
                    (rules.expr("instance:pg_backend_buffers_written:rate1s", one), "backends")], w=8, h=7, stack=True),
        timeseries(L, "$target: WAL bytes per second", "WAL this target generates per second (pg_stat_wal); it jumps "
                   "right after each checkpoint (full-page images).", "Bps",
                   [(rules.expr("instance:pg_wal_bytes:rate1s", one), "WAL")], w=8, h=7),
        timeseries(L, "$target: WAL since the last checkpoint", "WAL written since the last checkpoint's redo point "
                   "against max_wal_size: a requested checkpoint starts where it nears max_wal_size / "
                   "(1 + checkpoint_completion_target).", "bytes",
                   [(f"pg_control_checkpoint_wal_since_redo_bytes{{{one}}}", "WAL since redo"),
                    (f"pg_control_checkpoint_max_wal_size_bytes{{{one}}}", "max_wal_size")], w=8, h=7),
    ]
    return items


# -- the dashboards ---------------------------------------------------------------------------

def pgbench_run() -> dict:
    L = Layout()
    tps = f"pgbench_progress_tps{{{RUN}}}"
    not_template = 'datname!~"template.*"'
    server_tps = (f"sum(rate({on_targets('pg_stat_database_xact_commit', not_template)}[$__rate_interval]) "
                  f"+ rate({on_targets('pg_stat_database_xact_rollback', not_template)}[$__rate_interval]))")
    median = f"quantile_over_time(0.5, {tps}[$__range] @ end())"
    items: list[P.PanelBuilder] = [
        timeseries(L, "TPS", "pgbench's own TPS, one point per progress line at pgbench's time (0 while the run is stalled), "
                   "and commits+rollbacks per second counted by the selected targets' servers (pg_stat_database). Shaded "
                   "regions are checkpoints, coloured by reason; the green region is the run, with its pgbench arguments.",
                   "reqps", [(tps, "pgbench TPS"), (server_tps, "server commits+rollbacks/s")], w=24, h=10),
    ]
    L.new_row()
    items += [
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
    items += [
        timeseries(L, "Statements per second (QPS)", "TPS times the SQL statements per transaction of the run's scripts "
                   "(BEGIN and END count; backslash meta-commands do not).", "reqps",
                   [(f"{tps} * on(run_id) pgbench_script_sql_statements{{{RUN}}}", "statements/s")]),
        timeseries(L, "Latency", "Average and stddev per progress interval as pgbench printed them; p50/p95/p99 from the "
                   "per-transaction log histogram when the run uses -l.", "s", [
                       (f"pgbench_progress_latency_seconds{{{RUN}}}", "average"),
                       (f"pgbench_progress_latency_stddev_seconds{{{RUN}}}", "stddev"),
                       (f'histogram_quantile(0.5, sum by (le) (rate(pgbench_latency_seconds_bucket{{{RUN}}}[$__rate_interval])))', "p50"),
                       (f'histogram_quantile(0.95, sum by (le) (rate(pgbench_latency_seconds_bucket{{{RUN}}}[$__rate_interval])))', "p95"),
                       (f'histogram_quantile(0.99, sum by (le) (rate(pgbench_latency_seconds_bucket{{{RUN}}}[$__rate_interval])))', "p99")]),
    ]
    L.new_row()
    items += [
        timeseries(L, "Failed, skipped and retried transactions", "Per second: failed (pgbench 15+ serialization/deadlock "
                   "failures), skipped for being late (-R with -L), retried (--max-tries).", "reqps", [
                       (f"rate(pgbench_failed_transactions_total{{{RUN}}}[$__rate_interval])", "failed/s"),
                       (f"rate(pgbench_skipped_transactions_total{{{RUN}}}[$__rate_interval])", "skipped/s"),
                       (f"rate(pgbench_retried_transactions_total{{{RUN}}}[$__rate_interval])", "retried/s")], w=8),
        timeseries(L, "Aborted clients", "Clients that aborted so far; pgbench goes on with the others, so TPS drops without an error.",
                   "short", [(f"pgbench_aborted_clients_total{{{RUN}}}", "aborted clients")], w=8),
        timeseries(L, "Schedule lag", "With -R: how late transactions started compared with their schedule; growing lag "
                   "means the server cannot keep up with the target rate.", "s",
                   [(f"pgbench_progress_lag_seconds{{{RUN}}}", "lag")], w=8),
    ]
    L.new_row()
    items.append(table(L, "Per-statement latency", "Average latency of each script statement from pgbench -r, reported at the "
                       "end of the run, with failures and retries on pgbench 15+.", "s",
                       f"pgbench_statement_latency_seconds{{{RUN}}}",
                       {"script": "script", "statement": "statement", "Value": "latency"}))
    items += target_rows(L)
    # run_id stays the last variable: snapshots freeze it there.
    return dashboard(UIDS["run"], "pgbench run", "One pgbench run: TPS curve with checkpoint regions, latency, failures, "
                     "and each database target's disks, checkpoints, WAL and commits.",
                     items, [datasource_variable(), target_variable(), run_variable()], dashboard_annotations("run"))


def host_io() -> dict:
    """iostat -x 1 as time series per target and device, with the run's checkpoint regions."""
    L = Layout()
    sel = f'{TARGET}, device=~"$device"'

    def per_device(rule: str, legend: str) -> tuple:
        return (rules.expr(f"instance_device:{rule}", sel), f"{{{{target}}}} {{{{device}}}} {legend}")

    def cpu(rule: str, legend: str) -> tuple:
        return (rules.expr(f"instance:{rule}", TARGET), f"{{{{target}}}} {legend}")

    items: list[P.PanelBuilder] = [
        timeseries(L, "Requests per second (r/s, w/s)", "Read and write requests completed per second per device, "
                   "as iostat -x prints r/s and w/s.", "iops",
                   [per_device("node_disk_reads_completed:rate1s", "r/s"), per_device("node_disk_writes_completed:rate1s", "w/s")]),
        timeseries(L, "Throughput (rkB/s, wkB/s)", "Bytes read and written per second per device (iostat rkB/s and "
                   "wkB/s, in bytes).", "Bps",
                   [per_device("node_disk_read_bytes:rate1s", "read"), per_device("node_disk_written_bytes:rate1s", "written")]),
        timeseries(L, "Wait per request (r_await, w_await)", "Average time a read or write request took, queueing "
                   "included (iostat r_await/w_await). Climbing await while TPS dips points at the disk.", "s",
                   [per_device("node_disk_read_await_seconds:mean1s", "r_await"),
                    per_device("node_disk_write_await_seconds:mean1s", "w_await")]),
        timeseries(L, "Utilisation (%util)", "Share of time the device had requests in flight (iostat %util); near 100% "
                   "on a single disk means saturated, less meaningful for SSD/NVMe with parallel queues.", "percentunit",
                   [per_device("node_disk_io_time_seconds:rate1s", "%util")]),
        timeseries(L, "Average request size (rareq-sz, wareq-sz)", "Average size of read and write requests "
                   "(iostat rareq-sz/wareq-sz, in bytes): checkpoints write large sorted requests, backends small ones.",
                   "bytes", [per_device("node_disk_read_request_size_bytes:mean1s", "read"),
                             per_device("node_disk_write_request_size_bytes:mean1s", "write")]),
        timeseries(L, "Queue size (aqu-sz)", "Average number of requests queued or in service (iostat aqu-sz).", "short",
                   [per_device("node_disk_io_time_weighted_seconds:rate1s", "aqu-sz")]),
    ]
    L.new_row()
    items.append(timeseries(L, "CPU (avg-cpu)", "Machine-wide CPU of each selected target's host as iostat's avg-cpu "
                            "line: %user, %system (irq and softirq included), %iowait, %idle.", "percentunit", [
                                cpu("node_cpu_user:ratio1s", "%user"), cpu("node_cpu_system:ratio1s", "%system"),
                                cpu("node_cpu_iowait:ratio1s", "%iowait"), cpu("node_cpu_idle:ratio1s", "%idle")],
                            w=24, stack=True))
    return dashboard(UIDS["host"], "Host I/O", "The iostat -x view per target, device and CPU, with the same checkpoint regions.",
                     items, [datasource_variable(), target_variable(), run_variable(), device_variable()], dashboard_annotations("host"))


def checkpoints_wal() -> dict:
    L = Layout()

    def r(record: str) -> str:  # a recording rule's expression at query time: 1 s resolution
        return rules.expr(record, TARGET)

    items: list[P.PanelBuilder] = [
        timeseries(L, "Checkpoints per minute: timed vs requested", "Timed checkpoints come from checkpoint_timeout; "
                   "requested ones from max_wal_size running out (or CHECKPOINT). Mostly requested means max_wal_size is "
                   "too small for the write rate.", "short", [
                       (r("instance:pg_checkpoints_timed:rate1m") + " * 60", "{{target}} timed/min"),
                       (r("instance:pg_checkpoints_requested:rate1m") + " * 60", "{{target}} requested/min")]),
        timeseries(L, "Checkpoint write and sync time", "Write and sync phase of each checkpoint from the server log "
                   "(log_checkpoints), at its end. A long sync stalls the disk for everyone.", "s", [
                       (on_targets("pg_checkpoint_last_duration_seconds", 'phase="write"'), "{{target}} write"),
                       (on_targets("pg_checkpoint_last_duration_seconds", 'phase="sync"'), "{{target}} sync"),
                       (on_targets("pg_checkpoint_last_duration_seconds", 'phase="total"'), "{{target}} total")]),
    ]
    L.new_row()
    items += [
        timeseries(L, "Buffers written per second", "Who writes dirty shared buffers: the checkpointer, the background "
                   "writer, or the backends themselves (the last one hurts latency).", "short", [
                       (r("instance:pg_checkpoint_buffers_written:rate1s"), "{{target}} checkpointer"),
                       (r("instance:pg_bgwriter_buffers_clean:rate1s"), "{{target}} bgwriter"),
                       (r("instance:pg_backend_buffers_written:rate1s"), "{{target}} backends")], stack=True),
        timeseries(L, "WAL bytes per second", "WAL generated per second (pg_stat_wal). Right after a checkpoint it jumps: "
                   "first changes to each page write a full-page image.", "Bps",
                   [(r("instance:pg_wal_bytes:rate1s"), "{{target}} WAL")]),
    ]
    L.new_row()
    items += [
        timeseries(L, "Full-page image ratio", "Full-page images per WAL record: high just after each checkpoint "
                   "(full_page_writes), the WAL cost of checkpointing often.", "percentunit",
                   [(r("instance:pg_wal_fpi_per_record:ratio1s"), "{{target}} FPI per record")]),
        timeseries(L, "Checkpoint distance against max_wal_size", "WAL written since the last checkpoint's redo point, "
                   "and the distance of each completed checkpoint, against max_wal_size; a requested checkpoint starts "
                   "near max_wal_size / (1 + checkpoint_completion_target).", "bytes", [
                       (on_targets("pg_control_checkpoint_wal_since_redo_bytes"), "{{target}} WAL since redo"),
                       (on_targets("pg_checkpoint_last_distance_bytes"), "{{target}} last checkpoint distance"),
                       (on_targets("pg_control_checkpoint_max_wal_size_bytes"), "{{target}} max_wal_size")]),
    ]
    L.new_row()
    items += [
        timeseries(L, '"Checkpoints are occurring too frequently"', "Warnings the server logged (checkpoint_warning): "
                   "checkpoints forced by WAL volume closer together than checkpoint_warning seconds.", "short",
                   [(on_targets("pg_checkpoints_too_frequent_total"), "{{target}} warnings so far")], w=12),
        stat(L, "Checkpoints in range", "Checkpoints completed during the selected range, by target and reason, from the "
             "server log (counted exactly: the counter's rise over the range, no extrapolation).", "short",
             f"sum by (target, reason) (max_over_time({on_targets('pg_checkpoints_completed_total')}[$__range]) "
             f"- min_over_time({on_targets('pg_checkpoints_completed_total')}[$__range]))", w=12, h=8, decimals=0,
             legend="{{target}} {{reason}}"),
    ]
    return dashboard(UIDS["checkpoints"], "Checkpoints & WAL", "Timed vs requested checkpoints, their cost, who writes "
                     "buffers, WAL volume and full-page images, per target.", items,
                     [datasource_variable(), target_variable(), run_variable()], dashboard_annotations("checkpoints"))


def sysbench_innodb() -> dict:
    """A sysbench run on MySQL/MariaDB: its TPS/QPS curve under InnoDB's flushing-pressure regions,
    dirty pages and checkpoint age against their limits, flushing and redo rates, latency, errors,
    the runs of the same experiment per instance and summed, and the host's iostat view.

    The host panels read node_exporter's raw counters rather than node.yml's 1 s rules, so they do
    not depend on which of those rules are recorded."""
    L = Layout()
    tps = f"pgbench_progress_tps{{{RUN}}}"
    median = f"quantile_over_time(0.5, {tps}[$__range] @ end())"
    busy = on_targets("node_cpu_seconds_total", 'mode=~"user|system|iowait"')
    idle = on_targets("node_cpu_seconds_total", 'mode="idle"')

    # The runs of the picked run's experiment (meta.json "info": experiment and target, e.g. the
    # four-instance demo), or the picked run alone when it belongs to none.
    runs = (f'(pgbench_run_info{{tool="sysbench"}} and on(experiment) pgbench_run_info{{{RUN}, experiment!=""}}) '
            f'or pgbench_run_info{{{RUN}}}')
    per_run = f"pgbench_progress_tps * on(run_id) group_left(target) ({runs})"
    disks = f"{TARGET}, {DISKS}"

    def disk(counter: str, legend: str) -> tuple:
        return (f"rate({counter}{{{disks}}}[$__rate_interval])", f"{{{{target}}}} {{{{device}}}} {legend}")

    def await_(time_c: str, count_c: str, legend: str) -> tuple:
        return (f"rate({time_c}{{{disks}}}[$__rate_interval]) / (rate({count_c}{{{disks}}}[$__rate_interval]) > 0)",
                f"{{{{target}}}} {{{{device}}}} {legend}")

    items: list[P.PanelBuilder] = [
        timeseries(L, "TPS", "sysbench's own TPS, one point per progress line at sysbench's time (0 while the run is "
                   "stalled, e.g. by a table lock), and commits+rollbacks per second counted by the selected targets' "
                   "servers. Orange regions: InnoDB under flushing pressure (dirty pages at their limit, or checkpoint "
                   "age past the async point); the green region is the run.", "reqps",
                   [(tps, "sysbench TPS"), (f"sum({on_targets('instance:mysql_transactions:rate1s')})", "server commits+rollbacks/s")],
                   w=14, h=10),
        timeseries(L, "QPS by type (read / write / other)", "Queries per second as sysbench printed them, split "
                   "read/write/other (r/w/o), stacked to the total qps.", "reqps",
                   [(f"pgbench_progress_qps{{{RUN}}}", "{{type}}")], w=10, h=10, stack=True),
    ]
    L.new_row()
    items += [
        stat(L, "TPS mean", "Mean of sysbench's TPS over the selected time range.", "reqps", f"avg_over_time({tps}[$__range])"),
        stat(L, "TPS min", "Lowest TPS over the selected range.", "reqps", f"min_over_time({tps}[$__range])"),
        stat(L, "TPS max", "Highest TPS over the selected range.", "reqps", f"max_over_time({tps}[$__range])"),
        stat(L, "TPS coefficient of variation", "Stddev / mean of TPS over the selected range: 0 is perfectly steady.",
             "percentunit", f"stddev_over_time({tps}[$__range]) / avg_over_time({tps}[$__range])", decimals=2),
        stat(L, "Seconds below 50% of median", "How many seconds of the selected range TPS stayed under half its "
             "median: the stalls and deep valleys.", "s",
             f"sum_over_time(({tps} < bool 0.5 * scalar({median}))[$__range:1s])", decimals=0),
        stat(L, "Seconds under flushing pressure", "Seconds of the selected range each selected target's InnoDB "
             "was under flushing pressure (the orange regions).", "s",
             f"sum by (target) (sum_over_time({on_targets('instance:mysql_innodb_flushing_pressure:bool')}[$__range:1s]))",
             decimals=0, legend="{{target}}"),
    ]
    L.new_row()
    items += [
        timeseries(L, "Dirty pages vs innodb_max_dirty_pages_pct", "Dirty pages as a percentage of the buffer pool's "
                   "pages, against innodb_max_dirty_pages_pct (the limit; the page cleaner flushes at "
                   "innodb_io_capacity_max when it is reached) and the flush point (the low-water mark when set).",
                   "percent", [(on_targets("instance:mysql_innodb_buffer_pool_dirty_pages:percent"), "{{target}} dirty pages"),
                               (on_targets("instance:mysql_innodb_max_dirty_pages:percent"), "{{target}} innodb_max_dirty_pages_pct"),
                               (on_targets("instance:mysql_innodb_dirty_pages_flush_point:percent"), "{{target}} flush point")]),
        timeseries(L, "Checkpoint age vs its maximum", "Redo written since the last checkpoint (Innodb_checkpoint_age) "
                   "against Innodb_checkpoint_max_age, with InnoDB's async flush point (7/8: the page cleaner flushes "
                   "hard) and sync point (15/16: user threads wait for flushing). See docs/innodb.md.", "bytes",
                   [(on_targets("mysql_global_status_innodb_checkpoint_age"), "{{target}} checkpoint age"),
                    (on_targets("instance:mysql_innodb_checkpoint_async_point:bytes"), "{{target}} async point (7/8)"),
                    (on_targets("instance:mysql_innodb_checkpoint_sync_point:bytes"), "{{target}} sync point (15/16)"),
                    (on_targets("mysql_global_status_innodb_checkpoint_max_age"), "{{target}} max")]),
    ]
    L.new_row()
    items += [
        timeseries(L, "Pages flushed per second", "Buffer pool pages written to disk per second "
                   "(Innodb_buffer_pool_pages_flushed): the page cleaner's pace, which jumps under pressure.", "short",
                   [(on_targets("instance:mysql_innodb_pages_flushed:rate1s"), "{{target}} pages flushed/s")], w=8),
        timeseries(L, "Redo bytes per second", "Redo log written per second (Innodb_os_log_written): how fast the "
                   "checkpoint age grows when flushing does not keep up.", "Bps",
                   [(on_targets("instance:mysql_innodb_redo_bytes:rate1s"), "{{target}} redo")], w=8),
        timeseries(L, "Latency percentile", "The latency percentile sysbench printed for each interval "
                   "(lat (ms,95%) by default, --percentile=N otherwise).", "s",
                   [(f"pgbench_progress_latency_quantile_seconds{{{RUN}}}", "p{{quantile}}")], w=8),
    ]
    L.new_row()
    items += [
        timeseries(L, "Errors and reconnects per second", "Query errors sysbench ignored (--mysql-ignore-errors) and "
                   "reconnects, per second (err/s, reconn/s).", "reqps",
                   [(f"rate(pgbench_errors_total{{{RUN}}}[$__rate_interval])", "errors/s"),
                    (f"rate(pgbench_reconnects_total{{{RUN}}}[$__rate_interval])", "reconnects/s")], w=8),
        timeseries(L, "Experiment: TPS per instance and sum", "sysbench TPS of every run of the picked run's "
                   "experiment, one line per database target it drove, and their sum (benchwatch demo --engine mariadb "
                   "--instances 4 runs four side by side); the picked run alone when it belongs to no experiment.",
                   "reqps", [(f"sum by (target) ({per_run})", "{{target}}"), (f"sum({per_run})", "sum")], w=8),
        timeseries(L, "Server transactions per second by target", "Commits+rollbacks per second counted by each "
                   "selected target's server, and their sum.", "reqps",
                   [(f"sum by (target) ({on_targets('instance:mysql_transactions:rate1s')})", "{{target}}"),
                    (f"sum({on_targets('instance:mysql_transactions:rate1s')})", "sum")], w=8),
    ]
    items.append(row(L, "Host I/O (iostat -x)"))
    items += [
        timeseries(L, "Requests per second (r/s, w/s)", "Reads and writes completed per second per disk of the "
                   "selected targets' hosts (iostat r/s, w/s).", "iops",
                   [disk("node_disk_reads_completed_total", "r/s"), disk("node_disk_writes_completed_total", "w/s")], w=8),
        timeseries(L, "Throughput (rkB/s, wkB/s)", "Bytes read and written per second per disk (iostat rkB/s, wkB/s).",
                   "Bps", [disk("node_disk_read_bytes_total", "read"), disk("node_disk_written_bytes_total", "written")], w=8),
        timeseries(L, "Utilisation (%util)", "Share of time each disk had requests in flight (iostat %util).",
                   "percentunit", [disk("node_disk_io_time_seconds_total", "%util")], w=8),
        timeseries(L, "Wait per request (r_await, w_await)", "Average time a read or write took, queueing included "
                   "(iostat r_await, w_await): climbing await in the valleys points at the disk.", "s",
                   [await_("node_disk_read_time_seconds_total", "node_disk_reads_completed_total", "r_await"),
                    await_("node_disk_write_time_seconds_total", "node_disk_writes_completed_total", "w_await")]),
        timeseries(L, "CPU (avg-cpu)", "Machine-wide CPU of the selected targets' hosts, by mode (iostat avg-cpu: "
                   "%user, %system, %iowait), as a share of all CPUs.", "percentunit",
                   [(f"sum by (target, mode) (rate({busy}[$__rate_interval])) "
                     f"/ on(target) group_left() count by (target) ({idle})",
                     "{{target}} %{{mode}}")], stack=True),
    ]
    return dashboard(UIDS["sysbench"], "sysbench on InnoDB", "One sysbench run on MySQL/MariaDB: TPS/QPS with InnoDB "
                     "flushing-pressure regions, dirty pages and checkpoint age against their limits, flushing and "
                     "redo rates, latency, errors, the experiment's instances side by side, and the host's disks.",
                     items, [datasource_variable(), target_variable(), run_variable(SYSBENCH_RUN_PICKER_EXPR)],
                     dashboard_annotations("sysbench"))


GENERATORS = {"pgbench-run.json": pgbench_run, "host-io.json": host_io, "checkpoints-wal.json": checkpoints_wal,
              "sysbench-innodb.json": sysbench_innodb}


def render_all() -> dict[str, str]:
    return {name: json.dumps(fn(), indent=2, sort_keys=True) + "\n" for name, fn in GENERATORS.items()}
