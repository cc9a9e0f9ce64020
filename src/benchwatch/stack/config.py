"""Where the native stack lives, which engine it runs and which ports it uses: the one place that reads
the stack's settings (flags, BENCHWATCH_* variables, stack.json).

Precedence: command-line flag > environment (BENCHWATCH_*) > the stack's saved
``stack.json`` (so ``run``/``status``/``down`` find what ``up`` started) > defaults.
What ``up`` and ``demo`` start (the engine, its instances, an existing MySQL's
defaults file) is not read from stack.json (``load_config(..., starting=True)``):
without ``--engine`` they start the default engine, whatever ran before; a stack
still running is another matter, which ``Stack.running_engine`` tells.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass, field, fields

from benchwatch import engines
from benchwatch.util.net import LISTEN_HOST

# component -> default port. Away from the usual defaults so a stack can sit
# beside a user's own Prometheus (9090) or PostgreSQL (5432). The engines' own
# components (servers, exporters) come from their folders (Engine.default_ports).
SHARED_PORTS = {
    "prometheus": 19090,
    "alertmanager": 19093,
    "node_exporter": 19100,
    "benchwatch_exporter": 19188,
    "grafana": 13000,
    "supervisor": 19189,
}
DEFAULT_PORTS = {**SHARED_PORTS, **{c: p for e in engines.load_engines().values() for c, p in e.default_ports.items()}}
# docker-compose's address of the benchwatch exporter (service name, default port): what
# alertmanager/alertmanager.yml and docker/targets/benchwatch.json name and the native stack replaces
# with its own; tests/unit/test_settings_once.py fails when those files drift from DEFAULT_PORTS.
COMPOSE_EXPORTER = f"benchwatch:{DEFAULT_PORTS['benchwatch_exporter']}"
ENGINES = tuple(engines.choices())  # what --engine accepts: families and the names users give them


def default_state_dir() -> str:
    # PostgreSQL runs as the postgres user when we are root, and /root is not
    # traversable by it: keep root's state under /var/lib.
    if os.geteuid() == 0:
        return "/var/lib/benchwatch"
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "benchwatch")


@dataclass
class Config:
    state_dir: str
    ports: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_PORTS))
    pg_dsn: str | None = None  # an existing server instead of the embedded one; never printed with its password
    pg_database: str = "bench"
    # The `target` label of the stack's own database-side series (env BENCHWATCH_TARGET_NAME);
    # agents on other hosts name theirs (benchwatch agent up --name).
    target_name: str = "local"

    def database_labels(self) -> dict[str, str]:
        """The labels every database-side series of this stack carries (the shared target/host contract)."""
        return {"target": self.target_name, "host": socket.gethostname()}
    # The engine family the stack runs or watches (benchwatch.engines: "postgresql", "mysql"); stack.json
    # files written before say "postgres" or "mariadb", which load_config reads as their families.
    engine: str = field(default_factory=lambda: engines.default().name)
    mysql_defaults_file: str | None = None   # an existing MySQL/MariaDB's [client] file instead of the embedded one
    # Embedded MariaDB instances (--instances N): 1 is target "local"; several are mariadb-1..N,
    # instance i > 1 on ports["mariadb-i"] with its exporter on ports["mysqld_exporter-i"].
    mariadb_instances: int = 1

    # Read from the environment only, never saved (a password among them).
    prometheus_retention: str = field(default="30y", metadata={"saved": False})  # BENCHWATCH_PROMETHEUS_RETENTION
    alert_webhook_url: str | None = field(default=None, metadata={"saved": False})  # BENCHWATCH_ALERT_WEBHOOK_URL
    grafana_admin_password: str | None = field(default=None, metadata={"saved": False})  # BENCHWATCH_GRAFANA_ADMIN_PASSWORD
    grafana_home: str | None = field(default=None, metadata={"saved": False})  # BENCHWATCH_GRAFANA_HOME
    # Whether the engine was asked for (flag, environment, a defaults file) rather than saved or the default.
    engine_asked: bool = field(default=False, metadata={"saved": False})

    def mariadb_names(self) -> list[str]:
        n = max(1, self.mariadb_instances)
        return ["local"] if n == 1 else [f"mariadb-{i}" for i in range(1, n + 1)]

    @property
    def runs_dir(self) -> str:
        return os.path.join(self.state_dir, "runs")

    @property
    def stack_file(self) -> str:
        return os.path.join(self.state_dir, "stack.json")

    def url(self, component: str) -> str:
        return f"http://{LISTEN_HOST}:{self.ports[component]}"

    @property
    def remote_write_url(self) -> str:
        return self.url("prometheus") + "/api/v1/write"

    def save(self) -> None:
        os.makedirs(self.state_dir, exist_ok=True)
        data = asdict(self)
        for spec in fields(self):
            if spec.metadata.get("saved", True) is False:
                del data[spec.name]
        data["pg_dsn"] = None  # the DSN may carry a password: it lives in the 0600 secrets file only
        tmp = self.stack_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
        os.replace(tmp, self.stack_file)


def _engine_name(name: str) -> str:
    """The family of an engine name or alias (stack.json from before says "postgres"/"mariadb")."""
    return engines.get(name).name


def load_config(state_dir: str | None = None, port_overrides: dict[str, int] | None = None,
                pg_dsn: str | None = None, engine: str | None = None,
                mysql_defaults_file: str | None = None, instances: int | None = None,
                starting: bool = False) -> Config:
    """The stack's configuration. ``starting`` (up, demo): what to start comes from the flags, the
    environment and the defaults, not from what stack.json says an earlier ``up`` started."""
    state_dir = os.path.abspath(state_dir or os.environ.get("BENCHWATCH_STATE_DIR") or default_state_dir())
    cfg = Config(state_dir=state_dir)
    try:
        with open(cfg.stack_file, encoding="utf-8") as f:
            saved = json.load(f)
        cfg.ports.update({k: int(v) for k, v in saved.get("ports", {}).items()})
        cfg.pg_database = saved.get("pg_database", cfg.pg_database)
        cfg.target_name = saved.get("target_name", cfg.target_name)
        if not starting:
            cfg.engine = _engine_name(saved.get("engine", cfg.engine))
            cfg.mysql_defaults_file = saved.get("mysql_defaults_file")
            cfg.mariadb_instances = int(saved.get("mariadb_instances", 1))
    except (FileNotFoundError, ValueError, engines.UnknownEngine):
        pass
    for component in DEFAULT_PORTS:
        env = os.environ.get(f"BENCHWATCH_{component.upper()}_PORT")
        if env:
            cfg.ports[component] = int(env)
    cfg.ports.update({k: v for k, v in (port_overrides or {}).items() if v})
    cfg.target_name = os.environ.get("BENCHWATCH_TARGET_NAME") or cfg.target_name
    cfg.pg_dsn = pg_dsn or os.environ.get("BENCHWATCH_PG_DSN") or None
    cfg.prometheus_retention = os.environ.get("BENCHWATCH_PROMETHEUS_RETENTION") or cfg.prometheus_retention
    cfg.alert_webhook_url = os.environ.get("BENCHWATCH_ALERT_WEBHOOK_URL") or None
    cfg.grafana_admin_password = os.environ.get("BENCHWATCH_GRAFANA_ADMIN_PASSWORD") or None
    cfg.grafana_home = os.environ.get("BENCHWATCH_GRAFANA_HOME") or None
    if mysql_defaults_file:
        cfg.mysql_defaults_file, engine = os.path.abspath(mysql_defaults_file), engine or "mysql"
    asked = engine or os.environ.get("BENCHWATCH_ENGINE")
    if asked:
        cfg.engine, cfg.engine_asked = _engine_name(asked), True
    if instances and engines.get(cfg.engine).instances:  # (demo --shards has its own PostgreSQL instances)
        cfg.mariadb_instances = instances
    return cfg
