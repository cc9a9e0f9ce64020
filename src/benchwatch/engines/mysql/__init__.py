"""MySQL and MariaDB (flavours of one family): the embedded MariaDB instances (or a server the user has),
mysqld_exporter, InnoDB's flushing pressure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from benchwatch.engines import Engine
from benchwatch.engines.mysql.options import STACK_OPTIONS

if TYPE_CHECKING:
    from benchwatch.engines import Host, StackPart


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
    default_ports: ClassVar[Mapping[str, int]] = {"mariadb": 13306, "mysqld_exporter": 19104}
    packages: ClassVar[Mapping[str, str]] = {"mariadb": "mariadb-server", "mysqld_exporter": "prometheus-mysqld-exporter"}
    demo_tool = "sysbench"
    instances = True
    stack_options = STACK_OPTIONS
    # The client's and the server's messages in a tool's output (sysbench's and go-tpc's MySQL drivers).
    ending_messages: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "restart": (r"Lost connection to (?:MySQL|MariaDB) server", r"MySQL server has gone away",
                    r"Server shutdown in progress"),
    }
    demo_help = "--engine mariadb --instances 4: four MariaDB instances, four sysbench runs side by side"
    demo_duration_help = "or of each sysbench run with --engine mariadb (default 20)"

    def status_lines(self, status: Mapping[str, Any]) -> list[str]:
        mysql = status["mysql"]
        return [f"mariadb     {mysql['defaults_file']}"
                + (f"  pid {mysql.get('pid')}  log {mysql['log_file']}" if mysql["embedded"] else "  (external)")]

    def status_healthy(self, status: Mapping[str, Any]) -> bool:
        return bool(status["mysql"].get("healthy", True))

    def binary(self, component: str) -> str | None:
        from benchwatch.engines.mysql import embedded

        return embedded.binary(component)

    def stack_part(self, stack: Host) -> StackPart:
        from benchwatch.engines.mysql import embedded

        return embedded.MySQLPart(self, stack)

    def capabilities(self, facts: Mapping[str, Any]) -> dict[str, bool]:
        from benchwatch.engines.mysql.server import capabilities

        return dict(facts.get("capabilities") or {}) or capabilities(facts.get("settings") or {})

    # explain's signals (scored in causes.py here, registered through cause_modules): InnoDB's flushing pressure is its checkpoint
    # (prometheus/rules/mysql.yml, docs/innodb.md); lock waits are InnoDB's row lock waits
    # (Innodb_row_lock_current_waits) and the processlist's threads waiting on a lock (a LOCK TABLES
    # shows as "Waiting for table metadata lock"), without performance_schema.
    cause_modules = ("causes",)
    explain_signals = ("innodb_flushing", "lock", "target_down")
    address_settings = ("port", "socket", "bind_address", "pid_file", "datadir", "log_error", "general_log_file",
                        "slow_query_log_file", "tmpdir")
    evidence_signals = (
        ("redo log fsyncs per transaction", "sum(increase(mysql_global_status_innodb_os_log_fsyncs{target}[{w}]))"),
        ("redo bytes per transaction", "sum(increase(mysql_global_status_innodb_os_log_written{target}[{w}]))", "per_tx", "B"),
        ("data fsyncs per transaction", "sum(increase(mysql_global_status_innodb_data_fsyncs{target}[{w}]))"),
        ("pages flushed per transaction", "sum(increase(mysql_global_status_innodb_buffer_pool_pages_flushed{target}[{w}]))"),
        ("InnoDB flushing pressure (share of the run)",
         "avg(avg_over_time(instance:mysql_innodb_flushing_pressure:bool{target}[{w}]))", "value", "%", 100.0),
    )
    explain_selectors = ("instance:mysql_innodb_flushing_pressure:bool", "mysql_up",
                         "mysql_global_status_innodb_row_lock_current_waits", "mysql_info_schema_processlist_threads")
    up_metric = "mysql_up"
    server_processes = frozenset({"mariadbd", "mysqld"})

    def server_pid(self, facts: Mapping[str, Any]) -> int | None:
        # One process, threads inside: its pid file (the pid_file variable, among the recorded settings) names it.
        path = str((facts.get("server_settings") or {}).get("pid_file") or "")
        if not path:
            return None
        try:
            with open(path, encoding="utf-8") as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def capability_missing(self, capability: str, facts: Mapping[str, Any]) -> str:
        if capability == "performance_schema":
            return "performance_schema is off on the server"
        return super().capability_missing(capability, facts)

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
        "mysql_up",  # explain's target_down
        "mysql_global_status_innodb_row_lock_current_waits", "mysql_info_schema_processlist_threads",  # its lock
        # the why's signals (benchwatch.evidence), which a run read back from the long-term store is asked for
        '{__name__=~"mysql_global_status_innodb_(os_log_fsyncs|os_log_written|data_fsyncs|buffer_pool_pages_flushed)"}',
        *context_selectors,
    )

ENGINE = MySQL()
