"""Its options of every command acting on a stack: flags, BENCHWATCH_* variables and stack.json keys are contracts."""

from __future__ import annotations

from benchwatch.engines import StackOption

DSN = "pg_dsn"   # an existing server instead of the embedded one; never saved (it may carry a password)

STACK_OPTIONS = (
    StackOption("--pg-dsn", DSN, env="BENCHWATCH_PG_DSN", saved=False,
                help="use this existing PostgreSQL instead of the embedded one (env BENCHWATCH_PG_DSN; prefer a pgpass "
                     "file to a password here)"),
    # Read by demo --shards itself (its instances are not the stack's).
    StackOption("--instances", None, type=int,
                help="with demo --shards: PostgreSQL instances holding the shards (default 4)"),
)
