"""Its subcommands: ``benchwatch psql`` (the real psql on the stack's server, with the stack's PG* variables)
and ``benchwatch env`` (those variables as shell lines, for ``eval "$(benchwatch env)"``). Registered by
benchwatch.commands through ``Engine.commands``; a handler gets the command's Context."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from typing import Any

from benchwatch.engines import Engine, EngineCommand

# What picks the server a libpq client reaches: cleared so that psql/env mean
# the stack's server whatever the shell had (PGPASSWORD would beat the pgpass file).
# PGSSLMODE is left alone: clearing a user's "require" would weaken it.
PG_TARGET_VARS = ("PGHOST", "PGHOSTADDR", "PGPORT", "PGUSER", "PGDATABASE", "PGPASSWORD", "PGPASSFILE", "PGSERVICE")


def stack_pg_env(engine: Engine, ctx: Any) -> dict[str, str] | None:
    """The stack's PG* variables (password in the pgpass file), or None with the reason said."""
    stack = ctx.stack
    if not os.path.exists(stack.cfg.stack_file):
        ctx.say(f"no stack in {stack.cfg.state_dir}: start it with benchwatch up")
        return None
    return engine.stack_part(stack).client_env()


def shell_exports(pg_env: dict[str, str]) -> str:
    """POSIX shell lines that set exactly these PG* variables and clear the other ones that pick a server."""
    lines = [f"export {key}={shlex.quote(value)}" for key, value in sorted(pg_env.items())]
    cleared = [k for k in PG_TARGET_VARS if k not in pg_env]
    if cleared:
        lines.append("unset " + " ".join(cleared))
    return "\n".join(lines) + "\n"


def _psql_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("args", nargs=argparse.REMAINDER, help="passed to psql unchanged")


def cmd_psql(engine: Engine, ctx: Any) -> int:
    from benchwatch.engines.postgresql.server import pg_bindir

    pg_env = stack_pg_env(engine, ctx)
    if pg_env is None:
        return 1
    bindir = pg_bindir()
    psql = os.path.join(bindir, "psql") if bindir and os.path.exists(os.path.join(bindir, "psql")) else shutil.which("psql")
    if not psql:
        ctx.say("psql is not installed: apt-get install postgresql-client")
        return 127
    argv = list(ctx.args.args)
    if argv and argv[0] == "--":
        argv = argv[1:]
    env = {k: v for k, v in os.environ.items() if k not in PG_TARGET_VARS}
    env.update(pg_env)
    for stream in (sys.stdout, sys.stderr, ctx.stdout, ctx.stderr):
        stream.flush()
    os.execve(psql, [psql, *argv], env)  # psql owns the terminal; its exit code is ours


def cmd_env(engine: Engine, ctx: Any) -> int:
    pg_env = stack_pg_env(engine, ctx)
    if pg_env is None:
        return 1
    ctx.stdout.write(shell_exports(pg_env))
    return 0


def commands(engine: Engine) -> list[EngineCommand]:
    """psql and env, on ``engine``'s part of the stack (the stack's PostgreSQL, whichever engine it runs)."""
    return [
        EngineCommand("psql", "psql connected to the stack's server: benchwatch psql [PSQL ARGS]",
                      lambda ctx: cmd_psql(engine, ctx), arguments=_psql_arguments, add_help=False, passthrough=True,
                      after="demo"),
        EngineCommand("env", 'PG* variables of the stack\'s server, for eval "$(benchwatch env)"',
                      lambda ctx: cmd_env(engine, ctx), after="agent"),
    ]
