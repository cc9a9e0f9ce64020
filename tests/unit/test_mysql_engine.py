"""engines/mysql without a server: its 0600 files, the sysbench connection, the stack's components."""

from __future__ import annotations

import os
import stat

from benchwatch.engines.mysql import server
from benchwatch.engines.mysql.exporter import COLLECTOR_FLAGS
from benchwatch.loadgens.sysbench import connect as client
from benchwatch.stack.config import load_config
from benchwatch.stack.native import Stack


def test_client_file_round_trip_keeps_odd_passwords(tmp_path):
    path = str(tmp_path / "secrets" / "c.cnf")
    params = {"host": "127.0.0.1", "port": "3306", "user": "bench", "password": 'p#a "s\\w;rd', "database": "sbtest"}
    server._write_private(path, server.client_cnf(params))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert server.read_client_cnf(path) == params
    # mariadb-admin refuses options it does not know in [client]: database lives in [mysql].
    text = open(path).read()
    assert text.index("database=") > text.index("[mysql]")


def test_sysbench_config_file_holds_the_connection():
    text = server.sysbench_config({"host": "127.0.0.1", "port": "13306", "user": "bench", "password": "s3cret",
                                   "database": "sbtest"})
    assert text.splitlines() == ["mysql-host=127.0.0.1", "mysql-port=13306", "mysql-user=bench",
                                 "mysql-password=s3cret", "mysql-db=sbtest"]


def test_sysbench_gets_the_config_file_not_the_password():
    argv = ["oltp_read_write", "--threads=8", "run"]
    assert client.sysbench_connection(argv, "/s/sysbench.cnf") == (["--config-file=/s/sysbench.cnf", *argv],
                                                                  ["--config-file=/s/sysbench.cnf"])
    assert client.sysbench_connection(["--config-file=mine", *argv], "/s/x")[1] == []
    assert client.sysbench_connection(["--db-driver=pgsql", *argv], "/s/x")[1] == []
    assert client.sysbench_connection(["--version"], "/s/x")[1] == []


def test_mariadb_stack_runs_mariadb_and_its_exporter_not_postgres(tmp_path):
    stack = Stack(load_config(str(tmp_path), engine="mariadb"))
    components = stack.components()
    assert "mariadb" in components and "mysqld_exporter" in components
    assert "postgres" not in components and "postgres_exporter" not in components
    external = Stack(load_config(str(tmp_path / "x"), mysql_defaults_file="/etc/mysql/debian.cnf"))
    assert external.cfg.engine == "mysql" and "mariadb" not in external.components()
    assert "mysqld_exporter" in external.components()
    pg = Stack(load_config(str(tmp_path / "pg")))
    assert "mariadb" not in pg.components() and "mysqld_exporter" not in pg.components()


def test_embedded_server_argv_has_no_secret_and_runs_unprivileged(tmp_path):
    target = server.MySQLTarget(str(tmp_path), 23306)
    argv = target.argv()
    assert "--port=23306" in argv and "--bind-address=127.0.0.1" in argv and argv[1] == "--no-defaults"
    assert not any("password" in a for a in argv)
    if os.geteuid() == 0:
        assert "--user=mysql" in argv
    assert "--collect.info_schema.innodb_metrics" in COLLECTOR_FLAGS
