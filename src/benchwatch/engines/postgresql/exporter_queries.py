"""postgres_exporter's custom queries for the server it watches: ``exporters/postgres_exporter/queries.yaml`` as it
is, or, for a server whose version is known, a copy without what that version does not need.

The file serves PostgreSQL 14 to 18 alike: where the views changed (18 moved WAL I/O to pg_stat_io, 17 split
pg_stat_checkpointer out of pg_stat_bgwriter), a DO block finds the newer view only where it exists. PL/pgSQL
compiles such an anonymous block at every execution: the two of them cost the server 0.6-0.8 ms of CPU a
scrape, one scrape a second (issue 32; postgres_exporter scraped back to back with each file, side by side).
A server of 14-17 is asked pg_stat_wal's columns directly, and one before 17 is not asked for
pg_stat_checkpointer at all (there the query returns no row; postgres_exporter's own pg_stat_bgwriter_*_total
carry the counters). Same metric names and help; only the SQL differs.

docker-compose mounts the file as it is (its server's version is the image's), and a server that cannot be
asked its version when the exporter starts gets it as it is too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import yaml

from benchwatch import resources
from benchwatch.util.private import write_private

# query name -> (first version it applies to, first version it does not, the SQL there; None: leave the query out)
BY_VERSION: dict[str, tuple[int, int, str | None]] = {
    "pg_stat_wal": (140000, 180000,
                    "SELECT wal_records, wal_fpi, wal_bytes, wal_buffers_full, wal_write, wal_sync, wal_write_time,\n"
                    "       wal_sync_time\n"
                    "FROM pg_catalog.pg_stat_wal;\n"),
    "pg_stat_checkpointer": (0, 170000, None),
}


def universal() -> str:
    return resources.path("exporters", "postgres_exporter", "queries.yaml")


def server_version_num(params: Mapping[str, str]) -> int | None:
    """The server's ``server_version_num``, or None when it cannot be asked now (down, refused: the file as it is
    serves every version)."""
    import psycopg

    from benchwatch.engines.postgresql import connect

    try:
        with connect.connect(params, timeout=5) as conn:
            row = conn.execute("SELECT current_setting('server_version_num')::int").fetchone()
    except psycopg.Error:
        return None
    return int(row[0]) if row else None


def for_version(version_num: int | None, path: str) -> str:
    """The queries file for a server of ``version_num``: written at ``path`` when it differs from the file as it
    is, else that file's own path."""
    if version_num is None:
        return universal()
    changes = {name: sql for name, (first, after, sql) in BY_VERSION.items() if first <= version_num < after}
    if not changes:
        return universal()
    with open(universal(), encoding="utf-8") as f:
        queries = yaml.safe_load(f)
    for name, sql in changes.items():
        if sql is None:
            queries.pop(name, None)
        else:
            queries[name] = {**queries[name], "query": sql}
    header = (f"# Written by benchwatch for a server of version {version_num} from {universal()}\n"
              "# (benchwatch/engines/postgresql/exporter_queries.py says what differs and why).\n")
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    write_private(path, header + yaml.safe_dump(queries, sort_keys=False, allow_unicode=True, width=120))
    return path


def for_server(params: Mapping[str, str], path: str) -> str:
    """:func:`for_version` of the server ``params`` connect to."""
    return for_version(server_version_num(params), path)
