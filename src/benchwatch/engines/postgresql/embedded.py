"""PostgreSQL in the native stack: the embedded server (or none, with an existing server's DSN) and
postgres_exporter; the benchwatch exporter follows the embedded server's log for checkpoints."""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import Mapping
from typing import Any

from benchwatch import resources
from benchwatch.engines import StackPart
from benchwatch.engines.postgresql import dsn
from benchwatch.util.errors import StackError
from benchwatch.util.private import write_private

SERVER = "postgres"
EXPORTER = "postgres_exporter"

# Embedded server settings: checkpoints often enough that a one-minute demo shows them.
PG_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "log_checkpoints": "on",
    # Every autovacuum and autoanalyze run, with its duration (explain's autovacuum cause, at the
    # log's own times). 0 rather than a threshold: a run is logged once, when it ends, in ~15 lines,
    # and autovacuum_naptime (1 min) keeps them to a few per minute per table that changes; the
    # short routine runs (pgbench_branches every minute) are the base rate a long one is held against.
    "log_autovacuum_min_duration": "0",
    "log_line_prefix": "'%m [%p] '",
    "logging_collector": "off",
    "log_destination": "'stderr'",
    "checkpoint_timeout": "'30s'",
    "max_wal_size": "'64MB'",
    "min_wal_size": "'32MB'",
    "shared_buffers": "'128MB'",
    "track_io_timing": "on",
    "track_wal_io_timing": "on",
    "password_encryption": "'scram-sha-256'",
    # Time per call of each statement (the exporter's statements collector, explain's `statement`);
    # with it loaded, compute_query_id's default (auto) fills pg_stat_activity.query_id as well.
    "shared_preload_libraries": "'pg_stat_statements'",
}

# postgres_exporter: settings come from the run's metadata, database sizes are unused;
# both cost a catalog query per second (bench/bench_watch_cost.py).
POSTGRES_EXPORTER_FLAGS = ("--disable-default-metrics", "--disable-settings-metrics", "--no-collector.database")


def pg_bindir() -> str | None:
    """The newest PostgreSQL's bin directory (BENCHWATCH_PG_BINDIR names another): the agent, the
    sharded demo's instances and the tests use it without a stack, hence read here."""
    explicit = os.environ.get("BENCHWATCH_PG_BINDIR")
    if explicit:
        return explicit if os.path.exists(os.path.join(explicit, "postgres")) else None
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[-3]))
    if found:
        return os.path.dirname(found[-1])
    which = shutil.which("postgres")
    return os.path.dirname(which) if which else None


def binary(component: str) -> str | None:
    if component == SERVER:
        bindir = pg_bindir()
        return os.path.join(bindir, "postgres") if bindir else None
    if component == EXPORTER:
        return shutil.which("prometheus-postgres-exporter")
    return None


