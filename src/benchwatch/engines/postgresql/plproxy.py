"""A PL/Proxy cluster on loopback: shard databases spread over local PostgreSQL instances,
and a proxy database whose functions run on the shard their key hashes to.

For ``benchwatch demo --shards N``. Layout: shard ``i`` is database ``shardNN`` on
instance ``i * M // N`` (contiguous blocks, so each instance holds N/M shards);
each holds the keys ``k`` with ``hashint4(k) & (N - 1) = i``, which is exactly
where PL/Proxy's ``RUN ON hashint4(aid)`` sends a call for ``k``.

Credentials: the proxy reaches the shards as ``SHARD_ROLE``, a login role
without superuser rights that may only read and update the accounts. Its
password (one per instance, generated) is sent to each instance already
SCRAM-hashed, and reaches the proxy only through a pgpass file (0600, owned by
the server's OS user) that every partition's connection string names with
``passfile=``. So no password is in the SQL/MED catalog (pg_foreign_server is
readable by every user of the proxy database), in argv or in a server log; and
the shard instances keep scram-sha-256 on loopback rather than trust, which
would let any local user in as superuser.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from psycopg import sql

from benchwatch.engines.postgresql import connect, dsn
from benchwatch.engines.postgresql.local import LocalInstance
from benchwatch.util.private import write_private

CLUSTER = "shards"
SHARD_ROLE = "shard_rw"
KEYS = 100_000  # accounts over all shards (about 1 MB per shard at 16)
# Each client's proxy backend keeps a connection to every shard it has called:
# clients x shards-per-instance connections on each instance.
SHARD_MAX_CONNECTIONS = 300
RESERVED_CONNECTIONS = 20  # the exporter, psql, autovacuum and a margin

# The same functions in the proxy (LANGUAGE plproxy: pick the shard, call there)
# and in each shard (the work); PL/Proxy calls the shard's function of the same name.
FUNCTIONS = {
    "get_balance": ("aid int", "int", "SELECT abalance FROM accounts a WHERE a.aid = get_balance.aid", "STABLE"),
    "add_balance": ("aid int, delta int", "int",
                    "UPDATE accounts a SET abalance = a.abalance + add_balance.delta WHERE a.aid = add_balance.aid "
                    "RETURNING a.abalance", "VOLATILE"),
}

# pgbench scripts: one proxy call per transaction, so one commit in the proxy
# database and one in the shard the key hashes to.
SCRIPTS = {
    "update": f"\\set aid random(1, {KEYS})\n\\set delta random(-5000, 5000)\nSELECT add_balance(:aid, :delta);\n",
    "lookup": f"\\set aid random(1, {KEYS})\nSELECT get_balance(:aid);\n",
}


class LayoutError(ValueError):
    pass


def check_layout(shards: int, instances: int, clients: int | None = None) -> None:
    """PL/Proxy needs a power-of-2 partition count; each instance holds at least one shard."""
    if shards < 1 or shards & (shards - 1):
        raise LayoutError(f"--shards {shards}: PL/Proxy needs a power of 2 (2, 4, 8, 16, ...)")
    if not 1 <= instances <= shards:
        raise LayoutError(f"--instances {instances}: between 1 and the number of shards ({shards})")
    per_instance = -(-shards // instances)
    if clients is not None and clients * per_instance > SHARD_MAX_CONNECTIONS - RESERVED_CONNECTIONS:
        raise LayoutError(f"{clients} clients x {per_instance} shards per instance is more connections than an "
                          f"instance allows ({SHARD_MAX_CONNECTIONS - RESERVED_CONNECTIONS}): fewer clients or more instances")


def installed(bindir: str) -> bool:
    """The plproxy extension is available to the servers of ``bindir`` (Debian: postgresql-15-plproxy)."""
    import subprocess

    try:
        share = subprocess.run([os.path.join(bindir, "pg_config"), "--sharedir"], capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except OSError:
        return False
    return os.path.exists(os.path.join(share, "extension", "plproxy.control"))


def database(shard: int) -> str:
    return f"shard{shard:02d}"


def instance_of(shard: int, shards: int, instances: int) -> int:
    return shard * instances // shards


def shard_placement(shards: int, instances: int) -> list[list[int]]:
    """The shards each instance holds, in instance order."""
    out: list[list[int]] = [[] for _ in range(instances)]
    for s in range(shards):
        out[instance_of(s, shards, instances)].append(s)
    return out


def _function_sql(name: str, language: str, body: str, volatility: str) -> sql.Composed:
    args, returns, _, _ = FUNCTIONS[name]
    return sql.SQL("CREATE FUNCTION {name}({args}) RETURNS {returns} LANGUAGE {language} {volatility} AS {body}").format(
        name=sql.Identifier(name), args=sql.SQL(args), returns=sql.SQL(returns), language=sql.SQL(language),
        volatility=sql.SQL(volatility), body=sql.Literal(body))


def _setup_instance(inst: LocalInstance, shard_ids: Sequence[int], shards: int, password: str) -> None:
    with connect.connect(inst.params(), timeout=10) as conn:
        # Hashed here: the plain password never travels, so no statement log can show it.
        verifier = conn.pgconn.encrypt_password(password.encode(), SHARD_ROLE.encode(), b"scram-sha-256").decode()
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (SHARD_ROLE,)).fetchone():
            conn.execute(sql.SQL("ALTER ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(SHARD_ROLE), sql.Literal(verifier)))
        else:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(SHARD_ROLE), sql.Literal(verifier)))
        for s in shard_ids:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database(s))))
            # FILE_COPY: a 7 MB template copied as files beats WAL-logging it block by block.
            conn.execute(sql.SQL("CREATE DATABASE {} STRATEGY = FILE_COPY").format(sql.Identifier(database(s))))
    for s in shard_ids:
        with connect.connect(inst.params(database(s)), timeout=10) as conn:
            conn.execute("CREATE TABLE accounts (aid int PRIMARY KEY, abalance int NOT NULL, filler char(84))")
            conn.execute("INSERT INTO accounts SELECT k, 0, '' FROM generate_series(1, %s) k WHERE hashint4(k) & %s = %s",
                         (KEYS, shards - 1, s))
            conn.execute("VACUUM ANALYZE accounts")
            conn.execute(sql.SQL("GRANT SELECT, UPDATE ON accounts TO {}").format(sql.Identifier(SHARD_ROLE)))
            for name, (_, _, body, volatility) in FUNCTIONS.items():
                conn.execute(_function_sql(name, "sql", body, volatility))


def write_passfile(path: str, entries: Sequence[tuple[LocalInstance, str]], owner: str | None) -> None:
    """pgpass lines for SHARD_ROLE on each instance; 0600 and owned by the proxy server's OS user (libpq insists)."""
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace(":", "\\:")
    write_private(path, "".join(f"127.0.0.1:{inst.port}:*:{SHARD_ROLE}:{esc(password)}\n" for inst, password in entries),
                  owner=owner)


