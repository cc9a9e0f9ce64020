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

import json
import os
import re
import secrets
import shutil
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from benchwatch import engines, resources
from benchwatch.engines import Engine, StackPart
from benchwatch.query.launch import prometheus_argv, prometheus_binary
from benchwatch.stack.config import COMPOSE_EXPORTER, LISTEN_HOST, LONG_TERM_KEYS, Config
from benchwatch.stack.packages import STACK_PACKAGES
from benchwatch.stack.processes import ProcessManager
from benchwatch.util import net
from benchwatch.util.errors import StackError
from benchwatch.util.private import write_private

__all__ = ["Stack", "StackError", "binary", "installed"]

# The stack's own components, in start order; the engine's servers come before them, its exporters
# after node_exporter (ENGINE_EXPORTERS_AFTER). The supervisor comes last: it starts watching once
# everything is up, and `down` stops it first.
SHARED_COMPONENTS = ("results_db", "prometheus", "alertmanager", "node_exporter", "benchwatch_exporter", "grafana",
                     "supervisor")
# The stack's own results database (benchwatch.results), run only when no --results-dsn names another (nor "off");
# before the benchwatch exporter, which writes to it.
RESULTS_DB = "results_db"
RESULTS_DATABASE = "benchwatch_results"
ENGINE_EXPORTERS_AFTER = "node_exporter"

# Prometheus re-sends firing alerts this often (default 1m): an Alertmanager that was
# restarted during a drop hears of it within seconds, not a minute.
ALERT_RESEND_DELAY = "5s"

# node_exporter: only what rules, dashboards and snapshots use; the default set costs several
# times the CPU at a 1 s scrape (bench/bench_watch_cost.py). What `iostat -x 1` shows (cpu,
# diskstats) is scraped every second; the host's size and load (meminfo, loadavg: snapshots,
# ad-hoc queries) every 15 s by a second job that asks for those collectors alone (collect[] in
# prometheus.yml). No go_*/process_* series of node_exporter itself: a third of its exposition,
# read by nothing, rendered every second. pressure (/proc/pressure: tasks waiting for a CPU or on
# I/O, 5 series) is explain's cpu_contention and io_pressure.
NODE_FAST_COLLECTORS = ("cpu", "diskstats", "pressure")
NODE_SLOW_COLLECTORS = ("meminfo", "loadavg")
NODE_COLLECTORS = NODE_FAST_COLLECTORS + NODE_SLOW_COLLECTORS
NODE_EXPORTER_FLAGS = ("--web.disable-exporter-metrics", "--collector.disable-defaults",
                       *(f"--collector.{c}" for c in NODE_COLLECTORS))

PACKAGES = {
    **STACK_PACKAGES,
    "grafana": "grafana (not in Debian: see docker-compose.yml)",
}
BINARIES = {
    "alertmanager": "prometheus-alertmanager",
    "node_exporter": "prometheus-node-exporter",
}
# What says a shared component is healthy, below its URL.
HEALTH_PATHS = {
    "prometheus": "/-/ready",
    "alertmanager": "/-/ready",
    "node_exporter": "/metrics",
    "benchwatch_exporter": "/healthz",
    "supervisor": "/metrics",
    "grafana": "/api/health",
}


def _engine_of_component(component: str) -> Engine | None:
    return next((e for e in engines.load_engines().values() if component in e.default_ports), None)


def grafana_binary() -> str | None:
    return shutil.which("grafana") or shutil.which("grafana-server")


def binary(component: str) -> str | None:
    """The program of a component (base name): the stack's own, or an engine's."""
    if component == "grafana":
        return grafana_binary()
    if component in ("benchwatch_exporter", "supervisor"):
        return sys.executable
    if component == RESULTS_DB:
        server = engines.results_server()
        return server.program() if server is not None else None
    if component == "prometheus":
        return prometheus_binary()  # BENCHWATCH_PROMETHEUS may name another build
    engine = _engine_of_component(component)
    if engine is not None:
        return engine.binary(component)
    return shutil.which(BINARIES[component])


def package(component: str) -> str:
    if component == RESULTS_DB:
        server = engines.results_server()
        return server.package if server is not None else "postgresql"
    engine = _engine_of_component(component)
    return engine.packages[component] if engine is not None else PACKAGES[component]


def installed(component: str) -> str:
    """The component's program; up's preflight has checked it is there, this says so if it went away."""
    path = binary(component)
    if path is None:
        raise StackError(f"{component} is not installed: apt-get install {package(component)}")
    return path


