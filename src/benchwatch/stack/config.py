"""Where the native stack lives, which engine it runs and which ports it uses: the one place that reads
the stack's settings (flags, BENCHWATCH_* variables, stack.json).

Precedence: command-line flag > environment (BENCHWATCH_*) > the stack's saved
``stack.json`` (so ``run``/``status``/``down`` find what ``up`` started) > defaults.
What ``up`` and ``demo`` start (the engine and its options: instances, an existing
server to watch) is not read from stack.json (``load_config(..., starting=True)``):
without ``--engine`` they start the default engine, whatever ran before; a stack
still running is another matter, which ``Stack.running_engine`` tells.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass, field, fields
from typing import Any

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
    # The stack's own results database (benchwatch.results), when no --results-dsn names a team's.
    "results_db": 19432,
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
    pg_database: str = "bench"
    # The `target` label of the stack's own database-side series (env BENCHWATCH_TARGET_NAME);
    # agents on other hosts name theirs (benchwatch agent up --name).
    target_name: str = "local"

    def database_labels(self) -> dict[str, str]:
        """The labels every database-side series of this stack carries (the shared target/host contract)."""
        return {"target": self.target_name, "host": self.host}
    # The name of this host on every record (meta.json's hostname, the series' host label, the results
    # database): up --host NAME or BENCHWATCH_HOST, kept in stack.json; the machine's name by default.
    host: str = field(default_factory=socket.gethostname)
    # The results database (benchwatch.results): a DSN without password (up --results-dsn, BENCHWATCH_RESULTS_DSN),
    # "off" for none; None: the stack's own (the results_db component).
    results_dsn: str | None = None
    # The engine family the stack runs or watches (benchwatch.engines: "postgresql", "mysql"); stack.json
    # files written before say "postgres" or "mariadb", which load_config reads as their families.
    engine: str = field(default_factory=lambda: engines.default().name)
    # The engines' stack options by key (Engine.stack_options: an existing server instead of the embedded
    # one, the number of instances), each saved in stack.json under its own key as before.
    options: dict[str, Any] = field(default_factory=lambda: {o.key: o.default for o in engines.configured_options() if o.key})

    # Read from the environment only, never saved (a password among them).
    prometheus_retention: str = field(default="30y", metadata={"saved": False})  # BENCHWATCH_PROMETHEUS_RETENTION
    alert_webhook_url: str | None = field(default=None, metadata={"saved": False})  # BENCHWATCH_ALERT_WEBHOOK_URL
    grafana_admin_password: str | None = field(default=None, metadata={"saved": False})  # BENCHWATCH_GRAFANA_ADMIN_PASSWORD
    grafana_home: str | None = field(default=None, metadata={"saved": False})  # BENCHWATCH_GRAFANA_HOME
    # Whether the engine was asked for (flag, environment, a defaults file) rather than saved or the default.
    engine_asked: bool = field(default=False, metadata={"saved": False})
    # The long-term series store (docs/long-term.md): its remote-write endpoint, its Prometheus query API's
    # base URL and the 0600 file of a bearer token for both (the path is saved, never the token).
    long_term_write_url: str | None = None      # --long-term-write-url, BENCHWATCH_LONG_TERM_WRITE_URL
    long_term_query_url: str | None = None      # --long-term-query-url, BENCHWATCH_LONG_TERM_QUERY_URL
    long_term_bearer_token_file: str | None = None  # --long-term-bearer-token-file, BENCHWATCH_LONG_TERM_BEARER_TOKEN_FILE
    # Who reads the host's CPU, disks and pressure every second (BENCHWATCH_HOST_READER, kept in stack.json):
    # node_exporter, scraped every second, or the benchwatch exporter's host collector (HOST_READERS).
    host_reader: str = "node_exporter"

    def option(self, key: str) -> Any:
        """An engine's stack option (its StackOption.key); None when no engine has it."""
        return self.options.get(key)

    @property
    def own_results_db(self) -> bool:
        """Whether the stack runs its own results database (no DSN given, and not "off")."""
        return self.results_dsn is None

    def results_target(self) -> str | None:
        """The DSN runs are written to: the one given, the stack's own, or None ("off")."""
        from benchwatch.results import dsn

        if self.results_dsn == dsn.OFF:
            return None
        if self.results_dsn:
            return self.results_dsn
        return dsn.local(self.ports["results_db"], os.path.join(self.state_dir, "secrets", "results_pgpass"))

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
        # Each option under its own key, as stack.json always had them; one not saved (a DSN may carry
        # a password: it lives in the 0600 secrets file only) as null.
        options = data.pop("options")
        data.update({o.key: options.get(o.key) if o.saved else None for o in engines.configured_options() if o.key})
        tmp = self.stack_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
        os.replace(tmp, self.stack_file)


