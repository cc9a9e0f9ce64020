"""The native stack: real Debian components started as plain processes on 127.0.0.1.

State layout under ``state_dir``:
  stack.json            ports and settings of the stack (no secrets)
  secrets/              0700: the embedded server's password, pgpass, an external DSN
  pg/data, pg/socket    the embedded PostgreSQL cluster (owned by postgres when we are root)
  logs/<component>.log  every component's output; logs/postgresql.log is the server log
  pids/<component>.pid  what `down` stops, by PID
  supervisor/           what the supervisor restarts (components.json, 0600) and its restart counts
                        (state.json); see benchwatch.stack.supervisor
  prometheus/etc/       prometheus.yml and rules linked from the repository, targets/*.json generated
  prometheus/data, alertmanager/data
  alertmanager/alertmanager.yml  the repository's config with this stack's webhook URL (0600)
  grafana/              data and logs of a native Grafana, when one is on the PATH
  runs/<run_id>/        one directory per pgbench run
"""

from __future__ import annotations

import glob
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

from benchwatch import resources
from benchwatch.engines.mysql import exporter as mysql_exporter
from benchwatch.engines.mysql import server as mysql_server
from benchwatch.engines.postgresql import dsn
from benchwatch.query.launch import prometheus_argv, prometheus_binary
from benchwatch.stack import supervisor
from benchwatch.stack.config import LISTEN_HOST, Config
from benchwatch.util import net, processes

# The supervisor comes last: it starts watching once everything is up, and `down` stops it first.
COMPONENTS = ("postgres", "mariadb", "prometheus", "alertmanager", "node_exporter", "postgres_exporter", "mysqld_exporter",
              "benchwatch_exporter", "grafana", "supervisor")
# Components of one engine only (Config.engine); the rest serve both.
ENGINE_COMPONENTS = {"postgres": ("postgres", "postgres_exporter"), "mariadb": ("mariadb", "mysqld_exporter")}
# Recording rules (prometheus/rules/) about one engine's series, loaded only by a stack that runs it.
# docker-compose, which mounts the directory whole, loads them all.
ENGINE_RULE_FILES = {"mariadb": ("mysql.yml",)}

# Prometheus re-sends firing alerts this often (default 1m): an Alertmanager that was
# restarted during a drop hears of it within seconds, not a minute.
ALERT_RESEND_DELAY = "5s"

# Embedded server settings: checkpoints often enough that a one-minute demo shows them.
PG_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "log_checkpoints": "on",
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
}

# node_exporter: only what rules, dashboards and snapshots use; the default set costs several
# times the CPU at a 1 s scrape (bench/bench_watch_cost.py). What `iostat -x 1` shows (cpu,
# diskstats) is scraped every second; the host's size and load (meminfo, loadavg: snapshots,
# ad-hoc queries) every 15 s by a second job that asks for those collectors alone (collect[] in
# prometheus.yml). No go_*/process_* series of node_exporter itself: a third of its exposition,
# read by nothing, rendered every second.
NODE_FAST_COLLECTORS = ("cpu", "diskstats")
NODE_SLOW_COLLECTORS = ("meminfo", "loadavg")
NODE_COLLECTORS = NODE_FAST_COLLECTORS + NODE_SLOW_COLLECTORS
NODE_EXPORTER_FLAGS = ("--web.disable-exporter-metrics", "--collector.disable-defaults",
                       *(f"--collector.{c}" for c in NODE_COLLECTORS))
# postgres_exporter: settings come from the run's metadata, database sizes are unused;
# both cost a catalog query per second (bench/bench_watch_cost.py).
POSTGRES_EXPORTER_FLAGS = ("--disable-default-metrics", "--disable-settings-metrics", "--no-collector.database")

PACKAGES = {
    "postgres": "postgresql",
    "prometheus": "prometheus",
    "alertmanager": "prometheus-alertmanager",
    "node_exporter": "prometheus-node-exporter",
    "postgres_exporter": "prometheus-postgres-exporter",
    "grafana": "grafana (not in Debian: see docker-compose.yml)",
    "mariadb": "mariadb-server",
    "mysqld_exporter": "prometheus-mysqld-exporter",
}
BINARIES = {
    "alertmanager": "prometheus-alertmanager",
    "node_exporter": "prometheus-node-exporter",
    "postgres_exporter": "prometheus-postgres-exporter",
}


