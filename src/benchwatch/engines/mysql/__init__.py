"""MySQL and MariaDB (flavours of one family): the embedded MariaDB instances (or a server the user has),
mysqld_exporter, InnoDB's flushing pressure."""

from __future__ import annotations

from typing import Any

from benchwatch.engines import Engine


class MySQL(Engine):
    name = "mysql"
    title = "MySQL/MariaDB"
    aliases = ("mariadb",)
    scrape_job = "mysql"
    rule_files = ("mysql.yml",)
    server_transactions_text = "commits+rollbacks per second counted by the selected targets' servers"
    regions_text = ("Orange regions: InnoDB under flushing pressure (dirty pages at their limit, or checkpoint age "
                    "past the async point).")
    regions_name = "InnoDB flushing-pressure regions"
    panels_summary = "dirty pages and checkpoint age against their limits, flushing and redo rates"

    def server_transactions_expr(self) -> str:
        from benchwatch.engines.mysql import dashboard

        return dashboard.server_transactions()

    def annotations(self) -> list[Any]:
        from benchwatch.engines.mysql import dashboard

        return list(dashboard.innodb_annotations())

    def dashboard_panels(self, layout: Any) -> list[Any]:
        from benchwatch.engines.mysql import dashboard

        return dashboard.innodb_rows(layout)


    # Series its summary reads beyond the dashboard's; plain data (see Engine.archived_selectors).
    context_selectors = (
        'instance:mysql_innodb_flushing_pressure:bool', 'mysql_global_status_innodb_checkpoint_max_age',
        '{__name__=~"mysql_global_variables_(innodb_buffer_pool_size|innodb_log_file_size|innodb_io_capacity'
        '|innodb_io_capacity_max|innodb_adaptive_flushing|innodb_max_dirty_pages_pct|innodb_max_dirty_pages_pct_lwm'
        '|innodb_flush_log_at_trx_commit)"}',
    )
    archived_selectors = (
        '{__name__=~"instance:mysql_.*"}',  # its recording rules (prometheus/rules/mysql.yml)
        '{__name__=~"mysql_global_status_innodb_checkpoint_(age|max_age)"}',
        *context_selectors,
    )

    def summary_figures(self, ctx: Any) -> dict:
        from benchwatch.engines.mysql import summary

        return summary.figures(ctx)

    def summary_tables(self, s: dict) -> list[tuple[str, list[str], list[list[str]]]]:
        from benchwatch.engines.mysql import summary

        return summary.tables(s)

    def settings_tables(self, s: dict) -> list[tuple[str, list[str], list[list[str]]]]:
        from benchwatch.engines.mysql import summary

        return summary.settings_tables(s)

    @property
    def compare_rows(self) -> list[Any]:
        from benchwatch.engines.mysql import summary

        return summary.COMPARE_ROWS

ENGINE = MySQL()
