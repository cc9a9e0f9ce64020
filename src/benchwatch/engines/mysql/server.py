"""An embedded throwaway MariaDB 10.11 for ``benchwatch up --engine mariadb``, or an existing server.

Layout under the stack's state dir:
  mysql/data, mysql/mysqld.sock, mysql/mariadbd.pid   the server (owned by mysql when we are root)
  secrets/mysql-client.cnf      [client] section for the benchmark user (0600): mariadb --defaults-file=...
  secrets/sysbench.cnf          the same connection as sysbench --config-file options (0600)
  secrets/mysqld_exporter.cnf   [client] section for the exporter's own user (0600)
  logs/mariadb.log              the server's error log
With several instances (``up --engine mariadb --instances N``), instance i > 1 has the same
files with an ``-i`` suffix: mysql-i/, secrets/mysql-i-client.cnf, secrets/sysbench-i.cnf,
secrets/mysqld_exporter-i.cnf, logs/mariadb-i.log.

Passwords are generated here and only ever written to those 0600 files or
fed to the mariadb client on stdin: never argv, logs, labels or snapshots.
sysbench 1.0 reads no my.cnf and its MySQL driver passes ``--mysql-password``
(default "") to mysql_real_connect, so libmariadb's MYSQL_PWD is never
consulted; its own ``--config-file`` (one ``name=value`` option per line) is
how the password reaches it without argv.

With ``--mysql-defaults-file FILE`` (an existing server) nothing is started:
the benchmark and the exporter connect with FILE's [client] section.
"""

from __future__ import annotations

import configparser
import os
import pwd
import secrets
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from benchwatch.engines.mysql import client
from benchwatch.engines.mysql.client import MySQLError, binary
from benchwatch.record.host import filesystem
from benchwatch.util import processes
from benchwatch.util.net import LISTEN_HOST
from benchwatch.util.private import write_private
from benchwatch.util.secrets import redact_settings

BENCH_USER = "bench"
EXPORTER_USER = "benchwatch_exporter"
DATABASE = "sbtest"  # sysbench's default --mysql-db

# Embedded server settings: a small redo log and buffer pool so a one-minute run shows
# InnoDB's flushing (dirty pages at their limit, checkpoint age climbing); see docs/innodb.md.
# The log buffer (read-only) is the floor of innodb_log_file_size, which a sweep's variant may
# SET GLOBAL: at MariaDB's 16 MB a variant's redo log cannot be small enough to fill in the few
# seconds of a short run (docs/stability.md, "InnoDB's flushing valleys").
SERVER_SETTINGS = {
    "innodb_buffer_pool_size": "128M",
    "innodb_log_file_size": "96M",
    "innodb_log_buffer_size": "2M",
    "innodb_flush_log_at_trx_commit": "1",
    "max_connections": "200",
    "skip_name_resolve": "ON",
    "performance_schema": "OFF",
}


def _write_private(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    write_private(path, text)


def _cnf_value(value: str) -> str:
    # my.cnf values: quoted so "#" or spaces in a password stay part of it.
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def client_cnf(params: Mapping[str, str]) -> str:
    lines = ["# Written by benchwatch; keep it 0600.", "[client]"]
    lines += [f"{k}={_cnf_value(v)}" for k, v in params.items() if v and k != "database"]
    if params.get("database"):
        # Only the mariadb client knows "database": in [client], mariadb-admin would refuse the file.
        lines += ["[mysql]", f"database={_cnf_value(params['database'])}"]
    return "\n".join(lines) + "\n"


def read_client_cnf(path: str) -> dict[str, str]:
    """The [client] (and [mysql]/[mariadb]-client) options of a my.cnf-style file."""
    parser = configparser.ConfigParser(allow_no_value=True, interpolation=None, strict=False)
    with open(path, encoding="utf-8") as f:
        parser.read_string(f.read())
    out: dict[str, str] = {}
    for section in ("client", "client-server", "client-mariadb", "mariadb-client", "mysql"):
        if parser.has_section(section):
            for key, value in parser.items(section):
                if value is not None:
                    out[key.replace("-", "_")] = _option_value(value)
    return out


_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "r": "\r", "s": " "}


