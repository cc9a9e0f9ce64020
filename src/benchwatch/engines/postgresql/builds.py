"""The servers of an experiment's ``bindir=`` and ``dsn=`` variants: another PostgreSQL build started from
its own data directory (made by its own initdb, as postgres when we are root, with the embedded server's
settings so that the builds compare on equal terms), on a free port of 127.0.0.1; or a server that already
runs. pgbench from the stack's PostgreSQL drives both."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess

from benchwatch.engines import ServerControl, VariantServer
from benchwatch.engines.postgresql import dsn
from benchwatch.engines.postgresql.control import PostgreSQLControl
from benchwatch.engines.postgresql.server import PG_SETTINGS, init_data_dir, os_user
from benchwatch.util import net
from benchwatch.util.errors import StackError
from benchwatch.util.private import write_private

START_TIMEOUT_S = 60


class BuildServer(VariantServer):
    def __init__(self, bindir: str, home: str, database: str, env: dict[str, str]):
        self.bindir = bindir
        self.home = home
        self.database = database
        self.env = env
        self.port: int | None = None
        self.started = False

    @property
    def data(self) -> str:
        return os.path.join(self.home, "data")

    def _password(self) -> str:
        path = os.path.join(self.home, "password")
        try:
            with open(path, encoding="utf-8") as f:
                return f.read().strip()
        except FileNotFoundError:
            password = secrets.token_urlsafe(24)
            try:
                write_private(path, password + "\n", exclusive=True)
            except FileExistsError:  # another process made it meanwhile: its password is the server's
                return self._password()
            return password

    def _run(self, argv: list[str], what: str) -> None:
        user = os_user()
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, user=user, group=user,
                           extra_groups=[] if user else None, env=self.env, cwd=self.home, timeout=300)
        if r.returncode != 0:
            tail = (r.stderr.strip() or r.stdout.strip()).splitlines()[-1:] or [str(r.returncode)]
            raise StackError(f"{what} failed: {tail[0]}")

    def start(self) -> list[str]:
        user = os_user()
        os.makedirs(self.home, exist_ok=True)
        if user:
            shutil.chown(self.home, user, user)
        os.chmod(self.home, 0o700)
        done = []
        password = self._password()
        if not os.path.exists(os.path.join(self.data, "PG_VERSION")):
            init_data_dir(self.bindir, self.data, password, self.home, user, self.env)
            done.append(f"initdb of {self.bindir} in {self.data}")
        self.port = net.free_port()
        socket_dir = os.path.join(self.home, "socket")
        os.makedirs(socket_dir, exist_ok=True)
        if user:
            shutil.chown(socket_dir, user, user)
        settings = dict(PG_SETTINGS, port=str(self.port), unix_socket_directories=f"'{socket_dir}'")
        conf = os.path.join(self.data, "benchwatch.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.write("# Written by benchwatch sweep; rewritten on every start.\n"
                    + "".join(f"{k} = {v}\n" for k, v in settings.items()))
        if user:
            shutil.chown(conf, user, user)
        self._run([os.path.join(self.bindir, "pg_ctl"), "-D", self.data, "-l", os.path.join(self.home, "server.log"),
                   "-w", "-t", str(START_TIMEOUT_S), "start"], f"starting {self.bindir}/postgres")
        self.started = True
        from benchwatch.engines.postgresql import connect

        connect.ensure_database(self.params(), self.database)
        dsn.write_pgpass(os.path.join(self.home, "pgpass"), self.params())
        return done + [f"started {self.bindir}/postgres on port {self.port}"]

    def stop(self) -> None:
        if self.started:
            self._run([os.path.join(self.bindir, "pg_ctl"), "-D", self.data, "-m", "fast", "-w", "stop"],
                      f"stopping {self.bindir}/postgres")
            self.started = False

    def params(self) -> dict[str, str]:
        return {"host": "127.0.0.1", "port": str(self.port), "user": "postgres", "dbname": self.database,
                "sslmode": "disable", "password": self._password()}

    def client_env(self) -> dict[str, str]:
        return dsn.libpq_env({k: v for k, v in self.params().items() if k != "password"},
                             os.path.join(self.home, "pgpass"))

    def control(self) -> ServerControl | None:
        return PostgreSQLControl(self.params(), restart=None)


class ExistingServer(VariantServer):
    """A server that already runs (``dsn=``): reached as the DSN says, never started nor stopped."""

    def __init__(self, text: str, home: str):
        self.params = dsn.parse_dsn(text)
        self.home = home

    def start(self) -> list[str]:
        os.makedirs(self.home, mode=0o700, exist_ok=True)
        if "password" in self.params:
            dsn.write_pgpass(os.path.join(self.home, "pgpass"), self.params)
        return []

    def client_env(self) -> dict[str, str]:
        pgpass = os.path.join(self.home, "pgpass") if "password" in self.params else None
        return dsn.libpq_env({k: v for k, v in self.params.items() if k != "password"}, pgpass)

    def control(self) -> ServerControl | None:
        return PostgreSQLControl(self.params, restart=None)
