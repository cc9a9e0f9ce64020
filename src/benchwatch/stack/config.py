"""Where the native stack lives and which ports it uses.

Precedence: command-line flag > environment (BENCHWATCH_*) > the stack's saved
``stack.json`` (so ``run``/``status``/``down`` find what ``up`` started) > defaults.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass, field

LISTEN_HOST = "127.0.0.1"

# component -> default port. Away from the usual defaults so a stack can sit
# beside a user's own Prometheus (9090) or PostgreSQL (5432).
DEFAULT_PORTS = {
    "postgres": 15432,
    "prometheus": 19090,
    "alertmanager": 19093,
    "node_exporter": 19100,
    "postgres_exporter": 19187,
    "benchwatch_exporter": 19188,
    "grafana": 13000,
    "mariadb": 13306,           # only with --engine mariadb
    "mysqld_exporter": 19104,   # only with --engine mariadb
    "supervisor": 19189,
}
# docker-compose's address of the benchwatch exporter (service name, default port): what
# alertmanager/alertmanager.yml and docker/targets/benchwatch.json name and the native stack replaces
# with its own; tests/unit/test_settings_once.py fails when those files drift from DEFAULT_PORTS.
COMPOSE_EXPORTER = f"benchwatch:{DEFAULT_PORTS['benchwatch_exporter']}"
ENGINES = ("postgres", "mariadb")


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
    engine: str = "postgres"                 # the database the stack runs or watches: postgres or mariadb
    mysql_defaults_file: str | None = None   # an existing MySQL/MariaDB's [client] file instead of the embedded one
    # Embedded MariaDB instances (--instances N): 1 is target "local"; several are mariadb-1..N,
    # instance i > 1 on ports["mariadb-i"] with its exporter on ports["mysqld_exporter-i"].
    mariadb_instances: int = 1

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
        data["pg_dsn"] = None  # the DSN may carry a password: it lives in the 0600 secrets file only
        tmp = self.stack_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
        os.replace(tmp, self.stack_file)


def load_config(state_dir: str | None = None, port_overrides: dict[str, int] | None = None,
                pg_dsn: str | None = None, engine: str | None = None,
                mysql_defaults_file: str | None = None, instances: int | None = None) -> Config:
    state_dir = os.path.abspath(state_dir or os.environ.get("BENCHWATCH_STATE_DIR") or default_state_dir())
    cfg = Config(state_dir=state_dir)
    try:
        with open(cfg.stack_file, encoding="utf-8") as f:
            saved = json.load(f)
        cfg.ports.update({k: int(v) for k, v in saved.get("ports", {}).items()})
        cfg.pg_database = saved.get("pg_database", cfg.pg_database)
        cfg.target_name = saved.get("target_name", cfg.target_name)
        cfg.engine = saved.get("engine", cfg.engine)
        cfg.mysql_defaults_file = saved.get("mysql_defaults_file")
        cfg.mariadb_instances = int(saved.get("mariadb_instances", 1))
    except (FileNotFoundError, ValueError):
        pass
    for component in DEFAULT_PORTS:
        env = os.environ.get(f"BENCHWATCH_{component.upper()}_PORT")
        if env:
            cfg.ports[component] = int(env)
    cfg.ports.update({k: v for k, v in (port_overrides or {}).items() if v})
    cfg.target_name = os.environ.get("BENCHWATCH_TARGET_NAME") or cfg.target_name
    cfg.pg_dsn = pg_dsn or os.environ.get("BENCHWATCH_PG_DSN") or None
    if mysql_defaults_file:
        cfg.mysql_defaults_file, engine = os.path.abspath(mysql_defaults_file), engine or "mariadb"
    cfg.engine = engine or os.environ.get("BENCHWATCH_ENGINE") or cfg.engine
    if instances and cfg.engine == "mariadb":  # (demo --shards has its own PostgreSQL instances)
        cfg.mariadb_instances = instances
    return cfg
