"""A PostgreSQL process's kind from its process title (every one is ``postgres`` to the kernel).

The postmaster keeps the command line it was started with (``/usr/lib/postgresql/15/bin/postgres -D
...``); each child sets its title to ``postgres: [cluster_name: ]WHAT``, where WHAT is its
backend type (``checkpointer``, ``walwriter`` ...) or, for a client's backend, ``user database
host(port) state``: the same words as pg_stat_activity's backend_type, where it has them.
"""

from __future__ import annotations

import os

# Titles of the auxiliary and background processes (PostgreSQL 10 to 16), longest first where one starts another.
KINDS = ("autovacuum launcher", "autovacuum worker", "logical replication launcher", "logical replication worker",
         "logical replication apply worker", "logical replication tablesync worker", "logical replication parallel worker",
         "background writer", "checkpointer", "walwriter", "walsender", "walreceiver", "wal sender", "archiver",
         "stats collector", "startup", "logger", "parallel worker", "io worker", "walsummarizer", "slotsync worker")


def process_kind(cmdline: str) -> str | None:
    """The kind of a ``postgres`` process from its /proc/PID/cmdline (NULs as spaces); None for an empty one."""
    title = " ".join(cmdline.replace("\0", " ").split())
    if not title:
        return None
    if not title.startswith("postgres:"):
        return "postmaster"  # its title is the command line that started it
    rest = title[len("postgres:"):].strip()
    candidates = [rest]
    head, sep, tail = rest.partition(": ")
    if sep and " " not in head.replace("/", ""):
        candidates.append(tail)  # "15/main: checkpointer": cluster_name first
    for text in candidates:
        for kind in KINDS:
            if text == kind or text.startswith(kind + " "):
                return "walsender" if kind == "wal sender" else kind
        if text.startswith("bgworker:"):
            return "background worker"
    return "client backend"


def postmaster_pid(data_directory: str | None) -> int | None:
    """The postmaster's pid, the first line of its data directory's postmaster.pid (None: no such file)."""
    if not data_directory:
        return None
    try:
        with open(os.path.join(data_directory, "postmaster.pid"), encoding="utf-8") as f:
            return int(f.readline().strip())
    except (OSError, ValueError):
        return None