def _engine_name(name: str) -> str:
    """The family of an engine name or alias (stack.json from before says "postgres"/"mariadb")."""
    return engines.get(name).name


# The long-term store's settings: Config attribute = up's flag's dest, read from BENCHWATCH_<KEY upper>.
LONG_TERM_KEYS = ("long_term_write_url", "long_term_query_url", "long_term_bearer_token_file")


# What BENCHWATCH_HOST_READER may say: node_exporter scraped every second (the default), or the benchwatch
# exporter's host collector reading the same files at a quarter of the CPU (docs/metrics.md).
HOST_READERS = ("node_exporter", "exporter")


def check_host_reader(cfg: Config) -> str | None:
    if cfg.host_reader not in HOST_READERS:
        return f"BENCHWATCH_HOST_READER must be one of {', '.join(HOST_READERS)}, not {cfg.host_reader!r}"
    return None


def check_long_term(cfg: Config) -> str | None:
    """What is wrong with the long-term store's settings (None: nothing): http(s) URLs without user info
    (a password would land in stack.json and Prometheus' argv-visible config), a token file only its owner reads."""
    import urllib.parse

    for key in ("long_term_write_url", "long_term_query_url"):
        url = getattr(cfg, key)
        if url is None:
            continue
        parts = urllib.parse.urlsplit(url)
        flag = "--" + key.replace("_", "-")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return f"{flag} must be an http:// or https:// URL, not {url!r}"
        if parts.username is not None or parts.password is not None:
            return f"{flag}: no credentials in the URL (they would be saved in stack.json): use --long-term-bearer-token-file"
    if bool(cfg.long_term_write_url) != bool(cfg.long_term_query_url):
        return "give both --long-term-write-url and --long-term-query-url (the store is written and read)"
    path = cfg.long_term_bearer_token_file
    if path:
        if not cfg.long_term_write_url:
            return "--long-term-bearer-token-file without --long-term-write-url and --long-term-query-url"
        if not os.path.isfile(path):
            return f"bearer token file {path} does not exist"
        if os.stat(path).st_mode & 0o077:
            return f"bearer token file {path} is readable by others: chmod 600 {path}"
    return None


