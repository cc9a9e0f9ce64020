"""The servers of an experiment's ``bindir=`` and ``dsn=`` variants: another PostgreSQL build started from
its own data directory (made by its own initdb, as postgres when we are root, with the embedded server's
settings so that the builds compare on equal terms), on a free port of 127.0.0.1; or a server that already
runs. pgbench from the stack's PostgreSQL drives both.

Each is watched like the stack's own server while the sweep runs, as the host agent watches its instances
(agent.py): its own postgres_exporter, scraped by the stack's Prometheus (an entry of the postgres job's
file_sd file), and its own benchwatch exporter following its server log (checkpoints, autovacuum, events)
and reading its statements, remote-writing to the stack's Prometheus; every series labelled with the
variant's ``target``, so that the evidence of a run reads the server that served it and no other. Both are
children of the sweep, their pid files in the variant's directory, stopped with it (and, after a kill,
at the next start)."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from typing import Any

from benchwatch.engines import HOST_ONLY, SERVER_AND_HOST, ServerControl, VariantServer
from benchwatch.engines.postgresql import dsn, exporter_queries
from benchwatch.engines.postgresql.control import PostgreSQLControl
from benchwatch.engines.postgresql.server import EXPORTER, PG_SETTINGS, POSTGRES_EXPORTER_FLAGS, binary, init_data_dir, os_user
from benchwatch.util import net, processes
from benchwatch.util.errors import StackError
from benchwatch.util.private import write_private

START_TIMEOUT_S = 60
WATCHER_TIMEOUT_S = 60
FOLLOWER = "benchwatch_exporter"


class Watched(VariantServer):
    """What both kinds share: the watchers of the server ``params()`` reaches, started by :meth:`watch`."""

    home: str
    stack: Any  # the stack's Host (benchwatch.engines.Host): its Prometheus, remote write, base environment
    job: str    # the engine's scrape job, whose file_sd file takes the variant's exporter

    def params(self) -> dict[str, str]:
        raise NotImplementedError

    def pgpass(self) -> str | None:
        return os.path.join(self.home, "pgpass") if "password" in self.params() else None

    def server_log(self) -> tuple[str | None, str]:
        """(the server log to follow, or None with why not)."""
        return None, "none known"

    def _pid_file(self, component: str) -> str:
        return os.path.join(self.home, "pids", f"{component}.pid")

    def _spawn(self, component: str, argv: list[str], env: dict[str, str], health: str) -> None:
        for d in ("pids", "logs"):
            os.makedirs(os.path.join(self.home, d), exist_ok=True)
        self._stop_watcher(component)  # one a killed sweep left running
        log = os.path.join(self.home, "logs", f"{component}.log")
        with open(log, "ab") as out:
            proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    cwd=self.home, start_new_session=True)
        write_private(self._pid_file(component), f"{proc.pid}\n")
        self._watchers.append(component)
        if not processes.wait_until(lambda: net.http_ok(health), WATCHER_TIMEOUT_S, interval=0.2,
                                    abort=lambda: proc.poll() is not None):
            raise StackError(f"the variant server's {component} did not answer at {health} (log: {log})")

    def _stop_watcher(self, component: str) -> None:
        path = self._pid_file(component)
        pid = processes.read_pid(path)
        if pid is not None and processes.process_alive(pid) and any(
                "exporter" in word for word in processes.process_cmdline(pid)[:4]):
            processes.stop_pid(pid)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def watch(self, target: str, sweep: str = "") -> list[str]:
        self._watchers: list[str] = []
        self._scraped: list[str] = []
        params = self.params()
        done = []
        labels = self.stack.cfg.database_labels()
        host = labels.get("host", "")
        program = binary(EXPORTER)
        if program is None:
            raise StackError(f"{EXPORTER} is not installed: apt-get install prometheus-postgres-exporter")
        address = f"{net.LISTEN_HOST}:{net.free_port()}"
        queries = exporter_queries.for_server(params, os.path.join(self.home, "exporter-queries.yaml"))
        self._spawn(EXPORTER, [program, f"--web.listen-address={address}", f"--extend.query-path={queries}",
                               *POSTGRES_EXPORTER_FLAGS],
                    dict(self.stack.base_env(), **dsn.exporter_env(params, self.pgpass())), f"http://{address}/metrics")
        self.stack.add_scrape_targets(self.job, [{"targets": [address], "labels": {
            "component": EXPORTER, "postgres_server": f"{params.get('host', 'localhost')}:{params.get('port', '5432')}",
            "target": target, "host": host, **({"sweep": sweep} if sweep else {})}}])
        self._scraped.append(address)
        done.append(f"{EXPORTER} on {address}, scraped by the stack's Prometheus as target {target}")
        log, why_not = self.server_log()
        self.log_missing = None if log else why_not
        try:
            from benchwatch.engines.postgresql import connect

            connect.ensure_statements_extension(params)
        except Exception as e:  # statement times are a signal among others: said, not fatal
            done.append(f"pg_stat_statements not created: {str(e).strip().splitlines()[0] if str(e).strip() else e}")
        follower = f"{net.LISTEN_HOST}:{net.free_port()}"
        os.makedirs(os.path.join(self.home, "runs"), exist_ok=True)  # the daemon wants one; no run is followed here
        self._spawn(FOLLOWER, [
            sys.executable, "-m", "benchwatch", "exporter", f"--listen={follower}",
            f"--runs-dir={os.path.join(self.home, 'runs')}", f"--remote-write-url={self.stack.cfg.remote_write_url}",
            *([f"--server-log={log}"] if log else []),
            # The runs, the host's processes and the dips are the stack's exporter's business.
            "--no-collector.pgbench_runs", "--no-collector.processes", "--no-collector.dips",
            f"--label=target={target}", f"--label=host={host}"],
            dict(self.stack.base_env(), **dsn.libpq_env({k: v for k, v in params.items() if k != "password"},
                                                        self.pgpass())),
            f"http://{follower}/healthz")
        done.append(f"its server log {log} followed" if log else f"no server log followed ({why_not})")
        return done

    def scope(self) -> str:
        if not getattr(self, "_watchers", None):
            return HOST_ONLY
        if getattr(self, "log_missing", None):
            return f"server (no server log: {self.log_missing}) and host"
        return SERVER_AND_HOST

    def stop_watchers(self) -> None:
        if getattr(self, "_scraped", None):
            self.stack.remove_scrape_targets(self.job, self._scraped)
            self._scraped = []
        for component in reversed(getattr(self, "_watchers", [])):
            self._stop_watcher(component)
        self._watchers = []


class BuildServer(Watched):
    def __init__(self, bindir: str, home: str, database: str, env: dict[str, str], stack: Any = None,
                 job: str = "postgres"):
        self.bindir = bindir
        self.home = home
        self.database = database
        self.env = env
        self.stack = stack
        self.job = job
        self.port: int | None = None
        self.started = False

    def server_log(self) -> tuple[str | None, str]:
        return os.path.join(self.home, "server.log"), ""

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
        self.stop_watchers()
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


class ExistingServer(Watched):
    """A server that already runs (``dsn=``): reached as the DSN says, never started nor stopped. Its log is
    followed where the server says where it is (``pg_current_logfile()``: its logging collector on) and it
    can be read from here; else the rest is watched, and the report says the log was not."""

    def __init__(self, text: str, home: str, stack: Any = None, job: str = "postgres"):
        self._params = dsn.parse_dsn(text)
        self.home = home
        self.stack = stack
        self.job = job

    def params(self) -> dict[str, str]:
        return dict(self._params)

    def server_log(self) -> tuple[str | None, str]:
        return find_server_log(self._params)

    def stop(self) -> None:
        self.stop_watchers()

    def start(self) -> list[str]:
        os.makedirs(self.home, mode=0o700, exist_ok=True)
        if "password" in self._params:
            dsn.write_pgpass(os.path.join(self.home, "pgpass"), self._params)
        return []

    def client_env(self) -> dict[str, str]:
        return dsn.libpq_env({k: v for k, v in self._params.items() if k != "password"}, self.pgpass())

    def control(self) -> ServerControl | None:
        return PostgreSQLControl(self._params, restart=None)


LOCAL_HOSTS = ("", "localhost", "127.0.0.1", "::1")


def find_server_log(params: dict[str, str]) -> tuple[str | None, str]:
    """The log file of the server ``params`` reach, if it can be read from here: (path, "") or (None, why not)."""
    import psycopg

    from benchwatch.engines.postgresql import connect

    host = params.get("host", "")
    if not host.startswith("/") and host not in LOCAL_HOSTS:
        return None, f"the server runs on {host}, not on this host"
    try:
        with connect.connect(params) as conn:
            row = conn.execute("SELECT current_setting('logging_collector'), current_setting('data_directory'), "
                               "pg_current_logfile()").fetchone()
    except psycopg.Error as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return None, f"the server does not say where it logs to this user ({first})"
    collector, data_dir, path = row if row else (None, None, None)
    if collector != "on" or not path:
        return None, "its logging_collector is off: its log goes wherever its stderr was sent"
    path = os.path.join(str(data_dir), str(path))
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        return None, f"{path} cannot be read here ({e.strerror})"
    return path, ""
