"""The results database's DSN: given by ``up --results-dsn`` or BENCHWATCH_RESULTS_DSN, kept in stack.json, so
it must carry no password. libpq reads the password from a 0600 pgpass file (PGPASSFILE, ~/.pgpass, or the
DSN's ``passfile``), never from argv or a log."""

from __future__ import annotations

import os
from typing import Any

# What `--results-dsn off` (or BENCHWATCH_RESULTS_DSN=off) means: no results database at all, not even the
# stack's own (a throwaway stack of the tests, a host that keeps its runs to itself).
OFF = "off"
# What `--results-dsn own` means: the stack's own results database again (after a DSN kept in stack.json).
OWN = "own"


class DsnError(ValueError):
    """A DSN that cannot be used as given; the message says why and never repeats a password."""


def _parse(dsn: str) -> dict[str, str]:
    from psycopg import conninfo

    try:
        return {k: str(v) for k, v in conninfo.conninfo_to_dict(dsn).items()}
    except Exception as e:  # psycopg.ProgrammingError: the message may quote the DSN, password and all
        raise DsnError("the results DSN is not a libpq connection string or URI "
                       f"({type(e).__name__}); e.g. 'host=db.example port=5432 dbname=benchwatch user=bench' "
                       "or postgresql://bench@db.example/benchwatch") from None


def check(dsn: str) -> str:
    """The DSN as given, once it is known to carry no password; :class:`DsnError` otherwise."""
    params = _parse(dsn)
    if "password" in params:
        raise DsnError("the results DSN carries a password: it would be kept in stack.json and seen in argv. "
                       "Give it without, and put the password in a 0600 pgpass file "
                       "(PGPASSFILE, ~/.pgpass, or passfile=PATH in the DSN)")
    return dsn


def with_passfile(dsn: str, passfile: str | None) -> str:
    """The DSN naming ``passfile`` (absolute) for its password, unless it names one already or none is given."""
    if not passfile:
        return dsn
    from psycopg import conninfo

    params = _parse(dsn)
    if "passfile" in params:
        return dsn
    return conninfo.make_conninfo(dsn, passfile=os.path.abspath(passfile))


def connect_options(dsn: str) -> dict[str, Any]:
    """What a connection to ``dsn`` adds to it: for a DSN that names its passfile, an empty password, so that
    libpq reads that file. Else PGPASSWORD in the environment would win over it (libpq takes the password from
    the environment before any file), and PGPASSWORD is often the benchmark server's, not this database's
    (docker-compose's benchwatch service has it; so may any shell that runs pgbench)."""
    return {"password": ""} if "passfile" in _parse(dsn) else {}


def public(dsn: str) -> str:
    """The DSN for messages and status: its parts without any password (which :func:`check` refuses anyway)."""
    from psycopg import conninfo

    try:
        params = _parse(dsn)
    except DsnError:
        return "(not a valid DSN)"
    params.pop("password", None)
    return conninfo.make_conninfo(**params)


def local(port: int, passfile: str, user: str = "postgres", dbname: str = "benchwatch_results") -> str:
    """The DSN of the stack's own results database: 127.0.0.1, its port, the password in its 0600 pgpass."""
    from psycopg import conninfo

    return conninfo.make_conninfo(host="127.0.0.1", port=str(port), user=user, dbname=dbname, passfile=passfile,
                                  sslmode="disable")


def pgpass_password(passfile: str, host: str, port: str, dbname: str, user: str) -> str | None:
    """The password libpq would take from a pgpass file for these connection parts: the first line whose
    fields (hostname:port:database:username:password, ``*`` for any, ``\\:`` and ``\\\\`` escaped) match; None."""
    try:
        with open(passfile, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    wanted = (host, port, dbname, user)
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields: list[str] = []
        field: list[str] = []
        escaped = False
        for ch in line:
            if escaped:
                field.append(ch)
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == ":" and len(fields) < 4:
                fields.append("".join(field))
                field = []
            else:
                field.append(ch)
        fields.append("".join(field))
        if len(fields) == 5 and all(f in ("*", w) for f, w in zip(fields[:4], wanted)):
            return fields[4]
    return None


def grafana_environment(dsn: str | None) -> dict[str, str]:
    """What the provisioned PostgreSQL data source of Grafana reads (grafana/provisioning/datasources/
    benchwatch.yml: BENCHWATCH_RESULTS_DB_*), for the results database at ``dsn``: its address, database, user,
    sslmode, and the password libpq would find in its pgpass file (for Grafana's environment only: Grafana has
    no libpq to read the file itself). Empty without a database."""
    if not dsn or dsn == OFF:
        return {}
    import getpass

    params = _parse(dsn)
    host = params.get("hostaddr") or params.get("host") or "localhost"
    if host.startswith("/"):  # a socket directory: Grafana connects over TCP
        host = "localhost"
    port = params.get("port") or "5432"
    user = params.get("user") or getpass.getuser()
    dbname = params.get("dbname") or user
    passfile = params.get("passfile") or os.environ.get("PGPASSFILE") or os.path.expanduser("~/.pgpass")
    env = {"BENCHWATCH_RESULTS_DB_ADDRESS": f"{host}:{port}", "BENCHWATCH_RESULTS_DB_NAME": dbname,
           "BENCHWATCH_RESULTS_DB_USER": user,
           "BENCHWATCH_RESULTS_DB_SSLMODE": params.get("sslmode") or "prefer"}
    password = pgpass_password(passfile, params.get("host") or "localhost", port, dbname, user)
    if password is not None:
        env["BENCHWATCH_RESULTS_DB_PASSWORD"] = password
    return env