def load_config(state_dir: str | None = None, port_overrides: dict[str, int] | None = None,
                engine: str | None = None, *, starting: bool = False, results_dsn: str | None = None,
                host: str | None = None, long_term: dict[str, str | None] | None = None, **given: Any) -> Config:
    """The stack's configuration. ``given``: the engines' stack options by dest (``pg_dsn=``,
    ``instances=``), as their flags gave them. ``starting`` (up, demo): what to start comes from the
    flags, the environment and the defaults, not from what stack.json says an earlier ``up`` started.
    ``long_term``: up's --long-term-* flags by LONG_TERM_KEYS."""
    unknown = set(given) - {o.dest for o in engines.stack_options()}
    if unknown:
        raise TypeError(f"load_config: no engine has the options {sorted(unknown)}")
    state_dir = os.path.abspath(state_dir or os.environ.get("BENCHWATCH_STATE_DIR") or default_state_dir())
    cfg = Config(state_dir=state_dir)
    try:
        with open(cfg.stack_file, encoding="utf-8") as f:
            saved = json.load(f)
        cfg.ports.update({k: int(v) for k, v in saved.get("ports", {}).items()})
        cfg.pg_database = saved.get("pg_database", cfg.pg_database)
        cfg.target_name = saved.get("target_name", cfg.target_name)
        cfg.host = saved.get("host") or cfg.host
        cfg.results_dsn = saved.get("results_dsn") or None
        if not starting:
            # What the running stack was started with (a stack.json without the key: node_exporter, all there was).
            cfg.host_reader = saved.get("host_reader") or "node_exporter"
            for key in LONG_TERM_KEYS:
                setattr(cfg, key, saved.get(key) or None)
            cfg.engine = _engine_name(saved.get("engine", cfg.engine))
            for option in engines.configured_options():
                if option.key and option.saved and saved.get(option.key) is not None:
                    cfg.options[option.key] = option.type(saved[option.key])
    except (FileNotFoundError, ValueError, engines.UnknownEngine):
        pass
    for component in DEFAULT_PORTS:
        env = os.environ.get(f"BENCHWATCH_{component.upper()}_PORT")
        if env:
            cfg.ports[component] = int(env)
    cfg.ports.update({k: v for k, v in (port_overrides or {}).items() if v})
    cfg.target_name = os.environ.get("BENCHWATCH_TARGET_NAME") or cfg.target_name
    cfg.host = host or os.environ.get("BENCHWATCH_HOST") or cfg.host
    given_dsn = results_dsn or os.environ.get("BENCHWATCH_RESULTS_DSN")
    if given_dsn:
        from benchwatch.results import dsn

        # dsn.DsnError (a ValueError) for one with a password; PGPASSFILE, when set, is named in the DSN (a path,
        # no secret) so that the exporter finds the password there whatever its own environment says.
        if given_dsn == dsn.OWN:
            cfg.results_dsn = None  # back to the stack's own, whatever stack.json kept
        else:
            cfg.results_dsn = given_dsn if given_dsn == dsn.OFF else dsn.with_passfile(dsn.check(given_dsn),
                                                                                       os.environ.get("PGPASSFILE"))
    cfg.prometheus_retention = os.environ.get("BENCHWATCH_PROMETHEUS_RETENTION") or cfg.prometheus_retention
    cfg.host_reader = os.environ.get("BENCHWATCH_HOST_READER") or cfg.host_reader
    cfg.alert_webhook_url = os.environ.get("BENCHWATCH_ALERT_WEBHOOK_URL") or None
    cfg.grafana_admin_password = os.environ.get("BENCHWATCH_GRAFANA_ADMIN_PASSWORD") or None
    cfg.grafana_home = os.environ.get("BENCHWATCH_GRAFANA_HOME") or None
    for key in LONG_TERM_KEYS:
        value = (long_term or {}).get(key) or os.environ.get(f"BENCHWATCH_{key.upper()}") or None
        if value:
            setattr(cfg, key, os.path.abspath(value) if key.endswith("_file") else value.rstrip("/"))
    own: list[tuple[engines.StackOption, Any]] = []
    for e in engines.load_engines().values():
        for option in e.stack_options:
            if option.key is None:
                continue
            value = given.get(option.dest) or None
            if value is None and option.env and os.environ.get(option.env):
                value = option.type(os.environ[option.env])
            if value is None:
                if not option.saved:
                    cfg.options[option.key] = None  # only from the flag or the environment, never stack.json
                continue
            if option.path:
                value = os.path.abspath(value)
            if option.own_engine_only:
                own.append((option, value))  # once the engine is known
                continue
            cfg.options[option.key] = value
            if option.selects_engine:
                engine = engine or e.name
    asked = engine or os.environ.get("BENCHWATCH_ENGINE")
    if asked:
        cfg.engine, cfg.engine_asked = _engine_name(asked), True
    chosen = engines.get(cfg.engine)
    for option, value in own:
        if option.key and option in chosen.stack_options:  # (demo --shards reads --instances for its own instances)
            cfg.options[option.key] = value
    return cfg
