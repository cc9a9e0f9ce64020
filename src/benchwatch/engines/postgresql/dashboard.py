"""PostgreSQL's part of the dashboards: checkpoint regions, each target's disks, checkpoints, WAL and
commits below a run, and the Checkpoints & WAL dashboard."""

from __future__ import annotations

from benchwatch.grafana import board, rules
from benchwatch.grafana.panels import (
    DISKS,
    TARGET,
    Layout,
    PanelBuilder,
    PrometheusAnnotation,
    on_target_hosts,
    on_targets,
    row,
    stat,
    timeseries,
)

CHECKPOINTS_WAL = ("benchwatch-checkpoints-wal", "checkpoints-wal.json", "Checkpoints & WAL")
NOT_TEMPLATE = 'datname!~"template.*"'
# The statements collector samples every 5 s (every second while TPS is low): any window this long holds two,
# where $__rate_interval (4 s at the 1 s scrape) often holds one; the panel takes it when $__rate_interval is empty.
STATEMENT_WINDOW = "11s"
# The statements in flight are read at the same pace: each reading stands until the next (5 s, and a little).
IN_FLIGHT_HOLD = "6s"

# One colour per checkpoint reason, so a dip's cause reads at a glance.
CHECKPOINT_REASONS = [
    ("time", 'reason=~"time.*"', "#5794F2"),
    ("wal", 'reason=~"(wal|xlog).*"', "#FF9830"),
    ("requested", 'reason=~"(immediate|force|wait).*"', "#F2495C"),
    ("other", 'reason!~"(time|wal|xlog|immediate|force|wait).*"', "#B877D9"),  # shutdown, end-of-recovery
]



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


AUTOVACUUM_ANNOTATION = "Autovacuum (server log)"


def autovacuum_annotation() -> PrometheusAnnotation:
    """One region per autovacuum or autoanalyze run the server log reported, from its end less its elapsed
    time to its end, titled with its table. Off until switched on in the dashboard's controls: the routine
    10 ms runs of a busy pgbench's small tables come every few seconds and would hide the checkpoints."""
    return (PrometheusAnnotation(AUTOVACUUM_ANNOTATION, f"max_over_time({on_targets('pg_autovacuum_in_progress')}[1s]) == 1",
                                 "#73BF69")
            .step("1s").title_format("{{target}}: autovacuum {{kind}} of {{table}}").text_format("database {{database}}")
            .tag_keys("target,table,kind").enable(False))



def server_transactions() -> str:
    """Commits and rollbacks per second counted by the selected targets' servers (pg_stat_database)."""
    return (f"sum(rate({on_targets('pg_stat_database_xact_commit', NOT_TEMPLATE)}[$__rate_interval]) "
            f"+ rate({on_targets('pg_stat_database_xact_rollback', NOT_TEMPLATE)}[$__rate_interval]))")


def target_rows(L: Layout) -> list[PanelBuilder]:
    """A total row over the selected targets, then one row per target (repeated by the `target` variable):
    its disks, checkpoints, WAL and server-side commits."""
    # Recording rules' expressions at query time (benchwatch.grafana.rules): 1 s resolution.
    commits = rules.expr("instance_datname:pg_xact_commit:rate1s", f'{TARGET}, datname!~"template.*"')
    wal = rules.expr("instance:pg_wal_bytes:rate1s", TARGET)
    checkpointer = rules.expr("instance:pg_checkpoint_buffers_written:rate1s", TARGET)
    # Targets sharing a host share its disks: count each (host, device) once.
    written = f"max by (host, device) {on_target_hosts(rules.expr('instance_device:node_disk_written_bytes:rate1s', DISKS))}"
    items: list[PanelBuilder] = [row(L, "All selected targets")]
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
        return (on_target_hosts(rules.expr(f"instance_device:{rule}", DISKS)), f"{{{{device}}}} {legend}")

    def per_call(window: str) -> str:
        return (f"(1000 * sum by (queryid, statement) (increase(pg_statement_exec_seconds_total{{{one}}}[{window}])) "
                f"/ sum by (queryid, statement) (increase(pg_statement_calls_total{{{one}}}[{window}])))")

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
        timeseries(L, "$target: statements: time per call", "Time per call of the server's top statements (all its databases) "
                   f"over $__rate_interval (at least {STATEMENT_WINDOW}): execution time over calls from pg_stat_statements (the benchwatch "
                   "exporter's statements collector, every 5 s, every second while TPS is low). A call counts when it "
                   "ends, so a statement stuck on a lock shows its time after the wait. benchwatch explain's "
                   "`statement` cause.", "ms",
                   [(f"{per_call('$__rate_interval')} or {per_call(STATEMENT_WINDOW)}", "{{statement}}")], w=12, h=8),
        timeseries(L, "$target: statements in flight by wait event", "Active sessions of the server by "
                   "statement and what they wait on (pg_stat_activity by query_id; CPU: waiting on nothing), sampled "
                   f"with the statements, each reading held until the next (at most {IN_FLIGHT_HOLD}): which statement "
                   "waited on a lock while TPS fell.", "short",
                   # Held over a range, not by the lookback: a group that ends gets a staleness marker, which a
                   # run's archive (and so its rebuilt snapshot) cannot keep; a range reads the same in both.
                   [(f"sum by (statement, wait_event_type, wait_event) "
                     f"(last_over_time(pg_statement_active_sessions{{{one}}}[{IN_FLIGHT_HOLD}]))",
                     "{{wait_event_type}}:{{wait_event}} {{statement}}")], w=12, h=8, stack=True),
    ]
    return items


def checkpoints_wal() -> dict:
    L = Layout()

    def r(record: str) -> str:  # a recording rule's expression at query time: 1 s resolution
        return rules.expr(record, TARGET)

    items: list[PanelBuilder] = [
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
    return board.dashboard(CHECKPOINTS_WAL[0], CHECKPOINTS_WAL[2], "Timed vs requested checkpoints, their cost, who writes "
                     "buffers, WAL volume and full-page images, per target.", items,
                     [board.datasource_variable(), board.target_variable(),
                      board.run_variable(board.every_run())],
                     [*checkpoint_annotations(), board.run_annotation()])