def init_data_dir(bindir: str, data: str, password: str, home: str, user: str | None,
                  env: Mapping[str, str], timeout: float = 300) -> None:
    """initdb of ``bindir`` into ``data`` (scram, superuser postgres with ``password``), including the
    benchwatch.conf that every start rewrites. Raises StackError with initdb's last line."""
    # initdb reads the password from a file the postgres user can read; removed right after.
    pwfile = os.path.join(home, ".pwfile")
    write_private(pwfile, password + "\n", owner=user)
    try:
        result = subprocess.run(
            [os.path.join(bindir, "initdb"), "-D", data, "-U", "postgres", "--auth=scram-sha-256",
             f"--pwfile={pwfile}", "--encoding=UTF8", "--locale=C"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, user=user, group=user,
            extra_groups=[] if user else None, env=dict(env), cwd=home, timeout=timeout)
    finally:
        os.unlink(pwfile)
    if result.returncode != 0:
        tail = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or [str(result.returncode)]
        raise StackError(f"initdb failed: {tail[0]}")
    with open(os.path.join(data, "postgresql.conf"), "a", encoding="utf-8") as f:
        f.write("\ninclude_if_exists = 'benchwatch.conf'\n")


def os_user() -> str | None:
    """initdb and postgres refuse to run as root: as root they run as postgres."""
    return "postgres" if os.geteuid() == 0 else None


class PostgreSQLPart(StackPart):
    @property
    def embedded(self) -> bool:
        return not self.stack.external_dsn()

    def servers(self) -> list[str]:
        return [SERVER] if self.embedded else []

    def exporters(self) -> list[str]:
        return [EXPORTER]

    def is_server(self, component: str) -> bool:
        return component == SERVER

    def pid_source(self, component: str) -> str | None:
        return self.stack.path("pg", "data", "postmaster.pid") if component == SERVER else None

    def log_file(self, component: str) -> str | None:
        return self.stack.path("logs", "postgresql.log") if component == SERVER else None

    def healthy(self, component: str) -> bool | None:
        if component != SERVER:
            return None
        # psycopg costs ~0.2 s to import: only commands that talk to the server pay for it.
        from benchwatch.engines.postgresql import connect

        # pgpass may not exist yet during the first start: the password goes as a connection keyword.
        return self.stack.pid(component) is not None and connect.ready(self.stack.pg_params(), dbname="postgres")

    def stop_signal(self, component: str) -> signal.Signals | None:
        return signal.SIGINT if component == SERVER else None  # fast shutdown: roll back, checkpoint, exit

    def start(self, component: str) -> None:
        if component == SERVER:
            self._start_server()
        else:
            self._start_exporter()

    def after_start(self, component: str) -> None:
        if component == SERVER:
            self._ensure_database()  # the exporters connect to it next

    def after_up(self) -> None:
        dsn.write_pgpass(self.stack.path("secrets", "pgpass"), self.stack.pg_params())

    def client_env(self) -> dict[str, str]:
        return self.stack.pg_env()

    def variant_server(self, kind: str, value: str, home: str):
        from benchwatch.engines.postgresql.builds import BuildServer, ExistingServer

        if kind == "bindir":
            return BuildServer(value, home, self.stack.cfg.pg_database, self.stack.base_env())
        if kind == "dsn":
            return ExistingServer(value, home)
        return None

    def server_control(self, target: str | None = None):
        from benchwatch.engines.postgresql.control import PostgreSQLControl

        return PostgreSQLControl(self.stack.pg_params(),
                                 restart=(lambda: self.stack.restart(SERVER)) if self.embedded else None)

    def scrape_targets(self) -> list[dict]:
        external = self.stack.external_dsn()
        server = dsn.parse_dsn(external).get("host", "external") if external else "embedded"
        return [{"targets": [self.stack.address(EXPORTER)],
                 "labels": {"component": EXPORTER, "postgres_server": server, **self.stack.cfg.database_labels()}}]

    def exporter_args(self) -> list[str]:
        if not self.embedded:
            return []
        return [f"--server-log={self.stack.log_file(SERVER)}",
                *(f"--label={k}={v}" for k, v in self.stack.cfg.database_labels().items())]

    def exporter_env(self) -> dict[str, str]:
        # The statements collector's connection: libpq's variables, the password in the 0600 pgpass file.
        return self.stack.pg_env()

    def status(self, restarts: Mapping[str, Mapping[str, Any]]) -> dict:
        embedded = self.embedded
        pg: dict[str, Any] = {"dsn": self.stack.public_dsn(), "embedded": embedded,
                              "log_file": self.stack.log_file(SERVER) if embedded else None}
        if embedded:
            pg.update({"pid": self.stack.pid(SERVER), "port": self.stack.cfg.ports[SERVER],
                       "healthy": self.stack.healthy(SERVER), "data_dir": self.stack.path("pg", "data"),
                       "restarts": restarts.get(SERVER, {}).get("restarts", 0),
                       "last_restart": restarts.get(SERVER, {}).get("last_restart")})
        return {"postgres": pg}

    # -- the embedded server --------------------------------------------------------------

    def _start_server(self) -> None:
        bindir = os.path.dirname(self.stack.installed(SERVER))
        data = self.stack.path("pg", "data")
        user = os_user()
        if not os.path.exists(os.path.join(data, "PG_VERSION")):
            self._initdb(bindir, data, user)
        socket_dir = self.stack.path("pg", "socket")
        os.makedirs(socket_dir, exist_ok=True)
        if user:
            shutil.chown(socket_dir, user, user)
        settings = dict(PG_SETTINGS, port=str(self.stack.cfg.ports[SERVER]), unix_socket_directories=f"'{socket_dir}'")
        conf = "# Written by benchwatch up; rewritten on every start.\n" + "".join(f"{k} = {v}\n" for k, v in settings.items())
        conf_path = os.path.join(data, "benchwatch.conf")
        with open(conf_path, "w", encoding="utf-8") as f:
            f.write(conf)
        if user:
            shutil.chown(conf_path, user, user)
        self.stack.spawn(SERVER, [os.path.join(bindir, "postgres"), "-D", data], env=self.stack.base_env(), user=user)

    def _initdb(self, bindir: str, data: str, user: str | None) -> None:
        os.makedirs(self.stack.path("pg"), exist_ok=True)
        if user:
            shutil.chown(self.stack.path("pg"), user, user)
            os.chmod(self.stack.path("pg"), 0o700)
        password = secrets.token_urlsafe(24)
        self.stack.write_secret("pg_password", password)
        init_data_dir(bindir, data, password, self.stack.path("pg"), user, self.stack.base_env())

    def _ensure_database(self) -> None:
        import psycopg

        from benchwatch.engines.postgresql import connect

        try:
            connect.ensure_database(self.stack.pg_params(), self.stack.cfg.pg_database)
        except psycopg.Error as e:
            raise StackError(f"could not create database {self.stack.cfg.pg_database!r}: {str(e).strip()}") from None
        try:
            connect.ensure_statements_extension(self.stack.pg_params())
        except psycopg.Error as e:  # statement times are a signal among others: say so, go on
            self.stack.out(f"pg_stat_statements not created in {self.stack.cfg.pg_database!r}: {str(e).strip()}")

    def _start_exporter(self) -> None:
        # The DSN goes through the environment, never argv, and without the
        # password (lib/pq reads it from PGPASSFILE): postgres_exporter logs its DSN.
        dsn.write_pgpass(self.stack.path("secrets", "pgpass"), self.stack.pg_params())
        params = self.stack.pg_params()
        params.pop("password", None)
        # The database name goes as PGDATABASE: postgres_exporter 0.11 splits the
        # DSN on spaces to name the server, and rejects any value holding one.
        database = params.pop("dbname", None)
        env = dict(self.stack.base_env(), DATA_SOURCE_NAME=dsn.to_uri(params))
        if database:
            env["PGDATABASE"] = database
        pg_env = self.stack.pg_env()
        if "PGPASSFILE" in pg_env:  # else lib/pq reads the user's ~/.pgpass
            env["PGPASSFILE"] = pg_env["PGPASSFILE"]
        self.stack.spawn(EXPORTER, [
            self.stack.installed(EXPORTER), f"--web.listen-address={self.stack.address(EXPORTER)}",
            f"--extend.query-path={resources.path('exporters', 'postgres_exporter', 'queries.yaml')}",
            *POSTGRES_EXPORTER_FLAGS,
        ], env=env)
