"""The agent: watch the databases where they run, and push everything to the central stack.

On a database host, ``benchwatch agent up`` starts, listening on 127.0.0.1 only:

* node_exporter (the host's disks and CPUs),
* one postgres_exporter per PostgreSQL instance (0.11 has no multi-target
  /probe, and two DSNs in one make /metrics answer 500),
* one benchwatch exporter per instance with a server log, following it for
  checkpoints (remote-written at the log's own timestamps, to the agent),
* Prometheus in agent mode, which scrapes them every second, adds the
  ``target``/``host`` labels, keeps everything in its WAL and remote-writes it
  to the central Prometheus: the database host opens no port, and an outage of
  the central side loses nothing the agent has in its WAL.

Every database-side series carries ``target`` (the instance's name) and
``host``. node_exporter is scraped once per target so each target has its own
host series (several instances on one host repeat them: sum across hosts with
``max by (host, ...)``).

State layout under ``state_dir`` (default /var/lib/benchwatch-agent as root):
  agent.json               name, host, central URL, instances (no DSNs), ports
  secrets/                 0700: each instance's DSN and pgpass (0600)
  prometheus/agent.yml     generated; prometheus/wal the agent's WAL
  logs/<component>.log, pids/<component>.pid
  supervisor/              what the agent's supervisor restarts (components.json, 0600) and its
                           restart counts (state.json), as the stack's: every component above is
                           started again when it dies, until ``agent down``
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import yaml

from benchwatch import resources
from benchwatch.engines.postgresql import ENGINE as POSTGRESQL
from benchwatch.engines.postgresql import dsn
from benchwatch.engines.postgresql.server import POSTGRES_EXPORTER_FLAGS
from benchwatch.query.launch import prometheus_binary
from benchwatch.stack.config import LISTEN_HOST, default_state_dir
from benchwatch.stack.native import (
    NODE_EXPORTER_FLAGS,
    StackError,
    binary,
    installed,
)
from benchwatch.stack.processes import SUPERVISOR, ProcessManager
from benchwatch.util import net, processes, secrets
from benchwatch.util.private import write_private

AGENT_FILE = "agent.json"
# The agent's WAL keeps what the central side has not acknowledged; beyond this
# age it is dropped even if unsent (a day of outage is survived).
WAL_MAX_TIME = "24h"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


def default_agent_state_dir() -> str:
    return os.environ.get("BENCHWATCH_AGENT_STATE_DIR") or default_state_dir().rstrip("/") + "-agent"


@dataclass
class Instance:
    """One PostgreSQL instance the agent watches; ``name`` is its ``target`` label."""

    name: str
    server_log: str | None = None
    server: str = ""  # host:port from the DSN, for `benchwatch targets` (no secrets)


@dataclass
class CentralAuth:
    """Credentials for the central remote-write endpoint: file paths only, never the secret itself."""

    basic_auth_user: str | None = None
    password_file: str | None = None
    bearer_token_file: str | None = None

    def check(self) -> None:
        if self.bearer_token_file and (self.basic_auth_user or self.password_file):
            raise StackError("give either --bearer-token-file or --basic-auth-user/--password-file, not both")
        if bool(self.basic_auth_user) != bool(self.password_file):
            raise StackError("basic auth needs both --basic-auth-user and --password-file")
        for path in (self.password_file, self.bearer_token_file):
            if path and not os.path.isfile(path):
                raise StackError(f"credentials file {path} does not exist")
            if path and os.stat(path).st_mode & 0o077:
                raise StackError(f"credentials file {path} is readable by others: chmod 600 {path}")


@dataclass
class AgentConfig:
    state_dir: str
    name: str
    central_url: str  # the central Prometheus' base URL, or its /api/v1/write endpoint
    host: str = field(default_factory=socket.gethostname)
    instances: list[Instance] = field(default_factory=list)
    auth: CentralAuth = field(default_factory=CentralAuth)
    ports: dict[str, int] = field(default_factory=dict)  # component -> port on 127.0.0.1, chosen at first up
    scrape_interval: str = "1s"

    @property
    def write_url(self) -> str:
        url = self.central_url.rstrip("/")
        return url if url.endswith("/api/v1/write") else url + "/api/v1/write"

    def save(self) -> None:
        os.makedirs(self.state_dir, exist_ok=True)
        tmp = os.path.join(self.state_dir, AGENT_FILE + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(asdict(self), f, indent=2, sort_keys=True)
        os.replace(tmp, os.path.join(self.state_dir, AGENT_FILE))


def load_agent_config(state_dir: str) -> AgentConfig | None:
    try:
        with open(os.path.join(state_dir, AGENT_FILE), encoding="utf-8") as f:
            data = json.load(f)
    except (FileNotFoundError, ValueError):
        return None
    data["instances"] = [Instance(**i) for i in data.get("instances", [])]
    data["auth"] = CentralAuth(**data.get("auth", {}))
    return AgentConfig(**data)


def central_scrape_jobs() -> dict[str, dict]:
    """prometheus/prometheus.yml's scrape jobs by name: the one definition of each job, which the central
    stack and docker-compose run as they are and an agent runs with static targets."""
    with open(resources.path("prometheus", "prometheus.yml"), encoding="utf-8") as f:
        return {job["job_name"]: job for job in yaml.safe_load(f)["scrape_configs"]}


def static_job(job: dict, static_configs: list[dict]) -> dict:
    """A central job with the given targets instead of its file_sd_configs (written per environment)."""
    return {**{k: v for k, v in job.items() if k != "file_sd_configs"}, "static_configs": static_configs}


def instance_names(name: str, dsns: Sequence[str], names: Sequence[str] = ()) -> list[str]:
    """The target name of each instance: as given, else the agent's name (one instance) or name-PORT."""
    if names and len(names) != len(dsns):
        raise StackError(f"{len(names)} --target names for {len(dsns)} --postgres instances: give one per instance, in order")
    if names:
        out = list(names)
    elif len(dsns) <= 1:
        out = [name]
    else:
        out = []
        for i, d in enumerate(dsns):
            port = dsn.parse_dsn(d).get("port")
            out.append(f"{name}-{port}" if port else f"{name}-{i + 1}")
    for n in out:
        if not _NAME.fullmatch(n):
            raise StackError(f"target name {n!r}: use letters, digits, '.', '_' or '-'")
    if len(set(out)) != len(out):
        raise StackError(f"target names must differ: {out} (give --target once per --postgres)")
    return out