# The long-term store's remote_write queue (docs/long-term.md). Prometheus 2.42 sends a batch at most 5 s
# after its first sample by default; 1 s lets a finished run's completion (benchwatch.query.longterm.complete,
# which waits until the queue has sent what was appended) begin that much sooner, for about one request a
# second at a stack's few thousand series.
LONG_TERM_REMOTE_NAME = "long_term"
LONG_TERM_QUEUE = {"batch_send_deadline": "1s"}


def long_term_remote_write(cfg: Config) -> dict | None:
    """The stack's Prometheus' remote_write entry for the long-term store; None without one. The token is
    read by Prometheus from its file (``authorization.credentials_file``): it is in no config nor argv."""
    if not cfg.long_term_write_url:
        return None
    remote: dict = {"url": cfg.long_term_write_url, "name": LONG_TERM_REMOTE_NAME, "queue_config": dict(LONG_TERM_QUEUE)}
    if cfg.long_term_bearer_token_file:
        remote["authorization"] = {"type": "Bearer", "credentials_file": cfg.long_term_bearer_token_file}
    return remote


def render_remote_write(prometheus_yml: str, remote: dict) -> str:
    """prometheus.yml with one remote_write entry appended (the repository's file has none; YAML reads JSON)."""
    if re.search(r"^remote_write:", prometheus_yml, re.M):
        raise StackError("prometheus.yml already has a remote_write section: the long-term store's cannot be added")
    return prometheus_yml.rstrip("\n") + "\n\n# Added by benchwatch up --long-term-write-url (docs/long-term.md).\n" \
        + "remote_write:\n  - " + json.dumps(remote) + "\n"


