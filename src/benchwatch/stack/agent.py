"""The agent: watch the databases where they run, and push everything to the central stack.

On a database host, ``benchwatch agent up`` starts, listening on 127.0.0.1 only:

* node_exporter (the host's disks and CPUs),
* the engine's part (its ``AgentPart``, from its folder through
  ``Engine.agent_part``): per instance, its exporter and a benchwatch exporter
  following its server log (remote-written at the log's own timestamps, to
  the agent),
* Prometheus in agent mode, which scrapes them every second, adds the
  ``target``/``host`` labels, keeps everything in its WAL and remote-writes it
  to the central Prometheus: the database host opens no port, and an outage of
  the central side loses nothing the agent has in its WAL.

Every database-side series carries ``target`` (the instance's name) and
``host``. node_exporter is scraped once per host: its series carry ``host``
only (agents of earlier versions scraped it once per target, with ``target``),
and the dashboards keep those of the selected targets' hosts by joining on
``host``.

State layout under ``state_dir`` (default /var/lib/benchwatch-agent as root):
  agent.json               name, host, central URL, instances (no DSNs), ports
  secrets/                 0700: each instance's connection (the engine's files, 0600)
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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import yaml

from benchwatch import engines, resources
from benchwatch.engines import AgentPart
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
    """One server instance the agent watches; ``name`` is its ``target`` label."""

    name: str
    server_log: str | None = None
    server: str = ""  # host:port from its connection, for `benchwatch targets` (no secrets)


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


static_job = AgentPart.static_job


def instance_names(name: str, servers: Sequence[str], names: Sequence[str] = (), part: AgentPart | None = None) -> list[str]:
    """The target name of each instance: as given, else the agent's name (one instance) or name-SUFFIX, the
    engine's part saying what tells its servers apart (a DSN's port, say), else the position."""
    flag = part.flag if part else "server"
    if names and len(names) != len(servers):
        raise StackError(f"{len(names)} --target names for {len(servers)} {flag} instances: give one per instance, in order")
    if names:
        out = list(names)
    elif len(servers) <= 1:
        out = [name]
    else:
        out = []
        for i, server in enumerate(servers):
            suffix = part.instance_suffix(server) if part else None
            out.append(f"{name}-{suffix}" if suffix else f"{name}-{i + 1}")
    for n in out:
        if not _NAME.fullmatch(n):
            raise StackError(f"target name {n!r}: use letters, digits, '.', '_' or '-'")
    if len(set(out)) != len(out):
        raise StackError(f"target names must differ: {out} (give --target once per {flag})")
    return out


@dataclass
class Agent(ProcessManager):
    """The agent's components, started, supervised and stopped by benchwatch.stack.processes, as the stack's."""

    cfg: AgentConfig
    out: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr)
    _parts: list[AgentPart] | None = field(default=None, init=False, repr=False)

    # -- the engine's part -----------------------------------------------------------

    @property
    def part(self) -> AgentPart | None:
        """The part of the engine whose servers agents watch: the one engine that brings an agent part.
        agent.json names no engine (agents of earlier versions wrote none, and agent up must restart them);
        a second engine with an agent part would have to be named there, per instance."""
        if self._parts is None:
            self._parts = [p for e in engines.load_engines().values() if (p := e.agent_part(self)) is not None]
            if len(self._parts) > 1:
                raise RuntimeError(f"several engines bring an agent part: {[p.engine.name for p in self._parts]}")
        return self._parts[0] if self._parts else None

    # -- paths and components ----------------------------------------------------

    def components(self) -> list[str]:
        """Start order: exporters, then Prometheus (scrapes them, receives checkpoints), then the log
        followers; the supervisor last (`down` stops it first)."""
        part = self.part
        out = ["node_exporter", *(part.exporters() if part else []), "prometheus", *(part.followers() if part else [])]
        out.append(SUPERVISOR)
        return out

    def url(self, component: str) -> str:
        return f"http://{self.address(component)}"

    def health_url(self, component: str) -> str | None:
        if component not in self.cfg.ports:
            return None
        if component == "prometheus":
            return self.url(component) + "/-/ready"
        if component in (SUPERVISOR, "node_exporter") or self.part is None:
            return self.url(component) + "/metrics"
        return self.url(component) + self.part.health_path(component)

    # -- secrets -------------------------------------------------------------------

    def read_secret(self, name: str) -> str | None:
        try:
            with open(self.path("secrets", name), encoding="utf-8") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write_secret(self, name: str, value: str) -> None:
        os.makedirs(self.path("secrets"), mode=0o700, exist_ok=True)
        write_private(self.path("secrets", name), value + "\n")

    # -- up --------------------------------------------------------------------------

    def up(self, servers: Sequence[str] | None = None) -> dict:
        """Start what is not running; ``servers`` (one per instance, in order) are stored 0600 on first use."""
        self.cfg.auth.check()
        os.makedirs(self.path("prometheus"), exist_ok=True)
        if self.part:
            self.part.keep_servers(list(servers or ()))
        elif self.cfg.instances:
            raise StackError("no engine's agent part watches these instances")
        self._preflight()
        for component in self.components():
            if component not in self.cfg.ports or (self.pid(component) is None
                                                   and not net.port_free(LISTEN_HOST, self.cfg.ports[component])):
                self.cfg.ports[component] = net.free_port()
        self.cfg.save()
        self.start_all()
        return self.status()

    def _preflight(self) -> None:
        if binary("node_exporter") is None:
            raise StackError("node_exporter is not installed: apt-get install prometheus-node-exporter")
        if self.part:
            self.part.preflight()
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
        elif self.part:
            self.part.start(component)
        else:
            raise StackError(f"{component}: no engine's agent part starts it")

    def prometheus_config(self) -> dict:
        """The agent's Prometheus configuration (YAML is a superset of JSON: written as JSON)."""
        # node_exporter once per host: its series are the host's, whatever the number of instances (each
        # added instance scraped it again before, about 2.6 ms/s of CPU each plus Prometheus' ingestion).
        # They carry `host`; dashboards join them to targets on it. An agent with no instance names its host
        # series after itself, so that it still shows among the targets.
        labels = {"host": self.cfg.host, "component": "node_exporter"}
        if not self.cfg.instances:
            labels["target"] = self.cfg.name
        node = [{"targets": [self._listen("node_exporter")], "labels": labels}]
        # The central stack's jobs as prometheus/prometheus.yml defines them (intervals, node_exporter's
        # collectors, relabelling): iostat's collectors every second, the host's size and load every 15 s.
        jobs = central_scrape_jobs()
        scrape = [static_job(jobs["node"], node), static_job(jobs["node_inventory"], node)]
        if self.part:  # the engine's exporters and the followers' health
            scrape += self.part.scrape_configs(jobs)
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