class StackError(Exception):
    """One clear line naming the fix."""


# Components run once per MariaDB instance: instance i > 1 is "<component>-i".
PER_INSTANCE = ("mariadb", "mysqld_exporter")


def split_component(component: str) -> tuple[str, int]:
    """("mariadb", 3) for "mariadb-3"; (component, 1) for every single-instance name."""
    base, sep, number = component.rpartition("-")
    if sep and number.isdigit() and base in PER_INSTANCE:
        return base, int(number)
    return component, 1


def instance_component(base: str, index: int) -> str:
    return base if index == 1 else f"{base}-{index}"


def pg_bindir() -> str | None:
    explicit = os.environ.get("BENCHWATCH_PG_BINDIR")
    if explicit:
        return explicit if os.path.exists(os.path.join(explicit, "postgres")) else None
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[-3]))
    if found:
        return os.path.dirname(found[-1])
    which = shutil.which("postgres")
    return os.path.dirname(which) if which else None


def grafana_binary() -> str | None:
    return shutil.which("grafana") or shutil.which("grafana-server")


def binary(component: str) -> str | None:
    if component == "grafana":
        return grafana_binary()
    if component == "postgres":
        bindir = pg_bindir()
        return os.path.join(bindir, "postgres") if bindir else None
    if component in ("benchwatch_exporter", "supervisor"):
        return sys.executable
    if component == "prometheus":
        return prometheus_binary()  # BENCHWATCH_PROMETHEUS may name another build
    if component == "mariadb":
        return mysql_server.binary("mariadbd")
    if component == "mysqld_exporter":
        return mysql_exporter.binary()
    return shutil.which(BINARIES[component])


def installed(component: str) -> str:
    """The component's program; up's preflight has checked it is there, this says so if it went away."""
    path = binary(component)
    if path is None:
        raise StackError(f"{component} is not installed: apt-get install {PACKAGES[component]}")
    return path


