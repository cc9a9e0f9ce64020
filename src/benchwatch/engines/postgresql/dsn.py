"""libpq connection strings without leaking passwords.

A DSN may be a URI (postgresql://user:pw@host:port/db?opt=v) or key=value
pairs. Programs we start get the connection through PG* environment variables
and a 0600 pgpass file, never through argv; what we print or store has the
password removed.
"""

from __future__ import annotations

import re
import urllib.parse

from benchwatch.util.private import write_private

_KV = re.compile(r"\s*(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S*)")
_ENV = {"host": "PGHOST", "hostaddr": "PGHOSTADDR", "port": "PGPORT", "user": "PGUSER",
        "dbname": "PGDATABASE", "sslmode": "PGSSLMODE", "application_name": "PGAPPNAME",
        "connect_timeout": "PGCONNECT_TIMEOUT", "options": "PGOPTIONS"}


def parse_dsn(dsn: str) -> dict[str, str]:
    dsn = dsn.strip()
    if dsn.startswith(("postgresql://", "postgres://")):
        u = urllib.parse.urlsplit(dsn)
        params: dict[str, str] = {}
        if u.hostname:
            params["host"] = u.hostname
        if u.port:
            params["port"] = str(u.port)
        if u.username:
            params["user"] = urllib.parse.unquote(u.username)
        if u.password is not None:
            params["password"] = urllib.parse.unquote(u.password)
        if u.path.strip("/"):
            params["dbname"] = urllib.parse.unquote(u.path.strip("/"))
        for k, v in urllib.parse.parse_qsl(u.query):
            params[k] = v
        return params
    params = {}
    for m in _KV.finditer(dsn):
        value = m.group(2)
        if value.startswith("'") and value.endswith("'") and len(value) >= 2:
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        params[m.group(1)] = value
    return params


def format_dsn(params: dict[str, str]) -> str:
    """key=value form, quoting where needed."""
    def quote(v: str) -> str:
        if v and not re.search(r"[\s'\\]", v):
            return v
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return " ".join(f"{k}={quote(v)}" for k, v in params.items())


def to_uri(params: dict[str, str]) -> str:
    """postgresql:// URI form (what postgres_exporter can redact when it logs a DSN)."""
    q = urllib.parse.quote
    auth = q(params["user"], safe="") if "user" in params else ""
    if "password" in params:
        auth += ":" + q(params["password"], safe="")
    host = params.get("host", "")
    if ":" in host:
        host = f"[{host}]"
    netloc = (auth + "@" if auth else "") + host + (f":{params['port']}" if "port" in params else "")
    rest = {k: v for k, v in params.items() if k not in ("user", "password", "host", "port", "dbname")}
    query = ("?" + urllib.parse.urlencode(rest)) if rest else ""
    return f"postgresql://{netloc}/{q(params.get('dbname', ''), safe='')}{query}"


def redact(dsn: str) -> str:
    """The DSN as it may be shown: without its password."""
    params = parse_dsn(dsn)
    params.pop("password", None)
    return format_dsn(params)


def libpq_env(params: dict[str, str], pgpass_file: str | None) -> dict[str, str]:
    env = {var: params[k] for k, var in _ENV.items() if k in params}
    if pgpass_file:
        env["PGPASSFILE"] = pgpass_file
    return env


def write_pgpass(path: str, params: dict[str, str]) -> None:
    """A pgpass file (0600) holding the password for exactly this host/port/user, any database."""
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace(":", "\\:")
    # "*" for the database: pgbench -i and the exporter use other databases too.
    fields = [esc(params.get("host", "*")), esc(params.get("port", "*")), "*", esc(params.get("user", "*")),
              esc(params.get("password", ""))]
    write_private(path, ":".join(fields) + "\n")


def exporter_env(params: dict[str, str], pgpass_file: str | None) -> dict[str, str]:
    """postgres_exporter's variables for one server (the agent's instances, a sweep's variant servers): the
    connection as DATA_SOURCE_NAME without its password (lib/pq reads it from ``pgpass_file``), the database
    as PGDATABASE (0.11 splits the DSN on spaces to name the server and rejects a value holding one)."""
    params = dict(params)
    env: dict[str, str] = {}
    if params.pop("password", None) is not None and pgpass_file:
        env["PGPASSFILE"] = pgpass_file
    database = params.pop("dbname", None)
    if database:
        env["PGDATABASE"] = database
    host = params.get("host", "")
    if host.startswith("/"):
        # A socket directory cannot be a URI host: lib/pq takes host and port as query parameters.
        params.pop("host")
        port = params.pop("port", None)
        uri = to_uri(params)
        extra = {"host": host, **({"port": port} if port else {})}
        uri += ("&" if "?" in uri else "?") + urllib.parse.urlencode(extra)
    else:
        uri = to_uri(params)
    env["DATA_SOURCE_NAME"] = uri
    return env
