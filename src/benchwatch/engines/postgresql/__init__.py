"""PostgreSQL: the embedded server (or one the user has), postgres_exporter, the server log's checkpoints."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from benchwatch.engines import Engine, EngineCommand, ResultsServer
from benchwatch.engines.postgresql.options import STACK_OPTIONS

if TYPE_CHECKING:
    from benchwatch.engines import AgentHost, AgentPart, Host, StackPart


# Its statements collector (collectors/statements.py): explain's `statement` cause.
STATEMENT_SERIES = ("pg_statement_calls_total", "pg_statement_exec_seconds_total", "pg_statement_active_sessions",
                    "pg_statement_active_seconds_max")


class PostgreSQL(Engine):
    name = "postgresql"
    title = "PostgreSQL"
    aliases = ("postgres",)
    default = True
    scrape_job = "postgres"
    server_transactions_text = "commits+rollbacks per second counted by the selected targets' servers (pg_stat_database)"
    regions_text = "Shaded regions are checkpoints, coloured by reason (the server log's timestamps)."
    regions_name = "checkpoint regions"
    panels_summary = "each target's disks, checkpoints, WAL and commits"
    default_ports: ClassVar[Mapping[str, int]] = {"postgres": 15432, "postgres_exporter": 19187}
    packages: ClassVar[Mapping[str, str]] = {"postgres": "postgresql", "postgres_exporter": "prometheus-postgres-exporter"}
    # The server log's checkpoints, autovacuum runs and events; the top statements (pg_stat_statements).
    collector_modules = ("collectors.checkpoints", "collectors.statements")
    stack_options = STACK_OPTIONS
    server_label = "postgres_server"
    build_programs = ("postgres", "initdb", "pg_ctl")
    address_settings = ("port", "unix_socket_directories", "listen_addresses")
    # libpq's and the server's messages in a tool's output (pgbench and sysbench's pgsql driver print them).
    ending_messages: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "terminated": (r"terminating connection due to administrator command",),
        "restart": (r"the database system is shutting down", r"the database system is starting up",
                    r"server closed the connection unexpectedly", r"connection to server .* failed"),
        "crash": (r"terminating connection because of crash of another server process",
                  r"server process .* was terminated by signal", r"database system is in recovery mode"),
        "out_of_disk": (r"could not (?:write|extend) (?:to )?(?:file|block)",),
    }
    demo_help = "fresh machine: install, start the stack, run a short pgbench, print a summary"
    demo_duration_help = "seconds of pgbench (default 40; 30 with --shards)"

    def commands(self) -> list[EngineCommand]:
        from benchwatch.engines.postgresql import commands

        return commands.commands(self)

    def agent_options(self, parser: Any) -> None:
        parser.add_argument("--postgres", action="append", default=[], metavar="DSN",
                            help="a PostgreSQL instance to watch (libpq DSN; a password is kept in a 0600 file); repeatable")

    def agent_part(self, agent: AgentHost) -> AgentPart:
        from benchwatch.engines.postgresql.agent import PostgreSQLAgentPart

        return PostgreSQLAgentPart(self, agent)

    def stop_local_instances(self, layout: Mapping[str, Any]) -> list[str]:
        from benchwatch.engines.postgresql.local import stop_recorded

        return stop_recorded(layout, self.name)

    def demo_arguments(self, parser: Any) -> None:
        import argparse

        parser.add_argument("--shards", type=int, metavar="N",
                            help="instead: N shard databases (a power of 2) behind a PL/Proxy proxy database, pgbench calling it")
        parser.add_argument("--clients", type=int, default=8, help="with --shards: pgbench -c (default 8)")
        parser.add_argument("--jobs", type=int, default=2, help="with --shards: pgbench -j (default 2)")
        parser.add_argument("--script", choices=("update", "lookup"), default="update",
                            help="with --shards: each transaction updates (default) or looks up one account on its shard")
        parser.add_argument("pgbench_args", nargs=argparse.REMAINDER,
                            help="with --shards: -- more pgbench arguments (e.g. -R 2000)")

    def demo_arguments_given(self, args: Any) -> str | None:
        extra = [a for a in getattr(args, "pgbench_args", None) or [] if a != "--"]
        return "--shards and extra pgbench arguments" if getattr(args, "shards", None) is not None or extra else None

    def status_lines(self, status: Mapping[str, Any]) -> list[str]:
        pg = status["postgres"]
        return [f"postgres    {pg['dsn']}" + (f"  pid {pg.get('pid')}  log {pg['log_file']}" if pg.get("embedded") else "  (external)")
                + (f"  restarted {pg['restarts']}x" if pg.get("restarts") else "")]

    def status_healthy(self, status: Mapping[str, Any]) -> bool:
        return bool(status["postgres"].get("healthy", True))
    # The sharded demo's proxy (benchwatch.engines.postgresql.plproxy), for the server Debian's postgresql brings.
    feature_packages: ClassVar[Mapping[str, tuple[str, ...]]] = {"shards": ("postgresql-15-plproxy",)}
    demo_tool = "pgbench"

    def binary(self, component: str) -> str | None:
        from benchwatch.engines.postgresql import server

        return server.binary(component)

    def stack_part(self, stack: Host) -> StackPart:
        from benchwatch.engines.postgresql import embedded

        return embedded.PostgreSQLPart(self, stack)

    def results_server(self) -> ResultsServer | None:
        from benchwatch.engines.postgresql import results_db

        return results_db.PostgreSQLResults()

    def describe_server(self, env: Mapping[str, str]) -> dict:
        from benchwatch.engines.postgresql.settings import describe_server

        return describe_server(env)

    def capabilities(self, facts: Mapping[str, Any]) -> dict[str, bool]:
        from benchwatch.engines.postgresql.settings import capabilities

        recorded = dict(facts.get("capabilities") or {})
        if recorded:
            return recorded
        found = capabilities(facts.get("server_version"), None)
        found.pop("pg_stat_statements", None)  # runs recorded before did not say what was preloaded
        return found

    # explain's signals (scored in causes.py and statement_causes.py here, through cause_modules): full-page images are read from pg_stat_wal.
    # The server log's events (server_log.SERVER_EVENTS) are causes of their own.
    cause_modules = ("causes", "statement_causes")
    explain_signals = ("checkpoint", "wal_fpi", "autovacuum", "lock", "target_down", "deadlock", "lock_timeout",
                       "connection_terminated", "out_of_memory", "write_error", "statement")
    # statement: time per call from pg_stat_statements (the exporter's statements collector).
    explain_needs: ClassVar[Mapping[str, str]] = {"wal_fpi": "pg_stat_wal", "statement": "pg_stat_statements"}
    evidence_signals = (
        ("WAL syncs per transaction", "sum(increase(pg_stat_wal_wal_sync{target}[{w}]))"),
        ("WAL writes per transaction", "sum(increase(pg_stat_wal_wal_write{target}[{w}]))"),
        ("WAL bytes per transaction", "sum(increase(pg_stat_wal_wal_bytes{target}[{w}]))", "per_tx", "B"),
        ("WAL full-page images per transaction", "sum(increase(pg_stat_wal_wal_fpi{target}[{w}]))"),
        ("WAL sync time per transaction", "sum(increase(pg_stat_wal_wal_sync_time{target}[{w}]))", "per_tx", "µs", 1000.0),
        ("checkpoints", "sum(increase(pg_stat_checkpointer_num_timed{target}[{w}]) + increase(pg_stat_checkpointer_num_requested{target}[{w}]))",
         "value"),
        ("buffers written by checkpoints per transaction", "sum(increase(pg_stat_checkpointer_buffers_written{target}[{w}]))"),
        ("buffers written by backends per transaction", "sum(increase(pg_stat_checkpointer_buffers_backend{target}[{w}]))"),
        # Time the server spent executing statements (pg_stat_statements, the statements collector's top ones).
        ("statement execution time per transaction", "sum(increase(pg_statement_exec_seconds_total{target}[{w}]))",
         "per_tx", "µs", 1e6),
        # Mean active sessions waiting on each wait event over the run (scraped every second).
        ("wait", "sum by (wait_event_type, wait_event) (sum_over_time(pg_stat_activity_waits_sessions{target}[{w}]))",
         "waits", "sessions"),
    )
    # autovacuum: the server log's runs (pg_autovacuum_in_progress, with what a vacuum removed), and
    # postgres_exporter's worker count for runs without them (older runs, a log not followed, a run under way).
    explain_selectors = ("pg_checkpoint_in_progress", "pg_checkpoint_info", "pg_stat_activity_waits_sessions",
                         "pg_autovacuum_workers", "pg_autovacuum_in_progress", "pg_autovacuum_last_tuples_removed",
                         "pg_autovacuum_last_pages_removed", "pg_stat_wal_wal_fpi", "pg_up", "pg_server_log_events_total",
                         "pg_stat_activity_lock_waits_sessions", *STATEMENT_SERIES)
    up_metric = "pg_up"
    server_processes = frozenset({"postgres", "postmaster"})

    def process_kind(self, cmdline: str) -> str | None:
        from benchwatch.engines.postgresql.processes import process_kind

        return process_kind(cmdline)

    def server_pid(self, facts: Mapping[str, Any]) -> int | None:
        from benchwatch.engines.postgresql.processes import postmaster_pid

        return postmaster_pid(facts.get("data_directory"))

    def capability_missing(self, capability: str, facts: Mapping[str, Any]) -> str:
        from benchwatch.engines.postgresql.settings import missing_reason

        return missing_reason(capability, facts.get("server_version"), facts.get("capabilities"))

    def server_transactions_expr(self) -> str:
        from benchwatch.engines.postgresql import dashboard

        return dashboard.server_transactions()

    def annotations(self) -> list[Any]:
        from benchwatch.engines.postgresql import dashboard

        return [*dashboard.checkpoint_annotations(), dashboard.autovacuum_annotation()]

    def dashboard_panels(self, layout: Any) -> list[Any]:
        from benchwatch.engines.postgresql import dashboard

        return dashboard.target_rows(layout)

    def dashboards(self) -> dict[str, Callable[[], dict]]:
        from benchwatch.engines.postgresql import dashboard

        return {dashboard.CHECKPOINTS_WAL[1]: dashboard.checkpoints_wal}


    # Series its summary reads beyond the dashboard's; plain data (see Engine.archived_selectors).
    context_selectors = (
        'pg_checkpoint_in_progress', 'pg_checkpoint_last_duration_seconds', 'pg_checkpoint_last_buffers_written',
        'pg_checkpoint_last_buffers_written_ratio', 'pg_checkpoint_last_distance_bytes',
        'pg_checkpoint_last_estimate_bytes', 'pg_checkpoints_completed_total', 'pg_checkpoints_too_frequent_total',
        '{__name__=~"pg_settings_(shared_buffers|max_wal_size|min_wal_size|checkpoint_.*|wal_buffers|wal_compression'
        '|fsync|full_page_writes|synchronous_commit|max_connections|work_mem|effective_io_concurrency|bgwriter_.*'
        '|wal_writer_.*|huge_pages|wal_level|data_checksums)(_bytes|_seconds)?"}',
    )
    archived_selectors = (
        '{__name__=~"pg_checkpoints?_.*"}',  # the checkpoint collector's regions, last figures and counts
        '{__name__=~"pg_stat_(wal|bgwriter|checkpointer)_.*|pg_control_checkpoint_.*"}',
        '{__name__=~"pg_stat_database_xact_(commit|rollback)"}',
        "pg_stat_activity_waits_sessions", "pg_up", "pg_server_log_events_total",
        '{__name__=~"pg_autovacuum_.*"}',  # postgres_exporter's workers and the server log's runs
        "pg_stat_activity_lock_waits_sessions", *STATEMENT_SERIES,
        *context_selectors,
    )

ENGINE = PostgreSQL()
