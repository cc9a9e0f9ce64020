"""How a go-tpc run reaches the stack's MariaDB: a throwaway user, since go-tpc takes a password only as ``-p``.

go-tpc v1.0.7 reads no option file and no environment variable for its
password: ``-p PASSWORD`` is the only way, and argv is world-readable in the
process table (``ps -o args``) for as long as go-tpc runs. So on the embedded
MariaDB each run gets its own user, ``bw_gotpc_<pid>_<random>``@``127.0.0.1``
with a random password and privileges on the run's database only, created
through the server's socket by its administrator (as ``up`` bootstraps it) and
dropped when the run ends, however it ends (users of runs killed with SIGKILL
are dropped by the next run, once their wrapper's pid is gone). The password
is in go-tpc's argv and nowhere else: benchwatch saves and prints that argv
with ``-p *****``.

A server the stack does not run (``--mysql-defaults-file``) gets nothing added:
its password would have to go into go-tpc's argv, visible to every user of the
machine; give go-tpc ``-H``/``-P``/``-U``/``-p`` yourself (docs/gotpc.md).
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable
from typing import Any

from benchwatch.loadgens.gotpc import args as gotpc_args
from benchwatch.util import processes
from benchwatch.util.net import LISTEN_HOST

USER_PREFIX = "bw_gotpc_"
DATABASE = "tpcc"
# Options that say which server or user to use: given any, the user chose the connection.
_CONNECTION = ("host", "port", "user", "password")
_USER = re.compile(r"^" + USER_PREFIX + r"(\d+)_[0-9a-f]+$")


def _quote(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _ident(s: str) -> str:
    return "`" + s.replace("`", "``") + "`"


def stale_users(listed: str) -> list[str]:
    """Users of runs whose wrapper is gone (killed before it could drop them), from ``SELECT User`` output."""
    out = []
    for name in listed.split():
        m = _USER.match(name)
        if m and not processes.process_alive(int(m.group(1))):
            out.append(name)
    return out


def gotpc_connection(argv: list[str], target: Any, notice: Callable[[str], None]) -> tuple[list[str], Callable[[], None] | None]:
    """argv with ``-H -P -U -p [-D tpcc]`` of a new throwaway user first, and the call that drops the user."""
    parsed = gotpc_args.parse_gotpc_args(argv)
    if not parsed.runs or any(name in parsed.options for name in _CONNECTION):
        return list(argv), None
    if not target.embedded:
        notice("go-tpc takes its password only as -p, which every user of this machine sees in the process table: "
               "benchwatch adds no connection to your own server; give go-tpc -H, -P, -U and -p yourself")
        return list(argv), None
    listed = target.admin_sql(f"SELECT User FROM mysql.user WHERE User LIKE '{USER_PREFIX}%' AND Host = '{LISTEN_HOST}';")
    drop = [f"DROP USER IF EXISTS {_quote(u)}@{_quote(LISTEN_HOST)};" for u in stale_users(listed.stdout)] if listed.returncode == 0 else []
    user = f"{USER_PREFIX}{os.getpid()}_{secrets.token_hex(4)}"
    password = secrets.token_urlsafe(24)
    database = parsed.options.get("db") or DATABASE
    sql = "\n".join([*drop, f"CREATE USER {_quote(user)}@{_quote(LISTEN_HOST)} IDENTIFIED BY {_quote(password)};",
                     f"GRANT ALL PRIVILEGES ON {_ident(database)}.* TO {_quote(user)}@{_quote(LISTEN_HOST)};"]) + "\n"
    drop_sql = f"DROP USER IF EXISTS {_quote(user)}@{_quote(LISTEN_HOST)};\n"
    try:
        r = target.admin_sql(sql)
    except BaseException:
        # The client timed out or could not run: CREATE USER may have gone through all the same.
        target.admin_sql(drop_sql)
        raise
    if r.returncode != 0:
        # The client stopped part-way (Ctrl-C reaches it too: it kills its statement): the user may exist.
        target.admin_sql(drop_sql)
        notice(f"could not create a throwaway user for go-tpc on the stack's MariaDB {target.name}: "
               f"{(r.stderr.strip().splitlines() or ['?'])[-1]}; passing the arguments unchanged")
        return list(argv), None
    added = ["-H", LISTEN_HOST, "-P", str(target.port), "-U", user, "-p", password]
    if "db" not in parsed.options:
        added += ["-D", database]
    notice(f"added {' '.join(gotpc_args.redact_argv(added))} to the go-tpc arguments (the stack's MariaDB {target.name}; "
           f"{user} is a throwaway user for this run, limited to {LISTEN_HOST} and the {database} database, dropped when "
           "it ends: go-tpc takes a password only in its argv, which the process table shows)")

    def drop_user() -> None:
        r = target.admin_sql(drop_sql)
        if r.returncode != 0:
            notice(f"could not drop go-tpc's throwaway user {user}: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return added + list(argv), drop_user
