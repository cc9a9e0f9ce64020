"""PostgreSQL in the native stack: the embedded server (or none, with an existing server's DSN) and
postgres_exporter; the benchwatch exporter follows the embedded server's log for checkpoints."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
from collections.abc import Mapping
from typing import Any

from benchwatch.engines import StackPart
from benchwatch.engines.postgresql import dsn, exporter_queries
from benchwatch.engines.postgresql.options import DSN
from benchwatch.engines.postgresql.server import (
    EXPORTER,
    PG_SETTINGS,
    POSTGRES_EXPORTER_FLAGS,
    SERVER,
    init_data_dir,
    os_user,
)
from benchwatch.util.errors import StackError
from benchwatch.util.net import LISTEN_HOST


class PostgreSQLPart(StackPart):
    # -- the connection: the embedded server's, or an existing one's (--pg-dsn, kept in secrets/) -----

    def external_dsn(self) -> str | None:
        return self.stack.cfg.option(DSN) or self.stack.read_secret("pg_dsn") or None

    def pg_params(self) -> dict[str, str]:
        """Connection parameters for clients, password included (keep them out of argv)."""
        external = self.external_dsn()
        if external:
            params = dsn.parse_dsn(external)
            params.setdefault("dbname", self.stack.cfg.pg_database)
            return params
        params = {"host": LISTEN_HOST, "port": str(self.stack.cfg.ports[SERVER]), "user": "postgres",
                  "dbname": self.stack.cfg.pg_database, "sslmode": "disable"}
        password = self.stack.read_secret("pg_password")
        if password:
            params["password"] = password
        return params

    def pg_env(self) -> dict[str, str]:
        """PG* variables for pgbench/psql: everything but the password, which is in the pgpass file.

        A DSN without a password leaves PGPASSFILE unset: our pgpass would hold an
        empty password and hide the user's own ~/.pgpass."""
        params = self.pg_params()
        return dsn.libpq_env(params, self.stack.path("secrets", "pgpass") if "password" in params else None)

    def secret_values(self) -> list[str]:
        password = self.pg_params().get("password")
        return [password] if password else []

    def public_dsn(self) -> str:
        params = self.pg_params()
        params.pop("password", None)
        return dsn.format_dsn(params)

    def choose_server(self, running: bool) -> None:
        """--pg-dsn (or BENCHWATCH_PG_DSN) when given, kept for the commands after up; without it, a stopped
        stack starts the embedded one, whatever an earlier up watched (as with the engine: the README's
        commands do what it says whatever ran before); a running one stays as it is."""
        if self.stack.cfg.option(DSN):
            self.stack.write_secret("pg_dsn", self.stack.cfg.option(DSN))
        elif not running and self.stack.remove_secret("pg_dsn"):
            self.stack.out("an earlier up watched an existing PostgreSQL (--pg-dsn); without --pg-dsn this one starts "
                           "the embedded server")

    @property
    def embedded(self) -> bool:
        return not self.external_dsn()

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
        return self.stack.pid(component) is not None and connect.ready(self.pg_params(), dbname="postgres")

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
        dsn.write_pgpass(self.stack.path("secrets", "pgpass"), self.pg_params())

    def client_env(self) -> dict[str, str]:
        return self.pg_env()

    def variant_server(self, kind: str, value: str, home: str):
        from benchwatch.engines.postgresql.builds import BuildServer, ExistingServer

        if kind == "bindir":
            return BuildServer(value, home, self.stack.cfg.pg_database, self.stack.base_env(), self.stack,
                               self.engine.scrape_job)
        if kind == "dsn":
            return ExistingServer(value, home, self.stack, self.engine.scrape_job)
        return None

    def server_control(self, target: str | None = None):
        from benchwatch.engines.postgresql.control import PostgreSQLControl

        return PostgreSQLControl(self.pg_params(),
                                 restart=(lambda: self.stack.restart(SERVER)) if self.embedded else None)

    def scrape_targets(self) -> list[dict]:
        external = self.external_dsn()
        server = dsn.parse_dsn(external).get("host", "external") if external else "embedded"
        return [{"targets": [self.stack.address(EXPORTER)],
                 "labels": {"component": EXPORTER, "postgres_server": server, **self.stack.cfg.database_labels()}}]

    def exporter_args(self) -> list[str]:
        # The labels either way: the statements collector reads an existing server too, and a sweep's evidence
        # reads each server's series by its target.
        labels = [f"--label={k}={v}" for k, v in self.stack.cfg.database_labels().items()]
        if not self.embedded:
            return labels
        return [f"--server-log={self.stack.log_file(SERVER)}", *labels]

    def exporter_env(self) -> dict[str, str]:
        # The statements collector's connection: libpq's variables, the password in the 0600 pgpass file.
        return self.pg_env()

    def status(self, restarts: Mapping[str, Mapping[str, Any]]) -> dict:
        embedded = self.embedded
        pg: dict[str, Any] = {"dsn": self.public_dsn(), "embedded": embedded,
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
            connect.ensure_database(self.pg_params(), self.stack.cfg.pg_database)
        except psycopg.Error as e:
            raise StackError(f"could not create database {self.stack.cfg.pg_database!r}: {str(e).strip()}") from None
        try:
            connect.ensure_statements_extension(self.pg_params())
        except psycopg.Error as e:  # statement times are a signal among others: say so, go on
            self.stack.out(f"pg_stat_statements not created in {self.stack.cfg.pg_database!r}: {str(e).strip()}")

    def _start_exporter(self) -> None:
        # The DSN goes through the environment, never argv, and without the
        # password (lib/pq reads it from PGPASSFILE): postgres_exporter logs its DSN.
        dsn.write_pgpass(self.stack.path("secrets", "pgpass"), self.pg_params())
        params = self.pg_params()
        params.pop("password", None)
        # The database name goes as PGDATABASE: postgres_exporter 0.11 splits the
        # DSN on spaces to name the server, and rejects any value holding one.
        database = params.pop("dbname", None)
        env = dict(self.stack.base_env(), DATA_SOURCE_NAME=dsn.to_uri(params))
        if database:
            env["PGDATABASE"] = database
        pg_env = self.pg_env()
        if "PGPASSFILE" in pg_env:  # else lib/pq reads the user's ~/.pgpass
            env["PGPASSFILE"] = pg_env["PGPASSFILE"]
        queries = exporter_queries.for_server(self.pg_params(), self.stack.path("pg", "exporter-queries.yaml"))
        self.stack.spawn(EXPORTER, [
            self.stack.installed(EXPORTER), f"--web.listen-address={self.stack.address(EXPORTER)}",
            f"--extend.query-path={queries}",
            *POSTGRES_EXPORTER_FLAGS,
        ], env=env)
