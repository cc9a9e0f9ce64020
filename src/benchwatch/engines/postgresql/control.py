"""A PostgreSQL server for experiments (benchwatch sweep): settings by ALTER SYSTEM, a reload, or a
restart only for those whose pg_settings.context is 'postmaster'; a CHECKPOINT and pgbench_history
emptied before each run."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import psycopg
from psycopg import sql

from benchwatch.engines import ServerControl, SettingsError
from benchwatch.engines.postgresql import connect

# How long a reload may take to reach new connections (the postmaster reads the files on SIGHUP).
RELOAD_TIMEOUT_S = 10.0


class PostgreSQLControl(ServerControl):
    def __init__(self, params: Mapping[str, str], restart: Callable[[], None] | None):
        self.params = dict(params)
        self._restart = restart  # None: a server benchwatch did not start (it cannot restart it)

    def _conn(self) -> psycopg.Connection:
        return connect.connect(self.params)

    @property
    def can_restart(self) -> bool:
        return self._restart is not None

    def settings(self, names: list[str]) -> dict[str, dict[str, Any] | None]:
        out: dict[str, dict[str, Any] | None] = {n: None for n in names}
        with self._conn() as conn:
            rows = conn.execute("SELECT name, current_setting(name), context, coalesce(sourcefile, '') "
                                "FROM pg_settings WHERE name = ANY(%s)", ([n.lower() for n in names],)).fetchall()
        found = {r[0]: r for r in rows}
        for n in names:
            r = found.get(n.lower())
            if r is not None:
                out[n] = {"value": r[1], "context": r[2], "restart": r[2] == "postmaster",
                          "changeable": r[2] not in ("internal",),
                          "persisted": r[3].endswith("postgresql.auto.conf")}
        return out

    def apply(self, values: Mapping[str, str]) -> list[str]:
        facts = self.settings(list(values))
        done = []
        with self._conn() as conn:
            for name, value in values.items():
                try:
                    conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name.lower()),
                                                                            sql.Literal(value)))
                except psycopg.Error as e:
                    raise SettingsError(f"{name}={value}: {_message(e)}") from None
                done.append(f"ALTER SYSTEM SET {name.lower()} = '{value}'")
        return done + self._take_effect(any((facts.get(n) or {}).get("restart") for n in values))

    def restore(self, originals: Mapping[str, Mapping[str, Any]]) -> list[str]:
        if not originals:
            return []
        now = self.settings(list(originals))
        done = []
        with self._conn() as conn:
            for name, before in originals.items():
                ident = sql.Identifier(name.lower())
                if before.get("persisted"):
                    conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(ident, sql.Literal(str(before["value"]))))
                    done.append(f"ALTER SYSTEM SET {name.lower()} = '{before['value']}'")
                else:
                    conn.execute(sql.SQL("ALTER SYSTEM RESET {}").format(ident))
                    done.append(f"ALTER SYSTEM RESET {name.lower()}")
        changed_restart = any(b.get("restart") and (now.get(n) or {}).get("value") != b.get("value")
                              for n, b in originals.items())
        return done + self._take_effect(changed_restart)

    def _take_effect(self, restart: bool) -> list[str]:
        if restart:
            if self._restart is None:
                raise SettingsError("a setting needs a restart, which benchwatch cannot do on a server it did not start")
            self._restart()
            return ["restarted the server"]
        with self._conn() as conn:
            before = _one(conn, "SELECT pg_conf_load_time()")
            conn.execute("SELECT pg_reload_conf()")
        # A new connection sees the new settings once the postmaster has read the files again.
        deadline = time.monotonic() + RELOAD_TIMEOUT_S
        while time.monotonic() < deadline:
            with self._conn() as conn:
                if _one(conn, "SELECT pg_conf_load_time()") > before:
                    return ["pg_reload_conf()"]
            time.sleep(0.02)
        raise SettingsError(f"the server did not reload its configuration within {RELOAD_TIMEOUT_S:g} s")

    def before_run(self, checkpoint: bool = True) -> list[str]:
        done = []
        with self._conn() as conn:
            if _one(conn, "SELECT to_regclass('pgbench_history')") is not None:
                conn.execute("TRUNCATE pgbench_history")
                done.append("TRUNCATE pgbench_history")
            if checkpoint:
                conn.execute("CHECKPOINT")
                done.append("CHECKPOINT")
        return done

    def settle(self) -> list[str]:
        # A timed checkpoint is skipped while nothing was written since the last one: checkpointed now, an idle
        # server's next one has nothing to do during another server's run (autovacuum aside).
        with self._conn() as conn:
            conn.execute("CHECKPOINT")
        return ["CHECKPOINT"]

    def facts(self) -> dict[str, Any]:
        with self._conn() as conn:
            version = _one(conn, "SHOW server_version")
            debug = _one(conn, "SHOW debug_assertions")
        return {"server_version": str(version), "debug_assertions": debug == "on"}


def _message(e: psycopg.Error) -> str:
    diag = getattr(e, "diag", None)
    return (getattr(diag, "message_primary", None) or str(e)).strip()


def _one(conn: psycopg.Connection, query: str) -> Any:
    row = conn.execute(query).fetchone()
    return row[0] if row else None