def start_agent(state_dir: str, *, name: str, central_url: str,
                server_logs: Sequence[str | None] = (), targets: Sequence[str] = (), host: str | None = None,
                auth: CentralAuth | None = None, scrape_interval: str = "1s",
                out: Callable[[str], None] = lambda m: print(m, file=sys.stderr), **servers: Any) -> Agent:
    """An agent for N local server instances, given by the engine's options of agent up (``postgres=[DSN,
    ...]``), server logs and target names paired with them in order; started.

    What ``benchwatch agent up`` does, for programs (the sharded demo, tests)."""
    state_dir = os.path.abspath(state_dir)
    cfg = load_agent_config(state_dir)
    ports = cfg.ports if cfg else {}
    cfg = AgentConfig(state_dir=state_dir, name=name, central_url=central_url, host=host or socket.gethostname(),
                      auth=auth or CentralAuth(), ports=ports, scrape_interval=scrape_interval)
    agent = Agent(cfg, out=out)
    part = agent.part
    given = part.servers(servers) if part else []
    if not part and any(servers.values()):
        raise StackError(f"no engine's agent watches {', '.join(sorted(k for k, v in servers.items() if v))}")
    if server_logs and len(server_logs) != len(given):
        raise StackError(f"{len(server_logs)} --server-log for {len(given)} {part.flag if part else 'server'}: "
                         "give one per instance, in order ('-' for none)")
    if not _NAME.fullmatch(name):
        raise StackError(f"agent name {name!r}: use letters, digits, '.', '_' or '-'")
    names = instance_names(name, given, targets, part)
    logs = [None if not log or log == "-" else os.path.abspath(log) for log in (server_logs or [None] * len(given))]
    cfg.instances = [Instance(n, log) for n, log in zip(names, logs, strict=True)]
    agent.up(given)
    return agent


def wait_for_central(agent: Agent, timeout: float = 30.0) -> bool:
    """Until the agent has sent something to the central side (its highest sent timestamp moved)."""
    def sent() -> bool:
        stats = agent.remote_write_stats()
        return bool(stats and stats["lag_s"] is not None and stats["lag_s"] < 10)
    return processes.wait_until(sent, timeout, interval=0.2)
