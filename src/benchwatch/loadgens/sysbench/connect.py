"""How a sysbench run reaches the stack's MySQL: its --config-file, never the password in argv."""

from __future__ import annotations

from collections.abc import Mapping

from benchwatch.loadgens.sysbench import args as sysbench_args


def sysbench_connection(argv: list[str], config_file: str) -> tuple[list[str], list[str]]:
    """argv with ``--config-file=<the stack's sysbench.cnf>`` first, and what was added.

    Added unless the user gave a config file of their own or drives another
    database (``--db-driver`` other than mysql). Options on the command line
    win over the file's (measured with sysbench 1.0.20), so a user's own
    ``--mysql-host`` or ``--mysql-user`` still points the run elsewhere.
    """
    parsed = sysbench_args.parse_sysbench_args(argv)
    if "config-file" in parsed.options or parsed.options.get("db-driver", "mysql") != "mysql":
        return list(argv), []
    if "help" in parsed.options or "version" in parsed.options or parsed.command == "help":
        return list(argv), []
    added = [f"--config-file={config_file}"]
    return added + list(argv), added


# --pgsql-* option -> the libpq variable that run sets for the stack's PostgreSQL.
PGSQL_OPTIONS = {"pgsql-host": "PGHOST", "pgsql-port": "PGPORT", "pgsql-user": "PGUSER", "pgsql-db": "PGDATABASE"}


def pgsql_connection(argv: list[str], env: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """argv with the --pgsql-* options it lacks taken from ``env`` (PGHOST, PGPORT, PGUSER, PGDATABASE), and
    what was added; only for --db-driver=pgsql, and never a password (libpq reads it from PGPASSFILE)."""
    parsed = sysbench_args.parse_sysbench_args(argv)
    if parsed.options.get("db-driver") != "pgsql" or "config-file" in parsed.options:
        return list(argv), []
    if "help" in parsed.options or "version" in parsed.options or parsed.command == "help":
        return list(argv), []
    added = [f"--{option}={env[var]}" for option, var in PGSQL_OPTIONS.items()
             if option not in parsed.options and env.get(var)]
    return added + list(argv), added
