"""SQL through the mariadb (or mysql) command-line client, the one way benchwatch talks SQL to MariaDB.

The statements go on the client's stdin and the connection comes from an option
file (``--defaults-file``, 0600) or the embedded server's socket as its
administrator: a password is never in argv, where every user of the machine
sees it (``ps -o args``). Rows come back tab-separated without column names
(``-N -B``).

The engine's own modules call :func:`run_sql`; code outside this folder (a load
generator making a user for its run, the demo) reaches it through a target's
``sql``/``admin_sql`` methods (``server.MySQLTarget``), so that no folder
imports another's.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Sequence


class MySQLError(Exception):
    """One clear line naming the fix."""


def binary(name: str) -> str | None:
    return shutil.which(name) or (f"/usr/sbin/{name}" if os.path.exists(f"/usr/sbin/{name}") else None)


def client_binary() -> str:
    path = binary("mariadb") or binary("mysql")
    if path is None:
        raise MySQLError("the mariadb client is not installed: apt-get install mariadb-client")
    return path


def as_defaults_file(path: str) -> list[str]:
    """The connection of an option file's [client] section (the client wants it as its first option)."""
    return [f"--defaults-file={path}"]


def as_socket_admin(socket: str) -> list[str]:
    """The embedded server's administrator over its socket: as root, root@localhost by unix_socket
    authentication; otherwise the account mariadb-install-db made for the OS user."""
    user = "root" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
    return ["--no-defaults", f"--socket={socket}", "--protocol=socket", "-u", user]


def run_sql(connection: Sequence[str], sql: str, *, timeout: float = 60.0,
            connect_timeout: int | None = None) -> subprocess.CompletedProcess[str]:
    """``sql`` run by the client with ``connection`` (:func:`as_defaults_file`, :func:`as_socket_admin`).

    Raises MySQLError when no client is installed, subprocess.TimeoutExpired after ``timeout``; the
    caller reads the exit code (:func:`last_error` for the message)."""
    argv = [client_binary(), *connection, "-N", "-B"]
    if connect_timeout is not None:
        argv.append(f"--connect-timeout={connect_timeout}")
    return subprocess.run(argv, input=sql, capture_output=True, text=True, timeout=timeout)


def rows(output: str) -> list[list[str]]:
    """The client's batch output as rows of fields."""
    return [line.split("\t") for line in output.splitlines() if line]


def last_error(result: subprocess.CompletedProcess[str]) -> str:
    """The line of the client's stderr that says what went wrong (its last)."""
    return (result.stderr.strip().splitlines() or [f"exit code {result.returncode}"])[-1]
