"""``benchwatch env``: the stack's PG* variables as shell lines, for ``eval "$(benchwatch env)"``."""

from __future__ import annotations

from benchwatch.commands import Context, command
from benchwatch.commands.psql import shell_exports, stack_pg_env


@command("env", help='PG* variables of the stack\'s server, for eval "$(benchwatch env)"')
def cmd_env(ctx: Context) -> int:
    pg_env = stack_pg_env(ctx)
    if pg_env is None:
        return 1
    ctx.stdout.write(shell_exports(pg_env))
    return 0