@dataclass
class Stack:
    cfg: Config
    out: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr)

    # -- paths ----------------------------------------------------------------

    def path(self, *parts: str) -> str:
        return os.path.join(self.cfg.state_dir, *parts)

    def pid_file(self, component: str) -> str:
        return self.path("pids", f"{component}.pid")

    def log_file(self, component: str) -> str:
        if split_component(component)[0] == "mariadb":
            return self.mysql_target(split_component(component)[1]).log_file
        return self.path("logs", "postgresql.log" if component == "postgres" else f"{component}.log")

    @property
    def embedded_pg(self) -> bool:
        return self.cfg.engine == "postgres" and not self.external_dsn()

    @property
    def mysql(self) -> mysql_server.MySQLTarget:
        return self.mysql_target(1)

    def mysql_target(self, index: int) -> mysql_server.MySQLTarget:
        """MariaDB instance ``index`` (1..N) of the stack, with its port and target name."""
        names = self.cfg.mariadb_names()
        return mysql_server.MySQLTarget(self.cfg.state_dir, self.cfg.ports.get(instance_component("mariadb", index), 0),
                                        self.cfg.mysql_defaults_file if index == 1 else None, index=index,
                                        name=names[index - 1] if index <= len(names) else f"mariadb-{index}")

    def mysql_targets(self) -> list[mysql_server.MySQLTarget]:
        """Every MariaDB instance the stack watches: N embedded ones, or the one existing server."""
        if self.cfg.engine != "mariadb":
            return []
        if not self.mysql.embedded:
            return [self.mysql]
        return [self.mysql_target(i) for i in range(1, max(1, self.cfg.mariadb_instances) + 1)]

    def mysql_target_named(self, name: str) -> mysql_server.MySQLTarget | None:
        return next((t for t in self.mysql_targets() if t.name == name), None)

    def _all_components(self) -> list[str]:
        """COMPONENTS with each per-instance component repeated for instances 2..N, in start order."""
        out: list[str] = []
        extra = range(2, max(1, self.cfg.mariadb_instances) + 1) if self.cfg.engine == "mariadb" and not self.cfg.mysql_defaults_file else range(0)
        for c in COMPONENTS:
            out.append(c)
            if c in PER_INSTANCE:
                out += [instance_component(c, i) for i in extra]
        return out

    def components(self) -> list[str]:
        """What this stack runs: the engine's server unless an existing one was given; Grafana only where installed."""
        other = {c for engine, cs in ENGINE_COMPONENTS.items() if engine != self.cfg.engine for c in cs}
        return [c for c in self._all_components()
                if split_component(c)[0] not in other and (c != "postgres" or self.embedded_pg)
                and (c != "mariadb" or self.mysql.embedded) and (c != "grafana" or grafana_binary() is not None)]

    def _ensure_instance_ports(self) -> None:
        """Ports of MariaDB instances 2..N (and their exporters): free ones, chosen once and kept in stack.json."""
        used = set(self.cfg.ports.values())
        for c in self.components():
            if split_component(c)[1] > 1 and not self.cfg.ports.get(c):
                port = net.free_port()
                while port in used:
                    port = net.free_port()
                self.cfg.ports[c] = port
                used.add(port)

    # -- connection -------------------------------------------------------------

    def external_dsn(self) -> str | None:
        if self.cfg.pg_dsn:
            return self.cfg.pg_dsn
        try:
            with open(self.path("secrets", "pg_dsn"), encoding="utf-8") as f:
                return f.read().strip() or None
        except FileNotFoundError:
            return None

    def pg_params(self) -> dict[str, str]:
        """Connection parameters for clients, password included (keep them out of argv)."""
        external = self.external_dsn()
        if external:
            params = dsn.parse_dsn(external)
            params.setdefault("dbname", self.cfg.pg_database)
            return params
        params = {"host": LISTEN_HOST, "port": str(self.cfg.ports["postgres"]), "user": "postgres",
                  "dbname": self.cfg.pg_database, "sslmode": "disable"}
        password = self._read_secret("pg_password")
        if password:
            params["password"] = password
        return params

    def pg_env(self) -> dict[str, str]:
        """PG* variables for pgbench/psql: everything but the password, which is in the pgpass file.

        A DSN without a password leaves PGPASSFILE unset: our pgpass would hold an
        empty password and hide the user's own ~/.pgpass."""
        params = self.pg_params()
        return dsn.libpq_env(params, self.path("secrets", "pgpass") if "password" in params else None)

    def public_dsn(self) -> str:
        params = self.pg_params()
        params.pop("password", None)
        return dsn.format_dsn(params)

    def _read_secret(self, name: str) -> str | None:
        try:
            with open(self.path("secrets", name), encoding="utf-8") as f:
                return f.read().strip()
        except FileNotFoundError:
            return None

    def _write_secret(self, name: str, value: str) -> None:
        os.makedirs(self.path("secrets"), mode=0o700, exist_ok=True)
        fd = os.open(self.path("secrets", name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(value + "\n")

    # -- status ---------------------------------------------------------------

    def pid(self, component: str) -> int | None:
        if component == "postgres":
            pid = processes.read_pid(self.path("pg", "data", "postmaster.pid"))
        elif split_component(component)[0] == "mariadb":
            pid = processes.read_pid(self.mysql_target(split_component(component)[1]).pid_file)
        else:
            pid = processes.read_pid(self.pid_file(component))
        return pid if processes.process_alive(pid) else None

    def health_url(self, component: str) -> str | None:
        base = self.cfg.url(component)
        return {
            "prometheus": base + "/-/ready",
            "alertmanager": base + "/-/ready",
            "node_exporter": base + "/metrics",
            "postgres_exporter": base + "/metrics",
            "mysqld_exporter": base + "/metrics",
            "benchwatch_exporter": base + "/healthz",
            "supervisor": base + "/metrics",
            "grafana": base + "/api/health",
        }.get(split_component(component)[0])

    def healthy(self, component: str) -> bool:
        if component == "postgres":
            return self.pid(component) is not None and self._pg_ready()
        if split_component(component)[0] == "mariadb":
            return self.pid(component) is not None and self.mysql_target(split_component(component)[1]).ready()
        url = self.health_url(component)
        return self.pid(component) is not None and url is not None and net.http_ok(url)

    def restarts(self) -> dict[str, dict]:
        """The supervisor's record per component: {"restarts": n, "last_restart": epoch, "last_exit": "..."}."""
        return supervisor.read_state(self.path("supervisor"))

    def status(self) -> dict:
        components = {}
        restarts = self.restarts()
        for c in self.components():
            if split_component(c)[0] in ("postgres", "mariadb"):
                continue
            components[c] = {"url": self.cfg.url(c), "port": self.cfg.ports[c], "pid": self.pid(c),
                             "healthy": self.healthy(c), "log_file": self.log_file(c),
                             "restarts": restarts.get(c, {}).get("restarts", 0),
                             "last_restart": restarts.get(c, {}).get("last_restart")}
        pg = {"dsn": self.public_dsn(), "embedded": self.embedded_pg,
              "log_file": self.log_file("postgres") if self.embedded_pg else None}
        if self.embedded_pg:
            pg.update({"pid": self.pid("postgres"), "port": self.cfg.ports["postgres"],
                       "healthy": self.healthy("postgres"), "data_dir": self.path("pg", "data"),
                       "restarts": restarts.get("postgres", {}).get("restarts", 0),
                       "last_restart": restarts.get("postgres", {}).get("last_restart")})
        grafana = grafana_binary()
        extra = {}
        if self.cfg.engine == "mariadb":
            target = self.mysql
            extra["mysql"] = {"engine": "mariadb", "embedded": target.embedded, "defaults_file": target.client_file,
                              "log_file": target.log_file if target.embedded else None}
            if target.embedded:
                extra["mysql"].update({"pid": self.pid("mariadb"), "port": self.cfg.ports["mariadb"],
                                       "healthy": self.healthy("mariadb"), "data_dir": target.data_dir})
                # Every instance by its target name (one: "local"; --instances N: mariadb-1..N).
                extra["mysql"]["instances"] = [
                    {"target": t.name, "port": t.port, "pid": self.pid(instance_component("mariadb", t.index)),
                     "healthy": self.healthy(instance_component("mariadb", t.index)), "data_dir": t.data_dir,
                     "defaults_file": t.client_file, "sysbench_file": t.sysbench_file, "log_file": t.log_file}
                    for t in self.mysql_targets()]
            pg = {"dsn": None, "embedded": False, "log_file": None}
        return {"state_dir": self.cfg.state_dir, "postgres": pg, **extra, "components": components,
                "runs_dir": self.cfg.runs_dir,
                "grafana": {"installed": bool(grafana),
                            "hint": None if grafana else "Grafana is not installed: put grafana-server (or grafana) on the PATH "
                                    "and run up again, or use docker-compose.yml, or point your own Grafana at grafana/provisioning/"}}

    # -- up ---------------------------------------------------------------------

    def up(self) -> dict:
        """Start every component that is not running; idempotent. Leaves nothing half-running on failure."""
        self._ensure_instance_ports()
        self._preflight()
        os.makedirs(self.cfg.state_dir, exist_ok=True)
        if os.geteuid() == 0:
            os.chmod(self.cfg.state_dir, 0o755)  # the postgres user must reach pg/
        for d in ("logs", "pids", "runs"):
            os.makedirs(self.path(d), exist_ok=True)
        if self.cfg.pg_dsn:
            self._write_secret("pg_dsn", self.cfg.pg_dsn)
        self.cfg.save()
        # The supervisor would race us restarting what we start: it pauses while up works.
        with supervisor.paused(self.path("supervisor")):
            return self._up()

    def _up(self) -> dict:
        started: list[str] = []
        try:
            for component in self.components():
                if self.pid(component) is not None:
                    if not self._wait_healthy(component, 20.0):
                        raise StackError(f"{component} is running (pid {self.pid(component)}) but not healthy: see {self.log_file(component)}")
                    continue
                base, index = split_component(component)
                if base in PER_INSTANCE:
                    getattr(self, f"_start_{base}")(index)
                else:
                    getattr(self, f"_start_{component}")()
                started.append(component)
                if not self._wait_healthy(component, 60.0):
                    raise StackError(f"{component} failed to start: {self._log_tail(component)} (log: {self.log_file(component)})")
                if component == "postgres":
                    self._ensure_database()  # the exporters connect to it next
                if base == "mariadb":
                    self.mysql_target(index).bootstrap()  # users and 0600 client files, before the exporter reads one
            if self.cfg.engine == "postgres":
                dsn.write_pgpass(self.path("secrets", "pgpass"), self.pg_params())
            elif not self.mysql.embedded:
                self.mysql.write_sysbench_file()
        except BaseException:
            for component in reversed(started):
                self._stop(component)
            raise
        return self.status()

    def _preflight(self) -> None:
        for component in self.components():
            if self.pid(component) is not None:
                continue
            base = split_component(component)[0]
            if binary(base) is None:
                raise StackError(f"{base} is not installed: apt-get install {PACKAGES[base]}")
            port = self.cfg.ports[component]
            if not net.port_free(LISTEN_HOST, port):
                flag = base.replace("_", "-")
                raise StackError(f"port {port} for {component} is taken on {LISTEN_HOST}: pass --{flag}-port or set BENCHWATCH_{component.upper()}_PORT")

    def _wait_healthy(self, component: str, timeout: float) -> bool:
        return processes.wait_until(lambda: self.healthy(component), timeout, interval=0.1,
                                abort=lambda: self.pid(component) is None and not self._starting(component))

    def _starting(self, component: str) -> bool:
        # postgres writes postmaster.pid (mariadbd its pid file) a moment after it starts
        return (split_component(component)[0] in ("postgres", "mariadb")
                and processes.process_alive(getattr(self, "_pg_popen_pid", None)))

    def _log_tail(self, component: str, lines: int = 3) -> str:
        """The most telling lines of a component's log: its errors if it logged any, else the last lines."""
        try:
            with open(self.log_file(component), encoding="utf-8", errors="replace") as f:
                all_lines = [l.strip() for l in f.readlines()[-200:] if l.strip()]
        except FileNotFoundError:
            return "no log"
        errors = [l for l in all_lines if "level=error" in l or "ERROR" in l or "FATAL" in l]
        return " | ".join((errors or all_lines)[-lines:]) or "no output"

    def component_spec(self, component: str, argv: list[str], env: dict[str, str] | None = None,
                       user: str | None = None) -> supervisor.ComponentSpec:
        """How the component is started, the same way by up and by the supervisor."""
        base, index = split_component(component)
        # The database servers write their own pid files.
        own = (self.path("pg", "data", "postmaster.pid") if base == "postgres"
               else self.mysql_target(index).pid_file if base == "mariadb" else None)
        return supervisor.ComponentSpec(
            name=component, argv=argv, env=env, cwd=self.cfg.state_dir, user=user, log_file=self.log_file(component),
            pid_file=None if own else self.pid_file(component), pid_source=own)

    def _spawn(self, component: str, argv: list[str], env: dict[str, str] | None = None,
               user: str | None = None) -> int:
        spec = self.component_spec(component, argv, env, user)
        if component != "supervisor":
            # Recorded before the start: a component that dies at once is still restarted.
            supervisor.register(self.path("supervisor"), spec)
        return supervisor.spawn(spec).pid

    def _base_env(self) -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ", "HOME")}

    # -- components -------------------------------------------------------------

    def _pg_user(self) -> str | None:
        return "postgres" if os.geteuid() == 0 else None

    def _start_postgres(self) -> None:
        bindir = os.path.dirname(installed("postgres"))
        data = self.path("pg", "data")
        user = self._pg_user()
        if not os.path.exists(os.path.join(data, "PG_VERSION")):
            self._initdb(bindir, data, user)
        socket_dir = self.path("pg", "socket")
        os.makedirs(socket_dir, exist_ok=True)
        if user:
            shutil.chown(socket_dir, user, user)
        settings = dict(PG_SETTINGS, port=str(self.cfg.ports["postgres"]), unix_socket_directories=f"'{socket_dir}'")
        conf = "# Written by benchwatch up; rewritten on every start.\n" + "".join(f"{k} = {v}\n" for k, v in settings.items())
        conf_path = os.path.join(data, "benchwatch.conf")
        with open(conf_path, "w", encoding="utf-8") as f:
            f.write(conf)
        if user:
            shutil.chown(conf_path, user, user)
        self._pg_popen_pid = self._spawn("postgres", [os.path.join(bindir, "postgres"), "-D", data],
                                         env=self._base_env(), user=user)

    def _initdb(self, bindir: str, data: str, user: str | None) -> None:
        os.makedirs(self.path("pg"), exist_ok=True)
        if user:
            shutil.chown(self.path("pg"), user, user)
            os.chmod(self.path("pg"), 0o700)
        password = secrets.token_urlsafe(24)
        self._write_secret("pg_password", password)
        # initdb reads the password from a file the postgres user can read; removed right after.
        pwfile = self.path("pg", ".pwfile")
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(password + "\n")
        if user:
            shutil.chown(pwfile, user, user)
        try:
            result = subprocess.run(
                [os.path.join(bindir, "initdb"), "-D", data, "-U", "postgres", "--auth=scram-sha-256",
                 f"--pwfile={pwfile}", "--encoding=UTF8", "--locale=C"],
                stdin=subprocess.DEVNULL, capture_output=True, text=True, user=user, group=user,
                extra_groups=[] if user else None, env=self._base_env(), cwd=self.path("pg"))
        finally:
            os.unlink(pwfile)
        if result.returncode != 0:
            raise StackError(f"initdb failed: {result.stderr.strip().splitlines()[-1] if result.stderr.strip() else result.returncode}")
        with open(os.path.join(data, "postgresql.conf"), "a", encoding="utf-8") as f:
            f.write("\ninclude_if_exists = 'benchwatch.conf'\n")

    def _pg_ready(self) -> bool:
        # psycopg costs ~0.2 s to import: only commands that talk to the server pay for it.
        from benchwatch.engines.postgresql import connect

        # pgpass may not exist yet during the first start: the password goes as a connection keyword.
        return connect.ready(self.pg_params(), dbname="postgres")

    def _ensure_database(self) -> None:
        import psycopg

        from benchwatch.engines.postgresql import connect

        try:
            connect.ensure_database(self.pg_params(), self.cfg.pg_database)
        except psycopg.Error as e:
            raise StackError(f"could not create database {self.cfg.pg_database!r}: {str(e).strip()}") from None

    def _write_prometheus_config(self) -> str:
        etc = self.path("prometheus", "etc")
        os.makedirs(os.path.join(etc, "targets"), exist_ok=True)
        os.makedirs(self.path("prometheus", "data"), exist_ok=True)
        # Link, not copy: the repository's prometheus/ stays the one source.
        for name in ("prometheus.yml", "alerts"):
            link = os.path.join(etc, name)
            if os.path.lexists(link):
                os.unlink(link)
            os.symlink(resources.path("prometheus", name), link)
        self._link_rule_files(os.path.join(etc, "rules"))
        external = self.external_dsn()
        pg_instance = dsn.parse_dsn(external).get("host", "external") if external else "embedded"
        targets = {
            "prometheus": ("prometheus", {}),
            "alertmanager": ("alertmanager", {}),
            "node": ("node_exporter", self.cfg.database_labels()),
            "postgres": ("postgres_exporter", {"postgres_server": pg_instance, **self.cfg.database_labels()}),
            "benchwatch": ("benchwatch_exporter", {}),
            # The shared contract: a database instance is target (local: the stack's own) and host.
            "mysql": ("mysqld_exporter", {"target": "local", "host": socket.gethostname()}),
            "supervisor": ("supervisor", {}),
        }
        mysql_entries = [{"targets": [f"{LISTEN_HOST}:{self.cfg.ports[instance_component('mysqld_exporter', t.index)]}"],
                          "labels": {"component": "mysqld_exporter", "target": t.name, "host": socket.gethostname()}}
                         for t in self.mysql_targets()]
        for name, (component, labels) in targets.items():
            if component in {c for e, cs in ENGINE_COMPONENTS.items() if e != self.cfg.engine for c in cs}:
                with open(os.path.join(etc, "targets", f"{name}.json"), "w", encoding="utf-8") as f:
                    json.dump([], f)  # the other engine's exporter does not run: no target
                continue
            entry = [{"targets": [f"{LISTEN_HOST}:{self.cfg.ports[component]}"], "labels": {"component": component, **labels}}]
            if name == "mysql":
                entry = mysql_entries  # one exporter per MariaDB instance, each with its target name
            with open(os.path.join(etc, "targets", f"{name}.json"), "w", encoding="utf-8") as f:
                json.dump(entry, f, indent=2)
        return os.path.join(etc, "prometheus.yml")

    def _link_rule_files(self, rules_dir: str) -> None:
        """A link per recording-rule file, leaving out the rules of an engine this stack does not run:
        the mysql_innodb group is evaluated every second and, selecting nothing on a PostgreSQL
        stack, would still cost Prometheus about 1 ms of CPU per second (docs/rules.md)."""
        if os.path.islink(rules_dir) or os.path.isfile(rules_dir):
            os.unlink(rules_dir)  # a state dir from before: the whole directory was one link
        os.makedirs(rules_dir, exist_ok=True)
        for name in os.listdir(rules_dir):
            os.unlink(os.path.join(rules_dir, name))
        skipped = {f for engine, files in ENGINE_RULE_FILES.items() if engine != self.cfg.engine for f in files}
        source = resources.path("prometheus", "rules")
        for name in sorted(os.listdir(source)):
            if name.endswith(".yml") and name not in skipped:
                os.symlink(os.path.join(source, name), os.path.join(rules_dir, name))

    def _start_prometheus(self) -> None:
        config = self._write_prometheus_config()
        retention = os.environ.get("BENCHWATCH_PROMETHEUS_RETENTION", "30y")
        self._spawn("prometheus", prometheus_argv(
            installed("prometheus"), config=config, data_dir=self.path("prometheus", "data"), retention=retention,
            listen=f"{LISTEN_HOST}:{self.cfg.ports['prometheus']}",
            extra=["--web.enable-lifecycle", f"--rules.alert.resend-delay={ALERT_RESEND_DELAY}"]),
            env=self._base_env())

    def _start_alertmanager(self) -> None:
        os.makedirs(self.path("alertmanager", "data"), exist_ok=True)
        # Alertmanager 0.25 has no url_file for webhooks: write the repository's
        # config with docker-compose's exporter URL replaced by this stack's
        # (or BENCHWATCH_ALERT_WEBHOOK_URL); 0600, a webhook URL may hold a token.
        with open(resources.path("alertmanager", "alertmanager.yml"), encoding="utf-8") as f:
            text = f.read()
        webhook = os.environ.get("BENCHWATCH_ALERT_WEBHOOK_URL") or self.cfg.url("benchwatch_exporter") + "/alerts"
        config = self.path("alertmanager", "alertmanager.yml")
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            from benchwatch.stack.config import COMPOSE_EXPORTER

            f.write(text.replace(f"http://{COMPOSE_EXPORTER}/alerts", webhook))
        self._spawn("alertmanager", [
            installed("alertmanager"), f"--config.file={config}",
            f"--storage.path={self.path('alertmanager', 'data')}",
            f"--web.listen-address={LISTEN_HOST}:{self.cfg.ports['alertmanager']}",
            "--cluster.listen-address=",  # no gossip listener on 0.0.0.0:9094
        ], env=self._base_env())

    def _start_node_exporter(self) -> None:
        argv = [installed("node_exporter"), f"--web.listen-address={LISTEN_HOST}:{self.cfg.ports['node_exporter']}",
                *NODE_EXPORTER_FLAGS]
        self._spawn("node_exporter", argv, env=self._base_env())

    def _start_postgres_exporter(self) -> None:
        # The DSN goes through the environment, never argv, and without the
        # password (lib/pq reads it from PGPASSFILE): postgres_exporter logs its DSN.
        dsn.write_pgpass(self.path("secrets", "pgpass"), self.pg_params())
        params = self.pg_params()
        params.pop("password", None)
        # The database name goes as PGDATABASE: postgres_exporter 0.11 splits the
        # DSN on spaces to name the server, and rejects any value holding one.
        database = params.pop("dbname", None)
        env = dict(self._base_env(), DATA_SOURCE_NAME=dsn.to_uri(params))
        if database:
            env["PGDATABASE"] = database
        if "PGPASSFILE" in self.pg_env():  # else lib/pq reads the user's ~/.pgpass
            env["PGPASSFILE"] = self.pg_env()["PGPASSFILE"]
        self._spawn("postgres_exporter", [
            installed("postgres_exporter"), f"--web.listen-address={LISTEN_HOST}:{self.cfg.ports['postgres_exporter']}",
            f"--extend.query-path={resources.path('exporters', 'postgres_exporter', 'queries.yaml')}",
            *POSTGRES_EXPORTER_FLAGS,
        ], env=env)

    def _start_mariadb(self, index: int = 1) -> None:
        target = self.mysql_target(index)
        try:
            target.prepare()
            argv = target.argv()
        except mysql_server.MySQLError as e:
            raise StackError(str(e)) from None
        self._pg_popen_pid = self._spawn(instance_component("mariadb", index), argv, env=self._base_env())

    def _start_mysqld_exporter(self, index: int = 1) -> None:
        target = self.mysql_target(index)
        if not target.embedded:
            target.write_exporter_file()  # the user's [client] section, in a file of ours
        component = instance_component("mysqld_exporter", index)
        self._spawn(component, mysql_exporter.argv(
            installed("mysqld_exporter"), target.exporter_file, f"{LISTEN_HOST}:{self.cfg.ports[component]}"),
            env=self._base_env())

    def _start_benchwatch_exporter(self) -> None:
        env = self._base_env()
        argv = [sys.executable, "-m", "benchwatch", "exporter",
                f"--listen={LISTEN_HOST}:{self.cfg.ports['benchwatch_exporter']}",
                f"--runs-dir={self.cfg.runs_dir}", f"--remote-write-url={self.cfg.remote_write_url}"]
        if self.embedded_pg:
            argv.append(f"--server-log={self.log_file('postgres')}")
            argv += [f"--label={k}={v}" for k, v in self.cfg.database_labels().items()]
        self._spawn("benchwatch_exporter", argv, env=env)

    def _start_grafana(self) -> None:
        # Configured entirely through GF_* variables so no grafana.ini is copied;
        # the provisioning files are the ones docker-compose mounts.
        password = os.environ.get("BENCHWATCH_GRAFANA_ADMIN_PASSWORD") or self._read_secret("grafana_admin_password")
        if not password:
            password = secrets.token_urlsafe(18)
            self._write_secret("grafana_admin_password", password)
        exe = installed("grafana")
        home = os.environ.get("BENCHWATCH_GRAFANA_HOME") or os.path.dirname(os.path.dirname(os.path.realpath(exe)))
        if not os.path.exists(os.path.join(home, "conf", "defaults.ini")):
            home = "/usr/share/grafana"
        data = self.path("grafana")
        os.makedirs(data, exist_ok=True)
        env = dict(self._base_env(),
                   GF_SECURITY_ADMIN_PASSWORD=password, GF_USERS_ALLOW_SIGN_UP="false",
                   GF_ANALYTICS_REPORTING_ENABLED="false", GF_ANALYTICS_CHECK_FOR_UPDATES="false",
                   GF_SERVER_HTTP_ADDR=LISTEN_HOST, GF_SERVER_HTTP_PORT=str(self.cfg.ports["grafana"]),
                   GF_PATHS_DATA=os.path.join(data, "data"), GF_PATHS_LOGS=os.path.join(data, "logs"),
                   GF_PATHS_PLUGINS=os.path.join(data, "plugins"),
                   GF_PATHS_PROVISIONING=resources.path("grafana", "provisioning"),
                   BENCHWATCH_PROMETHEUS_URL=self.cfg.url("prometheus"),
                   BENCHWATCH_DASHBOARDS_DIR=resources.path("dashboards"))
        argv = [exe, "server"] if os.path.basename(exe) == "grafana" else [exe]
        self._spawn("grafana", argv + [f"--homepath={home}"], env=env)

    def _start_supervisor(self) -> None:
        self._spawn("supervisor", [sys.executable, "-m", "benchwatch", "supervise", f"--dir={self.path('supervisor')}",
                                   f"--listen={LISTEN_HOST}:{self.cfg.ports['supervisor']}"], env=self._base_env())

    # -- down -------------------------------------------------------------------

    def down(self) -> list[str]:
        stopped = []
        for component in reversed(self._all_components()):
            if self.pid(component) is not None:
                self._stop(component)
                stopped.append(component)
        return stopped

    def _stop(self, component: str) -> None:
        pid = self.pid(component)
        if component == "postgres":
            # Fast shutdown: roll back open transactions, checkpoint, exit.
            processes.stop_pid(pid, signal.SIGINT, timeout=60.0)
        elif split_component(component)[0] == "mariadb":
            processes.stop_pid(pid, signal.SIGTERM, timeout=60.0)  # a clean shutdown; it removes its pid file
        else:
            processes.stop_pid(pid, signal.SIGTERM, timeout=20.0)
            try:
                os.unlink(self.pid_file(component))
            except FileNotFoundError:
                pass
