"""What a PostgreSQL server says about itself at the start of a run: version, settings, pgbench scale."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Settings that explain a TPS curve: checkpoint spacing, cache size, WAL volume.
SETTINGS = ("shared_buffers", "max_wal_size", "min_wal_size", "checkpoint_timeout", "checkpoint_completion_target",
            "wal_buffers", "full_page_writes", "synchronous_commit", "fsync", "wal_compression", "work_mem",
            "effective_io_concurrency", "bgwriter_lru_maxpages", "max_connections", "data_checksums")


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
            rows = conn.execute("SELECT name, setting || coalesce(' ' || unit, '') FROM pg_settings "
                                "WHERE name = ANY(%s) ORDER BY 1", (list(SETTINGS),)).fetchall()
            if rows:
                out["settings"] = dict(rows)
            try:
                scale = _one(conn, "SELECT count(*) FROM pgbench_branches")
            except psycopg.errors.UndefinedTable:
                scale = None  # not initialised yet, or a custom script's own tables
            if scale is not None:
                out["scale"] = str(scale)
    except psycopg.Error:
        pass  # metadata is best effort: the run itself reports connection problems
    return out
