"""Talking to PostgreSQL: one psycopg connection per job, parameters as keywords.

Values (a database name, a password) never go into SQL text or a command line:
SQL takes them as query parameters or as quoted identifiers (psycopg.sql), and
the connection takes them as keywords, so nothing shows them in ``ps``.
psycopg's errors name host, port, user and database, never the password.
"""

from __future__ import annotations

from collections.abc import Mapping

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

# Seconds. Every caller is a short job (a readiness poll, one catalog query) that
# must not hang on a server that accepts TCP but never answers; libpq's floor is 2.
CONNECT_TIMEOUT = 3

# libpq's environment variables and the keywords they stand for ("Environment
# Variables" in the libpq chapter), for describing the server a child process
# will reach with that environment.
ENV_KEYWORDS = {
    "PGHOST": "host", "PGHOSTADDR": "hostaddr", "PGPORT": "port", "PGDATABASE": "dbname",
    "PGUSER": "user", "PGPASSWORD": "password", "PGPASSFILE": "passfile", "PGSERVICE": "service",
    "PGSERVICEFILE": "servicefile", "PGOPTIONS": "options", "PGAPPNAME": "application_name",
    "PGSSLMODE": "sslmode", "PGSSLCERT": "sslcert", "PGSSLKEY": "sslkey", "PGSSLROOTCERT": "sslrootcert",
    "PGSSLCRL": "sslcrl", "PGCHANNELBINDING": "channel_binding", "PGGSSENCMODE": "gssencmode",
    "PGCONNECT_TIMEOUT": "connect_timeout", "PGTARGETSESSIONATTRS": "target_session_attrs",
}


def params_from_env(env: Mapping[str, str]) -> dict[str, str]:
    """Connection keywords from PG* variables, as libpq would read them in a process with ``env``."""
    return {kw: env[var] for var, kw in ENV_KEYWORDS.items() if env.get(var)}


def connect(params: Mapping[str, str], *, dbname: str | None = None,
            timeout: int = CONNECT_TIMEOUT) -> psycopg.Connection:
    """An autocommit connection (CREATE DATABASE cannot run in a transaction); close it after the job."""
    kwargs = dict(params)
    if dbname is not None:
        kwargs["dbname"] = dbname
    kwargs.setdefault("connect_timeout", str(timeout))
    kwargs.setdefault("fallback_application_name", "benchwatch")
    return psycopg.connect(make_conninfo("", **kwargs), autocommit=True)


def ready(params: Mapping[str, str], *, dbname: str | None = "postgres") -> bool:
    """The server accepts this login and answers a query (not only a TCP connection)."""
    try:
        with connect(params, dbname=dbname) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


def ensure_database(params: Mapping[str, str], name: str) -> bool:
    """Create database ``name`` unless it exists, connected to the maintenance database; True if created."""
    with connect(params, dbname="postgres") as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            return False
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return True


def ensure_statements_extension(params: Mapping[str, str]) -> None:
    """pg_stat_statements' view in the benchmark's database (``params``' dbname), where the statements
    collector reads it; the library must be preloaded, which only the embedded server's settings ensure."""
    with connect(params) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
