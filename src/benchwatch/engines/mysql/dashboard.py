"""MySQL/MariaDB's part of the dashboards: InnoDB's flushing-pressure regions, dirty pages and checkpoint
age against their limits, flushing and redo rates, each target's transactions (docs/innodb.md)."""

from __future__ import annotations

from benchwatch.grafana.panels import Layout, PanelBuilder, PrometheusAnnotation, on_targets, row, stat, timeseries


def innodb_annotations() -> list[PrometheusAnnotation]:
    """InnoDB flushing-pressure regions of every selected target (prometheus/rules/mysql.yml: dirty
    pages at their flush point, or checkpoint age past 7/8 of its maximum), drawn over the sysbench
    curve as checkpoint regions are over pgbench's."""
    return [PrometheusAnnotation("InnoDB flushing pressure", f"{on_targets('instance:mysql_innodb_flushing_pressure:bool')} == 1",
                                 "#FF9830").step("1s").title_format("{{target}}: InnoDB flushing pressure")
            .text_format("dirty pages at innodb_max_dirty_pages_pct (or its low-water mark), or checkpoint age past 7/8 of its maximum")
            .tag_keys("target")]


def server_transactions() -> str:
    """Commits and rollbacks per second counted by the selected targets' servers (prometheus/rules/mysql.yml)."""
    return f"sum({on_targets('instance:mysql_transactions:rate1s')})"


def innodb_rows(L: Layout) -> list[PanelBuilder]:
    items: list[PanelBuilder] = [row(L, "InnoDB (flushing and redo)")]
    items += [
        timeseries(L, "Dirty pages vs innodb_max_dirty_pages_pct", "Dirty pages as a percentage of the buffer pool's "
                   "pages, against innodb_max_dirty_pages_pct (the limit; the page cleaner flushes at "
                   "innodb_io_capacity_max when it is reached) and the flush point (the low-water mark when set).",
                   "percent", [(on_targets("instance:mysql_innodb_buffer_pool_dirty_pages:percent"), "{{target}} dirty pages"),
                               (on_targets("instance:mysql_innodb_max_dirty_pages:percent"), "{{target}} innodb_max_dirty_pages_pct"),
                               (on_targets("instance:mysql_innodb_dirty_pages_flush_point:percent"), "{{target}} flush point")],
                   w=10),
        timeseries(L, "Checkpoint age vs its maximum", "Redo written since the last checkpoint (Innodb_checkpoint_age) "
                   "against Innodb_checkpoint_max_age, with InnoDB's async flush point (7/8: the page cleaner flushes "
                   "hard) and sync point (15/16: user threads wait for flushing). See docs/innodb.md.", "bytes",
                   [(on_targets("mysql_global_status_innodb_checkpoint_age"), "{{target}} checkpoint age"),
                    (on_targets("instance:mysql_innodb_checkpoint_async_point:bytes"), "{{target}} async point (7/8)"),
                    (on_targets("instance:mysql_innodb_checkpoint_sync_point:bytes"), "{{target}} sync point (15/16)"),
                    (on_targets("mysql_global_status_innodb_checkpoint_max_age"), "{{target}} max")], w=10),
        stat(L, "Seconds under flushing pressure", "Seconds of the selected range each selected target's InnoDB "
             "was under flushing pressure (the orange regions).", "s",
             f"sum by (target) (sum_over_time({on_targets('instance:mysql_innodb_flushing_pressure:bool')}[$__range:1s]))",
             w=4, h=8, decimals=0, legend="{{target}}"),
    ]
    L.new_row()
    items += [
        timeseries(L, "Pages flushed per second", "Buffer pool pages written to disk per second "
                   "(Innodb_buffer_pool_pages_flushed): the page cleaner's pace, which jumps under pressure.", "short",
                   [(on_targets("instance:mysql_innodb_pages_flushed:rate1s"), "{{target}} pages flushed/s")], w=8),
        timeseries(L, "Redo bytes per second", "Redo log written per second (Innodb_os_log_written): how fast the "
                   "checkpoint age grows when flushing does not keep up.", "Bps",
                   [(on_targets("instance:mysql_innodb_redo_bytes:rate1s"), "{{target}} redo")], w=8),
        timeseries(L, "Server transactions per second by target", "Commits+rollbacks per second counted by each "
                   "selected target's server, and their sum.", "reqps",
                   [(f"sum by (target) ({on_targets('instance:mysql_transactions:rate1s')})", "{{target}}"),
                    (f"sum({on_targets('instance:mysql_transactions:rate1s')})", "sum")], w=8),
    ]
    return items
