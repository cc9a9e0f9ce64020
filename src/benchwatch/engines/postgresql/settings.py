"""What a PostgreSQL server says about itself at the start of a run: version, settings, pgbench scale."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from benchwatch.record.host import filesystem
from benchwatch.util import secrets

# Settings that explain a TPS curve: checkpoint spacing, cache size, WAL volume.
SETTINGS = ("shared_buffers", "max_wal_size", "min_wal_size", "checkpoint_timeout", "checkpoint_completion_target",
            "wal_buffers", "full_page_writes", "synchronous_commit", "fsync", "wal_compression", "work_mem",
            "effective_io_concurrency", "bgwriter_lru_maxpages", "max_connections", "data_checksums")


def major_version(version: str | None) -> int | None:
    """15 for "15.4", "15.4 (Debian 15.4-1)" or "15devel"; 9 for "9.6.24" (a 9.x major is older than 10)."""
    m = re.match(r"\s*(\d+)", version or "")
    return int(m.group(1)) if m else None


# The major version each statistic came with.
SINCE = {
    "pg_stat_wal": 14,
    "pg_stat_io": 16,
    "pg_stat_checkpointer": 17,
    "pg_stat_io_wal": 18,  # WAL I/O rows (object 'wal') in pg_stat_io
}


def capabilities(version: str | None, preload_libraries: str | None,
                 statements_view: bool | None = None) -> dict[str, bool]:
    """Which statistics the server has, for meta.json: what explain and compare may expect of it.
    {} when the version is unknown (nothing to say, rather than "absent"). ``statements_view``: whether
    the pg_stat_statements extension is created in the benchmark's database (None: not looked at);
    its view is readable only when it is and the library is preloaded."""
    major = major_version(version)
    if major is None:
        return {}
    loaded = {lib.strip().strip('"') for lib in (preload_libraries or "").split(",")}
    preloaded = "pg_stat_statements" in loaded
    out = {**{cap: major >= since for cap, since in SINCE.items()},
           "pg_stat_statements": preloaded and statements_view is not False}
    if preloaded and statements_view is False:
        out["pg_stat_statements_preloaded"] = True  # what is missing is the extension: missing_reason says so
    return out


def missing_reason(capability: str, version: str | None, recorded: Mapping[str, bool] | None = None) -> str:
    """Why a server lacks a capability, for explain's report: "pg_stat_wal needs PostgreSQL 14 (server 13.4)".
    ``recorded``: the run's capabilities, which say whether pg_stat_statements was preloaded."""
    if capability in SINCE:
        return f"{capability} needs PostgreSQL {SINCE[capability]} (server {version or 'of unknown version'})"
    if capability == "pg_stat_statements":
        if (recorded or {}).get("pg_stat_statements_preloaded"):
            return "pg_stat_statements is preloaded but not created in the benchmark's database (CREATE EXTENSION pg_stat_statements)"
        return "pg_stat_statements is not in shared_preload_libraries"
    return f"{capability} is not available on the server"


def _one(conn, sql: str) -> Any:
    row = conn.execute(sql).fetchone()
    return row[0] if row else None


def describe_server(env: Mapping[str, str]) -> dict:
    """Server version, pgbench scale and settings of the server ``env`` points at, best effort.

    One connection, a few ms; a server that does not answer costs at most the connect timeout."""
    # psycopg costs ~0.2 s to import: attach, which never connects, does not pay for it.
    import psycopg

    from benchwatch.engines.postgresql import connect

    # env holds the user's PG* variables and the stack's: the server pgbench will reach.
    params = connect.params_from_env(env)
    out: dict = {}
    try:
        with connect.connect(params) as conn:
            conn.execute("SET statement_timeout = '5s'")  # a lock on pgbench_branches must not hold the run
            version = _one(conn, "SELECT current_setting('server_version')")
            if version:
                out["server_version"] = str(version).split()[0]
            preload = _one(conn, "SELECT current_setting('shared_preload_libraries')")
            view = bool(_one(conn, "SELECT count(*) FROM pg_extension WHERE extname = 'pg_stat_statements'"))
            caps = capabilities(out.get("server_version"), preload, view)
            if caps:
                out["capabilities"] = caps
            rows = conn.execute("SELECT name, setting || coalesce(' ' || unit, '') FROM pg_settings "
                                "WHERE name = ANY(%s) ORDER BY 1", (list(SETTINGS),)).fetchall()
            if rows:
                out["settings"] = dict(rows)
            # Every setting someone chose (config file, command line, ALTER SYSTEM, a role's default...):
            # what "what changed" between two runs compares. 'override' is initdb's or the platform's choice;
            # 'client' and 'session' are this connection's own (its application_name, the SET above).
            rows = conn.execute("SELECT name, setting || coalesce(' ' || unit, '') FROM pg_settings "
                                "WHERE source NOT IN ('default', 'override', 'client', 'session') ORDER BY 1").fetchall()
            if rows:
                out["server_settings"] = secrets.redact_settings(dict(rows))  # primary_conninfo's password
            datadir = _one(conn, "SELECT setting FROM pg_settings WHERE name = 'data_directory'")  # superusers only
            if datadir:
                out["data_directory"] = str(datadir)
                fs = filesystem(str(datadir))
                if fs:
                    out["data_filesystem"] = fs
            try:
                scale = _one(conn, "SELECT count(*) FROM pgbench_branches")
            except psycopg.errors.UndefinedTable:
                scale = None  # not initialised yet, or a custom script's own tables
            if scale is not None:
                out["scale"] = str(scale)
    except psycopg.Error:
        pass  # metadata is best effort: the run itself reports connection problems
    return out
