"""How a go-ycsb run reaches the stack's server, never with a password in its argv.

go-ycsb reads its connection from properties (``pg.host``, ``mysql.password``, ...), given in a
property file (``-P``) or with ``-p`` (argv: the process table shows it to every user), and prints
every property it was given when it starts (benchwatch hides the password in that copy:
``Goycsb.output_redactor``).

* PostgreSQL: ``pg.host``, ``pg.port``, ``pg.user`` and ``pg.db`` from the PG* variables the stack
  gives (``PGHOST``, ...), as ``-p``; no password at all: go-ycsb leaves an empty ``pg.password`` out
  of its DSN, so lib/pq 1.1.1 reads the password from ``PGPASSFILE``, which ``run`` sets (the stack's
  0600 passfile).
* MariaDB: the stack's benchmark user, as its [client] file says, written to a 0600 property file
  beside the stack's other secrets (``bw-goycsb-connection-<target>.properties``) given with ``-P``.

Nothing is added when the argv or one of its property files already sets a connection property:
the user chose the server. And go-ycsb's debug listener (``debug.pprof``, by default ``:6060``, every
interface) is moved to 127.0.0.1 unless the user set it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from benchwatch.loadgens.goycsb import args as goycsb_args

HOST = "127.0.0.1"
PPROF = "debug.pprof"
# A Java-style properties line as magiconair/properties reads the simple cases: key=value, key: value, key value.
_LINE = re.compile(r"^\s*([^=:\s#!][^=:\s]*)\s*[=:\s]\s*(.*)$")


def read_properties(path: str) -> dict[str, str]:
    """A property file's keys and values, as far as benchwatch needs them (no escapes, no continuations);
    {} when it cannot be read (go-ycsb will say so itself)."""
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = _LINE.match(line.rstrip("\n"))
                if m:
                    out[m.group(1)] = m.group(2).strip()
    except OSError:
        return {}
    return out


def _given(parsed: goycsb_args.GoycsbArgs) -> set[str]:
    """Every property the argv sets, by -p or in its property files."""
    keys = set(parsed.props)
    for path in parsed.property_files:
        keys |= set(read_properties(path))
    return keys


def _pprof(given: set[str]) -> list[str]:
    return [] if PPROF in given else ["-p", f"{PPROF}={HOST}:0"]


def pg_connection(argv: list[str], env: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """argv with ``-p pg.host=... -p pg.port=... -p pg.user=... -p pg.db=...`` from ``env`` added (and the debug
    listener on 127.0.0.1), and what was added; nothing for another database or a connection already given."""
    parsed = goycsb_args.parse_goycsb_args(argv)
    if not parsed.runs or parsed.engine != "postgresql":
        return list(argv), []
    given = _given(parsed)
    added = _pprof(given)
    if not any(k.startswith("pg.") for k in given):
        host = env.get("PGHOST", "")
        # go-ycsb puts the host in a URL: a socket directory cannot go there; the stack listens on 127.0.0.1 too.
        for key, value in (("pg.host", HOST if host.startswith("/") or not host else host), ("pg.port", env.get("PGPORT")),
                           ("pg.user", env.get("PGUSER")), ("pg.db", env.get("PGDATABASE"))):
            if value:
                added += ["-p", f"{key}={value}"]
    if not added:
        return list(argv), []
    end = argv.index("--") if "--" in argv else len(argv)
    return [*argv[:end], *added, *argv[end:]], added


def _write_private(path: str, text: str) -> None:
    """A 0600 file, replaced whole (a run reading the old one meanwhile reads it complete)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def connection_file(target: Any) -> str:
    return target.path("secrets", f"{goycsb_args.CONNECTION_FILE_PREFIX}-{target.name}.properties")


def mysql_connection(argv: list[str], target: Any) -> tuple[list[str], list[str]]:
    """argv with ``-P <0600 file>`` of the stack's benchmark user on ``target`` first (and the debug listener
    on 127.0.0.1), and what was added; nothing for another database or a connection already given."""
    parsed = goycsb_args.parse_goycsb_args(argv)
    if not parsed.runs or parsed.engine != "mysql":
        return list(argv), []
    given = _given(parsed)
    added = _pprof(given)
    if not any(k.startswith("mysql.") for k in given) and os.path.exists(target.client_file):
        params = target.client_params()
        # go-ycsb's MySQL driver speaks TCP only: a socket in the [client] file becomes the server's port.
        host = params.get("host") if params.get("host") not in (None, "", "localhost") else HOST
        props = {"mysql.host": host, "mysql.port": params.get("port") or str(target.port),
                 "mysql.user": params.get("user"), "mysql.password": params.get("password"),
                 "mysql.db": params.get("database")}
        path = connection_file(target)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        _write_private(path, "".join(f"{k}={v}\n" for k, v in props.items() if v))
        added = ["-P", path, *added]
    if not added:
        return list(argv), []
    end = argv.index("--") if "--" in argv else len(argv)
    return [*argv[:end], *added, *argv[end:]], added