def _option_value(raw: str) -> str:
    """A my.cnf value as the client library reads it: quotes removed, backslash escapes applied,
    and, outside quotes, a "#" starting a comment."""
    text = raw.strip()
    quote = text[0] if text[:1] in ("'", '"') else None
    out: list[str] = []
    i = 1 if quote else 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append(_ESCAPES.get(text[i + 1], text[i + 1]))
            i += 2
            continue
        if (quote and c == quote) or (not quote and c == "#"):
            break
        out.append(c)
        i += 1
    return "".join(out) if quote else "".join(out).rstrip()


def sysbench_config(params: Mapping[str, str]) -> str:
    """sysbench's --config-file: its mysql-* options, one per line, from [client]-style params."""
    mapping = (("host", "mysql-host"), ("port", "mysql-port"), ("socket", "mysql-socket"), ("user", "mysql-user"),
               ("password", "mysql-password"), ("database", "mysql-db"))
    lines = [f"{opt}={params[key]}" for key, opt in mapping if params.get(key)]
    return "\n".join(lines) + "\n"


@dataclass
class MySQLTarget:
    """The MySQL/MariaDB a stack watches: embedded under ``state_dir``, or the server a defaults file names."""

    state_dir: str
    port: int
    defaults_file: str | None = None
    index: int = 1          # instance number of the stack (1..N); 1 keeps the single-instance file names
    name: str = "local"     # its target label

    # -- paths ------------------------------------------------------------------

    def path(self, *parts: str) -> str:
        return os.path.join(self.state_dir, *parts)

    def _suffixed(self, stem: str, ext: str = "") -> str:
        return f"{stem}{ext}" if self.index == 1 else f"{stem}-{self.index}{ext}"

    @property
    def embedded(self) -> bool:
        return not self.defaults_file

    @property
    def home(self) -> str:
        return self.path(self._suffixed("mysql"))

    @property
    def data_dir(self) -> str:
        return os.path.join(self.home, "data")

    @property
    def socket(self) -> str:
        return os.path.join(self.home, "mysqld.sock")

    @property
    def pid_file(self) -> str:
        return os.path.join(self.home, "mariadbd.pid")

    @property
    def log_file(self) -> str:
        return self.path("logs", self._suffixed("mariadb", ".log"))

    @property
    def client_file(self) -> str:
        """The benchmark user's [client] file: the embedded server's, or the user's own."""
        own = "mysql-client.cnf" if self.index == 1 else f"mysql-{self.index}-client.cnf"
        return self.defaults_file or self.path("secrets", own)

    @property
    def sysbench_file(self) -> str:
        return self.path("secrets", self._suffixed("sysbench", ".cnf"))

    @property
    def exporter_file(self) -> str:
        return self.path("secrets", self._suffixed("mysqld_exporter", ".cnf"))

    # -- status -----------------------------------------------------------------

    def pid(self) -> int | None:
        pid = processes.read_pid(self.pid_file)
        return pid if processes.process_alive(pid) else None

    def ready(self) -> bool:
        admin = binary("mariadb-admin") or binary("mysqladmin")
        if admin is None:
            return False
        if self.embedded:
            argv = [admin, "--no-defaults", f"--socket={self.socket}", "--protocol=socket", "--connect-timeout=2", "ping"]
        else:
            argv = [admin, f"--defaults-file={self.client_file}", "--connect-timeout=2", "ping"]
        # ping exits 0 when the server answers, even "access denied": it is up.
        r = subprocess.run(argv, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
        return r.returncode == 0

    def client_params(self) -> dict[str, str]:
        return read_client_cnf(self.client_file)

    # -- SQL through the client (benchwatch.engines.mysql.client) ----------------

    def sql(self, text: str, *, timeout: float = 60.0, connect_timeout: int | None = None) -> subprocess.CompletedProcess[str]:
        """``text`` run as the benchmark user (its client file); the caller reads the exit code."""
        return client.run_sql(client.as_defaults_file(self.client_file), text, timeout=timeout,
                              connect_timeout=connect_timeout)

    def admin_sql(self, text: str, *, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """``text`` run as the embedded server's administrator over its socket (users made and dropped)."""
        return client.run_sql(client.as_socket_admin(self.socket), text, timeout=timeout)

    # -- the embedded server ----------------------------------------------------

    def _os_user(self) -> str | None:
        """mariadbd refuses to run as root: as root, it runs as mysql (or nobody)."""
        if os.geteuid() != 0:
            return None
        for name in ("mysql", "nobody"):
            try:
                pwd.getpwnam(name)
                return name
            except KeyError:
                continue
        raise MySQLError("no unprivileged user to run mariadbd as: create the mysql user")

    def argv(self) -> list[str]:
        mariadbd = binary("mariadbd") or binary("mysqld")
        if mariadbd is None:
            raise MySQLError("mariadbd is not installed: apt-get install mariadb-server")
        user = self._os_user()
        argv = [mariadbd, "--no-defaults", f"--datadir={self.data_dir}", f"--socket={self.socket}",
                f"--port={self.port}", f"--bind-address={LISTEN_HOST}", f"--pid-file={self.pid_file}",
                f"--log-error={self.log_file}"]
        if user:
            argv.append(f"--user={user}")
        argv += [f"--{k.replace('_', '-')}={v}" for k, v in SERVER_SETTINGS.items()]
        return argv

    def prepare(self) -> None:
        """mariadb-install-db on first start; the directories the server user must own."""
        user = self._os_user()
        os.makedirs(self.home, exist_ok=True)
        os.makedirs(self.path("logs"), exist_ok=True)
        if user:
            shutil.chown(self.home, user, user)
            # The error log is opened by the server user.
            if not os.path.exists(self.log_file):
                open(self.log_file, "a").close()
            shutil.chown(self.log_file, user, user)
        if os.path.exists(os.path.join(self.data_dir, "mysql")):
            return
        install = binary("mariadb-install-db") or binary("mysql_install_db")
        if install is None:
            raise MySQLError("mariadb-install-db is not installed: apt-get install mariadb-server")
        argv = [install, "--no-defaults", f"--datadir={self.data_dir}", "--skip-test-db",
                "--auth-root-authentication-method=socket"]
        if user:
            argv.append(f"--user={user}")
        r = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd=self.home)
        if r.returncode != 0:
            tail = (r.stderr.strip() or r.stdout.strip()).splitlines()[-1:] or [str(r.returncode)]
            raise MySQLError(f"mariadb-install-db failed: {tail[0]}")

    def bootstrap(self) -> None:
        """Users, database and the 0600 client files; idempotent, the password generated once."""
        params = read_client_cnf(self.client_file) if os.path.exists(self.client_file) else {}
        password = params.get("password") or secrets.token_urlsafe(24)
        exporter = (read_client_cnf(self.exporter_file).get("password") if os.path.exists(self.exporter_file)
                    else None) or secrets.token_urlsafe(24)

        def quote(s: str) -> str:
            return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"

        sql = "\n".join([
            f"CREATE DATABASE IF NOT EXISTS {DATABASE};",
            *[f"CREATE USER IF NOT EXISTS '{BENCH_USER}'@'{h}' IDENTIFIED BY {quote(password)};" for h in (LISTEN_HOST, "localhost")],
            *[f"ALTER USER '{BENCH_USER}'@'{h}' IDENTIFIED BY {quote(password)};" for h in (LISTEN_HOST, "localhost")],
            *[f"GRANT ALL PRIVILEGES ON *.* TO '{BENCH_USER}'@'{h}';" for h in (LISTEN_HOST, "localhost")],
            f"CREATE USER IF NOT EXISTS '{EXPORTER_USER}'@'{LISTEN_HOST}' IDENTIFIED BY {quote(exporter)} WITH MAX_USER_CONNECTIONS 3;",
            f"ALTER USER '{EXPORTER_USER}'@'{LISTEN_HOST}' IDENTIFIED BY {quote(exporter)};",
            f"GRANT PROCESS, REPLICATION CLIENT, SELECT ON *.* TO '{EXPORTER_USER}'@'{LISTEN_HOST}';",
        ]) + "\n"
        # The SQL (passwords included) goes on stdin, never argv.
        r = self.admin_sql(sql)
        if r.returncode != 0:
            raise MySQLError(f"could not create the benchmark users: {client.last_error(r)}")
        conn = {"host": LISTEN_HOST, "port": str(self.port)}
        _write_private(self.client_file, client_cnf({**conn, "user": BENCH_USER, "password": password,
                                                     "database": DATABASE}))
        _write_private(self.exporter_file, client_cnf({**conn, "user": EXPORTER_USER, "password": exporter}))
        self.write_sysbench_file()

    def write_sysbench_file(self) -> None:
        _write_private(self.sysbench_file, sysbench_config(self.client_params()))

    def write_exporter_file(self) -> None:
        """An existing server: the exporter connects with the user's [client] section."""
        params = self.client_params()
        _write_private(self.exporter_file, client_cnf({k: params[k] for k in ("host", "port", "socket", "user", "password")
                                                       if params.get(k)}))

    def server_facts(self) -> dict:
        """What a run's meta.json says of the server: version and the InnoDB settings that shape the curve."""
        if not os.path.exists(self.client_file):
            return {}
        sql = ("SELECT VERSION(); SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES "
               "WHERE VARIABLE_NAME IN ('INNODB_BUFFER_POOL_SIZE','INNODB_LOG_FILE_SIZE','INNODB_IO_CAPACITY',"
               "'INNODB_IO_CAPACITY_MAX','INNODB_ADAPTIVE_FLUSHING','INNODB_MAX_DIRTY_PAGES_PCT',"
               "'INNODB_MAX_DIRTY_PAGES_PCT_LWM','INNODB_FLUSH_LOG_AT_TRX_COMMIT','PERFORMANCE_SCHEMA')")
        output = self._client_query(sql)
        if output is None:
            return {}
        rows = client.rows(output)
        out: dict = {"server": "mariadb"}
        if rows and len(rows[0]) == 1:
            out["server_version"] = rows.pop(0)[0]
        out["settings"] = {name.lower(): value for name, value in (row for row in rows if len(row) == 2)}
        caps = capabilities(out["settings"])
        if caps:
            out["capabilities"] = caps
        out.update(self._all_settings())
        return out

    def _client_query(self, sql: str) -> str | None:
        """The tab-separated rows the server answers ``sql`` with; None when it does not answer in time
        (or no client is installed)."""
        try:
            r = self.sql(sql, timeout=10, connect_timeout=3)
        except (OSError, subprocess.TimeoutExpired, MySQLError):
            return None
        return r.stdout if r.returncode == 0 else None

    def _all_settings(self) -> dict:
        """Every global variable (what "what changed" between two runs compares) and the data directory's
        filesystem; {} when the server does not answer."""
        sql = "SELECT LOWER(VARIABLE_NAME), VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES ORDER BY 1"
        output = self._client_query(sql)
        if output is None:
            return {}
        found = dict(row for row in (line.split("\t", 1) for line in output.splitlines()) if len(row) == 2)
        # The server's clock and counters are no setting: they would differ between any two runs.
        for name in ("timestamp", "gtid_binlog_pos", "gtid_current_pos", "gtid_binlog_state", "gtid_slave_pos"):
            found.pop(name, None)
        out: dict = {"server_settings": redact_settings(found)} if found else {}
        datadir = found.get("datadir")
        if datadir:
            out["data_directory"] = datadir
            fs = filesystem(datadir)
            if fs:
                out["data_filesystem"] = fs
        return out


def capabilities(settings: Mapping[str, str]) -> dict[str, bool]:
    """Which statistics the server has, for meta.json ({} when its settings do not say)."""
    value = settings.get("performance_schema")
    if value is None:
        return {}
    return {"performance_schema": value.strip().upper() in ("ON", "1", "TRUE")}
