"""PostgreSQL's part of the host agent (``benchwatch agent up --postgres DSN --server-log LOG``): per instance,

* one postgres_exporter (``postgres_exporter-NAME``; 0.11 has no multi-target /probe, and two DSNs in one
  make /metrics answer 500),
* where it has a server log, one benchwatch exporter (``checkpoints-NAME``) following it for checkpoints
  (remote-written at the log's own timestamps, to the agent) and reading its top statements.

Each instance's DSN is kept in the agent's ``secrets/dsn-NAME`` (0600), its password for the readers in
``secrets/pgpass-NAME``; agent.json has only the instance's ``host:port``."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from benchwatch.engines import AgentPart
from benchwatch.engines.postgresql import dsn, exporter_queries, server
from benchwatch.engines.postgresql.server import POSTGRES_EXPORTER_FLAGS
from benchwatch.util.errors import StackError

EXPORTER = "postgres_exporter-"
FOLLOWER = "checkpoints-"
# The followers' health in the agent's own "benchwatch" job; the checkpoint series come by remote write.
FOLLOWER_HEALTH = "benchwatch_exporter_checkpoints_log_present|benchwatch_exporter_collector_success"


def server_label(params: Mapping[str, str]) -> str:
    return f"{params.get('host', 'localhost')}:{params.get('port', '5432')}"


class PostgreSQLAgentPart(AgentPart):
    flag = "--postgres"

    def servers(self, options: Mapping[str, Any]) -> list[str]:
        return list(options.get("postgres") or [])

    def instance_suffix(self, server: str) -> str | None:
        return dsn.parse_dsn(server).get("port")

    # -- each instance's connection, in the agent's secrets ------------------------------------------

    def keep_servers(self, servers: list[str]) -> None:
        for inst, text in zip(self.agent.cfg.instances, servers, strict=False):
            self.agent.write_secret(f"dsn-{inst.name}", text.strip())
            inst.server = server_label(dsn.parse_dsn(text))
        for inst in self.agent.cfg.instances:
            if self.agent.read_secret(f"dsn-{inst.name}") is None:
                raise StackError(f"no DSN for instance {inst.name}: give {self.flag}")

    def _params(self, inst: Any) -> dict[str, str]:
        return dsn.parse_dsn(self.agent.read_secret(f"dsn-{inst.name}") or "")

    def _pgpass(self, inst: Any, params: dict[str, str]) -> str | None:
        """The instance's password in a pgpass file (0600) for its readers' PGPASSFILE, None without one."""
        if "password" not in params:
            return None
        path = self.agent.path("secrets", f"pgpass-{inst.name}")
        dsn.write_pgpass(path, params)
        return path

    # -- components ------------------------------------------------------------------------------------

    def preflight(self) -> None:
        self._program()

    def exporters(self) -> list[str]:
        return [EXPORTER + i.name for i in self.agent.cfg.instances]

    def followers(self) -> list[str]:
        return [FOLLOWER + i.name for i in self.agent.cfg.instances if i.server_log]

    def health_path(self, component: str) -> str:
        return "/healthz" if component.startswith(FOLLOWER) else "/metrics"

    def _instance(self, component: str) -> Any:
        name = component.split("-", 1)[1]
        return next(i for i in self.agent.cfg.instances if i.name == name)

    def start(self, component: str) -> None:
        inst = self._instance(component)
        if component.startswith(EXPORTER):
            self._start_postgres_exporter(component, inst)
        else:
            self._start_follower(component, inst)

    def _program(self) -> str:
        path = server.binary(server.EXPORTER)
        if path is None:
            raise StackError(f"{server.EXPORTER} is not installed: apt-get install {self.engine.packages[server.EXPORTER]}")
        return path

    def _start_postgres_exporter(self, component: str, inst: Any) -> None:
        # As the central stack: the DSN through the environment without its
        # password (pgpass, 0600), the database as PGDATABASE.
        params = self._params(inst)
        env = dict(self.agent.base_env(), **dsn.exporter_env(params, self._pgpass(inst, params)))
        # An instance down now gets the file for every version; one upgraded later, at the agent's next start.
        queries = exporter_queries.for_server(params, self.agent.path(f"{component}-queries.yaml"))
        self.agent.spawn(component, [self._program(), f"--web.listen-address={self.agent.address(component)}",
                                     f"--extend.query-path={queries}",
                                     *POSTGRES_EXPORTER_FLAGS], env=env)

    def _start_follower(self, component: str, inst: Any) -> None:
        params = self._params(inst)
        cfg = self.agent.cfg
        os.makedirs(self.agent.path("runs"), exist_ok=True)  # the daemon wants one; no run is followed here
        self.agent.spawn(component, [
            sys.executable, "-m", "benchwatch", "exporter", f"--listen={self.agent.address(component)}",
            f"--runs-dir={self.agent.path('runs')}", f"--remote-write-url={self.agent.url('prometheus')}/api/v1/write",
            f"--server-log={inst.server_log}", "--no-collector.pgbench_runs",
            # The host's processes (explain's cpu_contention) once per host: the first follower scans /proc.
            *([] if inst == next(i for i in cfg.instances if i.server_log) else ["--no-collector.processes"]),
            f"--label=target={inst.name}", f"--label=host={cfg.host}"],
            # The statements collector reads the instance as postgres_exporter does (libpq's variables, the
            # password in a 0600 pgpass file): time per call where pg_stat_statements is there.
            env=dict(self.agent.base_env(), **dsn.libpq_env(params, self._pgpass(inst, params))))

    def scrape_configs(self, central_jobs: Mapping[str, dict]) -> list[dict]:
        cfg = self.agent.cfg
        out = []
        if cfg.instances:
            out.append(self.static_job(central_jobs[self.engine.scrape_job], [
                {"targets": [self.agent.address(EXPORTER + i.name)],
                 "labels": {"target": i.name, "host": cfg.host, "component": "postgres_exporter", "postgres_server": i.server}}
                for i in cfg.instances]))
        followers = [i for i in cfg.instances if i.server_log]
        if followers:
            # The agent's own job, not the central "benchwatch" one (which scrapes the exporter that also
            # follows runs): only the checkpoint followers' health, the checkpoint series come by remote
            # write at the log's timestamps. Every 15 s, as the central job: each scrape renders the
            # follower's whole /metrics (about 150 lines) for the two series kept.
            out.append({"job_name": "benchwatch", "scrape_interval": "15s", "static_configs": [
                {"targets": [self.agent.address(FOLLOWER + i.name)],
                 "labels": {"target": i.name, "host": cfg.host, "component": "benchwatch_exporter"}} for i in followers],
                "metric_relabel_configs": [{"source_labels": ["__name__"], "action": "keep", "regex": FOLLOWER_HEALTH}]})
        return out