def partition_conninfo(inst: LocalInstance, shard: int, passfile: str) -> str:
    return dsn.format_dsn({"dbname": database(shard), "host": "127.0.0.1", "port": str(inst.port), "user": SHARD_ROLE,
                           "passfile": passfile, "sslmode": "disable", "application_name": "plproxy"})


def setup_shards(instances: Sequence[LocalInstance], shards: int, passfile: str, owner: str | None) -> list[str]:
    """Shard databases with their accounts and functions on each instance (in parallel); the partitions'
    connection strings in partition order, naming ``passfile`` for the password."""
    placement = shard_placement(shards, len(instances))
    passwords = [secrets.token_urlsafe(18) for _ in instances]
    with ThreadPoolExecutor(max_workers=2) as pool:  # the demo's machines have 2 cores
        for f in [pool.submit(_setup_instance, inst, ids, shards, pw)
                  for inst, ids, pw in zip(instances, placement, passwords, strict=True)]:
            f.result()
    write_passfile(passfile, list(zip(instances, passwords, strict=True)), owner)
    return [partition_conninfo(instances[instance_of(s, shards, len(instances))], s, passfile) for s in range(shards)]


def setup_proxy(params: Mapping[str, str], dbname: str, partitions: Sequence[str]) -> None:
    """(Re)create the proxy database: the plproxy extension, the cluster as a SQL/MED server, the proxy functions."""
    with connect.connect(params, dbname="postgres", timeout=10) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    with connect.connect(params, dbname=dbname, timeout=10) as conn:
        conn.execute("CREATE EXTENSION plproxy")
        options = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(f"p{i}"), sql.Literal(c))
                                     for i, c in enumerate(partitions))
        conn.execute(sql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER plproxy OPTIONS ({})").format(
            sql.Identifier(CLUSTER), options))
        # PL/Proxy wants a user mapping; it holds no credentials (they are in the passfile).
        conn.execute(sql.SQL("CREATE USER MAPPING FOR PUBLIC SERVER {}").format(sql.Identifier(CLUSTER)))
        for name in FUNCTIONS:
            conn.execute(_function_sql(name, "plproxy", f"CLUSTER '{CLUSTER}'; RUN ON hashint4(aid);", "VOLATILE"))