def _server_label(params: dict[str, str]) -> str:
    return f"{params.get('host', 'localhost')}:{params.get('port', '5432')}"


@dataclass
class Agent(ProcessManager):
    """The agent's components, started, supervised and stopped by benchwatch.stack.processes, as the stack's."""

    cfg: AgentConfig
    out: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr)

    # -- paths and components ----------------------------------------------------

    def components(self) -> list[str]:
        """Start order: exporters, then Prometheus (scrapes them, receives checkpoints), then the log
        followers; the supervisor last (`down` stops it first)."""
        out = ["node_exporter"] + [f"postgres_exporter-{i.name}" for i in self.cfg.instances]
        out.append("prometheus")
        out += [f"checkpoints-{i.name}" for i in self.cfg.instances if i.server_log]
        out.append(SUPERVISOR)
        return out

    def url(self, component: str) -> str:
        return f"http://{self.address(component)}"

    def health_url(self, component: str) -> str | None:
        if component not in self.cfg.ports:
            return None
        path = "/-/ready" if component == "prometheus" else "/healthz" if component.startswith("checkpoints-") else "/metrics"
        return self.url(component) + path

    # -- secrets -------------------------------------------------------------------

    def _secret(self, name: str) -> str:
        return self.path("secrets", name)

    def _write_secret(self, name: str, value: str) -> None:
        os.makedirs(self.path("secrets"), mode=0o700, exist_ok=True)
        write_private(self._secret(name), value + "\n")

    def _dsn(self, inst: Instance) -> dict[str, str]:
        with open(self._secret(f"dsn-{inst.name}"), encoding="utf-8") as f:
            return dsn.parse_dsn(f.read())

    # -- up --------------------------------------------------------------------------

    def up(self, dsns: Sequence[str] | None = None) -> dict:
        """Start what is not running; ``dsns`` (one per instance, in order) are stored 0600 on first use."""
        self.cfg.auth.check()
        os.makedirs(self.path("prometheus"), exist_ok=True)
        for inst, text in zip(self.cfg.instances, dsns or (), strict=False):
            self._write_secret(f"dsn-{inst.name}", text.strip())
            inst.server = _server_label(dsn.parse_dsn(text))
        for inst in self.cfg.instances:
            if not os.path.exists(self._secret(f"dsn-{inst.name}")):
                raise StackError(f"no DSN for instance {inst.name}: give --postgres")
        self._preflight()
        for component in self.components():
            if component not in self.cfg.ports or (self.pid(component) is None
                                                   and not net.port_free(LISTEN_HOST, self.cfg.ports[component])):
                self.cfg.ports[component] = net.free_port()
        self.cfg.save()
        self.start_all()
        return self.status()

    def _preflight(self) -> None:
        for program, package in (("node_exporter", "prometheus-node-exporter"),
                                 ("postgres_exporter", "prometheus-postgres-exporter")):
            if binary(program) is None:
                raise StackError(f"{program} is not installed: apt-get install {package}")
        if prometheus_binary() is None:
            raise StackError("prometheus is not installed: apt-get install prometheus")
        for inst in self.cfg.instances:
            if inst.server_log and not os.path.exists(inst.server_log):
                self.out(f"server log {inst.server_log} of {inst.name} does not exist yet: "
                         "its checkpoints appear once it does")

    def _listen(self, component: str) -> str:
        return self.address(component)

    def start_component(self, component: str) -> None:
        if component == "node_exporter":
            self.spawn(component, [installed("node_exporter"), f"--web.listen-address={self._listen(component)}",
                                   *NODE_EXPORTER_FLAGS], env=self.base_env())
        elif component == "prometheus":
            self._start_prometheus()
        elif component == SUPERVISOR:
            self.start_supervisor()
        elif component.startswith("postgres_exporter-"):
            self._start_postgres_exporter(self._instance(component))
        else:
            self._start_checkpoints(self._instance(component))

    def _instance(self, component: str) -> Instance:
        name = component.split("-", 1)[1]
        return next(i for i in self.cfg.instances if i.name == name)

    def _pgpass(self, inst: Instance, params: dict[str, str]) -> str | None:
        """The instance's password in a pgpass file (0600) for its readers' PGPASSFILE, None without one."""
        if "password" not in params:
            return None
        dsn.write_pgpass(self._secret(f"pgpass-{inst.name}"), params)
        return self._secret(f"pgpass-{inst.name}")

    def _start_postgres_exporter(self, inst: Instance) -> None:
        # As the central stack: the DSN through the environment without its
        # password (pgpass, 0600), the database as PGDATABASE.
        params = self._dsn(inst)
        env = self.base_env()
        pgpass = self._pgpass(inst, params)
        if pgpass:
            env["PGPASSFILE"] = pgpass
            params.pop("password")
        database = params.pop("dbname", None)
        if database:
            env["PGDATABASE"] = database
        host = params.get("host", "")
        if host.startswith("/"):
            # A socket directory cannot be a URI host: lib/pq takes host and port as query parameters.
            params.pop("host")
            port = params.pop("port", None)
            uri = dsn.to_uri(params)
            extra = {"host": host, **({"port": port} if port else {})}
            uri += ("&" if "?" in uri else "?") + urllib.parse.urlencode(extra)
        else:
            uri = dsn.to_uri(params)
        env["DATA_SOURCE_NAME"] = uri
        component = f"postgres_exporter-{inst.name}"
        self.spawn(component, [installed("postgres_exporter"), f"--web.listen-address={self._listen(component)}",
                               f"--extend.query-path={resources.path('exporters', 'postgres_exporter', 'queries.yaml')}",
                               *POSTGRES_EXPORTER_FLAGS], env=env)

    def _start_checkpoints(self, inst: Instance) -> None:
        component = f"checkpoints-{inst.name}"
        params = self._dsn(inst)
        os.makedirs(self.path("runs"), exist_ok=True)  # the daemon wants one; no run is followed here
        self.spawn(component, [
            sys.executable, "-m", "benchwatch", "exporter", f"--listen={self._listen(component)}",
            f"--runs-dir={self.path('runs')}", f"--remote-write-url={self.url('prometheus')}/api/v1/write",
            f"--server-log={inst.server_log}", "--no-collector.pgbench_runs",
            # The host's processes (explain's cpu_contention) once per host: the first follower scans /proc.
            *([] if inst == next(i for i in self.cfg.instances if i.server_log) else ["--no-collector.processes"]),
            f"--label=target={inst.name}", f"--label=host={self.cfg.host}"],
            # The statements collector reads the instance as postgres_exporter does (libpq's variables, the
            # password in a 0600 pgpass file): time per call where pg_stat_statements is there.
            env=dict(self.base_env(), **dsn.libpq_env(params, self._pgpass(inst, params))))

    def prometheus_config(self) -> dict:
        """The agent's Prometheus configuration (YAML is a superset of JSON: written as JSON)."""
        host = self.cfg.host
        targets = [(i.name, {"postgres_server": i.server}) for i in self.cfg.instances] or [(self.cfg.name, {})]
        node = [{"targets": [self._listen("node_exporter")],
                 "labels": {"target": name, "host": host, "component": "node_exporter"}} for name, _ in targets]
        # The central stack's jobs as prometheus/prometheus.yml defines them (intervals, node_exporter's
        # collectors, relabelling): iostat's collectors every second, the host's size and load every 15 s.
        jobs = central_scrape_jobs()
        scrape = [static_job(jobs["node"], node), static_job(jobs["node_inventory"], node)]
        if self.cfg.instances:
            scrape.append(static_job(jobs[POSTGRESQL.scrape_job], [
                {"targets": [self._listen(f"postgres_exporter-{i.name}")],
                 "labels": {"target": i.name, "host": host, "component": "postgres_exporter", "postgres_server": i.server}}
                for i in self.cfg.instances]))
        followers = [i for i in self.cfg.instances if i.server_log]
        if followers:
            # The agent's own job, not the central "benchwatch" one (which scrapes the exporter that also
            # follows runs): only the checkpoint followers' health, the checkpoint series come by remote
            # write at the log's timestamps.
            scrape.append({"job_name": "benchwatch", "scrape_interval": "5s", "static_configs": [
                {"targets": [self._listen(f"checkpoints-{i.name}")],
                 "labels": {"target": i.name, "host": host, "component": "benchwatch_exporter"}} for i in followers],
                "metric_relabel_configs": [{"source_labels": ["__name__"], "action": "keep",
                                            "regex": "benchwatch_exporter_checkpoints_log_present|benchwatch_exporter_collector_success"}]})
        # The central rules evaluate every second at "now": a sample still queued here when they run
        # is missed by them for good. The default 5 s batch deadline let a one-instance agent's
        # samples arrive late enough to drop 7-13 % of the recorded points.
        remote: dict = {"url": self.cfg.write_url, "name": "central",
                        "queue_config": {"batch_send_deadline": "250ms"}}
        auth = self.cfg.auth
        if auth.bearer_token_file:
            remote["authorization"] = {"type": "Bearer", "credentials_file": os.path.abspath(auth.bearer_token_file)}
        elif auth.basic_auth_user:
            remote["basic_auth"] = {"username": auth.basic_auth_user, "password_file": os.path.abspath(auth.password_file or "")}
        return {"global": {"scrape_interval": self.cfg.scrape_interval, "scrape_timeout": self.cfg.scrape_interval},
                "scrape_configs": scrape, "remote_write": [remote]}

    def _start_prometheus(self) -> None:
        config = self.path("prometheus", "agent.yml")
        with open(config, "w", encoding="utf-8") as f:
            json.dump(self.prometheus_config(), f, indent=2)
        self.spawn("prometheus", [
            installed("prometheus"), "--enable-feature=agent", f"--config.file={config}",
            f"--storage.agent.path={self.path('prometheus', 'wal')}",
            f"--storage.agent.retention.max-time={WAL_MAX_TIME}",
            f"--web.listen-address={self._listen('prometheus')}",
            # the checkpoint followers write here; loopback only
            "--web.enable-remote-write-receiver"], env=self.base_env())

    # -- status and down -------------------------------------------------------------

    def remote_write_stats(self) -> dict | None:
        """From the agent's own /metrics: samples pending and how far the central side is behind."""
        try:
            status, body = net.http_get(self.url("prometheus") + "/metrics", timeout=2.0)
        except (OSError, KeyError):
            return None
        if status != 200:
            return None
        values: dict[str, float] = {}
        for line in body.decode(errors="replace").splitlines():
            for name in ("prometheus_remote_storage_samples_pending", "prometheus_remote_storage_highest_timestamp_in_seconds",
                         "prometheus_remote_storage_queue_highest_sent_timestamp_seconds",
                         "prometheus_remote_storage_samples_failed_total", "prometheus_remote_storage_samples_retried_total"):
                if line.startswith(name + "{") or line.startswith(name + " "):
                    values[name] = values.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
        highest = values.get("prometheus_remote_storage_highest_timestamp_in_seconds")
        sent = values.get("prometheus_remote_storage_queue_highest_sent_timestamp_seconds")
        return {"samples_pending": values.get("prometheus_remote_storage_samples_pending"),
                "lag_s": None if highest is None or sent is None else max(0.0, highest - sent),
                "samples_retried": values.get("prometheus_remote_storage_samples_retried_total"),
                "samples_failed": values.get("prometheus_remote_storage_samples_failed_total")}

    def status(self) -> dict:
        restarts = self.restarts()
        components = {c: self.component_status(c, restarts) for c in self.components()}
        return {"state_dir": self.cfg.state_dir, "name": self.cfg.name, "host": self.cfg.host,
                "central": secrets.redact_argv([self.cfg.write_url])[0],
                "targets": [{"target": i.name, "server": i.server, "server_log": i.server_log} for i in self.cfg.instances],
                "components": components,
                "remote_write": self.remote_write_stats() if components["prometheus"]["healthy"] else None}

    def down(self) -> list[str]:
        """The supervisor first (nothing comes back), then the log followers (they write to Prometheus),
        Prometheus, and what it scrapes."""
        return self.stop_all()


