"""MySQL/MariaDB in the native stack: N embedded MariaDB instances (or none, with an existing server's
defaults file), one mysqld_exporter per instance, each instance a target (one: "local"; several:
mariadb-1..N). Instance i > 1 is component ``mariadb-i`` (``mysqld_exporter-i``) on its own port."""

from __future__ import annotations

import signal
from collections.abc import Mapping
from typing import Any

from benchwatch.engines import StackPart
from benchwatch.engines.mysql import exporter as mysql_exporter
from benchwatch.engines.mysql import server as mysql_server
from benchwatch.engines.mysql.options import DEFAULTS_FILE, INSTANCES
from benchwatch.util.errors import StackError

SERVER = "mariadb"
EXPORTER = "mysqld_exporter"
PER_INSTANCE = (SERVER, EXPORTER)


def split_component(component: str) -> tuple[str, int]:
    """("mariadb", 3) for "mariadb-3"; (component, 1) for every single-instance name."""
    base, sep, number = component.rpartition("-")
    if sep and number.isdigit() and base in PER_INSTANCE:
        return base, int(number)
    return component, 1


def instance_component(base: str, index: int) -> str:
    return base if index == 1 else f"{base}-{index}"


def binary(component: str) -> str | None:
    if component == SERVER:
        return mysql_server.binary("mariadbd")
    if component == EXPORTER:
        return mysql_exporter.binary()
    return None


def instance_count(cfg: Any) -> int:
    """Embedded MariaDB instances the stack's configuration asks for (--instances N, at least 1)."""
    return max(1, int(cfg.option(INSTANCES) or 1))


def instance_names(cfg: Any) -> list[str]:
    """Their target names: one is "local"; several are mariadb-1..N."""
    n = instance_count(cfg)
    return ["local"] if n == 1 else [f"mariadb-{i}" for i in range(1, n + 1)]


class MySQLPart(StackPart):
    def target(self, index: int) -> mysql_server.MySQLTarget:
        """MariaDB instance ``index`` (1..N) of the stack, with its port and target name."""
        cfg = self.stack.cfg
        names = instance_names(cfg)
        return mysql_server.MySQLTarget(cfg.state_dir, cfg.ports.get(instance_component(SERVER, index), 0),
                                        cfg.option(DEFAULTS_FILE) if index == 1 else None, index=index,
                                        name=names[index - 1] if index <= len(names) else f"mariadb-{index}")

    @property
    def first(self) -> mysql_server.MySQLTarget:
        return self.target(1)

    def targets(self) -> list[mysql_server.MySQLTarget]:
        """Every instance the stack watches: N embedded ones, or the one existing server."""
        if not self.first.embedded:
            return [self.first]
        return [self.target(i) for i in range(1, instance_count(self.stack.cfg) + 1)]

    def target_named(self, name: str) -> mysql_server.MySQLTarget | None:
        return next((t for t in self.targets() if t.name == name), None)

    def server_control(self, target: str | None = None):
        from benchwatch.engines.mysql.control import MySQLControl

        chosen = self.target_named(target) if target else self.first
        return MySQLControl(chosen) if chosen is not None else None

    def servers(self) -> list[str]:
        return [instance_component(SERVER, t.index) for t in self.targets() if t.embedded]

    def exporters(self) -> list[str]:
        return [instance_component(EXPORTER, t.index) for t in self.targets()]

    def split(self, component: str) -> tuple[str, int]:
        return split_component(component)

    def is_server(self, component: str) -> bool:
        return split_component(component)[0] == SERVER

    def pid_source(self, component: str) -> str | None:
        base, index = split_component(component)
        return self.target(index).pid_file if base == SERVER else None

    def log_file(self, component: str) -> str | None:
        base, index = split_component(component)
        return self.target(index).log_file if base == SERVER else None

    def healthy(self, component: str) -> bool | None:
        base, index = split_component(component)
        if base != SERVER:
            return None
        return self.stack.pid(component) is not None and self.target(index).ready()

    def stop_signal(self, component: str) -> signal.Signals | None:
        return None  # SIGTERM is its clean shutdown; it removes its pid file

    def start(self, component: str) -> None:
        base, index = split_component(component)
        target = self.target(index)
        if base == SERVER:
            try:
                target.prepare()
                argv = target.argv()
            except mysql_server.MySQLError as e:
                raise StackError(str(e)) from None
            self.stack.spawn(component, argv, env=self.stack.base_env())
            return
        if not target.embedded:
            target.write_exporter_file()  # the user's [client] section, in a file of ours
        self.stack.spawn(component, mysql_exporter.argv(self.stack.installed(EXPORTER), target.exporter_file,
                                                        self.stack.address(component)), env=self.stack.base_env())

    def after_start(self, component: str) -> None:
        base, index = split_component(component)
        if base == SERVER:
            self.target(index).bootstrap()  # users and 0600 client files, before the exporter reads one

    def after_up(self) -> None:
        if not self.first.embedded:
            self.first.write_sysbench_file()

    def scrape_targets(self) -> list[dict]:
        # The shared contract: a database instance is target and host; one exporter per instance.
        return [{"targets": [self.stack.address(instance_component(EXPORTER, t.index))],
                 "labels": {"component": EXPORTER, "target": t.name, "host": self.stack.cfg.host}}
                for t in self.targets()]

    def exporter_args(self) -> list[str]:
        # The benchwatch exporter follows no MariaDB log, but its processes collector scans this host: its
        # series carry the host (and the first instance's target) as PostgreSQL's do, so that explain
        # weighs them against this host's pressure stall information, not whichever host's comes first.
        if not self.first.embedded:
            return []
        return [f"--label=target={self.first.name}", f"--label=host={self.stack.cfg.host}"]

    def status(self, restarts: Mapping[str, Mapping[str, Any]]) -> dict:
        target = self.first
        mysql: dict[str, Any] = {"engine": "mariadb", "embedded": target.embedded, "defaults_file": target.client_file,
                                 "log_file": target.log_file if target.embedded else None}
        if target.embedded:
            mysql.update({"pid": self.stack.pid(SERVER), "port": self.stack.cfg.ports[SERVER],
                          "healthy": self.stack.healthy(SERVER), "data_dir": target.data_dir})
            # Every instance by its target name (one: "local"; --instances N: mariadb-1..N).
            mysql["instances"] = [
                {"target": t.name, "port": t.port, "pid": self.stack.pid(instance_component(SERVER, t.index)),
                 "healthy": self.stack.healthy(instance_component(SERVER, t.index)), "data_dir": t.data_dir,
                 "defaults_file": t.client_file, "sysbench_file": t.sysbench_file, "log_file": t.log_file}
                for t in self.targets()]
        # "postgres" stays in status --json, empty, as before.
        return {"postgres": {"dsn": None, "embedded": False, "log_file": None}, "mysql": mysql}