@dataclass
class Stack(ProcessManager):
    """The stack's components, started and stopped by benchwatch.stack.processes; the engine's through its
    StackPart."""

    cfg: Config
    out: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr)
    engine: Engine = field(init=False)
    server: StackPart = field(init=False)  # the engine's components in this stack

    def __post_init__(self) -> None:
        self.engine = engines.get(self.cfg.engine)
        self.server = self.engine.stack_part(self)

    # -- paths ----------------------------------------------------------------

    def installed(self, component: str) -> str:
        return installed(component)

    def _part(self, component: str) -> StackPart | None:
        """The engine part a component belongs to: this stack's engine's, or another engine's (`down`
        stops what any engine left running)."""
        if self.server.owns(component):
            return self.server
        return next((p for p in self._other_parts() if p.owns(component)), None)

    def _other_parts(self) -> list[StackPart]:
        return [e.stack_part(self) for e in engines.load_engines().values() if e is not self.engine]

    def log_file(self, component: str) -> str:
        part = self._part(component)
        return (part and part.log_file(component)) or super().log_file(component)

    @staticmethod
    def _components(parts: list[StackPart]) -> list[str]:
        out: list[str] = [c for p in parts for c in p.servers()]
        for c in SHARED_COMPONENTS:
            out.append(c)
            if c == ENGINE_EXPORTERS_AFTER:
                out += [c for p in parts for c in p.exporters()]
        return out

    def components(self) -> list[str]:
        """What this stack runs, in start order: the engine's servers (unless it watches an existing
        one), the shared components with the engine's exporters; Grafana only where installed."""
        return [c for c in self._components([self.server]) if (c != "grafana" or grafana_binary() is not None)
                and (c != RESULTS_DB or self.cfg.own_results_db)]

    def _all_components(self) -> list[str]:
        """What any engine's stack in this state dir may have left running, in start order."""
        return self._components([self.server, *self._other_parts()])

    def running_engine(self) -> Engine | None:
        """The engine whose components run in this state dir (whatever this configuration asks for);
        None when none does."""
        for part in [self.server, *self._other_parts()]:
            if any(self.pid(c) is not None for c in part.servers() + part.exporters()):
                return part.engine
        return None

    def _ensure_instance_ports(self) -> None:
        """Ports of components without one (an engine's instances 2..N): free ones, chosen once and kept in stack.json."""
        used = set(self.cfg.ports.values())
        for c in self.components():
            if not self.cfg.ports.get(c):
                port = net.free_port()
                while port in used:
                    port = net.free_port()
                self.cfg.ports[c] = port
                used.add(port)

    # -- secrets (0600 files under secrets/) ---------------------------------------------

    def read_secret(self, name: str) -> str | None:
        try:
            with open(self.path("secrets", name), encoding="utf-8") as f:
                return f.read().strip()
        except FileNotFoundError:
            return None

    def write_secret(self, name: str, value: str) -> None:
        os.makedirs(self.path("secrets"), mode=0o700, exist_ok=True)
        write_private(self.path("secrets", name), value + "\n")

    def remove_secret(self, name: str) -> bool:
        try:
            os.unlink(self.path("secrets", name))
            return True
        except FileNotFoundError:
            return False

    # -- scrape targets beside the stack's own (a sweep's variant servers) -------------------------

    def _edit_scrape_targets(self, job: str, edit: Callable[[list[dict]], list[dict]]) -> None:
        """Rewrite the job's file_sd file whole (Prometheus reads it again when it is replaced), one writer
        at a time (two sweeps may start at once)."""
        import fcntl

        directory = self.path("prometheus", "etc", "targets")
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"{job}.json")
        with open(path + ".lock", "a", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                with open(path, encoding="utf-8") as f:
                    entries = json.load(f)
            except (FileNotFoundError, ValueError):
                entries = []
            tmp = path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(edit(entries), f, indent=2)
            os.replace(tmp, path)

    def add_scrape_targets(self, job: str, entries: list[dict]) -> None:
        """Added, in place of any entry of the same address or the same target (one a killed sweep left)."""
        added = {t for e in entries for t in e.get("targets", [])}
        names = {e.get("labels", {}).get("target") for e in entries} - {None}

        def edit(old: list[dict]) -> list[dict]:
            return [e for e in old if not added & set(e.get("targets", []))
                    and e.get("labels", {}).get("target") not in names] + list(entries)

        self._edit_scrape_targets(job, edit)

    def remove_scrape_targets(self, job: str, addresses: list[str]) -> None:
        gone = set(addresses)
        self._edit_scrape_targets(job, lambda old: [e for e in old if not gone & set(e.get("targets", []))])

    def client_env(self) -> dict[str, str]:
        """The variables a tool run on the stack gets to reach its server (the engine's; a password in a 0600 file)."""
        return self.server.client_env()

    # -- status ---------------------------------------------------------------

    def pid_source(self, component: str) -> str | None:
        if component == RESULTS_DB:
            server = engines.results_server()
            return server.pid_source(self.path("results", "data")) if server is not None else None
        part = self._part(component)
        return part.pid_source(component) if part else None

    def health_url(self, component: str) -> str | None:
        part = self._part(component)
        if part is not None:
            return None if part.is_server(component) else self.cfg.url(component) + "/metrics"
        path = HEALTH_PATHS.get(component)
        return self.cfg.url(component) + path if path else None

    def check(self, component: str) -> bool | None:
        if component == RESULTS_DB:
            return self.pid(component) is not None and self._results_ready()
        part = self._part(component)
        return part.healthy(component) if part else None

    def stop_signal(self, component: str) -> signal.Signals:
        if component == RESULTS_DB:
            return signal.SIGINT  # PostgreSQL's fast shutdown
        part = self._part(component)
        return (part and part.stop_signal(component)) or signal.SIGTERM

    def status(self) -> dict:
        components = {}
        restarts = self.restarts()
        for c in self.components():
            if self.server.is_server(c):
                continue  # under the engine's own key
            components[c] = {"url": self.cfg.url(c), **self.component_status(c, restarts)}
        grafana = grafana_binary()
        return {"state_dir": self.cfg.state_dir, "engine": self.engine.name, **self.server.status(restarts),
                "components": components, "runs_dir": self.cfg.runs_dir, "host": self.cfg.host,
                "results": self._results_status(),
                "grafana": {"installed": bool(grafana),
                            "hint": None if grafana else "Grafana is not installed: put grafana-server (or grafana) on the PATH "
                                    "and run up again, or use docker-compose.yml, or point your own Grafana at grafana/provisioning/"}}

    # -- up ---------------------------------------------------------------------

    def up(self) -> dict:
        """Start every component that is not running; idempotent. Leaves nothing half-running on failure."""
        running = self.running_engine()
        if running is not None and running is not self.engine:
            raise StackError(f"the stack in {self.cfg.state_dir} runs {running.title}: stop it with benchwatch down "
                             f"before starting {self.engine.title}")
        self._ensure_instance_ports()
        self._preflight()
        os.makedirs(self.cfg.state_dir, exist_ok=True)
        if os.geteuid() == 0:
            os.chmod(self.cfg.state_dir, 0o755)  # the postgres user must reach pg/
        os.makedirs(self.path("runs"), exist_ok=True)
        self.server.choose_server(running is not None)
        self.cfg.save()
        self.start_all()
        return self.status()

    def start_component(self, component: str) -> None:
        part = self._part(component)
        if part is not None:
            part.start(component)
            return
        {RESULTS_DB: self._start_results_db, "prometheus": self._start_prometheus, "alertmanager": self._start_alertmanager,
         "node_exporter": self._start_node_exporter, "benchwatch_exporter": self._start_benchwatch_exporter,
         "grafana": self._start_grafana, "supervisor": self.start_supervisor}[component]()

    def after_start(self, component: str) -> None:
        if component == RESULTS_DB:
            self._ensure_results_database()
            return
        part = self._part(component)
        if part is not None:
            part.after_start(component)

    def after_up(self) -> None:
        self.server.after_up()

    def _preflight(self) -> None:
        for component in self.components():
            if self.pid(component) is not None:
                continue
            part = self._part(component)
            base = part.split(component)[0] if part else component
            if binary(base) is None:
                raise StackError(f"{base} is not installed: apt-get install {package(base)}")
            port = self.cfg.ports[component]
            if not net.port_free(LISTEN_HOST, port):
                flag = base.replace("_", "-")
                raise StackError(f"port {port} for {component} is taken on {LISTEN_HOST}: pass --{flag}-port or set BENCHWATCH_{component.upper()}_PORT")

    # -- components -------------------------------------------------------------

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
        remote = long_term_remote_write(self.cfg)
        if remote:
            # The repository's file with the long-term store's remote_write added: a copy, 0600 like
            # alertmanager.yml (it names the token's file, and the store's URL may be private).
            with open(resources.path("prometheus", "prometheus.yml"), encoding="utf-8") as f:
                text = f.read()
            link = os.path.join(etc, "prometheus.yml")
            os.unlink(link)
            write_private(link, render_remote_write(text, remote))
        if self.reads_host():
            self._drop_job(os.path.join(etc, "prometheus.yml"), "node")
        self._link_rule_files(os.path.join(etc, "rules"))
        targets = {
            "prometheus": ("prometheus", {}),
            "alertmanager": ("alertmanager", {}),
            "node": ("node_exporter", self.cfg.database_labels()),
            "benchwatch": ("benchwatch_exporter", {}),
            "supervisor": ("supervisor", {}),
        }
        files: dict[str, list[dict]] = {
            name: [{"targets": [self.address(component)], "labels": {"component": component, **labels}}]
            for name, (component, labels) in targets.items()}
        for engine in engines.load_engines().values():
            # Each engine's exporters are its scrape job's targets; an engine the stack does not run has none.
            files[engine.scrape_job] = self.server.scrape_targets() if engine is self.engine else []
        for name, entries in files.items():
            with open(os.path.join(etc, "targets", f"{name}.json"), "w", encoding="utf-8") as f:
                json.dump(entries, f, indent=2)
        return os.path.join(etc, "prometheus.yml")

    @staticmethod
    def _drop_job(path: str, job: str) -> None:
        """The config at ``path`` (a link to the repository's file, or a copy) as a copy without scrape job ``job``
        (0600: it may name the long-term store)."""
        import yaml

        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f)
        config["scrape_configs"] = [j for j in config["scrape_configs"] if j.get("job_name") != job]
        os.unlink(path)
        write_private(path, "# benchwatch's prometheus/prometheus.yml without the job " + repr(job) + "\n"
                      + yaml.safe_dump(config, sort_keys=False))

    def reads_host(self) -> bool:
        """Whether the benchwatch exporter reads the host's CPU, disks and pressure every second (its host
        collector, BENCHWATCH_HOST_READER=exporter) instead of Prometheus scraping node_exporter every second."""
        return self.cfg.host_reader == "exporter"

    def _link_rule_files(self, rules_dir: str) -> None:
        """A link per recording-rule file, leaving out the rules of an engine this stack does not run:
        the mysql_innodb group is evaluated every second and, selecting nothing on a PostgreSQL
        stack, would still cost Prometheus about 1 ms of CPU per second (docs/rules.md)."""
        if os.path.islink(rules_dir) or os.path.isfile(rules_dir):
            os.unlink(rules_dir)  # a state dir from before: the whole directory was one link
        os.makedirs(rules_dir, exist_ok=True)
        for name in os.listdir(rules_dir):
            os.unlink(os.path.join(rules_dir, name))
        skipped = {f for e in engines.load_engines().values() if e is not self.engine for f in e.rule_files}
        source = resources.path("prometheus", "rules")
        for name in sorted(os.listdir(source)):
            if name.endswith(".yml") and name not in skipped:
                os.symlink(os.path.join(source, name), os.path.join(rules_dir, name))

    def _start_prometheus(self) -> None:
        config = self._write_prometheus_config()
        retention = self.cfg.prometheus_retention
        self.spawn("prometheus", prometheus_argv(
            installed("prometheus"), config=config, data_dir=self.path("prometheus", "data"), retention=retention,
            listen=f"{LISTEN_HOST}:{self.cfg.ports['prometheus']}",
            extra=["--web.enable-lifecycle", f"--rules.alert.resend-delay={ALERT_RESEND_DELAY}"]),
            env=self.base_env())

    def _start_alertmanager(self) -> None:
        os.makedirs(self.path("alertmanager", "data"), exist_ok=True)
        # Alertmanager 0.25 has no url_file for webhooks: write the repository's
        # config with docker-compose's exporter URL replaced by this stack's
        # (or BENCHWATCH_ALERT_WEBHOOK_URL); 0600, a webhook URL may hold a token.
        with open(resources.path("alertmanager", "alertmanager.yml"), encoding="utf-8") as f:
            text = f.read()
        webhook = self.cfg.alert_webhook_url or self.cfg.url("benchwatch_exporter") + "/alerts"
        config = self.path("alertmanager", "alertmanager.yml")
        write_private(config, text.replace(f"http://{COMPOSE_EXPORTER}/alerts", webhook))
        self.spawn("alertmanager", [
            installed("alertmanager"), f"--config.file={config}",
            f"--storage.path={self.path('alertmanager', 'data')}",
            f"--web.listen-address={LISTEN_HOST}:{self.cfg.ports['alertmanager']}",
            "--cluster.listen-address=",  # no gossip listener on 0.0.0.0:9094
        ], env=self.base_env())

    def _start_node_exporter(self) -> None:
        argv = [installed("node_exporter"), f"--web.listen-address={LISTEN_HOST}:{self.cfg.ports['node_exporter']}",
                *NODE_EXPORTER_FLAGS]
        self.spawn("node_exporter", argv, env=self.base_env())

    def _start_benchwatch_exporter(self) -> None:
        env = dict(self.base_env(), **self.server.exporter_env())  # e.g. PG* for the statements collector
        # Where finished runs' records go (benchwatch.exporter.results_writer), and the host they carry.
        env.update(BENCHWATCH_RESULTS_DSN=self.cfg.results_target() or "off", BENCHWATCH_HOST=self.cfg.host)
        argv = [sys.executable, "-m", "benchwatch", "exporter",
                f"--listen={LISTEN_HOST}:{self.cfg.ports['benchwatch_exporter']}",
                f"--runs-dir={self.cfg.runs_dir}", f"--remote-write-url={self.cfg.remote_write_url}"]
        argv += self.server.exporter_args()  # the server log it follows, its labels
        if self.reads_host():
            argv.append("--collector.host")  # the host's 1 s series, instead of node_exporter's 1 s scrape
        for key in LONG_TERM_KEYS:  # the store's URLs and its token's file (a path: the token is in no argv)
            if getattr(self.cfg, key):
                argv.append(f"--{key.replace('_', '-')}={getattr(self.cfg, key)}")
        self.spawn("benchwatch_exporter", argv, env=env)

    def _start_grafana(self) -> None:
        # Configured entirely through GF_* variables so no grafana.ini is copied;
        # the provisioning files are the ones docker-compose mounts.
        password = self.cfg.grafana_admin_password or self.read_secret("grafana_admin_password")
        if not password:
            password = secrets.token_urlsafe(18)
            self.write_secret("grafana_admin_password", password)
        exe = installed("grafana")
        home = self.cfg.grafana_home or os.path.dirname(os.path.dirname(os.path.realpath(exe)))
        if not os.path.exists(os.path.join(home, "conf", "defaults.ini")):
            home = "/usr/share/grafana"
        data = self.path("grafana")
        os.makedirs(data, exist_ok=True)
        env = dict(self.base_env(),
                   GF_SECURITY_ADMIN_PASSWORD=password, GF_USERS_ALLOW_SIGN_UP="false",
                   GF_ANALYTICS_REPORTING_ENABLED="false", GF_ANALYTICS_CHECK_FOR_UPDATES="false",
                   GF_SERVER_HTTP_ADDR=LISTEN_HOST, GF_SERVER_HTTP_PORT=str(self.cfg.ports["grafana"]),
                   GF_PATHS_DATA=os.path.join(data, "data"), GF_PATHS_LOGS=os.path.join(data, "logs"),
                   GF_PATHS_PLUGINS=os.path.join(data, "plugins"),
                   GF_PATHS_PROVISIONING=resources.path("grafana", "provisioning"),
                   BENCHWATCH_PROMETHEUS_URL=self.cfg.url("prometheus"),
                   BENCHWATCH_DASHBOARDS_DIR=resources.path("dashboards"))
        # The results database's data source (the SQL panels): its address and the password, in the environment
        # (Grafana's provisioning reads $VAR; the file would not be libpq's pgpass), never in argv.
        from benchwatch.results.dsn import grafana_environment

        env.update(grafana_environment(self.cfg.results_target()))
        argv = [exe, "server"] if os.path.basename(exe) == "grafana" else [exe]
        self.spawn("grafana", argv + [f"--homepath={home}"], env=env)

    # -- the results database (the stack's own) -----------------------------------------

    def _results_pgpass(self) -> str:
        return self.path("secrets", "results_pgpass")

    def _start_results_db(self) -> None:
        server = engines.results_server()
        if server is None:
            raise StackError("no engine can run the stack's own results database: give one with --results-dsn DSN, "
                             "or --results-dsn off")
        data = self.path("results", "data")
        if not os.path.exists(os.path.join(data, "PG_VERSION")):
            password = secrets.token_urlsafe(24)
            server.init(data, password, self.path("results"), self.base_env())
            # libpq's pgpass: any port (a later up may move it), this stack's superuser; 0600 (libpq refuses wider).
            write_private(self._results_pgpass(), f"{LISTEN_HOST}:*:*:postgres:{password}\n")
        self.spawn(RESULTS_DB, server.argv(data, self.cfg.ports[RESULTS_DB], self.path("results", "socket")),
                   env=self.base_env(), user=server.user())

    def _results_ready(self) -> bool:
        import psycopg

        from benchwatch.results.dsn import local

        try:
            with psycopg.connect(local(self.cfg.ports[RESULTS_DB], self._results_pgpass(), dbname="postgres"),
                                 connect_timeout=2, password=""):  # its pgpass, not a PGPASSWORD of the environment
                return True
        except psycopg.Error:
            return False

    def _ensure_results_database(self) -> None:
        import psycopg
        from psycopg import sql

        from benchwatch.results.dsn import local
        from benchwatch.results.store import Store

        try:
            with psycopg.connect(local(self.cfg.ports[RESULTS_DB], self._results_pgpass(), dbname="postgres"),
                                 autocommit=True, connect_timeout=5, password="") as conn:
                if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (RESULTS_DATABASE,)).fetchone() is None:
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(RESULTS_DATABASE)))
            with Store(local(self.cfg.ports[RESULTS_DB], self._results_pgpass(), dbname=RESULTS_DATABASE)) as store:
                store.connect()  # creates the schema
        except (psycopg.Error, RuntimeError) as e:
            raise StackError(f"the results database: {str(e).strip()}") from None

    def results_target_running(self) -> str | None:
        """Where a command writes what it computed (report's verdicts, history's change points): the DSN given
        (a team's database, tried whatever its state), or the stack's own database while it runs; None when the
        stack has none or its own is not running (a stack that is down, runs directories read alone), so that
        no command waits on a connection that cannot be made."""
        target = self.cfg.results_target()
        if target is None or (self.cfg.own_results_db and self.pid(RESULTS_DB) is None):
            return None
        return target

    def _results_status(self) -> dict:
        from benchwatch.results import dsn
        from benchwatch.results.pending import Pending
        from benchwatch.results.sweeps import PendingSweeps

        target = self.cfg.results_target()
        return {"dsn": dsn.public(target) if target else None, "own": self.cfg.own_results_db and target is not None,
                **Pending(self.cfg.runs_dir).summary(), **PendingSweeps(self.cfg.state_dir).summary(),
                "long_term": {"write_url": self.cfg.long_term_write_url, "query_url": self.cfg.long_term_query_url}
                if self.cfg.long_term_write_url else None}

    # -- down -------------------------------------------------------------------

    def down(self) -> list[str]:
        """Stop whatever any engine's stack left running in this state dir, the supervisor first."""
        return self.stop_all(self._all_components())