def start_agent(state_dir: str, *, name: str, central_url: str, postgres: Sequence[str] = (),
                server_logs: Sequence[str | None] = (), targets: Sequence[str] = (), host: str | None = None,
                auth: CentralAuth | None = None, scrape_interval: str = "1s",
                out: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> Agent:
    """An agent for N local PostgreSQL instances (DSNs, server logs and target names paired in order); started.

    What ``benchwatch agent up`` does, for programs (the sharded demo, tests)."""
    if server_logs and len(server_logs) != len(postgres):
        raise StackError(f"{len(server_logs)} --server-log for {len(postgres)} --postgres: give one per instance, "
                         "in order ('-' for none)")
    if not _NAME.fullmatch(name):
        raise StackError(f"agent name {name!r}: use letters, digits, '.', '_' or '-'")
    names = instance_names(name, postgres, targets)
    logs = [None if not log or log == "-" else os.path.abspath(log) for log in (server_logs or [None] * len(postgres))]
    state_dir = os.path.abspath(state_dir)
    cfg = load_agent_config(state_dir)
    ports = cfg.ports if cfg else {}
    cfg = AgentConfig(state_dir=state_dir, name=name, central_url=central_url, host=host or socket.gethostname(),
                      instances=[Instance(n, log) for n, log in zip(names, logs, strict=True)],
                      auth=auth or CentralAuth(), ports=ports, scrape_interval=scrape_interval)
    agent = Agent(cfg, out=out)
    agent.up(list(postgres))
    return agent


def wait_for_central(agent: Agent, timeout: float = 30.0) -> bool:
    """Until the agent has sent something to the central side (its highest sent timestamp moved)."""
    def sent() -> bool:
        stats = agent.remote_write_stats()
        return bool(stats and stats["lag_s"] is not None and stats["lag_s"] < 10)
    return processes.wait_until(sent, timeout, interval=0.2)
