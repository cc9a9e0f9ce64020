"""A PostgreSQL server's files and programs: the settings benchwatch gives a server it starts, initdb, the
bin directory, the OS user. Shared by the stack's embedded server (embedded.py) and a sweep's other builds
(builds.py), which therefore import it rather than each other."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from collections.abc import Mapping

from benchwatch.util.errors import StackError
from benchwatch.util.private import write_private

SERVER = "postgres"
EXPORTER = "postgres_exporter"

# Embedded server settings: checkpoints often enough that a one-minute demo shows them.
PG_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "log_checkpoints": "on",
    # Every autovacuum and autoanalyze run, with its duration (explain's autovacuum cause, at the
    # log's own times). 0 rather than a threshold: a run is logged once, when it ends, in ~15 lines,
    # and autovacuum_naptime (1 min) keeps them to a few per minute per table that changes; the
    # short routine runs (pgbench_branches every minute) are the base rate a long one is held against.
    "log_autovacuum_min_duration": "0",
    "log_line_prefix": "'%m [%p] '",
    "logging_collector": "off",
    "log_destination": "'stderr'",
    "checkpoint_timeout": "'30s'",
    "max_wal_size": "'64MB'",
    "min_wal_size": "'32MB'",
    "shared_buffers": "'128MB'",
    "track_io_timing": "on",
    "track_wal_io_timing": "on",
    "password_encryption": "'scram-sha-256'",
    # Time per call of each statement (the exporter's statements collector, explain's `statement`);
    # with it loaded, compute_query_id's default (auto) fills pg_stat_activity.query_id as well.
    "shared_preload_libraries": "'pg_stat_statements'",
}

# postgres_exporter: settings come from the run's metadata, database sizes are unused;
# both cost a catalog query per second (bench/bench_watch_cost.py).
POSTGRES_EXPORTER_FLAGS = ("--disable-default-metrics", "--disable-settings-metrics", "--no-collector.database")


def pg_bindir() -> str | None:
    """The newest PostgreSQL's bin directory (BENCHWATCH_PG_BINDIR names another): the agent, the
    sharded demo's instances and the tests use it without a stack, hence read here."""
    explicit = os.environ.get("BENCHWATCH_PG_BINDIR")
    if explicit:
        return explicit if os.path.exists(os.path.join(explicit, "postgres")) else None
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[-3]))
    if found:
        return os.path.dirname(found[-1])
    which = shutil.which("postgres")
    return os.path.dirname(which) if which else None


def binary(component: str) -> str | None:
    if component == SERVER:
        bindir = pg_bindir()
        return os.path.join(bindir, "postgres") if bindir else None
    if component == EXPORTER:
        return shutil.which("prometheus-postgres-exporter")
    return None


def init_data_dir(bindir: str, data: str, password: str, home: str, user: str | None,
                  env: Mapping[str, str], timeout: float = 300) -> None:
    """initdb of ``bindir`` into ``data`` (scram, superuser postgres with ``password``), including the
    benchwatch.conf that every start rewrites. Raises StackError with initdb's last line."""
    # initdb reads the password from a file the postgres user can read; removed right after.
    pwfile = os.path.join(home, ".pwfile")
    write_private(pwfile, password + "\n", owner=user)
    try:
        result = subprocess.run(
            [os.path.join(bindir, "initdb"), "-D", data, "-U", "postgres", "--auth=scram-sha-256",
             f"--pwfile={pwfile}", "--encoding=UTF8", "--locale=C"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, user=user, group=user,
            extra_groups=[] if user else None, env=dict(env), cwd=home, timeout=timeout)
    finally:
        os.unlink(pwfile)
    if result.returncode != 0:
        tail = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or [str(result.returncode)]
        raise StackError(f"initdb failed: {tail[0]}")
    with open(os.path.join(data, "postgresql.conf"), "a", encoding="utf-8") as f:
        f.write("\ninclude_if_exists = 'benchwatch.conf'\n")


def os_user() -> str | None:
    """initdb and postgres refuse to run as root: as root they run as postgres."""
    return "postgres" if os.geteuid() == 0 else None
