"""A MariaDB/MySQL server for experiments (benchwatch sweep): settings by SET GLOBAL through the mariadb
client and the target's 0600 client file (the password never in argv); a read-only variable would need
a restart with another option, which is refused before the sweep starts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from benchwatch.engines import ServerControl, SettingsError
from benchwatch.engines.mysql import client
from benchwatch.engines.mysql import server as mysql_server

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _literal(value: str) -> str:
    """A number as it is (an integer variable refuses a quoted one), anything else quoted."""
    if re.fullmatch(r"-?\d+(\.\d+)?", value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class MySQLControl(ServerControl):
    def __init__(self, target: mysql_server.MySQLTarget):
        self.target = target

    def _sql(self, text: str) -> list[list[str]]:
        try:
            r = self.target.sql(text, connect_timeout=5)
        except client.MySQLError as e:
            raise SettingsError(str(e)) from None
        if r.returncode != 0:
            raise SettingsError(client.last_error(r))
        return client.rows(r.stdout)

    def settings(self, names: list[str]) -> dict[str, dict[str, Any] | None]:
        out: dict[str, dict[str, Any] | None] = {n: None for n in names}
        valid = [n for n in names if _NAME.match(n)]
        if not valid:
            return out
        rows = self._sql("SELECT VARIABLE_NAME, GLOBAL_VALUE, READ_ONLY FROM information_schema.SYSTEM_VARIABLES "
                         f"WHERE VARIABLE_NAME IN ({', '.join(_literal(n.upper()) for n in valid)})")
        found = {r[0].lower(): r for r in rows if len(r) == 3}
        for n in names:
            r = found.get(n.lower())
            if r is not None:
                out[n] = {"value": r[1], "restart": r[2] == "YES", "changeable": r[2] != "YES", "persisted": False,
                          "context": "read-only (needs a restart)" if r[2] == "YES" else "dynamic"}
        return out

    def apply(self, values: Mapping[str, str]) -> list[str]:
        done = []
        for name, value in values.items():
            statement = f"SET GLOBAL {name} = {_literal(value)}"
            try:
                self._sql(statement)
            except SettingsError as e:
                raise SettingsError(f"{name}={value}: {e}") from None
            done.append(statement)
        return done

    def restore(self, originals: Mapping[str, Mapping[str, Any]]) -> list[str]:
        return self.apply({n: str(b["value"]) for n, b in originals.items()})

    def before_run(self, checkpoint: bool = True) -> list[str]:
        return []  # InnoDB has no CHECKPOINT statement; its flushing is part of what a run measures

    def facts(self) -> dict[str, Any]:
        rows = self._sql("SELECT VERSION()")
        version = rows[0][0] if rows and rows[0] else None
        return {"server_version": version, "debug_assertions": bool(version and "debug" in version.lower())}
